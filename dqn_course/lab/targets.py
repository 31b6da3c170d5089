"""The blog's TD targets for notebook 06: one forward pass per sampled transition, against ``td_targets``' batched pass.

``per_sample_targets`` takes ``dqn_course.agent.td_targets``' arguments, so it plugs in wherever a target rule
does (``agent.batched_targets(t, per_sample_targets)``, ``agent.learn(batch, targets=per_sample_targets)``) and a
whole learning step can be timed with either way of computing its targets.
"""
from __future__ import annotations

import torch

from dqn_course.contracts import Probability, check_module


@torch.no_grad()
def per_sample_targets(rewards: torch.Tensor, dones: torch.Tensor, next_states: torch.Tensor, online: torch.nn.Module,
                       target: torch.nn.Module, gamma: Probability, double: bool = False) -> torch.Tensor:
    """``td_targets``' targets, one forward pass per transition, as the blog-post agent's ``replay()``.

    Double DQN (``double``) runs both networks per transition. Returns a tensor of shape (B,), the dtype and
    device of ``rewards``.
    """
    out = torch.empty_like(rewards)
    for i in range(rewards.shape[0]):
        s2 = next_states[i:i + 1]
        next_q = target(s2)[0]
        next_v = next_q[online(s2)[0].argmax()] if double else next_q.max()
        out[i] = rewards[i] + (0.0 if dones[i] else gamma * next_v)
    return out


check_module(globals())
