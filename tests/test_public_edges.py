"""Every public callable of dqn_course refuses arguments of the wrong kind: one generated test, not case by case.

The sweep walks the package (every module without a leading underscore, ``dqn_course.lab`` included), takes each
public function, class constructor and public method defined there, and reads each parameter's annotation. For each
parameter it makes calls that differ from a valid one in that argument only, with values of the wrong kind for the
annotation (this file's own table, ``bad_values``: not the package's rules, so it can catch them out):

- every parameter: an object of no kind at all, and ``None`` unless the parameter is optional;
- ``int``: a string, a fraction, ``True``, -1 (and 0 where the annotation is a count);
- ``float``: a string, ``True``, NaN, -inf and +inf (+inf only where the annotation does not take it);
- ``bool``: the string "false"; ``str``: a number; a path: a number, "" and a name holding a NUL byte;
- arrays and tensors: a string, and a numpy array where a tensor is meant; callables: a number;
- containers: a string, and for ``tuple[int, ...]`` a negative item.

Each call must be refused by the package's own code (the raising frame is in ``dqn_course``) with a message that
names the parameter, or be in ``ALLOWED`` with a reason. The other arguments are valid: built from their annotations
(``placeholder``), or, for the stateful objects in ``EXAMPLES``, a real object and a real call, whose state is
compared after each refused call. A public function that checks nothing fails here: ``test_a_planted_unchecked
_function_is_caught`` plants one.
"""
from __future__ import annotations

import collections.abc
import contextlib
import dataclasses
import functools
import importlib
import inspect
import io
import math
import operator
import os
import pkgutil
import signal
import sys
import traceback
import types
import typing
import warnings
from dataclasses import dataclass, field
from pathlib import Path, PurePath
from collections.abc import Callable
from typing import Annotated, Any

import numpy as np
import pytest
import torch

import dqn_course
from dqn_course.contracts import INF_OK, SIGNED, AtLeast, Between, Rank

PACKAGE = Path(dqn_course.__file__).resolve().parent
PROBE_SECONDS = 3.0


class Nothing:
    """A value of no kind any parameter here takes."""

    def __repr__(self) -> str:
        return "<an object of no kind>"


# -- the public callables ------------------------------------------------------------------------------------------

@dataclass
class Target:
    name: str  # dqn_course.module.function, or dqn_course.module.Class(.method)
    func: Callable  # what is called (a class for its constructor)
    owner: type | None = None  # the class of a method
    signature: inspect.Signature | None = None
    hints: dict = field(default_factory=dict)


@functools.cache
def public_modules() -> list[types.ModuleType]:
    names = [m.name for m in pkgutil.walk_packages(dqn_course.__path__, "dqn_course.")
             if not any(part.startswith("_") for part in m.name.split(".")[1:])]
    return [dqn_course] + [importlib.import_module(name) for name in names]


def _hints(func: Callable) -> dict:
    """Resolved annotations; a name imported for type checkers only is found among the package's modules."""
    try:
        return typing.get_type_hints(func, include_extras=True)
    except NameError:
        names: dict[str, Any] = {}
        for module in public_modules():
            for name, obj in vars(module).items():
                names.setdefault(name, obj)
        return typing.get_type_hints(func, globalns={**names, **func.__globals__}, include_extras=True)


def _is_record(cls: type) -> bool:
    return issubclass(cls, tuple) or issubclass(cls, BaseException) or typing.is_typeddict(cls)


def public_targets(modules=None) -> list[Target]:
    out = []
    for module in modules or public_modules():
        for name, obj in sorted(vars(module).items()):
            if name.startswith("_") or getattr(obj, "__module__", None) != module.__name__:
                continue
            qual = f"{module.__name__}.{name}"
            if inspect.isfunction(obj):
                out.append(Target(qual, obj))
            elif inspect.isclass(obj) and not _is_record(obj):
                init = inspect.unwrap(obj.__init__)
                if getattr(init, "__module__", "").startswith("dqn_course"):  # not a constructor gymnasium wrote
                    out.append(Target(qual, obj, signature=inspect.signature(obj), hints=_hints(init)))
                fields = {f.name for f in dataclasses.fields(obj)} if dataclasses.is_dataclass(obj) else set()
                for attr, member in sorted(vars(obj).items()):
                    if attr.startswith("_") or attr in fields:  # a dataclass field's default is no method
                        continue
                    if isinstance(member, staticmethod):
                        out.append(Target(f"{qual}.{attr}", getattr(obj, attr)))
                    elif isinstance(member, classmethod):
                        out.append(Target(f"{qual}.{attr}", getattr(obj, attr)))
                    elif inspect.isfunction(member):
                        out.append(Target(f"{qual}.{attr}", member, owner=obj))
    for t in out:
        if t.signature is None:
            t.signature = inspect.signature(t.func)
            t.hints = _hints(inspect.unwrap(t.func))
    return out


RAY_TRACE = "_ray_trace_ctx"  # Ray adds it to an actor class's method signatures once the class is made remote


def parameters(target: Target) -> list[inspect.Parameter]:
    """The parameters a caller passes (not ``self``, not ``*args``/``**kwargs``, not Ray's tracing context)."""
    return [p for i, p in enumerate(target.signature.parameters.values())
            if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD) and not (target.owner is not None and i == 0)
            and p.name != RAY_TRACE]


# -- kinds, valid stand-ins and wrong values, from annotations --------------------------------------------------------

def _split(hint) -> tuple[Any, tuple, bool]:
    """(hint without Annotated and None, its marks, None allowed)."""
    marks: tuple = ()
    if typing.get_origin(hint) is Annotated:
        hint, *marks = typing.get_args(hint)
    optional = False
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        members = [a for a in typing.get_args(hint) if a is not type(None)]
        optional = len(members) < len(typing.get_args(hint))
        hint = members[0] if len(members) == 1 else functools.reduce(operator.or_, members)
        if typing.get_origin(hint) is Annotated:
            hint, *more = typing.get_args(hint)
            marks = (*marks, *more)
    return hint, tuple(marks), optional


def _is_path(hint) -> bool:
    members = typing.get_args(hint) if typing.get_origin(hint) in (typing.Union, types.UnionType) else (hint,)
    return any(m is os.PathLike or isinstance(m, type) and issubclass(m, PurePath) for m in members)


CONTAINERS = {list: list, tuple: tuple, dict: dict, set: set, collections.abc.Sequence: list,
              collections.abc.Mapping: dict, collections.abc.Iterable: list, collections.abc.Collection: tuple,
              collections.abc.Iterator: lambda: iter(())}


def kind(hint) -> str:
    hint, marks, _ = _split(hint)
    origin = typing.get_origin(hint)
    if hint in (Any, object, inspect.Parameter.empty) or isinstance(hint, typing.TypeVar):
        return "any"
    if _is_path(hint):
        return "path"
    if origin in (typing.Union, types.UnionType):
        return "union"
    if hint is bool:
        return "bool"
    if hint is int:
        return "count" if any(isinstance(m, AtLeast) and m.low >= 1 for m in marks) else \
            "signed" if SIGNED in marks else "int"
    if hint is float:
        between = next((m for m in marks if isinstance(m, Between)), None)
        if between is not None:
            return "fraction" if between.low_open else "probability"
        return "float+inf" if INF_OK in marks else "float"
    if any(isinstance(m, Rank) for m in marks):
        return "shape"
    if hint is str:
        return "str"
    if hint is np.ndarray:
        return "array"
    if hint is torch.Tensor:
        return "tensor"
    if origin is typing.Literal:
        return "literal"
    if hint in (collections.abc.Callable, typing.Callable) or origin is collections.abc.Callable:
        return "callable"
    if origin is tuple and len(typing.get_args(hint)) == 2 and typing.get_args(hint)[1] is Ellipsis \
            and typing.get_args(hint)[0] is int:
        return "int-tuple"
    if (origin or hint) in CONTAINERS:
        return "container"
    if isinstance(origin or hint, type):
        return "instance"
    raise AssertionError(f"the sweep has no kind for the annotation {hint!r}")


def _rank(hint) -> int:
    return next(m.rank for m in _split(hint)[1] if isinstance(m, Rank))


def optional(param: inspect.Parameter, hint) -> bool:
    return _split(hint)[2] or param.default is None


def bad_values(param: inspect.Parameter, hint) -> list[tuple[str, Any]]:
    """(label, value) pairs this parameter must refuse."""
    k = kind(hint)
    out = [("an object of no kind", Nothing())]
    if k == "any":  # no annotation: the body must refuse what it cannot use, or ALLOWED says why anything goes
        return out
    if not optional(param, hint):
        out.append(("None", None))
    rank = _rank(hint) if k == "shape" else 0
    out += {
        "int": [("a string", "3"), ("a fraction", 2.5), ("True", True), ("-1", -1)],
        "count": [("a string", "3"), ("a fraction", 2.5), ("True", True), ("-1", -1), ("0", 0)],
        "signed": [("a string", "3"), ("a fraction", 2.5), ("True", True)],
        "float": [("a string", "0.5"), ("True", True), ("NaN", math.nan), ("-inf", -math.inf), ("+inf", math.inf)],
        "float+inf": [("a string", "0.5"), ("True", True), ("NaN", math.nan), ("-inf", -math.inf)],
        "probability": [("a string", "0.5"), ("True", True), ("NaN", math.nan), ("+inf", math.inf), ("-0.5", -0.5),
                        ("2", 2)],
        "fraction": [("a string", "0.5"), ("True", True), ("NaN", math.nan), ("0", 0.0), ("-0.5", -0.5), ("2", 2)],
        "shape": [("a number", 3), ("a shape of another rank", (6,) * (rank + 1)),
                  ("a size of 0", (0,) + (6,) * (rank - 1)), ("a fractional size", (6.5,) * rank)],
        "bool": [("a string", "false")],
        "str": [("a number", 3)],
        "path": [("a number", 3), ("an empty path", ""), ("a NUL byte", "run\0dir")],
        "array": [("a string", "x")],
        "tensor": [("a string", "x"), ("a numpy array", np.zeros(2, np.float32))],
        "callable": [("a number", 3)],
        "container": [("a number", 3)],
        "int-tuple": [("a number", 3), ("a negative item", (2, -1))],
        "literal": [("an unknown option", "no-such-option")],
        "instance": [],
        "union": [],
    }[k]
    return out


# -- valid stand-ins for the other arguments ----------------------------------------------------------------------

def _instance(cls: type):
    """An instance for an isinstance check: a real one where it is cheap, else an uninitialised one."""
    if cls is np.random.Generator:
        return np.random.default_rng(0)
    if cls is torch.device:
        return torch.device("cpu")
    if cls is torch.nn.Module:
        return torch.nn.Linear(1, 1)
    if cls is np.ndarray:
        return np.zeros(1, np.float32)
    if cls is torch.Tensor:
        return torch.zeros(1)
    if cls is type:
        return Nothing
    if getattr(cls, "_is_protocol", False):  # a runtime Protocol: an object that has every name it lists
        names = typing._get_protocol_attrs(cls)
        return type(f"StandIn{cls.__name__}", (), {n: (lambda self, *a, **k: None) for n in names})()
    if issubclass(cls, tuple) and hasattr(cls, "_fields"):
        return cls._make([None] * len(cls._fields))
    with contextlib.suppress(TypeError):
        return cls.__new__(cls)
    raise AssertionError(f"the sweep cannot stand in for a {cls}")


def placeholder(hint, tmp: Path):
    if kind(hint) == "shape":  # a mark the split below drops
        return ((4, 6, 6) + (6,) * _rank(hint))[:_rank(hint)]
    hint, marks, _ = _split(hint)
    k = kind(hint)
    if k in ("int", "count", "signed"):
        return 1
    if k in ("float", "float+inf", "probability", "fraction"):
        return 0.5
    if k == "bool":
        return False
    if k == "str":
        return "x"
    if k == "path":
        return str(tmp / "x")
    if k == "callable":
        return lambda *args, **kwargs: None
    if k == "int-tuple":
        return (1,)
    if k == "literal":
        return typing.get_args(hint)[0]
    if k == "union":
        return placeholder(typing.get_args(hint)[0], tmp)
    if k == "any":
        return None
    origin = typing.get_origin(hint) or hint
    if k == "container":
        return CONTAINERS[origin]()  # a fresh one: a call may fill it
    return _instance(origin)


# -- one call and its outcome -------------------------------------------------------------------------------------

class Overran(Exception):
    pass


def _alarm(signum, frame):
    raise Overran(f"ran past {PROBE_SECONDS} s instead of refusing")


def outcome(call: Callable[[], Any], name: str, verdict: bool = False) -> str | None:
    """None when the call is refused by dqn_course naming ``name`` (or, ``verdict``: a notebook check's own
    ``AssertionError``, its verdict on a learner's answer, which says what it expected); else what happened."""
    previous = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGALRM)}
    argv, cwd = list(sys.argv), os.getcwd()
    signal.signal(signal.SIGALRM, _alarm)
    signal.setitimer(signal.ITIMER_REAL, PROBE_SECONDS)
    try:
        with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()), \
                contextlib.redirect_stderr(io.StringIO()):
            warnings.simplefilter("ignore")
            call()
    except Overran as error:
        return str(error)
    except SystemExit as error:
        return f"exited ({error.code}) instead of raising"
    except Exception as error:  # noqa: BLE001 - every kind of error is judged below
        frames = traceback.extract_tb(error.__traceback__)
        last = Path(frames[-1].filename).resolve() if frames else None
        if last is None or not last.is_relative_to(PACKAGE):
            return f"{type(error).__name__} raised in {last}: {str(error)[:120]}"
        if name not in str(error) and not (verdict and isinstance(error, AssertionError)):
            return f"{type(error).__name__} without the name {name!r}: {str(error)[:120]}"
        return None
    else:
        return "accepted"
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        for s, handler in previous.items():
            signal.signal(s, handler)
        sys.argv[:] = argv
        os.chdir(cwd)
    return None


def probes(target: Target, tmp: Path):
    """(parameter, label, call) for each wrong value of each parameter of ``target``."""
    params = parameters(target)
    for param in params:
        hint = target.hints.get(param.name, inspect.Parameter.empty)
        for label, value in bad_values(param, hint):
            args, kwargs = [], {}
            for other in params:
                if other is param:
                    v = value
                elif other.default is not inspect.Parameter.empty:
                    continue
                else:
                    v = placeholder(target.hints.get(other.name, inspect.Parameter.empty), tmp)
                if other.kind is other.POSITIONAL_ONLY:
                    args.append(v)
                else:
                    kwargs[other.name] = v
            first = [_instance(target.owner)] if target.owner is not None else []  # an uninitialised self
            yield param.name, label, functools.partial(target.func, *first, *args, **kwargs)


def sweep(targets: list[Target], tmp: Path) -> tuple[list[str], int, int, set]:
    """The failures ("name(param=label): what happened"), the numbers of parameters and calls made, and the
    ALLOWED entries used."""
    failures, n_params, n_calls, used = [], 0, 0, set()
    made = examples()
    for target in targets:
        n_params += len(parameters(target))
        verdict = target.name.startswith("dqn_course.lab.checks.")
        if target.name in made:
            calls = example_probes(target.name, made[target.name], target)
        else:
            calls = ((name, label, call, None) for name, label, call in probes(target, tmp))
        for name, label, call, unchanged in calls:
            entry = next((e for e in ((target.name, name, label), (target.name, name), (target.name, None))
                          if e in ALLOWED), None)
            if entry is not None:
                used.add(entry)
                continue
            n_calls += 1
            why = outcome(call, name, verdict)
            if why is None and unchanged is not None and not unchanged():
                why = "refused, but the object's state changed"
            if why is not None:
                failures.append(f"{target.name}({name}={label}): {why}")
    return failures, n_params, n_calls, used


# -- real objects for the callables whose checks need a real object (state compared after each refused call) ------

OBS = (4, 6, 6)


def transition() -> dict:
    return dict(state=np.zeros(OBS, np.uint8), action=1, reward=0.5, next_state=np.zeros(OBS, np.uint8), done=False)


def filled(memory, n: int = 12):
    for i in range(n):
        memory.add(**{**transition(), "done": i % 5 == 4})
    return memory


def _memories():
    from dqn_course.replay import FoldedRingMemory, FrameSharingMemory, MultiStreamMemory, NaiveDequeMemory, \
        StackedRingMemory

    return {"dqn_course.replay.frame_sharing.FrameSharingMemory": lambda: FrameSharingMemory(64, OBS, seed=0),
            "dqn_course.replay.rungs.StackedRingMemory": lambda: StackedRingMemory(64, OBS, seed=0),
            "dqn_course.replay.rungs.FoldedRingMemory": lambda: FoldedRingMemory(64, OBS, seed=0),
            "dqn_course.replay.rungs.NaiveDequeMemory": lambda: NaiveDequeMemory(64, OBS, seed=0),
            "dqn_course.replay.multi_stream.MultiStreamMemory": lambda: MultiStreamMemory(64, 2, OBS, seed=0)}


def _prioritized():
    from dqn_course.per import PrioritizedMemory
    from dqn_course.replay import FrameSharingMemory

    memory = PrioritizedMemory(filled(FrameSharingMemory(64, OBS, seed=0)), seed=0)
    return memory, memory.sample(4).indices


def examples() -> dict[str, Callable[[], tuple[Any, dict]]]:
    """Target name -> a maker of (the object whose method is called, or None for a function; valid arguments)."""
    from dqn_course.agent import DQNAgent
    from dqn_course.lab.checks import QUESTIONS
    from dqn_course.per import CompiledSumTree

    out = {}
    for name, make in _memories().items():
        extra = {"stream": 1} if "Multi" in name else {}
        out[f"{name}.add"] = lambda make=make, extra=extra: (make(), {**transition(), **extra})
        out[f"{name}.sample"] = lambda make=make: (filled(make()), dict(batch_size=4))
    out["dqn_course.replay.multi_stream.MultiStreamMemory.add_batch"] = lambda: (_memories()[
        "dqn_course.replay.multi_stream.MultiStreamMemory"](), dict(
        states=np.zeros((2, *OBS), np.uint8), actions=np.array([0, 1]), rewards=np.zeros(2, np.float32),
        next_states=np.zeros((2, *OBS), np.uint8), dones=np.zeros(2, bool), episode_ends=np.zeros(2, bool)))
    out["dqn_course.replay.multi_stream.MultiStreamMemory.end_episode"] = lambda: (_memories()[
        "dqn_course.replay.multi_stream.MultiStreamMemory"](), dict(stream=1))
    out["dqn_course.per.PrioritizedMemory.sample"] = lambda: (_prioritized()[0], dict(batch_size=4, beta=0.4))
    out["dqn_course.per.PrioritizedMemory.update_priorities"] = lambda: (
        (p := _prioritized())[0], dict(indices=p[1], td_errors=np.ones(4)))
    out["dqn_course.agent.DQNAgent.act"] = lambda: (DQNAgent(4, seed=0), dict(
        states=np.zeros((2, 4, 84, 84), np.uint8), epsilon=0.1))
    for method, args in (("update", dict(indices=np.array([1, 2]), values=np.array([1.0, 2.0]))),
                         ("get", dict(indices=np.array([1, 2]))), ("find", dict(mass=np.array([0.5, 2.5])))):
        out[f"dqn_course.per.CompiledSumTree.{method}"] = lambda args=args: (_tree(CompiledSumTree), dict(args))
    from dqn_course.lab.per_demo import VectorReplay
    from dqn_course.lab.per_trees import PerItemSumTree, SumTree

    for cls in (SumTree, PerItemSumTree):
        for method, args in (("update", dict(indices=np.array([1, 2]), values=np.array([1.0, 2.0]))),
                             ("get", dict(indices=np.array([1, 2]))), ("find", dict(mass=np.array([0.5, 2.5])))):
            if hasattr(cls, method):
                out[f"dqn_course.lab.per_trees.{cls.__name__}.{method}"] = lambda c=cls, a=args: (_tree(c), dict(a))
    out["dqn_course.lab.per_trees.PerItemSumTree.find_one"] = lambda: (_tree(PerItemSumTree), dict(mass=2.5))

    def replay():
        memory = VectorReplay(16, 3, prioritized=True, seed=0)
        for _ in range(6):
            memory.add(np.zeros(3, np.float32), 1, 0.5, np.ones(3, np.float32), False)
        return memory

    out["dqn_course.lab.per_demo.VectorReplay.add"] = lambda: (replay(), dict(
        obs=np.zeros(3, np.float32), action=1, reward=0.5, next_obs=np.ones(3, np.float32), done=False))
    out["dqn_course.lab.per_demo.VectorReplay.sample"] = lambda: (replay(), dict(batch_size=4, beta=0.4))
    out["dqn_course.lab.per_demo.VectorReplay.update_priorities"] = lambda: (replay(), dict(
        indices=np.array([1, 2]), td_errors=np.array([0.5, -1.0])))
    out["dqn_course.lab.checks.core.check_question"] = lambda: (None, dict(key=next(iter(QUESTIONS)), answer="a"))
    return out


def _tree(cls):
    tree = cls(8)
    tree.update(np.arange(8), np.arange(1.0, 9.0))
    return tree


def wrong_like(value) -> list[tuple[str, Any]]:
    """Wrong values for a parameter known only by a valid value: its kind's, and for an array a wrong shape and
    a wrong dtype."""
    if isinstance(value, (bool, np.bool_)):
        return [("a string", "false"), ("2", 2)]
    if isinstance(value, (int, np.integer)):
        return [("a string", "3"), ("a fraction", 2.5), ("-1", -1)]
    if isinstance(value, (float, np.floating)):
        return [("a string", "0.5"), ("NaN", math.nan), ("+inf", math.inf), ("-inf", -math.inf)]
    if isinstance(value, np.ndarray) and value.ndim >= 1:
        wrong_dtype = value.astype(np.float64) + 0.5 if value.dtype.kind in "biu" else value.astype(str)
        return [("a wrong shape", value[..., None]), ("a wrong dtype", wrong_dtype),
                ("NaN in it", np.full(value.shape, np.nan)) if value.dtype.kind == "f" else
                ("a negative in it", value.astype(np.int64) - 1 - value.max())]
    return []


def snapshot(obj, depth: int = 0, seen: dict | None = None):
    """A comparable copy of everything ``obj`` holds: arrays and tensors by their bytes, objects by their fields."""
    seen = {} if seen is None else seen  # id -> object: holding them keeps a temporary's id from being reused
    if isinstance(obj, (type(None), bool, int, float, str, bytes, np.generic)):
        return obj if not (isinstance(obj, float) and math.isnan(obj)) else "nan"
    if isinstance(obj, np.ndarray):
        return ("array", obj.shape, str(obj.dtype), obj.tobytes())
    if isinstance(obj, torch.Tensor):
        return ("tensor", tuple(obj.shape), str(obj.dtype), obj.detach().cpu().numpy().tobytes())
    if isinstance(obj, np.random.Generator):
        return ("rng", repr(obj.bit_generator.state))
    if id(obj) in seen or depth > 8:
        return ("seen", type(obj).__name__)
    seen[id(obj)] = obj
    if isinstance(obj, torch.nn.Module):
        return snapshot(obj.state_dict(), depth + 1, seen)
    if isinstance(obj, torch.optim.Optimizer):
        return snapshot(obj.state_dict(), depth + 1, seen)
    if isinstance(obj, dict):
        return {repr(k): snapshot(v, depth + 1, seen) for k, v in obj.items()}
    if isinstance(obj, (list, tuple, collections.deque)):
        return [snapshot(v, depth + 1, seen) for v in obj]
    if hasattr(obj, "__dict__"):
        return (type(obj).__name__, snapshot(vars(obj), depth + 1, seen))
    return type(obj).__name__


def example_probes(name: str, make: Callable, target: Target):
    """(parameter, label, call, check of the state afterwards) for each wrong value of each parameter."""
    _, valid = make()
    for param in parameters(target):
        if param.name not in valid:
            continue
        hint = target.hints.get(param.name, inspect.Parameter.empty)
        wrong = bad_values(param, hint) if kind(hint) != "any" else [("an object of no kind", Nothing())]
        if kind(hint) == "any" and isinstance(valid[param.name], np.ndarray):
            wrong.append(("a list", valid[param.name].tolist()))  # an annotation may take lists; here none said so
        wrong += wrong_like(valid[param.name])
        for label, value in wrong:
            obj, args = make()
            before = snapshot(obj)
            call = getattr(obj, name.rsplit(".", 1)[1]) if obj is not None else target.func
            yield param.name, label, (lambda c=call, a={**args, param.name: value}: c(**a)), \
                (lambda o=obj, b=before: snapshot(o) == b)


ALLOWED: dict[tuple, str] = {  # (callable, parameter or None for all, optionally the wrong value's label): why
    ("dqn_course.per.CompiledSumTree.find", "mass", "a wrong shape"):
        "masses of any shape: the leaves come back in their shape",
    ("dqn_course.lab.per_trees.SumTree.find", "mass", "a wrong shape"):
        "masses of any shape: the leaves come back in their shape",

    ("dqn_course.check_arg", "value"): "the value check_arg judges: any object; its error names it by `name`",
    ("dqn_course.distributed.placement.actor_status", "handle"):
        "a Ray actor handle read through Ray's private API, best effort: anything else reads 'state unknown'",
    ("dqn_course.distributed.ray_private.actor_table_entry", "handle"):
        "a Ray actor handle read through Ray's private API: unreadable ones raise DiagnosticsUnavailable",
    ("dqn_course.profiling.SubprocessMeasurement", "result"): "the measured function's return value: any object",
    ("dqn_course.replay.base.ReplayMemory.add", None): "abstract: each memory's own add checks its arguments",
}


# -- the tests ----------------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def targets():
    return public_targets()


def test_every_public_callable_refuses_arguments_of_the_wrong_kind(targets, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    failures, n_params, n_calls, used = sweep(targets, tmp_path)
    print(f"{len(targets)} callables, {n_params} parameters, {n_calls} calls, {len(ALLOWED)} allowed")
    assert not failures, f"{len(failures)} calls not refused by rule:\n" + "\n".join(failures[:300])
    assert used == set(ALLOWED), f"ALLOWED entries no call needs any more: {sorted(set(ALLOWED) - used)}"


def _planted_module() -> types.ModuleType:
    module = types.ModuleType("dqn_course.planted")

    def count_frames(n: int, path: str | Path) -> int:
        """Checks nothing."""
        return n * 2

    count_frames.__module__ = module.__name__
    module.count_frames = count_frames
    return module


def test_a_planted_unchecked_function_is_caught(tmp_path, monkeypatch):
    from dqn_course.contracts import check_module

    monkeypatch.chdir(tmp_path)
    module = _planted_module()
    failures, n_params, n_calls, _ = sweep(public_targets([module]), tmp_path)
    assert n_params == 2 and n_calls > 10
    assert any(f.startswith("dqn_course.planted.count_frames(n=-1): accepted") for f in failures), failures
    assert any(f.startswith("dqn_course.planted.count_frames(path=a NUL byte): accepted") for f in failures)
    check_module(vars(module))  # the rule applied: the same sweep passes
    assert sweep(public_targets([module]), tmp_path)[0] == []


class Tally:
    """A planted stateful object: ``add`` counts, and checks its argument before (``checks_first``) or after."""

    checks_first = True

    def __init__(self):
        self.count = 0

    def add(self, value: int) -> None:
        if not self.checks_first:
            self.count += 1
        if not isinstance(value, int):
            raise TypeError(f"value must be an int, got {value!r}")
        self.count += self.checks_first


class CountsFirst(Tally):
    checks_first = False


@pytest.mark.parametrize("cls, kept", [(Tally, True), (CountsFirst, False)])
def test_a_refusal_that_changes_the_objects_state_is_caught(cls, kept):
    target = Target("dqn_course.planted.Tally.add", cls.add, owner=cls, signature=inspect.signature(cls.add),
                    hints={"value": int})
    probes = list(example_probes(target.name, lambda: (cls(), dict(value=1)), target))
    call, unchanged = next((call, unchanged) for _, label, call, unchanged in probes if label == "a string")
    with pytest.raises(TypeError, match="value must be an int"):
        call()
    assert unchanged() is kept
