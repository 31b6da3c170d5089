"""Arguments checked against their annotations at the call: one rule per kind, for every public callable.

A module ends with ``check_module(globals())``: each public function, and each public method (and ``__init__``)
of each public class defined there, then refuses an argument of the wrong kind before its body runs, with an
``ArgumentError`` naming the callable, the parameter, what it takes and what it got. The body keeps the rules an
annotation cannot say (shapes, dtypes, one argument against another), so a refused call changes nothing.

The rules, by annotation:

- ``int``: a whole number (``np.integer`` too; not ``bool``), ``>= 0``: counts, sizes, steps, seeds and indices
  are never negative here. ``Count`` (``>= 1``) is a count that cannot be zero; ``SignedInt`` takes negatives.
- ``float``: a finite number (ints welcome; not ``bool``, not NaN or ±inf). ``MaybeInf`` also takes +inf;
  ``Probability`` is one in [0, 1] (ε, γ, β), ``Fraction`` one in (0, 1] (a share of a machine's memory).
- ``Shape(n)``: a tuple or list of ``n`` whole numbers ``>= 1`` (``StackShape``: ``(stack, height, width)``).
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

The check costs about a microsecond per call from outside, whatever the signature: at the first call each wrapped
callable resolves its annotations once and compiles a checker with its own parameter list (Python binds the
arguments, no ``Signature.bind``), in which each parameter is first tested by an inline expression that accepts
the common values (an ``int`` in range, a finite ``float``, an instance of a plain class); only a value that fails
it goes through the rule, which accepts or words the refusal. The inline test never accepts what the rule refuses
(``tests/test_contracts.py`` compares them).
"""
from __future__ import annotations

import abc
import ast
import builtins
import collections.abc
import dataclasses
import functools
import importlib
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


@dataclasses.dataclass(frozen=True)
class Between:
    """An ``Annotated`` mark on ``float``: ``low <= x <= high`` (``low < x`` when ``low_open``)."""
    low: float
    high: float
    low_open: bool = False

    def __post_init__(self) -> None:
        for name in ("low", "high"):
            value = getattr(self, name)
            if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float)) or not math.isfinite(value):
                raise ArgumentError(f"Between: {name} must be a finite number, got {_short(value)}")
        if not isinstance(self.low_open, bool):
            raise ArgumentError(f"Between: low_open must be True or False, got {_short(self.low_open)}")
        if not self.low < self.high:
            raise ArgumentError(f"Between: low must be below high, got {self.low} and {self.high}")

    def __str__(self) -> str:
        return f"{'(' if self.low_open else '['}{self.low:g}, {self.high:g}]"


Probability = Annotated[float, Between(0.0, 1.0)]  # ε, γ, β: a chance or a weight in [0, 1]
Fraction = Annotated[float, Between(0.0, 1.0, low_open=True)]  # a share of something that cannot be none of it


@dataclasses.dataclass(frozen=True)
class Rank:
    """An ``Annotated`` mark on a sequence of ints: a shape of exactly ``rank`` sizes, each ``>= 1``; ``names`` says
    what they are in the refusal, e.g. ``"(stack, height, width)"``."""
    rank: int
    names: str = ""

    def __post_init__(self) -> None:
        if isinstance(self.rank, bool) or not isinstance(self.rank, int) or self.rank < 1:
            raise ArgumentError(f"Rank: rank must be a whole number >= 1, got {_short(self.rank)}")
        if not isinstance(self.names, str):
            raise ArgumentError(f"Rank: names must be a string, got {_short(self.names)}")


def Shape(rank: int, names: str = "") -> Any:  # noqa: N802 - used as a type, like typing's own aliases
    """The annotation of a shape of ``rank`` positive sizes (a tuple or list of ints); ``Rank`` checks both."""
    return Annotated[collections.abc.Sequence[int], Rank(rank, names)]


StackShape = Shape(3, "(stack, height, width)")  # a replay memory's observation: a stack of 2-D frames

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


def _float_rule(inf_ok: bool, between: Between | None = None) -> Rule:
    def rule(value):
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)):
            return "a number" if between is None else f"a number in {between}"
        if math.isnan(value) or (math.isinf(value) and not (inf_ok and value > 0)):
            return "a finite number" + (" (or +inf)" if inf_ok else "") if between is None else \
                f"a number in {between}"
        if between is not None and not ((between.low < value if between.low_open else between.low <= value)
                                         and value <= between.high):
            return f"a number in {between}"
        return None
    return rule


def _shape_rule(rank: Rank) -> Rule:
    what = f"a shape of {rank.rank} positive whole numbers" + (f" {rank.names}" if rank.names else "")

    def rule(value):
        if not isinstance(value, (tuple, list, np.ndarray)) or len(value) != rank.rank:
            return what
        if any(isinstance(d, (bool, np.bool_)) or not isinstance(d, (int, np.integer)) or d < 1 for d in value):
            return what
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
        return _float_rule(INF_OK in marks, next((m for m in marks if isinstance(m, Between)), None))
    rank = next((m for m in marks if isinstance(m, Rank)), None)
    if rank is not None:
        return _shape_rule(rank)
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


class _Deferred(type):
    """The class ``module.name`` of a module not loaded when an annotation was resolved (``torch.device`` for a
    memory kept on the host, which never loads torch). ``isinstance`` looks the real class up at each check: while
    the module is not loaded no value can be one of its instances, so the check refuses everything but the other
    members of the annotation; once loaded, the real class decides."""

    def __instancecheck__(cls, value) -> bool:
        real = cls._real()
        return isinstance(real, type) and isinstance(value, real)

    def __subclasscheck__(cls, sub) -> bool:
        real = cls._real()
        return isinstance(real, type) and isinstance(sub, type) and issubclass(sub, real)

    def __getattr__(cls, attr: str):  # ``torch.device`` on the deferred module ``torch``
        if attr.startswith("_"):
            raise AttributeError(attr)
        return _deferred(cls.__module__, f"{cls.__qualname__}.{attr}" if cls.__qualname__ else attr)

    def _real(cls):
        """The module or class this stands for, once its module is loaded; else None."""
        obj = sys.modules.get(cls.__module__)
        for part in filter(None, cls.__qualname__.split(".")):
            obj = getattr(obj, part, None)
        return obj


@functools.cache
def _deferred(module: str, qualname: str) -> type:
    """The ``_Deferred`` class for ``module.qualname`` (``qualname`` empty: the module itself), one per name."""
    cls = _Deferred(qualname.rpartition(".")[2] or module, (), {"__module__": module})
    cls.__qualname__ = qualname
    return cls


@functools.cache
def _type_checking_names(module_name: str) -> dict[str, type]:
    """The names module ``module_name`` (loaded) imports under ``if TYPE_CHECKING:``, each as a deferred class: its
    source is read once per module, however many of its functions resolve their annotations. Read-only."""
    try:
        tree = ast.parse(inspect.getsource(sys.modules[module_name]))
    except (OSError, TypeError):  # no source (a module built at run time): nothing deferred
        return {}
    names: dict[str, type] = {}
    for node in tree.body:
        if not (isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)):
            continue
        for stmt in node.body:
            if isinstance(stmt, ast.Import):
                for alias in stmt.names:
                    names[alias.asname or alias.name.split(".")[0]] = _deferred(
                        alias.name if alias.asname else alias.name.split(".")[0], "")
            elif isinstance(stmt, ast.ImportFrom) and stmt.module and not stmt.level:
                for alias in stmt.names:
                    names[alias.asname or alias.name] = _deferred(stmt.module, alias.name)
    return names


def _hints(func: Callable) -> dict[str, Any]:
    """The resolved annotations. A name imported only for type checkers (``if TYPE_CHECKING:``, to keep the
    layers, or not to load torch where it is not needed) resolves to the class it names if its module is loaded,
    else to a ``_Deferred`` class that finds the real one when a value is checked: the check is the same whatever
    was imported before the first call."""
    try:
        return typing.get_type_hints(func, include_extras=True)
    except NameError:  # or a function pickled by value, whose globals hold only the names its code reads
        module = sys.modules.get(func.__module__) or importlib.import_module(func.__module__)
        names = {name: cls._real() or cls for name, cls in _type_checking_names(module.__name__).items()}
        return typing.get_type_hints(func, globalns={**names, **vars(module), **func.__globals__},
                                     include_extras=True)


class _Annotated:
    """A stand-in holding one annotation, for ``typing.get_type_hints`` to resolve alone."""

    def __init__(self, text: Any):
        self.__annotations__ = {"x": text}


_is_compiling: Callable[[], bool] | None = None


def _compiling() -> bool:
    global _is_compiling
    if _is_compiling is None:
        torch = sys.modules.get("torch")
        if torch is None:
            return False
        _is_compiling = torch.compiler.is_compiling
    return _is_compiling()


_INF = math.inf


def _accept_expr(hint: Any, var: str, names: dict[str, Any]) -> str | None:
    """A Python expression in ``var`` that is true for common values ``hint``'s rule accepts (and never for one it
    refuses), for the compiled checker; None when there is none worth having. Objects it needs go into ``names``."""
    marks: tuple = ()
    if typing.get_origin(hint) is Annotated:
        hint, *marks = typing.get_args(hint)
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        members = [a for a in args if a is not type(None)]
        if any(m is os.PathLike or isinstance(m, type) and issubclass(m, PurePath) for m in members):
            return None  # a path union has its own rule (non-empty, no NUL byte)
        parts = [f"{var} is None"] if len(members) < len(args) else []
        parts += [e for e in (_accept_expr(m, var, names) for m in members) if e is not None]
        return " or ".join(f"({p})" for p in parts) or None
    if hint is int:
        low = next((m.low for m in marks if isinstance(m, AtLeast)), None if SIGNED in marks else 0)
        return f"type({var}) is int" + ("" if low is None else f" and {var} >= {int(low)}")
    if hint is float:
        between = next((m for m in marks if isinstance(m, Between)), None)
        if between is not None:  # NaN fails every comparison; ±inf fails the bounds
            low = f"{float(between.low)!r} {'<' if between.low_open else '<='} {var}"
            return f"(type({var}) is float or type({var}) is int) and {low} and {var} <= {float(between.high)!r}"
        finite = f"{var} - {var} == 0.0"  # false for NaN and ±inf
        return (f"type({var}) is int or type({var}) is float and "
                + (f"({finite} or {var} == __c_inf)" if INF_OK in marks else finite))
    if hint is bool:
        return f"{var} is True or {var} is False"
    if hint is str:
        return f"type({var}) is str"
    if marks or origin is not None or not isinstance(hint, type) or isinstance(hint, abc.ABCMeta) \
            or getattr(hint, "_is_protocol", False) or issubclass(hint, (PurePath, os.PathLike)):
        return None  # containers, literals, shapes, ABCs and protocols: the rule itself
    name = f"__c_cls{len(names)}"
    names[name] = hint
    return f"isinstance({var}, {name})"


def _refuse_item(where: str, rule: Rule) -> Callable[[str, Any], None]:
    """The slow path of a value: its rule, and the refusal naming it as ``shown`` (a parameter, or an item of
    ``*args`` or ``**kwargs`` by its index or name)."""
    def refuse(shown: str, value) -> None:
        why = rule(value)
        if why is not None:
            raise ArgumentError(f"{where}: {shown} must be {why}, got {_short(value)}")
    return refuse


def _refuse(where: str, shown: str, rule: Rule) -> Callable[[Any], None]:
    """``_refuse_item`` for one named parameter."""
    return functools.partial(_refuse_item(where, rule), shown)


def _parameter_list(signature: inspect.Signature, names: dict[str, Any]) -> tuple[str, str]:
    """(the parameter list of a ``def`` with ``signature``'s names, kinds and defaults, the arguments that pass each
    on to a function of that signature); the defaults go into ``names`` as ``__c_d<i>``."""
    header, passing, star = [], [], False
    params = list(signature.parameters.values())
    last_positional_only = max((i for i, p in enumerate(params) if p.kind is p.POSITIONAL_ONLY), default=-1)
    for i, p in enumerate(params):
        if p.name.startswith("__c_"):
            raise ArgumentError(f"checked: a parameter named {p.name}: the checker's own names start with __c_")
        if p.kind is p.VAR_POSITIONAL:
            header.append(f"*{p.name}")
            passing.append(f"*{p.name}")
            star = True
            continue
        if p.kind is p.VAR_KEYWORD:
            header.append(f"**{p.name}")
            passing.append(f"**{p.name}")
            continue
        if p.kind is p.KEYWORD_ONLY and not star:
            header.append("*")
            star = True
        if p.default is not p.empty:
            names[f"__c_d{i}"] = p.default
        header.append(p.name + (f"=__c_d{i}" if p.default is not p.empty else ""))
        passing.append(f"{p.name}={p.name}" if p.kind is p.KEYWORD_ONLY else p.name)
        if i == last_positional_only:
            header.append("/")
    return ", ".join(header), ", ".join(passing)


def _check_lines(signature: inspect.Signature, hints: dict[str, Any], where: str, skip_first: bool,
                 names: dict[str, Any]) -> tuple[list[str], list[str]]:
    """(the inline tests, one per checked parameter, all true for common good values; the lines that check each
    parameter by its rule, ``_refuse``). A value left at its default passes both. The objects they use go into
    ``names``."""
    fast, lines = [], []
    for i, p in enumerate(signature.parameters.values()):
        hint = hints.get(p.name, inspect.Parameter.empty)
        rule = None if (skip_first and i == 0) else rule_for(hint)
        if rule is None:
            continue
        if p.kind is p.VAR_POSITIONAL:
            names[f"__c_r{i}"] = _refuse_item(where, rule)
            fast.append(f"not {p.name}")
            lines.append(f"for __c_k, __c_v in enumerate({p.name}): __c_r{i}(f'{p.name}[{{__c_k}}]', __c_v)")
        elif p.kind is p.VAR_KEYWORD:
            names[f"__c_r{i}"] = _refuse_item(where, rule)
            fast.append(f"not {p.name}")
            lines.append(f"for __c_k, __c_v in {p.name}.items(): __c_r{i}(__c_k, __c_v)")
        else:
            names[f"__c_r{i}"] = _refuse(where, p.name, rule)
            accept = _accept_expr(hint, p.name, names)
            given = f"{p.name} is not __c_d{i}" if p.default is not p.empty else None
            fast.append(" or ".join(f"({t})" for t in (given and f"{p.name} is __c_d{i}", accept) if t) or "False")
            lines.append(f"if {given}: __c_r{i}({p.name})" if given else f"__c_r{i}({p.name})")
    return fast, lines


_OUTSIDE = "not __c_frame(1).f_globals.get('__name__', '').startswith('dqn_course') and not __c_compiling()"


def checked(func: Callable, method: bool = False) -> Callable:
    """``func`` with its annotated arguments checked at each call (module docstring's rules); a no-op if done.
    ``method``: its first parameter is ``self`` or ``cls``, not checked.

    The wrapper is a function with ``func``'s own parameters (so Python binds the arguments, and a missing or
    unknown one is Python's ``TypeError``, naming it). At its first call it resolves the annotations and takes the
    compiled checks as its code: from then on each argument meets an inline test of the common good values, and
    only when one fails are the caller's frame (outside the package?) and the rules consulted.
    """
    if not callable(func):
        raise ArgumentError(f"checked: func must be a function (something callable), got {_short(func)}")
    if not isinstance(method, bool):
        raise ArgumentError(f"checked: method must be True or False, got {_short(method)}")
    if getattr(func, "__checked__", False):
        return func
    signature = inspect.signature(func)
    where = func.__qualname__.replace(".__init__", "")
    name = func.__name__ if func.__name__.isidentifier() else "checked"
    # The wrapper's globals. Builtins as the module, not a copy of its dict: Ray pickles an actor class's methods by
    # value, and a dict of builtins would carry a notebook's replaced input() with it, which cannot be pickled.
    names: dict[str, Any] = {"__builtins__": builtins, "__c_func": func, "__c_frame": sys._getframe,
                             "__c_compiling": _compiling, "__c_inf": _INF}
    header, passing = _parameter_list(signature, names)
    filename = f"<checked {where}>"

    def resolve() -> None:  # at the first call: by then every module a type-checking-only name comes from is loaded
        live = wrapper.__globals__  # ``names``; or, in a process that unpickled the wrapper, a new dict of its names
        live.update({k: v for k, v in names.items() if k not in live})
        fast, lines = _check_lines(signature, _hints(func), where, method, live)
        body = f"    return __c_func({passing})\n"
        if lines:  # good values pass the inline tests; only a value that fails one costs the caller's frame
            body = (f"    if not ({' and '.join(f'({t})' for t in fast)}) and {_OUTSIDE}:\n"
                    f"        __c_checks({passing})\n" + body)
        exec(compile(f"def {name}({header}):\n{body}"
                     + f"def __c_checks({header}):\n" + "".join(f"    {line}\n" for line in lines or ["pass"]),
                     filename, "exec"), live)  # noqa: S102 - source made here, from the signature and names
        wrapper.__code__ = live[name].__code__  # the same function object (held by classes and modules) from now on

    names["__c_resolve"] = resolve
    exec(compile(f"def {name}({header}):\n    __c_resolve()\n    if {_OUTSIDE}:\n        __c_checks({passing})\n"
                 f"    return __c_func({passing})\n", filename, "exec"), names)  # noqa: S102 - made here, from names
    wrapper = names[name]
    functools.update_wrapper(wrapper, func)
    wrapper.__checked__ = True  # its globals are ``names``: _rebind_defaults keeps the defaults there in step
    return wrapper


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
    for f in [*functions, *(getattr(f, "__wrapped__", f) for f in functions)]:  # the wrappers and the functions
        if getattr(f, "__checked__", False):  # the wrapper's checks compare a value with its default
            names = f.__globals__
            names.update({k: wrapped.get(d, d) for k, d in names.items() if k.startswith("__c_d")
                          and inspect.isfunction(d)})
        if f.__defaults__:
            f.__defaults__ = tuple(wrapped.get(d, d) if inspect.isfunction(d) else d for d in f.__defaults__)
        if f.__kwdefaults__:
            f.__kwdefaults__ = {k: wrapped.get(d, d) if inspect.isfunction(d) else d
                                for k, d in f.__kwdefaults__.items()}

