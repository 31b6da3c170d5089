"""Acting and learning for DQN: ε-greedy over a batch of states, TD targets in one forward pass.

``DQNAgent.batched_targets`` computes the targets of a whole sampled batch with one forward pass of
the target network (two networks for Double DQN), so a learning step pays the framework's fixed
per-call overhead once, not once per transition. ``DQNAgent.learn`` can take another target function
(its ``targets`` argument). The blog's per-transition loop, which notebook 06 times against the
batched pass, is kept in the lab: ``dqn_course.lab.targets.per_sample_targets``.
"""
from __future__ import annotations

import copy
from collections.abc import Callable

import numpy as np
import torch
import torch.nn.functional as F

from dqn_course import check_arg
from dqn_course.device import Uploader, check_device
from dqn_course.networks import NatureCNN
from dqn_course.replay import Batch


def batch_to_tensors(batch: Batch, device: torch.device) -> dict[str, torch.Tensor]:
    """Move a sampled batch to the device; frames stay uint8 on the way (4x fewer bytes to copy).

    Host arrays bound for a GPU go through pinned (page-locked) memory, so the copy is a DMA that
    can overlap with the next Python work; tensors already on the device (device replay) stay put.
    """
    pin = device.type == "cuda"

    def t(x):
        x = torch.as_tensor(x)
        if pin and x.device.type == "cpu":
            x = x.pin_memory()
        return x.to(device, non_blocking=True)

    return {"states": t(batch.states), "actions": t(batch.actions), "rewards": t(batch.rewards),
            "next_states": t(batch.next_states), "dones": t(batch.dones)}


class DQNAgent:
    """An online Q-network, its target copy and an optimiser, with the knobs DQN papers vary.

    ``double=True`` picks the next action with the online network and values it with the target
    network (van Hasselt et al., 2016). ``max_grad_norm`` clips the global gradient norm.
    """

    def __init__(self, n_actions: int, device: torch.device | str = "cpu", lr: float = 1e-4, gamma: float = 0.99,
                 double: bool = False, max_grad_norm: float | None = 10.0, in_channels: int = 4,
                 seed: int | None = None):
        check_arg("n_actions", n_actions, integer=True, low=1)
        check_arg("lr", lr, above=0)
        check_arg("gamma", gamma, low=0, high=1)
        check_arg("max_grad_norm", max_grad_norm, above=0, optional=True)
        check_arg("in_channels", in_channels, integer=True, low=1)
        check_arg("seed", seed, integer=True, low=0, optional=True)
        if not isinstance(double, (bool, np.bool_)):
            raise ValueError(f"double must be True or False, got {double!r}")
        check_device(device, f"device={str(device)!r}")
        if seed is not None:
            torch.manual_seed(seed)
        self.device = torch.device(device)
        self.n_actions = n_actions
        self.gamma = gamma
        self.double = double
        self.max_grad_norm = max_grad_norm
        self.q = NatureCNN(n_actions, in_channels).to(self.device)
        self.target = copy.deepcopy(self.q).requires_grad_(False)
        self.optimizer = torch.optim.Adam(self.q.parameters(), lr=lr)
        self.rng = np.random.default_rng(seed)
        self._upload = Uploader(self.device)

    # -- acting ---------------------------------------------------------------------------------
    @torch.no_grad()
    def act(self, states: np.ndarray, epsilon: float) -> np.ndarray:
        """ε-greedy actions for a batch of states (N, stack, 84, 84) uint8; one forward for all N.

        The exploration draws come from the agent's own generator (checkpointed), before the forward, so a
        fully random step costs no forward at all; on a GPU the states go up through a pinned buffer and
        only the N greedy actions come back.
        """
        states = np.asarray(states)
        if states.ndim == 3:
            states = states[None]
        n = states.shape[0]
        explore = self.rng.random(n) < epsilon
        actions = self.rng.integers(0, self.n_actions, size=n)
        if not explore.all():
            q = self.q(self._upload(states)[0])
            actions = np.where(explore, actions, q.argmax(1).cpu().numpy())
        return actions

    # -- targets ----------------------------------------------------------------------------------
    @torch.no_grad()
    def batched_targets(self, t: dict[str, torch.Tensor]) -> torch.Tensor:
        """r + γ (1 - done) max_a' Q_target(s', a') for the whole batch in one forward pass."""
        next_q = self.target(t["next_states"])
        if self.double:
            best = self.q(t["next_states"]).argmax(1, keepdim=True)
            next_v = next_q.gather(1, best).squeeze(1)
        else:
            next_v = next_q.max(1).values
        return t["rewards"] + self.gamma * (1.0 - t["dones"]) * next_v

    # -- learning ---------------------------------------------------------------------------------
    def learn(self, batch: Batch, targets: Callable[..., torch.Tensor] | None = None) -> float:
        """One gradient step on the Huber TD error; returns the loss.

        ``targets(agent, tensors)`` computes the TD targets instead of ``batched_targets``: it gets this
        agent and the batch as ``batch_to_tensors`` gives it (on the agent's device) and returns a float
        tensor of shape (B,) on that device, treated as a constant (no gradient flows into it).
        With prioritized replay the batch carries importance-sampling ``weights`` that scale each
        transition's loss; ``last_td_errors`` keeps |target - Q| for the new priorities.
        """
        t = batch_to_tensors(batch, self.device)
        target = self.batched_targets(t) if targets is None else targets(self, t).detach()
        q = self.q(t["states"]).gather(1, t["actions"].long().unsqueeze(1)).squeeze(1)
        if batch.weights is None:
            loss = F.smooth_l1_loss(q, target)
        else:
            weights = torch.as_tensor(batch.weights).to(self.device, non_blocking=True)
            loss = (weights * F.smooth_l1_loss(q, target, reduction="none")).mean()
            self.last_td_errors = (target - q).detach().abs().cpu().numpy()
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if self.max_grad_norm is not None:
            torch.nn.utils.clip_grad_norm_(self.q.parameters(), self.max_grad_norm)
        self.optimizer.step()
        return float(loss.detach())

    def sync_target(self) -> None:
        """Hard update: copy the online weights into the target network."""
        self.target.load_state_dict(self.q.state_dict())

    def state_dict(self) -> dict:
        return {"q": self.q.state_dict(), "target": self.target.state_dict(), "optimizer": self.optimizer.state_dict()}

    def load_state_dict(self, state: dict) -> None:
        self.q.load_state_dict(state["q"])
        self.target.load_state_dict(state["target"])
        self.optimizer.load_state_dict(state["optimizer"])
