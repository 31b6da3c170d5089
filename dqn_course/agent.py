"""Acting and learning for DQN: ε-greedy over a batch of states, TD targets and the loss in one forward pass each.

The learning rule is two functions with small signatures, so a learner can write their own and train with them
(``DQNAgent(..., targets=my_targets, loss=my_loss)``, ``train.train(cfg, targets=..., loss=...)``):

- ``td_targets(rewards, dones, next_states, online, target, gamma, double)``: r + γ (1 − done) V(s') for the whole
  batch, one forward pass of each network (the framework's fixed per-call price paid once, not once per
  transition), no gradient;
- ``td_loss(q_values, actions, targets)``: the Huber loss between Q(s, a) of the taken actions and the targets.

The blog's per-transition loop, which notebook 06 times against the batched pass, has the same signature as
``td_targets`` and is kept in the lab: ``dqn_course.lab.targets.per_sample_targets``.
"""
from __future__ import annotations

import copy
from collections.abc import Callable, Iterable

import numpy as np
import torch
import torch.nn.functional as F

from dqn_course.contracts import Count, Probability, check_module
from dqn_course import check_arg
from dqn_course.device import Uploader, check_device
from dqn_course.networks import NatureCNN
from dqn_course.replay import Batch

# What ``DQNAgent.update`` returns, in this order: the loss, the mean over the batch of max_a Q(s, a) (the online
# network's value of the sampled states) and the gradient's global norm before clipping.
UPDATE_STATS = ("loss", "q_max", "grad_norm")


def update_stats(loss: torch.Tensor, q_values: torch.Tensor, norm: torch.Tensor) -> torch.Tensor:
    """One update's ``UPDATE_STATS`` as a float tensor (3,) on the update's device, detached (no host sync)."""
    return torch.stack([loss.detach(), q_values.detach().max(1).values.mean(), norm.detach()])


@torch.no_grad()
def td_targets(rewards: torch.Tensor, dones: torch.Tensor, next_states: torch.Tensor, online: torch.nn.Module,
               target: torch.nn.Module, gamma: Probability, double: bool = False) -> torch.Tensor:
    """TD targets y = r + γ (1 − done) V(s') of a batch, as a constant (no gradient flows into them).

    ``rewards`` and ``dones`` are float (B,), ``next_states`` uint8 (B, stack, 84, 84). V(s') is
    max_a Q_target(s', a) (Mnih et al., 2015) or, with ``double``, Q_target(s', argmax_a Q_online(s', a))
    (van Hasselt et al., 2016: the online network chooses, the target network values). A ``done`` transition
    (game over or a lost life) does not bootstrap: its target is its reward. Returns float (B,).
    """
    next_q = target(next_states)
    if double:
        next_v = next_q.gather(1, online(next_states).argmax(1, keepdim=True)).squeeze(1)
    else:
        next_v = next_q.max(1).values
    return rewards + gamma * (1.0 - dones) * next_v


def td_loss(q_values: torch.Tensor, actions: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """The Huber loss (δ = 1, ``F.smooth_l1_loss``) between Q(s, a) of the taken actions and the targets, averaged
    over the batch. ``q_values`` (B, n_actions) carries the gradient; ``actions`` int (B,); ``targets`` float (B,)."""
    taken = q_values.gather(1, actions.long().unsqueeze(1)).squeeze(1)
    return F.smooth_l1_loss(taken, targets)


def grad_norm(parameters: Iterable[torch.Tensor], max_norm: float | None) -> torch.Tensor:
    """The global L2 norm of the parameters' gradients before clipping; clips them to ``max_norm`` (None: not)."""
    parameters = [p for p in parameters if p.grad is not None]
    if max_norm is not None:
        return torch.nn.utils.clip_grad_norm_(parameters, max_norm)
    return torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(p.grad) for p in parameters]))


def batch_to_tensors(batch: Batch, device: torch.device | str, upload: Uploader | None = None
                     ) -> dict[str, torch.Tensor]:
    """A sampled batch on ``device``, by field name: ``states``, ``actions``, ``rewards``, ``next_states``,
    ``dones``, and ``weights`` when the batch has them (prioritized replay). Frames stay uint8 on the way (4x fewer
    bytes to copy than float32).

    Host arrays go up through ``upload``, an ``Uploader`` to ``device`` (by default a new one for this call): on a
    GPU through pinned buffers with non-blocking copies, so the host does not wait. Tensors already on the device
    (device replay) stay put. Raises ``TypeError`` when ``upload`` is not an ``Uploader``, ``ValueError`` when it
    goes to another kind of device.
    """
    device = torch.device(device)
    upload = Uploader(device, depth=1) if upload is None else upload
    if upload.device.type != device.type:
        raise ValueError(f"batch_to_tensors: the uploader goes to {upload.device}, the batch to {device}")
    names = ["states", "actions", "rewards", "next_states", "dones"] + ([] if batch.weights is None else ["weights"])
    values = {name: getattr(batch, name) for name in names}
    host = [name for name in names if not isinstance(values[name], torch.Tensor)]
    values.update(zip(host, upload(*(np.asarray(values[name]) for name in host))))
    return {name: value.to(device, non_blocking=True) for name, value in values.items()}


class DQNAgent:
    """An online Q-network, its target copy and an optimiser, with the knobs DQN papers vary.

    ``double=True`` picks the next action with the online network and values it with the target
    network (van Hasselt et al., 2016). ``max_grad_norm`` clips the global gradient norm. ``targets`` and
    ``loss`` are the learning rule (defaults: ``td_targets`` and ``td_loss``; a learner's own functions take the
    same arguments). ``float64`` makes the networks (and so the learning arithmetic) float64: about twice the time
    on a CPU, and rounding differences between CPUs' kernels too small to change a decision.
    """

    def __init__(self, n_actions: Count, device: torch.device | str = "cpu", lr: float = 1e-4,
                 gamma: Probability = 0.99, double: bool = False, max_grad_norm: float | None = 10.0,
                 in_channels: Count = 4,
                 seed: int | None = None, targets: Callable[..., torch.Tensor] = td_targets,
                 loss: Callable[..., torch.Tensor] = td_loss, float64: bool = False):
        check_arg("n_actions", n_actions, integer=True, low=1)
        check_arg("lr", lr, above=0)
        check_arg("gamma", gamma, low=0, high=1)
        check_arg("max_grad_norm", max_grad_norm, above=0, optional=True)
        check_arg("in_channels", in_channels, integer=True, low=1)
        check_device(device, f"device={str(device)!r}")
        if seed is not None:
            torch.manual_seed(seed)
        self.device = torch.device(device)
        self._upload = Uploader(self.device)  # host arrays to the device: act's states, update's batches
        self.n_actions = n_actions
        self.gamma = gamma
        self.double = double
        self.max_grad_norm = max_grad_norm
        self.td_targets, self.td_loss = targets, loss
        self.obs_shape = (in_channels, 84, 84)  # what the network takes (NatureCNN's layers are sized for 84x84)
        self.q = NatureCNN(n_actions, in_channels).to(self.device, torch.float64 if float64 else torch.float32)
        self.target = copy.deepcopy(self.q).requires_grad_(False)
        # fused: Adam's step as one kernel per dtype, instead of a dozen operations per weight tensor
        self.optimizer = torch.optim.Adam(self.q.parameters(), lr=lr,
                                          fused=self.device.type in ("cpu", "cuda") or None)
        self.rng = np.random.default_rng(seed)

    # -- acting ---------------------------------------------------------------------------------
    @torch.no_grad()
    def act(self, states: np.ndarray, epsilon: Probability) -> np.ndarray:
        """ε-greedy actions for a batch of states (N, stack, 84, 84) uint8 (or one state); one forward for all N.
        ``ValueError`` for states of another shape or dtype, or ``epsilon`` outside [0, 1].

        The exploration draws come from the agent's own generator (checkpointed), before the forward, so a
        fully random step costs no forward at all; on a GPU the states go up through a pinned buffer and
        only the N greedy actions come back.
        """
        states = np.asarray(states)
        if states.ndim == 3:
            states = states[None]
        self._check_act(states, epsilon)
        n = states.shape[0]
        explore = self.rng.random(n) < epsilon
        actions = self.rng.integers(0, self.n_actions, size=n)
        if not explore.all():
            q = self.q(self._upload(states)[0])
            actions = np.where(explore, actions, q.argmax(1).cpu().numpy())
        return actions

    def _check_act(self, states: np.ndarray, epsilon: float) -> None:
        """``act``'s input check: ``ValueError`` unless ``epsilon`` is in [0, 1] and ``states`` a batch of uint8
        stacks of this agent's shape."""
        check_arg("epsilon", epsilon, low=0, high=1)
        if states.dtype != np.uint8 or states.shape[1:] != self.obs_shape or not states.shape[0]:
            raise ValueError(f"states must be uint8 frame stacks of shape {self.obs_shape} (or a batch of them, "
                             f"(N, *{self.obs_shape}) with N >= 1), as the env returns them; got "
                             f"{states.dtype}{list(states.shape)}")

    # -- targets ----------------------------------------------------------------------------------
    def batched_targets(self, t: dict[str, torch.Tensor], targets: Callable[..., torch.Tensor] | None = None
                        ) -> torch.Tensor:
        """The TD targets of the batch ``t`` (as ``batch_to_tensors`` gives it) by ``targets`` (default: this
        agent's rule, ``td_targets`` unless it was given another) with this agent's networks, γ and ``double``."""
        fn = self.td_targets if targets is None else targets
        return fn(t["rewards"], t["dones"], t["next_states"], self.q, self.target, self.gamma, self.double)

    # -- learning ---------------------------------------------------------------------------------
    def update(self, batch: Batch, targets: Callable[..., torch.Tensor] | None = None) -> torch.Tensor:
        """One gradient step on the batch; returns its ``UPDATE_STATS`` as one float tensor (3,) on the device,
        without waiting for it (no host sync).

        ``targets`` overrides the agent's TD-target rule for this step (same arguments as ``td_targets``).
        With prioritized replay the batch carries importance-sampling ``weights`` that scale each transition's
        Huber loss (``ValueError`` if this agent's loss is not ``td_loss``: a learner's loss takes no weights);
        ``last_td_errors`` keeps |target - Q| for the new priorities.
        """
        if batch.weights is not None and self.td_loss is not td_loss:
            raise ValueError("prioritized replay weights each transition's Huber loss; a loss function given "
                             "to the agent cannot take those weights: use the default td_loss with PER")
        t = batch_to_tensors(batch, self.device, self._upload)  # one pinned copy each, no host wait
        stats = self.gradient_step(t["states"], t["actions"], t["rewards"], t["next_states"], t["dones"],
                                   t.get("weights"), targets)
        if batch.weights is not None:
            self.last_td_errors = self._td_errors.cpu().numpy()
        return stats

    def gradient_step(self, states: torch.Tensor, actions: torch.Tensor, rewards: torch.Tensor,
                      next_states: torch.Tensor, dones: torch.Tensor, weights: torch.Tensor | None = None,
                      targets: Callable[..., torch.Tensor] | None = None) -> torch.Tensor:
        """The one DQN gradient step, on a batch already on the device: TD targets by the agent's rule (or
        ``targets``), the loss (the agent's, or the Huber loss weighted by ``weights``), backward, gradient-norm
        clipping, the optimizer's step. Returns ``UPDATE_STATS`` as a (3,) tensor on the device; reads nothing back
        to the host, so it can be captured as a CUDA graph (``learner.DeviceLearner`` does). With ``weights``,
        ``_td_errors`` keeps |target - Q| on the device."""
        target = self.batched_targets({"rewards": rewards, "dones": dones, "next_states": next_states}, targets)
        q_values = self.q(states)
        if weights is None:
            loss = self.td_loss(q_values, actions, target)
        else:
            q = q_values.gather(1, actions.long().unsqueeze(1)).squeeze(1)
            loss = (weights * F.smooth_l1_loss(q, target, reduction="none")).mean()
            self._td_errors = (target - q).detach().abs()
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        norm = grad_norm(self.q.parameters(), self.max_grad_norm)
        self.optimizer.step()
        return update_stats(loss, q_values, norm)

    def learn(self, batch: Batch, targets: Callable[..., torch.Tensor] | None = None) -> float:
        """``update``, returning the loss as a number (one host sync: for notebooks and tests, not the loop)."""
        return float(self.update(batch, targets)[0])

    def sync_target(self) -> None:
        """Hard update: copy the online weights into the target network."""
        self.target.load_state_dict(self.q.state_dict())

    def state_dict(self) -> dict:
        return {"q": self.q.state_dict(), "target": self.target.state_dict(), "optimizer": self.optimizer.state_dict()}

    def load_state_dict(self, state: dict) -> None:
        self.q.load_state_dict(state["q"])
        self.target.load_state_dict(state["target"])
        self.optimizer.load_state_dict(state["optimizer"])


check_module(globals())
