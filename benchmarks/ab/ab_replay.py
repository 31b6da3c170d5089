"""A/B: replay sampling and adding, run under PYTHONPATH=<tree>. Prints one JSON line."""
import json
import time

import numpy as np

from dqn_course.replay import FrameSharingMemory, MultiStreamMemory

def frames(rng, n):
    f = np.zeros((n, 84, 84), np.uint8)
    f[:, 10:20, :] = rng.integers(0, 3, (n, 1, 84)) * 60  # bricks
    f[np.arange(n), rng.integers(0, 84, n), rng.integers(0, 84, n)] = 200  # ball
    return f

def best_rate(fn, seconds=1.0, rounds=5):
    best = 0.0
    for _ in range(rounds):
        n, t0 = 0, time.perf_counter()
        while time.perf_counter() - t0 < seconds:
            fn()
            n += 1
        best = max(best, n / (time.perf_counter() - t0))
    return best

rng = np.random.default_rng(0)
out = {}
N = 50_000
pool = frames(rng, 4000)
for storage in ("ram", "lz4"):
    m = FrameSharingMemory(N, seed=0, storage=storage)
    state = np.stack([pool[0]] * 4)
    for t in range(N):
        nxt = np.concatenate([state[1:], pool[(t + 1) % 4000][None]])
        m.add(state, int(t % 4), 0.0, nxt, False, t % 500 == 499)
        state = np.stack([pool[(t + 1) % 4000]] * 4) if t % 500 == 499 else nxt
    out[f"frame_sharing_{storage}_batches_per_s"] = best_rate(lambda m=m: m.sample(32))
    del m
n = 8
m = MultiStreamMemory(N, n, seed=0)
state = np.stack([np.stack([pool[0]] * 4)] * n)
adds = 0
t0 = time.perf_counter()
for t in range(N // n):
    nxt = np.concatenate([state[:, 1:], np.stack([pool[(t * n + i) % 4000] for i in range(n)])[:, None]], axis=1)
    ends = np.full(n, t % 400 == 399)
    m.add_batch(state, np.zeros(n, np.int64), np.zeros(n), nxt, ends, ends)
    state = np.stack([np.stack([pool[(t + 1) % 4000]] * 4)] * n) if ends[0] else nxt
out["multi_stream8_add_batch_per_s"] = (N // n) / (time.perf_counter() - t0)
out["multi_stream8_ram_batches_per_s"] = best_rate(lambda: m.sample(32))
print(json.dumps(out))
