"""Arguments checked against their annotations at the call: one rule per kind, for every public callable.

A module ends with ``check_module(globals())``: each public function, and each public method (and ``__init__``)
of each public class defined there, then refuses an argument of the wrong kind before its body runs, with an
``ArgumentError`` naming the callable, the parameter, what it takes and what it got. The body keeps the rules an
annotation cannot say (shapes, dtypes, one argument against another), so a refused call changes nothing.

The rules, by annotation:

- ``int``: a whole number (``np.integer`` too; not ``bool``), ``>= 0``: counts, sizes, steps, seeds and indices
  are never negative here. ``Count`` (``>= 1``) is a count that cannot be zero; ``SignedInt`` takes negatives.
- ``float``: a finite number (ints welcome; not ``bool``, not NaN or ±inf). ``MaybeInf`` also takes +inf.
- ``bool``: True or False (not 0/1, not "false", which is true in Python).
- ``str``: a string. A ``Path``/``os.PathLike`` (alone or in a union with ``str``): a string or path, neither
  empty nor holding a NUL byte.
- a class (``np.ndarray``, ``torch.Tensor``, ``torch.device``, ``Config``, ...): an instance of it;
  ``Callable``: something callable; ``list[X]``/``tuple[X, ...]``: that container, each item by X's rule;
  ``dict[...]``: a dict; ``Literal[...]``: one of the values; ``X | None``: None or X; ``A | B``: either.
- no annotation, ``Any`` or ``object``: anything (the body checks what it needs).

The checks guard the package's edge: a call from the package's own code (a module named ``dqn_course...``) is not
checked again, since what it passes came in through a checked call or was made by the package; so the training
loop's own calls cost a frame lookup each. Checks are also skipped while ``torch.compile`` traces.
"""
from __future__ import annotations

import collections.abc
import contextlib
import dataclasses
import functools
import inspect
import math
import os
import sys
import types
import typing
from collections.abc import Callable
from pathlib import PurePath
from typing import Annotated, Any

import numpy as np


class ArgumentError(TypeError, ValueError):
    """An argument of the wrong kind or out of its annotation's range; the message names the parameter.

    Both a ``TypeError`` and a ``ValueError``, so callers that catch either for bad input still catch it.
    """


@dataclasses.dataclass(frozen=True)
class _Mark:
    name: str


SIGNED = _Mark("signed")
INF_OK = _Mark("inf")
SignedInt = Annotated[int, SIGNED]
MaybeInf = Annotated[float, INF_OK]


@dataclasses.dataclass(frozen=True)
class AtLeast:
    """An ``Annotated`` mark: the number is ``>= low``."""
    low: SignedInt

    def __post_init__(self) -> None:  # this module checks its own arguments: it cannot wrap itself
        if isinstance(self.low, bool) or not isinstance(self.low, (int, np.integer)):
            raise ArgumentError(f"AtLeast: low must be a whole number (int), got {_short(self.low)}")


Count = Annotated[int, AtLeast(1)]

Rule = Callable[[Any], "str | None"]  # None: the value is fine; else what the parameter must be


def _short(value: Any) -> str:
    if isinstance(value, np.ndarray) or type(value).__name__ == "Tensor":
        return f"{type(value).__name__} of shape {tuple(value.shape)} and dtype {value.dtype}"
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _int_rule(low: int | None) -> Rule:
    what = "a whole number" if low is None else f"a whole number >= {low}"

    def rule(value):
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
            fix = f", e.g. {int(value)}" if isinstance(value, float) and value.is_integer() else ""
            return f"{what} (an int{fix})"
        return what if low is not None and value < low else None
    return rule


def _float_rule(inf_ok: bool) -> Rule:
    def rule(value):
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)):
            return "a number"
        if math.isnan(value) or (math.isinf(value) and not (inf_ok and value > 0)):
            return "a finite number" + (" (or +inf)" if inf_ok else "")
        return None
    return rule


def _bool_rule(value):
    return None if isinstance(value, (bool, np.bool_)) else "True or False"


def _path_rule(value):
    if not isinstance(value, (str, os.PathLike)):
        return "a path (str or pathlib.Path)"
    text = os.fspath(value)
    if not isinstance(text, str) or not text or "\0" in text:
        return "a path: a non-empty text without NUL bytes"
    return None


def _instance_rule(cls: type, what: str | None = None) -> Rule:
    if what is None:
        what = f"a {cls.__name__}" if cls.__module__ == "builtins" else f"a {cls.__module__}.{cls.__qualname__}"
    return lambda value: None if isinstance(value, cls) else what


def _items_rule(container: type, item: Rule | None, length: int | None = None) -> Rule:
    def rule(value):
        if not isinstance(value, container):
            return f"a {container.__name__}"
        if length is not None and len(value) != length:
            return f"a {container.__name__} of {length} items"
        if item is not None:
            for x in value:
                why = item(x)
                if why is not None:
                    return f"a {container.__name__} of items each {why}"
        return None
    return rule


def _union_rule(rules: list[Rule]) -> Rule:
    def rule(value):
        whys = [r(value) for r in rules]
        if None in whys:
            return None
        if "a number" in whys:  # an int is a number too
            whys = [w for w in whys if not w.startswith("a whole number")]
        return " or ".join(dict.fromkeys(whys))
    return rule


def rule_for(hint: Any) -> Rule | None:
    """The check for one resolved annotation (None: anything goes); ``TypeError`` for a kind with no rule."""
    marks: tuple = ()
    if typing.get_origin(hint) is Annotated:
        hint, *marks = typing.get_args(hint)
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if hint in (Any, object, inspect.Parameter.empty) or isinstance(hint, typing.TypeVar):
        return None
    if origin in (typing.Union, types.UnionType):
        members = [a for a in args if a is not type(None)]
        optional = len(members) < len(args)
        if any(isinstance(m, type) and issubclass(m, PurePath) or m is os.PathLike for m in members) and all(
                m in (str, os.PathLike) or isinstance(m, type) and issubclass(m, PurePath) for m in members):
            inner = _path_rule
        else:
            rules = [rule_for(m) for m in members]
            if any(r is None for r in rules):
                return None
            inner = rules[0] if len(rules) == 1 else _union_rule(rules)
        if not optional:
            return inner
        return lambda value: None if value is None else (None if inner(value) is None else f"None or {inner(value)}")
    if hint is int:
        low = next((m.low for m in marks if isinstance(m, AtLeast)), None if SIGNED in marks else 0)
        return _int_rule(low)
    if hint is float:
        return _float_rule(INF_OK in marks)
    if hint is bool:
        return _bool_rule
    if hint is str:
        return _instance_rule(str, "a string")
    if hint is os.PathLike or isinstance(hint, type) and issubclass(hint, PurePath):
        return _path_rule
    if origin is typing.Literal:
        return lambda value: None if value in args else f"one of {', '.join(map(repr, args))}"
    if origin is collections.abc.Callable or hint is collections.abc.Callable or hint is typing.Callable:
        return lambda value: None if callable(value) else "a function (something callable)"
    if origin in (list, set, frozenset):
        return _items_rule(origin, rule_for(args[0]) if args else None)
    if origin is tuple:
        if len(args) == 2 and args[1] is Ellipsis:
            return _items_rule(tuple, rule_for(args[0]))
        return _items_rule(tuple, None, len(args) if args and args != ((),) else None)
    if origin is not None and isinstance(origin, type):
        return _instance_rule(origin)
    if isinstance(hint, type):
        return _instance_rule(hint)
    raise TypeError(f"rule_for: hint {hint!r} is no annotation this module has a rule for")


def _hints(func: Callable) -> dict[str, Any]:
    """The resolved annotations. A name imported only for type checkers (``if TYPE_CHECKING:``, to keep the
    layers) is looked up among the package's loaded modules: one object of that name there is the one meant."""
    try:
        return typing.get_type_hints(func, include_extras=True)
    except NameError:
        found: dict[str, list] = {}
        for module in list(sys.modules.values()):
            if getattr(module, "__name__", "").startswith("dqn_course"):
                for name, obj in vars(module).items():
                    if not any(obj is seen for seen in found.setdefault(name, [])):
                        found[name].append(obj)
        names = {**{name: objs[0] for name, objs in found.items() if len(objs) == 1}, **func.__globals__}
        hints = {}
        for name, text in func.__annotations__.items():
            with contextlib.suppress(NameError):  # a module not loaded yet (torch, for a memory kept on the host)
                hints[name] = typing.get_type_hints(_Annotated(text), globalns=names, include_extras=True)["x"]
        return hints


class _Annotated:
    """A stand-in holding one annotation, for ``typing.get_type_hints`` to resolve alone."""

    def __init__(self, text: Any):
        self.__annotations__ = {"x": text}


def _compiling() -> bool:
    torch = sys.modules.get("torch")
    return torch is not None and torch.compiler.is_compiling()


def checked(func: Callable, method: bool = False) -> Callable:
    """``func`` with its annotated arguments checked at each call (module docstring's rules); a no-op if done.
    ``method``: its first parameter is ``self`` or ``cls``, not checked."""
    if not callable(func):
        raise ArgumentError(f"checked: func must be a function (something callable), got {_short(func)}")
    if not isinstance(method, bool):
        raise ArgumentError(f"checked: method must be True or False, got {_short(method)}")
    if getattr(func, "__checked__", False):
        return func
    signature = inspect.signature(func)
    where = func.__qualname__.replace(".__init__", "")
    rules: dict[str, Rule] = {}
    resolved = False

    def resolve() -> None:  # at the first call: by then every module a type-checking-only name comes from is loaded
        nonlocal resolved
        hints = _hints(func)
        names = list(signature.parameters)[1 if method else 0:]
        rules.update({name: rule for name in names
                      if (rule := rule_for(hints.get(name, inspect.Parameter.empty))) is not None})
        resolved = True

    positional = [p.name for p in signature.parameters.values() if p.kind in (p.POSITIONAL_ONLY,
                                                                              p.POSITIONAL_OR_KEYWORD)]
    simple = all(p.kind is not p.VAR_POSITIONAL and p.kind is not p.VAR_KEYWORD
                 for p in signature.parameters.values())
    required = {p.name for p in signature.parameters.values() if p.default is p.empty}

    def check(name: str, kind, value) -> None:
        rule = rules.get(name)
        if rule is None:
            return
        items = (value.items() if kind is inspect.Parameter.VAR_KEYWORD else
                 ((f"{name}[{i}]", v) for i, v in enumerate(value)) if kind is inspect.Parameter.VAR_POSITIONAL
                 else ((name, value),))
        for shown, item in items:  # *args and **kwargs: each item by the annotation's rule
            why = rule(item)
            if why is not None:
                raise ArgumentError(f"{where}: {shown} must be {why}, got {_short(item)}")

    @functools.wraps(func)
    def call(*args, **kwargs):
        # At the package's edge only: a call from the package's own code passes what was checked where it came in.
        if not sys._getframe(1).f_globals.get("__name__", "").startswith("dqn_course") and not _compiling():
            if not resolved:
                resolve()
            if (simple and len(args) <= len(positional) and all(k in signature.parameters for k in kwargs)
                    and required.issubset((*positional[:len(args)], *kwargs))):
                for name, value in zip(positional, args):  # the common case, without Signature.bind's cost
                    check(name, None, value)
                for name, value in kwargs.items():
                    check(name, None, value)
            else:
                try:
                    bound = signature.bind(*args, **kwargs)
                except TypeError as error:
                    raise ArgumentError(f"{where}: {error}") from None
                for name, value in bound.arguments.items():
                    check(name, signature.parameters[name].kind, value)
        return func(*args, **kwargs)

    call.__checked__ = True
    return call


def _wrap_methods(cls: type, init: bool) -> None:
    fields = {f.name for f in dataclasses.fields(cls)} if dataclasses.is_dataclass(cls) else set()
    for attr, member in list(vars(cls).items()):
        if attr.startswith("_") and not (init and attr == "__init__") or attr in fields:  # a field's default
            continue
        if isinstance(member, staticmethod):
            setattr(cls, attr, staticmethod(checked(member.__func__)))
        elif isinstance(member, classmethod):
            setattr(cls, attr, classmethod(checked(member.__func__, method=True)))
        elif inspect.isfunction(member):
            setattr(cls, attr, checked(member, method=True))


def check_module(namespace: dict) -> None:
    """Wrap with ``checked`` each public function and each public class's public methods defined in this module.

    Called as the last line of a module, ``check_module(globals())``; the generated edge test proves each module
    does. Constructors are wrapped too, but for a dataclass with a ``_check_fields`` method (its own check, in its
    command line's words: ``Config``, ``DistConfig``), a named tuple (a record) and an exception (its argument is
    the message). Properties are left alone (they take no arguments).
    """
    if not isinstance(namespace, dict) or not isinstance(namespace.get("__name__"), str):
        raise ArgumentError(f"check_module: namespace must be a module's globals(), got {_short(namespace)}")
    module = namespace["__name__"]
    wrapped = {}  # original -> its checked wrapper
    for name, obj in list(namespace.items()):
        if name.startswith("_") or getattr(obj, "__module__", None) != module:
            continue
        if inspect.isfunction(obj):
            namespace[name] = wrapped[obj] = checked(obj)
        elif inspect.isclass(obj) and not issubclass(obj, BaseException):
            own_check = dataclasses.is_dataclass(obj) and "_check_fields" in vars(obj)
            _wrap_methods(obj, init=not (own_check or issubclass(obj, tuple)))
    _rebind_defaults(namespace, module, wrapped)


def _rebind_defaults(namespace: dict, module: str, wrapped: dict) -> None:
    """A default that is one of this module's functions (``loss=td_loss``) was bound before the wrapping: point it
    at the wrapper, so ``loss is td_loss`` holds for the default as it does for a caller's ``td_loss``."""
    functions = [f for f in namespace.values() if inspect.isfunction(f)]
    for cls in (c for c in namespace.values() if inspect.isclass(c) and c.__module__ == module):
        functions += [m.__func__ if isinstance(m, (staticmethod, classmethod)) else m for m in vars(cls).values()
                      if inspect.isfunction(m) or isinstance(m, (staticmethod, classmethod))]
    for f in (getattr(f, "__wrapped__", f) for f in functions):
        if f.__defaults__:
            f.__defaults__ = tuple(wrapped.get(d, d) if inspect.isfunction(d) else d for d in f.__defaults__)
        if f.__kwdefaults__:
            f.__kwdefaults__ = {k: wrapped.get(d, d) if inspect.isfunction(d) else d
                                for k, d in f.__kwdefaults__.items()}

