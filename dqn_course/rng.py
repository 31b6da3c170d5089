"""Random generators' states as arrays, for checkpoints that hold arrays and never pickles."""
from __future__ import annotations

import json

import numpy as np

from dqn_course.contracts import check_module


def rng_state_array(rng: np.random.Generator) -> np.ndarray:
    """A generator's state as JSON bytes in a uint8 array (checkpoints hold arrays, never pickles)."""
    return np.frombuffer(json.dumps(rng.bit_generator.state).encode(), np.uint8).copy()


def parse_rng_state(rng: np.random.Generator, array: np.ndarray) -> dict:
    """The state ``rng_state_array`` saved, checked to fit ``rng`` (assign it to ``rng.bit_generator.state``)."""
    try:
        state = json.loads(np.asarray(array, np.uint8).tobytes().decode())
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"cannot load: the saved rng state is not JSON ({exc})") from None
    mine = type(rng.bit_generator).__name__
    saved = state.get("bit_generator") if isinstance(state, dict) else state
    if saved != mine:
        raise ValueError(f"cannot load: saved rng is {saved!r}, this memory's is {mine!r}")
    return state


check_module(globals())
