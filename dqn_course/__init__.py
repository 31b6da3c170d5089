"""dqn_course: the DQN memory course's library (what training runs) and, in ``dqn_course.lab``, the notebooks' helpers.

README.md's "The package" lists every module with the first line of its docstring (``make readme`` writes
that list; a test keeps it current); ARCHITECTURE.md says how the pieces fit. The library never imports
the lab: ``tests/test_architecture.py`` checks.
"""
import argparse
import dataclasses
import os
from collections.abc import Callable, Collection
from typing import Any

from dqn_course.contracts import check_module

__version__ = "0.1.0"


def quick_mode() -> bool:
    """True when DQN_COURSE_QUICK=1: every notebook and benchmark shrinks its workload (CI sets it)."""
    return os.environ.get("DQN_COURSE_QUICK", "0") not in ("", "0", "false", "False")


def parse_bool(text: str) -> bool:
    """A command-line true/false (1/0, yes/no, on/off), for the CLIs' ``--flag true`` options."""
    if text.lower() in ("1", "true", "yes", "on"):
        return True
    if text.lower() in ("0", "false", "no", "off"):
        return False
    raise argparse.ArgumentTypeError(f"expected true/false, got {text!r}")


# -- settings: one check for every config dataclass (train.Config, distributed.DistConfig) ------------------------

class ConfigError(ValueError):
    """Settings that cannot work; the message names the setting, its value and what to change.

    The CLIs print it (``error: ...``) and exit with status 2, as argparse does for a malformed option.
    """


def _hint_kind(hint) -> tuple[type, bool]:
    """(base type, None allowed) of a field annotation such as ``int``, ``float | None`` or ``Optional[str]``."""
    import types
    import typing

    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        if len(args) != 1:
            raise TypeError(f"a config field must have one type (or that type | None), got {hint}")
        return args[0], True
    return hint, False


def check_fields(cfg: object, flag: Callable[[str], str] = lambda name: "--" + name.replace("_", "-")) -> None:
    """Every field of the dataclass ``cfg`` against its annotation, with one rule per type; ``ConfigError`` if not.

    ints are whole numbers (not bools, not floats); floats are finite numbers (ints welcome, bools and
    strings not); bools are True or False (not "false", not 0); str fields take strings or paths;
    ``X | None`` also takes None. numpy scalars and paths are turned into plain ``int``/``float``/``bool``/
    ``str`` in place, so the config stays JSON-able (checkpoints record it). ``flag(name)`` is how
    messages spell a field (the CLI's option).
    """
    import dataclasses
    import math
    import typing

    import numpy as np

    if not dataclasses.is_dataclass(cfg) or isinstance(cfg, type):
        raise TypeError(f"check_fields: cfg must be a dataclass instance (a config), got {cfg!r}")
    hints = typing.get_type_hints(type(cfg))
    for f in dataclasses.fields(cfg):
        value, (kind, optional) = getattr(cfg, f.name), _hint_kind(hints[f.name])
        if value is None and optional:
            continue
        where = f"{flag(f.name)} ({type(cfg).__name__}.{f.name})"
        if kind is bool:
            if not isinstance(value, (bool, np.bool_)):
                raise ConfigError(f"{where} must be True or False, got {value!r}"
                                  + (": a string is no bool (\"false\" is true in Python); pass False"
                                     if isinstance(value, str) else ""))
            value = bool(value)
        elif kind is int:
            if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
                fix = f"; use {int(value)}" if isinstance(value, float) and value.is_integer() else ""
                raise ConfigError(f"{where} must be a whole number (int), got {value!r}{fix}")
            value = int(value)
        elif kind is float:
            if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)):
                raise ConfigError(f"{where} must be a number, got {value!r}"
                                  + (f"; convert it first, e.g. float({value!r})" if isinstance(value, str) else ""))
            if not math.isfinite(value):
                raise ConfigError(f"{where} must be a finite number, got {value!r}")
            value = value.item() if isinstance(value, np.generic) else value
        elif kind is str:
            if not isinstance(value, (str, os.PathLike)):
                raise ConfigError(f"{where} must be a string (or a path), got {value!r}")
            value = os.fspath(value)
            if not isinstance(value, str):
                raise ConfigError(f"{where} must be a text path, got {value!r}")
        else:  # pragma: no cover - a new field type needs a rule here
            raise TypeError(f"check_fields has no rule for {f.name}: {kind}")
        setattr(cfg, f.name, value)


def add_field_options(parser: argparse.ArgumentParser, cls: type, *, defaults: bool = True,
                      skip: Collection[str] = ()) -> None:
    """One ``--field-name`` option on ``parser`` for each field of the dataclass ``cls`` (but those in ``skip``),
    read by its annotation: ``bool`` fields take true/false (``parse_bool``), ``X | None`` fields an X. Each
    option's default is its field's default, or None with ``defaults=False`` (a preset's value then stays unless
    the option is given). Values are checked later, with the config (``check_fields``)."""
    import dataclasses
    import typing

    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        if f.name in skip:
            continue
        kind = _hint_kind(hints[f.name])[0]
        parser.add_argument("--" + f.name.replace("_", "-"), dest=f.name, type=parse_bool if kind is bool else kind,
                            default=f.default if defaults else None)


def require(ok: bool, message: str) -> None:
    """``ConfigError(message)`` unless ``ok``: a cross-field or range rule of a config."""
    if not ok:
        raise ConfigError(message)


def check_ranges(cfg: object, positive: Collection[str] = (), non_negative: Collection[str] = (),
                 fractions: Collection[str] = (),
                 flag: Callable[[str], str] = lambda name: "--" + name.replace("_", "-")) -> None:
    """The range rules most fields share (after ``check_fields``): > 0 / >= 0 / in [0, 1]; None passes."""
    if not dataclasses.is_dataclass(cfg) or isinstance(cfg, type):
        raise TypeError(f"check_ranges: cfg must be a dataclass instance (a config), got {cfg!r}")
    import typing

    hints = typing.get_type_hints(type(cfg))
    for names, ok, what in ((positive, lambda v: v > 0, "must be > 0"),
                            (non_negative, lambda v: v >= 0, "must be >= 0"),
                            (fractions, lambda v: 0 <= v <= 1, "must be between 0 and 1")):
        for name in names:
            value = getattr(cfg, name)
            if value is not None and not ok(value):
                if what == "must be > 0" and _hint_kind(hints[name])[0] is int:
                    what = "must be a positive whole number"
                require(False, f"{flag(name)} {what}, got {value!r} ({type(cfg).__name__}.{name})")


def check_arg(name: str, value: Any, *, integer: bool = False, low: float | None = None, high: float | None = None,
              above: float | None = None,
              optional: bool = False) -> None:
    """A function argument that must be a number (``integer``: a whole one) in a range; ``ValueError`` naming it.

    ``low``/``high`` are inclusive bounds, ``above`` an exclusive lower one; bools and strings are no numbers.
    For the public functions a notebook calls (the agent, the envs), so nonsense fails at the call.
    """
    import math

    import numpy as np

    if value is None and optional:
        return
    kinds = (int, np.integer) if integer else (int, float, np.integer, np.floating)
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, kinds) or not math.isfinite(value):
        what = "a whole number" if integer else "a finite number"
        raise ValueError(f"{name} must be {what}{' or None' if optional else ''}, got {value!r}")
    if (low is not None and value < low) or (high is not None and value > high) or (above is not None
                                                                                      and not value > above):
        bounds = " and ".join(b for b in (f">= {low}" if low is not None else "", f"<= {high}" if high is not None
                                          else "", f"> {above}" if above is not None else "") if b)
        raise ValueError(f"{name} must be {bounds}, got {value!r}")


check_module(globals())
