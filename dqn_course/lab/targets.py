"""The blog's TD targets for notebook 06: one forward pass per sampled transition, against ``DQNAgent``'s batched pass.

``per_sample_targets(agent, t)`` plugs into ``DQNAgent.learn(batch, targets=per_sample_targets)``, so a
whole learning step can be timed with either way of computing its targets.
"""
from __future__ import annotations

import torch

from dqn_course.agent import DQNAgent


@torch.no_grad()
def per_sample_targets(agent: DQNAgent, t: dict[str, torch.Tensor]) -> torch.Tensor:
    """``agent.batched_targets(t)``'s targets, one forward pass per transition, as the blog-post agent's ``replay()``.

    ``t`` is a batch as ``batch_to_tensors`` gives it; Double DQN (``agent.double``) runs both networks per
    transition. Returns a tensor of shape (B,), the dtype and device of ``t["rewards"]``.
    """
    out = torch.empty_like(t["rewards"])
    for i in range(t["rewards"].shape[0]):
        s2 = t["next_states"][i:i + 1]
        next_q = agent.target(s2)[0]
        next_v = next_q[agent.q(s2)[0].argmax()] if agent.double else next_q.max()
        out[i] = t["rewards"][i] + (0.0 if t["dones"][i] else agent.gamma * next_v)
    return out
