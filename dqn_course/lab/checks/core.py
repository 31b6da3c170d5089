"""What every chapter's checks share: the verdicts, one number's check, predictions and the short questions.

The verdicts: passed, not answered yet, a hint (an ``AssertionError``); predict-then-measure is ``Prediction`` and
``check_prediction_of``, the short questions ``check_question``.

``PREDICTIONS`` and ``QUESTIONS`` are filled by the chapters' modules (``dqn_course.lab.checks`` imports them all),
one entry per question, named ``"<notebook>.<what>"``.
"""
from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any, NamedTuple

from dqn_course.contracts import check_module


def _passed(message: str) -> bool:
    print(f"✓ {message}")
    return True


def _not_answered_yet(todo: str) -> None:
    """The answer is still ``None``: say so without raising, so the notebook runs top to bottom."""
    print(f"Not answered yet: {todo}, then run this cell again.")
    return None


def _require_number(value, should: str) -> None:
    """Raise ``AssertionError`` "<should>, got <type>: <value>" unless ``value`` is a real number (not a bool)."""
    import numbers

    assert isinstance(value, numbers.Real) and not isinstance(value, bool), (
        f"{should}, got {type(value).__name__}: {value!r}")


def _check_number(answer, expected: float, *, todo: str, should: str, right: str, hints: list[tuple[float, str]],
                  otherwise: str, close: Callable[[float, float], bool] = operator.eq, show: str = ",") -> bool | None:
    """The pattern of the checks that take one number: ``None`` is not answered yet (``todo`` says what to do);
    anything but a number fails with ``should``; an answer ``close`` to ``expected`` passes with ``right``;
    otherwise the first hint whose value the answer is close to, or ``otherwise``, in
    "<answer> is not it: <hint>." (the answer formatted with ``show``)."""
    if answer is None:
        return _not_answered_yet(todo)
    _require_number(answer, should)
    if close(answer, expected):
        return _passed(right)
    hint = next((h for value, h in hints if close(answer, value)), otherwise)
    raise AssertionError(f"{answer:{show}} is not it: {hint}.")


def _show(x) -> str:
    """A number as the learner reads it: thousands separators, no spurious decimals."""
    if float(x).is_integer():
        return f"{int(x):,}"
    return f"{x:,.0f}" if abs(x) >= 100 else f"{x:.3g}"


REDO = "redo the arithmetic from the cell's numbers"


def _prediction_hint(prediction, measured, rel: float, forgot: dict | None, otherwise: str = REDO) -> str:
    """How far ``prediction`` is from ``measured``, in words that never state ``measured``.

    The direction (too high / too low), a rough factor band, and, when ``prediction / measured`` lies within 5%
    of a factor in ``forgot`` (within half its distance from 1 for a factor closer to 1 than 10%), what that
    factor usually means; else ``otherwise``. A prediction of zero gets ``forgot``'s text for the factor 0.
    """
    forgot = forgot or {}
    if prediction == 0 and measured != 0:
        return f"zero, where the measurement is not: {forgot.get(0, otherwise)}"
    if measured == 0 or (prediction > 0) != (measured > 0):
        return f"not even the same sign as the measurement (or zero): {otherwise}"
    ratio = prediction / measured
    direction = "too high" if abs(prediction) > abs(measured) else "too low"
    factor = max(abs(ratio), 1 / abs(ratio))
    if factor > 10:
        band = "off by more than 10x"
    elif factor >= 1.5:
        band = f"off by about {max(2, round(factor))}x"
    elif factor > 1.1:
        band = "off by between 10% and 50%"
    else:
        band = "within 10% but not exact" if rel == 0 else f"within 10% but not within {rel * 100:g}%"
    hint = f"{direction}, {band}"
    # A factor matches within 5%, or within half its distance from 1 when closer (a near miss is not "forgot").
    near = [(abs(ratio / f - 1), why) for f, why in forgot.items()
            if f > 0 and abs(ratio / f - 1) <= min(0.05, abs(f - 1) / 2)]
    why = min(near)[1] if near else otherwise
    return f"{hint}: {why}"


def check_prediction(prediction: Any, measured: float, what: str, rel: float = 0.02, *,
                     forgot: dict[float, str] | None = None, otherwise: str = REDO) -> bool | None:
    """Notebooks 03-10: the learner's ``prediction`` (a number written *before* the measurement) against the
    ``measured`` value, within ``rel`` (2% by default; 0 asks for the exact value).

    A wrong prediction gets a hint, never the measured value: too high or too low, by roughly what factor
    (more than 10x, about N x, 10-50%, within 10%), and, when ``prediction / measured`` is within 5% of a key
    of ``forgot``, that key's text: e.g. ``forgot={8.0: "pixels are uint8, 1 byte each, not float64"}``; else
    ``otherwise`` (how to work the number out). On success it prints the measured value (the learner has answered).
    """
    if prediction is None:
        return _not_answered_yet(f"write your prediction of {what} (a number) in the cell above")
    _require_number(prediction, f"the prediction of {what} should be a number")
    off = abs(prediction - measured) / max(abs(measured), 1e-12)
    if off <= rel:
        return _passed(f"{what}: predicted {_show(prediction)}, measured {_show(measured)}")
    raise AssertionError(f"you predicted {_show(prediction)} for {what}; that is "
                         f"{_prediction_hint(prediction, measured, rel, forgot, otherwise)}.")


class Prediction(NamedTuple):
    """One predict-then-measure question: the quantity (``what``), how close counts (``rel``; 0 asks for the exact
    value), the likely mistakes: ``mistakes(measured, **given)`` maps the number a learner who made a mistake
    would write to its hint (``given``: the notebook's own inputs a wrong answer is made of), and the hint for any
    other wrong number (``otherwise``: how to work it out)."""

    what: str
    rel: float
    mistakes: Callable[..., dict[float, str]]
    otherwise: str = REDO


PREDICTIONS: dict[str, Prediction] = {}  # the chapters' modules add theirs
QUESTIONS: dict[str, tuple] = {}  # key: (right option, why, hint for a wrong one)


def check_prediction_of(key: str, prediction: Any, measured: float, **given: float) -> bool | None:
    """A notebook's prediction ``key`` (``PREDICTIONS``): ``check_prediction`` with that question's quantity,
    tolerance and likely mistakes (``given``: the notebook's inputs its mistakes are made of), so that the check
    cell states none of them. Raises ValueError for an unknown key."""
    if key not in PREDICTIONS:
        raise ValueError(f"no prediction called {key!r}: the notebooks' are {', '.join(sorted(PREDICTIONS))}")
    what, rel, mistakes, otherwise = PREDICTIONS[key]
    forgot = {wrong / measured: why for wrong, why in mistakes(measured, **given).items()} if measured else None
    return check_prediction(prediction, measured, what, rel, forgot=forgot, otherwise=otherwise)


def check_question(key: str, answer: Any) -> bool | None:
    """Notebooks 01-10: a short multiple-choice question; ``answer`` is a letter, e.g. ``"b"``."""
    if key not in QUESTIONS:
        raise KeyError(f"check_question: key {key!r} names no question here (e.g. {next(iter(QUESTIONS))!r})")
    right, why, hints = QUESTIONS[key]
    if answer is None:
        return _not_answered_yet("write the letter of your answer, e.g. \"a\"")
    assert isinstance(answer, str) and answer.strip().lower() in ("a", "b", "c"), (
        f"answer with one letter, \"a\", \"b\" or \"c\", got {answer!r}")
    letter = answer.strip().lower()
    assert letter == right, f"not {letter!r}: {hints.get(letter, 'look again at the measurements above')}"
    return _passed(f"{letter}: {why}")


def _flip_a_byte(path) -> None:
    """Change the byte in the middle of the file at ``path``, its length kept: a copy gone wrong that the file's size
    cannot show (the damaged checkpoints of notebooks 07b's and 09b's checks)."""
    from pathlib import Path

    data = bytearray(Path(path).read_bytes())
    data[len(data) // 2] ^= 0x01
    Path(path).write_bytes(bytes(data))


def _cut_short(path, keep: float) -> None:
    """Keep only the first ``keep`` share of the file at ``path`` (0: empty), as a save, copy or upload cut short
    leaves it under its name (the damaged checkpoints of notebooks 07b's and 09b's checks)."""
    import os

    with open(path, "r+b") as f:
        f.truncate(int(os.path.getsize(path) * keep))


def _library_roots() -> list:
    """The folders a function written by the learner does not come from: the course's package, the standard
    library and every folder installed packages live in (numpy, torch, ... whatever a page imports)."""
    import site
    import sysconfig
    from pathlib import Path

    folders = [sysconfig.get_paths()[key] for key in ("stdlib", "platstdlib", "purelib", "platlib")]
    folders += [*getattr(site, "getsitepackages", list)(), site.getusersitepackages()]
    return [Path(__file__).resolve().parents[2]] + [Path(f).resolve() for f in folders]


def _call_learner(fn, args: tuple, call: str, hints: dict[str, str] | None = None):
    """Call a learner's function; an exception becomes an ``AssertionError`` naming the call, the exception, the
    line of the learner's code it came from and, when its message contains a key of ``hints``, that key's hint."""
    import inspect
    import traceback

    try:
        return fn(*args)
    except Exception as exc:  # any crash of the learner's code is reported, not shown as a traceback
        code = getattr(inspect.unwrap(fn), "__code__", None)  # a decorated function: the learner's own code
        lines = [f.line for f in traceback.extract_tb(exc.__traceback__)
                 if code is not None and f.filename == code.co_filename and f.line]
        where = f" at `{lines[-1]}`" if lines else ""
        hint = next((h for key, h in (hints or {}).items() if key in str(exc)), None)
        raise AssertionError(f"{call} raised {type(exc).__name__}{where}: {exc}"
                             + (f". Hint: {hint}." if hint else "")) from None


COURSE_PACKAGE = "dqn_course"


def _is_course_object(obj) -> bool:
    """Whether ``obj`` is the course's own code: a function, class or module of ``dqn_course``."""
    import types

    if isinstance(obj, types.ModuleType):
        return obj.__name__.split(".")[0] == COURSE_PACKAGE
    if not (callable(obj) or isinstance(obj, type)):
        return False
    module = getattr(obj, "__module__", None)
    return isinstance(module, str) and module.split(".")[0] == COURSE_PACKAGE


def _parts(obj) -> list:
    """What an object a function reads hands on when called or looked into: a ``functools.partial``'s function and
    bound arguments, a bound method's function, a decorated function's original, a container's items (one level);
    else the object itself."""
    import functools
    import inspect

    if isinstance(obj, functools.partial):
        return [obj.func, *obj.args, *obj.keywords.values()]
    if inspect.ismethod(obj):
        return [obj.__func__, obj.__self__]
    if inspect.isfunction(obj) and hasattr(obj, "__wrapped__"):
        return [obj, inspect.unwrap(obj)]
    if isinstance(obj, (list, tuple, set, frozenset)):
        return list(obj)
    if isinstance(obj, dict):
        return list(obj.values())
    return [obj]


def _objects_read(fn) -> tuple[list[tuple[str, object]], set[str]]:
    """The (name, object) pairs the Python function ``fn`` reads: the globals its code names (its code and the code
    nested in it, e.g. a lambda or a comprehension), what an import of the course inside it names, the variables it
    closes over and its default arguments; and the string constants in it that name a module of the course."""
    import importlib
    import types

    codes, names, strings = [fn.__code__], set(), set()
    while codes:
        code = codes.pop()
        names.update(code.co_names)
        strings.update(c for c in code.co_consts if isinstance(c, str) and c.split(".")[0] == COURSE_PACKAGE)
        codes += [c for c in code.co_consts if isinstance(c, types.CodeType)]
    read = [(name, fn.__globals__[name]) for name in sorted(names) if name in fn.__globals__]
    for module in sorted(n for n in names if n.split(".")[0] == COURSE_PACKAGE):  # an import inside the function
        try:
            module = importlib.import_module(module)
        except ImportError:  # a name that only looks like a module of the course's
            continue
        read += [(name, getattr(module, name)) for name in sorted(names) if hasattr(module, name)]
    read += [(name, cell.cell_contents) for name, cell in zip(fn.__code__.co_freevars, fn.__closure__ or ())
             if _has_contents(cell)]
    defaults = dict(zip(fn.__code__.co_varnames[fn.__code__.co_argcount - len(fn.__defaults__ or ()):],
                        fn.__defaults__ or ()))
    read += [(f"the default of {name}", value) for name, value in {**defaults, **(fn.__kwdefaults__ or {})}.items()]
    return read, strings


def _has_contents(cell) -> bool:
    """Whether a closure cell holds a value yet (a variable assigned later in the enclosing function does not)."""
    try:
        _ = cell.cell_contents
    except ValueError:
        return False
    return True


def _course_names_read(fn, allowed: tuple = ()) -> list[str]:
    """The names of the course's objects that the Python function ``fn`` reads (``_objects_read``: its globals, an
    import of the course inside it, the variables it closes over, its defaults), directly or through the learner's
    own functions and classes it reads in turn, followed to any depth; a ``functools.partial``, a bound method, a
    decorated function or a container it reads is looked into (``_parts``). The objects in ``allowed`` (by
    identity) are left out. A string constant that is the name of one of the course's modules
    (``importlib.import_module("dqn_course.agent")``, ``sys.modules[...]``) counts as reading it, whatever it then
    takes from it. A name found through a helper is given as ``helper → name``."""
    import inspect

    def course(obj) -> bool:  # the course's function, class or module, or an instance of the course's class
        return ((_is_course_object(obj) or (not inspect.isclass(obj) and _is_course_object(type(obj))))
                and not any(obj is a for a in allowed))

    found, strings, seen, todo = [], set(), {id(fn)}, [("", fn)]
    while todo:
        via, function = todo.pop(0)
        read, named = _objects_read(function)
        strings.update(via + s for s in named)
        for name, obj in read:
            if any(obj is a for a in allowed):  # handed to the learner: neither it nor what it wraps is refused
                continue
            for part in _parts(obj):
                if course(part):
                    found.append(via + name)
                    break
                if id(part) in seen:
                    continue
                seen.add(id(part))
                if inspect.isfunction(part) and _defined_by_learner(part):
                    todo.append((f"{via}{name} → ", part))
                elif inspect.isclass(part) and _defined_by_learner(part):
                    if any(_is_course_object(base) for base in inspect.getmro(part)):
                        found.append(via + name)
                        break
                    todo += [(f"{via}{name} → ", f) for f in vars(part).values()
                             if inspect.isfunction(f) and _defined_by_learner(f) and id(f) not in seen]
    return list(dict.fromkeys(found)) + sorted(strings)


def _defined_by_learner(obj) -> bool:
    """Whether the function or class ``obj`` was written outside the course's package, the standard library and the
    installed packages (in a notebook's cell, a script or a test). A function is judged by the file its code was
    compiled from; a class by its own methods (any of them the learner's), or, with none, by the file of the module
    it names (``__main__`` without a file is a notebook's)."""
    import inspect
    import sys
    from pathlib import Path

    if inspect.isclass(obj):
        methods = [getattr(f, "__func__", f) for f in vars(obj).values()]
        methods = [f for f in methods if inspect.isfunction(f)]
        if methods:
            return any(_defined_by_learner(f) for f in methods)
        file = getattr(sys.modules.get(getattr(obj, "__module__", None) or ""), "__file__", None)
        if file is None:
            return getattr(obj, "__module__", None) == "__main__"
    else:
        file = obj.__code__.co_filename
        if file.startswith("<frozen "):  # the standard library's frozen modules (os, posixpath, ...): no file
            return False
    where = Path(file).resolve()
    return not any(where.is_relative_to(root) for root in _library_roots())


def _require_learners_code(answer, call: str, write: str | None = None, allowed: tuple = ()) -> None:
    """Raise ``AssertionError`` unless ``answer`` is code the learner wrote: an exercise checks the learner's code,
    and the course's reference, a library function the page imports or a wrapper around either could pass a
    behaviour check with none of the idea written.

    A function (a ``def`` or a lambda, decorated or not; a ``functools.partial`` or a bound method is looked through)
    must be defined outside the course's package, the standard library and the installed packages; a class (or an
    instance of one) must be defined there too, with no course class among its bases. Either way, no function of the
    learner's that makes up the answer (the function, or the methods of the learner's classes in the class's MRO)
    may read one of the course's objects, through its globals or the variables it closes over. ``call`` is how the
    exercise calls the answer (``"pretouch(buf)"``, ``"Ring.add(item)"``), for the message; ``write`` says what to
    write instead (the concept and the section of the page), by default a ``def`` of ``call`` in the notebook.
    ``allowed`` holds the course's objects the exercise hands the learner to build with (notebook 07c's loop joins
    the course's network, memory and run folder): reading those is no reason to refuse; they themselves still are.
    """
    import functools
    import inspect

    name = call.split("(")[0]
    write = write or f"a def of {call} in the notebook (the check runs your code, not a library's)"
    assert callable(answer), f"pass the function itself, e.g. check_{name}({name}), got {answer!r}"
    while isinstance(answer, functools.partial) or inspect.ismethod(answer) or hasattr(answer, "__wrapped__"):
        answer = (answer.func if isinstance(answer, functools.partial) else
                  answer.__func__ if inspect.ismethod(answer) else inspect.unwrap(answer))
    if inspect.isfunction(answer):
        owners, functions = [answer], [answer]
    elif inspect.isclass(answer) or not inspect.isroutine(answer):
        cls = answer if inspect.isclass(answer) else type(answer)
        owners = [c for c in inspect.getmro(cls) if c is not object]
        functions = [getattr(f, "__func__", f) for c in owners if _defined_by_learner(c) for f in vars(c).values()]
        functions = [f for f in functions if inspect.isfunction(f)]
    else:
        raise AssertionError(f"{answer!r} is not a function of yours: the exercise is to write it yourself: {write}")
    course = next((o for o in owners if _is_course_object(o)), None)
    if course is not None:
        raise AssertionError(f"`{call}` is the course's own `{course.__qualname__}` ({course.__module__}): the "
                             f"exercise is to write it yourself: {write}")
    if not _defined_by_learner(owners[0]):
        raise AssertionError(f"`{call}` is {owners[0].__module__}.{owners[0].__qualname__}, a library's, not yours: "
                             f"the exercise is to write it yourself: {write}")
    for fn in functions:
        read = _course_names_read(fn, allowed)
        if read:
            raise AssertionError(f"`{call}` calls the course's own `{read[0]}`: the exercise is to write it "
                                 f"yourself: {write}")


check_module(globals())
