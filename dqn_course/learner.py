"""Learners: who runs the DQN updates the training loop says are due (``learn(k, step)``, ``diagnostics()``).

Both keep the updates' ``UPDATE_STATS`` (loss, mean max-Q of the sampled states, gradient norm before clipping)
summed on the training device (``UpdateStats``) and read them only when a log row asks: no host sync per update.

``EagerLearner`` is the plain way: one ``agent.learn`` per update on a batch ``memory.sample`` returns
(prioritized replay included). ``DeviceLearner`` is the fast path's, for a replay memory whose frames
live on the training device. It runs the same update as ``DQNAgent.learn`` (targets from the target network, Huber loss,
gradient-norm clipping, Adam), but built for a GPU, where launching work and waiting for it cost more than
the arithmetic:

- the slots of all updates due in a vector step are drawn on the host at once, turned into frame indices
  into the memory's bank, and copied to the device in one transfer (pinned buffer, no wait);
- each update gathers its frames from the bank on the device (one gather per batch), so no frame crosses;
- on CUDA the whole update (gather, targets, loss, backward, clipping, Adam with ``capturable=True``) is
  captured once as a CUDA graph and replayed: one launch per update instead of dozens;
- the update is the agent's own rule (``agent.td_targets``, ``agent.td_loss``), so a learner's functions run
  here too, captured with the rest.

On the CPU the same function runs eagerly, so what the graph replays is what the CPU tests check. A capture that
fails (an old driver, a GPU or a torch build without graph support) falls back to that eager update, with one
``CudaGraphFallbackWarning`` saying why; ``graph=False`` (``--cuda-graph false``) skips the capture.
"""
from __future__ import annotations

import warnings
import numpy as np
import torch

from dqn_course.agent import UPDATE_STATS, DQNAgent, grad_norm, update_stats
from dqn_course.device import Uploader
from dqn_course.replay import MultiStreamMemory


class CudaGraphFallbackWarning(RuntimeWarning):
    """The CUDA graph of the device learner's update could not be captured: updates run eagerly instead."""


class UpdateStats:
    """The sums of the updates' ``UPDATE_STATS`` on the device; ``mean()`` reads them (one transfer) and starts over.

    Invariant: ``sums`` holds the stats of exactly ``count`` updates since the last ``mean()`` that saw any.
    """

    def __init__(self, device: torch.device):
        self.sums = torch.zeros(len(UPDATE_STATS), dtype=torch.float32, device=device)
        self.count = 0
        self._last: dict[str, float] | None = None

    def add(self, stats: torch.Tensor) -> None:
        self.sums.add_(stats)
        self.count += 1

    def mean(self) -> dict[str, float] | None:
        """The mean of each stat over the updates since the last call that saw any (the last means again when
        there were none since), or None before the first update."""
        if self.count:
            self._last = dict(zip(UPDATE_STATS, (self.sums / self.count).tolist()))
            self.sums.zero_()
            self.count = 0
        return self._last


class EagerLearner:
    """``agent.update`` on ``memory.sample(batch_size)``, once per update; with prioritized replay (``beta`` given:
    a function of the step) the batch carries importance weights and the new |TD errors| go back as priorities."""

    def __init__(self, agent: DQNAgent, memory, batch_size: int, beta=None):
        self.agent, self.memory, self.batch_size, self.beta = agent, memory, batch_size, beta
        self.stats = UpdateStats(agent.device)

    def learn(self, k: int, step: int) -> None:
        for _ in range(k):
            if self.beta is None:
                self.stats.add(self.agent.update(self.memory.sample(self.batch_size)))
            else:
                batch = self.memory.sample(self.batch_size, beta=self.beta(step))
                self.stats.add(self.agent.update(batch))
                self.memory.update_priorities(batch.indices, self.agent.last_td_errors)

    def diagnostics(self) -> dict[str, float] | None:
        """``UpdateStats.mean`` of the updates since the last call: {"loss", "q_max", "grad_norm"}."""
        return self.stats.mean()


class DeviceLearner:
    """Updates for ``agent`` from ``memory`` (a ``MultiStreamMemory`` with one frame bank on ``agent.device``).

    ``learn(k)`` runs k updates of ``batch_size`` transitions, each drawn uniformly as ``memory.sample``
    draws them. ``graph``: capture the update as a CUDA graph (None: on CUDA devices); a capture that fails
    warns once (``CudaGraphFallbackWarning``) and the updates run eagerly, from the state before the attempt.
    Raises ``ValueError`` for a memory whose frames are not one bank on the agent's device or that pads stacks
    with zeros (the graph gathers by index only).
    """

    def __init__(self, agent: DQNAgent, memory: MultiStreamMemory, batch_size: int, graph: bool | None = None):
        if getattr(memory, "bank", None) is None or memory.device != agent.device:
            raise ValueError(f"DeviceLearner needs a MultiStreamMemory whose frames are one bank on {agent.device} "
                             f"(storage='ram', device={agent.device}); got frames on {memory.device or 'the host'}")
        if memory.streams[0].padding != "repeat":
            raise ValueError("DeviceLearner gathers stacks by index: use padding='repeat'")
        self.agent, self.memory, self.batch_size = agent, memory, batch_size
        self.device = agent.device
        self.frames = memory.bank.tensor  # (streams * C, H, W) uint8 on the device
        self.graph_enabled = self.device.type == "cuda" if graph is None else graph
        B, window = batch_size, memory.stack + 1
        self.index = torch.zeros((B, window), dtype=torch.int64, device=self.device)  # static inputs of one update
        self.actions = torch.zeros(B, dtype=torch.int64, device=self.device)
        self.rewards = torch.zeros(B, dtype=torch.float32, device=self.device)
        self.dones = torch.zeros(B, dtype=torch.float32, device=self.device)
        self.stats = UpdateStats(self.device)  # the graph adds into stats.sums; learn() counts on the host
        self._upload = Uploader(self.device)
        self._graph = None
        if self.graph_enabled:
            self._capturable_adam(True)

    def _capturable_adam(self, on: bool) -> None:
        """Adam with its step counts on the device (graph-safe, ``on``), or as a plain Adam keeps them (host)."""
        optimizer = self.agent.optimizer
        for group in optimizer.param_groups:
            group["capturable"] = on
        for state in optimizer.state.values():
            if "step" in state:
                state["step"] = state["step"].to(self.device if on else "cpu", torch.float32)

    # -- one update, as a function of the static inputs -------------------------------------------------------
    def _update(self) -> None:
        agent = self.agent
        frames = self.frames[self.index]  # (B, S+1, H, W): s = [:, :-1], s' = [:, 1:]
        target = agent.td_targets(self.rewards, self.dones, frames[:, 1:], agent.q, agent.target, agent.gamma,
                                  agent.double)
        q_values = agent.q(frames[:, :-1])
        loss = agent.td_loss(q_values, self.actions, target)
        loss.backward()
        norm = grad_norm(agent.q.parameters(), agent.max_grad_norm)
        agent.optimizer.step()
        self.stats.sums.add_(update_stats(loss, q_values, norm))

    def _capture(self) -> None:
        """Capture ``_update`` as a CUDA graph, or fall back to eager updates if that fails (see ``_fall_back``)."""
        saved = snapshot(self.agent)
        try:
            self._warm_up_and_capture(saved)
        except Exception as error:  # any failure of an optional speed-up: run without it
            self._fall_back(saved, error)

    def _warm_up_and_capture(self, saved: tuple[dict, dict]) -> None:
        """The warm-up (on a side stream, as CUDA graphs need) runs the update for real, so the weights and Adam's
        state are put back afterwards, in place: the graph reads these very tensors, and Adam's state exists before
        the capture. The first replayed update is the first update."""
        agent = self.agent
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(3):
                agent.optimizer.zero_grad(set_to_none=True)
                self._update()
        torch.cuda.current_stream().wait_stream(side)
        restore_in_place(agent, saved)
        agent.optimizer.zero_grad(set_to_none=True)  # backward inside the graph writes (not adds) the grads
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            self._update()
        self._graph = graph
        self.stats.sums.zero_()

    def _fall_back(self, saved: tuple[dict, dict], error: Exception) -> None:
        """After a failed capture: the state before it (weights and Adam's state as they were, Adam's step counts on
        the host, no gradients, no loss counted), eager updates from now on, and one warning saying why and how to
        skip the attempt."""
        agent = self.agent
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)  # no warm-up work left in flight to overwrite what is restored
        restore_in_place(agent, saved)  # Adam state the warm-up created is zeroed: what a fresh Adam starts from
        self._capturable_adam(False)
        agent.optimizer.zero_grad(set_to_none=True)
        self.stats.sums.zero_()
        self._graph, self.graph_enabled = None, False
        warnings.warn(f"could not capture the update as a CUDA graph ({type(error).__name__}: {error}); running "
                      f"each update eagerly instead (the same updates, more launches). To skip the capture and this "
                      f"warning: --cuda-graph false (Config(cuda_graph=False); DeviceLearner(..., graph=False))",
                      CudaGraphFallbackWarning, stacklevel=4)

    # -- planning: the slots of k updates, drawn on the host, one copy to the device ---------------------------
    def plan(self, k: int) -> list[tuple[torch.Tensor, ...]]:
        """Draw k batches; returns per update (index, actions, rewards, dones) tensors on the device."""
        memory, B = self.memory, self.batch_size
        index = np.empty((k, B, memory.stack + 1), np.int64)
        scalars = np.empty((k, 3, B), np.float64)  # actions, rewards, dones: exact in float64
        for u in range(k):
            streams, slots = memory.draw(B)
            index[u], actions, rewards, dones = memory.window_at(streams, slots)
            scalars[u] = actions, rewards, dones
        idx, sc = self._upload(index, scalars)  # one copy of the plan, no wait
        return [(idx[u], sc[u, 0].long(), sc[u, 1].float(), sc[u, 2].float()) for u in range(k)]

    def learn(self, k: int, step: int | None = None) -> None:
        """Run k updates (their stats are added to ``stats``; nothing is read back). ``step`` is not used."""
        if k <= 0:
            return
        self.memory.bank.flush()  # every frame written so far is on the device before any gather
        for index, actions, rewards, dones in self.plan(k):
            self.index.copy_(index)
            self.actions.copy_(actions)
            self.rewards.copy_(rewards)
            self.dones.copy_(dones)
            if self.graph_enabled and self._graph is None:
                self._capture()  # on failure: graph_enabled is False from now on
            if self.graph_enabled:
                self._graph.replay()
            else:
                self.agent.optimizer.zero_grad(set_to_none=True)
                self._update()
            self.stats.count += 1

    def diagnostics(self) -> dict[str, float] | None:
        """``UpdateStats.mean`` of the updates since the last call: {"loss", "q_max", "grad_norm"}."""
        return self.stats.mean()


def snapshot(agent: DQNAgent) -> tuple[dict, dict]:
    """Copies of the online weights and of Adam's per-parameter state, for ``restore_in_place``."""
    weights = {name: t.clone() for name, t in agent.q.state_dict().items()}
    moments = {p: {k: v.clone() for k, v in st.items() if torch.is_tensor(v)}
               for p, st in agent.optimizer.state.items()}
    return weights, moments


@torch.no_grad()
def restore_in_place(agent: DQNAgent, saved: tuple[dict, dict]) -> None:
    """Put back what ``snapshot`` copied, into the same tensors (a captured graph keeps reading them). Adam state
    that did not exist at the snapshot is zeroed, which is what a fresh Adam starts from."""
    weights, moments = saved
    for name, t in agent.q.state_dict().items():
        t.copy_(weights[name])
    for p, st in agent.optimizer.state.items():
        for k, v in st.items():
            if not torch.is_tensor(v):
                continue
            if p in moments:
                v.copy_(moments[p][k])
            else:
                v.zero_()
