"""A/B: MultiStreamMemory.add_batch of 8 envs per second, prefaulted; run under PYTHONPATH=<tree>."""
import json
import time

import numpy as np
from dqn_course.replay import MultiStreamMemory

rng = np.random.default_rng(0)
n, N = 8, 40_000
pool = rng.integers(0, 2, (1000, 84, 84), dtype=np.uint8) * 100
best = 0
for _ in range(3):
    m = MultiStreamMemory(N, n, seed=0, prefault=True)
    state = np.stack([np.stack([pool[0]] * 4)] * n)
    t0 = time.perf_counter()
    for t in range(3000):
        nxt = np.concatenate([state[:, 1:], pool[(t * n + np.arange(n)) % 1000][:, None]], axis=1)
        ends = np.full(n, t % 400 == 399)
        m.add_batch(state, np.zeros(n, np.int64), np.zeros(n), nxt, ends, ends)
        state = np.stack([np.stack([pool[(t + 1) % 1000]] * 4)] * n) if ends[0] else nxt
    best = max(best, 3000 / (time.perf_counter() - t0))
print(json.dumps({"add_batch8_per_s": best}))
