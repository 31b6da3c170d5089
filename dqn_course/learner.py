"""Learners: who runs the DQN updates the training loop says are due (``learn(k, step)``, ``diagnostics()``).

Both keep the updates' ``UPDATE_STATS`` (loss, mean max-Q of the sampled states, gradient norm before clipping)
summed on the training device (``UpdateStats``) and read them only when a log row asks: no host sync per update.

``EagerLearner`` is the plain way: one ``agent.learn`` per update on a batch ``memory.sample`` returns
(prioritized replay included). ``DeviceLearner`` is the fast path's, for a replay memory whose frames
live on the training device. Both run the one gradient step, ``DQNAgent.gradient_step`` (targets from the
target network, the loss, gradient-norm clipping, Adam); the device learner is built for a GPU, where launching
work and waiting for it cost more than the arithmetic:

- the transitions of all updates due in a vector step are drawn on the host in one vectorised pass
  (``memory.draw_windows``), as frame indices into the memory's bank, and copied to the device in one transfer
  (pinned buffers, no wait);
- each update gathers its frames from the bank on the device (one gather per batch), so no frame crosses;
- on CUDA the whole update (gather, targets, loss, backward, clipping, Adam with ``capturable=True``) is
  captured once as a CUDA graph and replayed: one launch per update instead of dozens;
- the update is the agent's own rule (``agent.td_targets``, ``agent.td_loss``), so a learner's functions run
  here too, captured with the rest.

On the CPU the same function runs eagerly, so what the graph replays is what the CPU tests check. A capture that
fails (an old driver, a GPU or a torch build without graph support) or whose first update disagrees with the eager
one falls back to that eager update, with one ``CudaGraphFallbackWarning`` and ``fallback_reason`` saying why;
``graph=False`` (``--cuda-graph false``) skips the capture.
"""
from __future__ import annotations

import contextlib
import warnings
from collections.abc import Callable

import numpy as np
import torch

from dqn_course.contracts import Count, check_module
from dqn_course.agent import UPDATE_STATS, DQNAgent
from dqn_course.device import Capture, GraphCapture, Uploader
from dqn_course.replay import MultiStreamMemory
from dqn_course.replay.base import MemoryLike


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

    path = "eager"  # how updates run (``DeviceLearner.path`` may also say "cuda graph")
    fallback_reason = None

    def __init__(self, agent: DQNAgent, memory: MemoryLike, batch_size: Count,
                 beta: Callable[[int], float] | None = None):
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

    ``learn(k)`` runs k updates of ``batch_size`` transitions, each drawn uniformly over the memory's transitions
    (``memory.draw_windows``). ``graph``: capture the update once and replay it (None: on CUDA devices, or when
    ``capture`` is given); ``capture``: what warms the update up, records it and waits for the device, with
    ``GraphCapture``'s methods (default: a ``GraphCapture`` of the agent's device, whose CUDA objects are made for
    that device whatever device is current); ``compile``: run the update through ``torch.compile`` (captured as it
    is when ``graph``).

    Before the graph is trusted, ``self_check`` runs one update eagerly and one by the graph from the same state
    on the same batch. A capture the GPU, driver or torch build cannot make (a ``RuntimeError`` while capturing,
    after the same update ran eagerly without one) or a self-check that disagrees makes the learner fall back to
    eager updates from the state before the attempt: one ``CudaGraphFallbackWarning``, and ``fallback_reason``
    says why (``train`` puts it in the run's summary). Any other error, and any error of the eager warm-up (a
    shape error, a bug in the rule), is raised as itself, with the weights and Adam's state put back.
    Raises ``ValueError`` for a memory whose frames are not one bank on the agent's device or that pads stacks
    with zeros (the graph gathers by index only), and for ``graph=True`` on a device other than CUDA with no
    ``capture`` given.
    """

    STATS_RTOL = 1e-4  # self-check: loss, max-Q and gradient norm of the two updates, relative difference
    STEP_RTOL = 1e-2  # self-check: |graph step - eager step| / |eager step| over all weights (L2 norms)

    def __init__(self, agent: DQNAgent, memory: MultiStreamMemory, batch_size: Count, graph: bool | None = None,
                 compile: bool = False, capture: Capture | None = None):
        if getattr(memory, "bank", None) is None or memory.device != agent.device:
            raise ValueError(f"DeviceLearner needs a MultiStreamMemory whose frames are one bank on {agent.device} "
                             f"(storage='ram', device={agent.device}); got frames on {memory.device or 'the host'}")
        if memory.streams[0].padding != "repeat":
            raise ValueError("DeviceLearner gathers stacks by index: use padding='repeat'")
        self.agent, self.memory, self.batch_size = agent, memory, batch_size
        self.device = agent.device
        self.frames = memory.bank.tensor  # (streams * C, H, W) uint8 on the device
        if graph and capture is None and self.device.type != "cuda":
            raise ValueError(f"graph=True captures the update as a CUDA graph, which needs a CUDA device; this "
                             f"learner's is {self.device} (pass graph=None or False)")
        self.graph_enabled = bool(capture is not None or self.device.type == "cuda" if graph is None else graph)
        self.capture = capture if capture is not None or not self.graph_enabled else GraphCapture(self.device)
        self.fallback_reason: str | None = None
        B, window = batch_size, memory.stack + 1
        # The static inputs of one update, two tensors so that each update's inputs are two copies:
        self._ints = torch.zeros((B, window + 1), dtype=torch.int64, device=self.device)  # frame slots, action
        self._floats = torch.zeros((2, B), dtype=torch.float32, device=self.device)  # reward, done
        self.index, self.actions = self._ints[:, :window], self._ints[:, window]
        self.rewards, self.dones = self._floats[0], self._floats[1]
        self.stats = UpdateStats(self.device)  # the graph adds into stats.sums; learn() counts on the host
        self._upload = Uploader(self.device)
        self._replay = None  # the captured update, once captured and self-checked
        # compile: the update through torch.compile (fused kernels); captured as a graph as it is, after the warm-up
        # compiled it. The self-check compares it with the plain eager update.
        self._compiled = torch.compile(self._update) if compile else None
        if self.graph_enabled and self.capture.optimizer_on_device:
            self._capturable_adam(True)

    @property
    def path(self) -> str:
        """How updates run: "cuda graph", or "eager" (with the reason when a capture was given up)."""
        if self._replay is not None:
            return "cuda graph"
        return "eager" + (f" (fell back: {self.fallback_reason})" if self.fallback_reason else "")

    def _on_device(self):
        """The run's device made current (CUDA), so streams, graphs and events are made for it."""
        return torch.cuda.device(self.device) if self.device.type == "cuda" else contextlib.nullcontext()

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
        """``agent.gradient_step`` on the batch the static inputs name, its stats added on the device."""
        frames = self.frames[self.index]  # (B, S+1, H, W): s = [:, :-1], s' = [:, 1:]
        self.stats.sums.add_(self.agent.gradient_step(frames[:, :-1], self.actions, self.rewards, frames[:, 1:],
                                                      self.dones))

    def _step(self) -> None:
        """One update as this learner runs it: compiled when asked for (and not given up), else ``_update``."""
        (self._compiled or self._update)()

    # -- the capture: warm-up, graph, self-check ----------------------------------------------------------------
    def _capture(self) -> None:
        """Capture ``_step`` (``capture.record``) and check it (``self_check``), or fall back to eager updates.
        The step sets the gradients to None first, so backward inside a graph writes (not adds) them."""
        saved = snapshot(self.agent)
        self._warm_up(saved)
        try:
            replay = self.capture.record(self._step)
        except torch.OutOfMemoryError:
            restore_in_place(self.agent, saved)
            raise
        except RuntimeError as error:  # what a GPU, driver or build that cannot capture this update raises
            self._fall_back(saved, f"the capture failed ({type(error).__name__}: {error})")
            return
        problem = self.self_check(replay, saved)
        if problem:
            self._fall_back(saved, problem)
        else:
            self._replay = replay

    def _warm_up(self, saved: tuple[dict, dict]) -> None:
        """Three updates before the capture (``capture.warm_up``): they create Adam's state and raise the rule's own
        errors as themselves. They update for real, so the weights and Adam's state are put back afterwards, in
        place (the graph reads these very tensors), also when one raises."""
        try:
            self.capture.warm_up(self._step, times=3)
        finally:
            restore_in_place(self.agent, saved)
            self.stats.sums.zero_()

    def self_check(self, candidate: Callable[[], None], saved: tuple[dict, dict]) -> str | None:
        """Compare ``candidate()`` (e.g. a graph's ``replay``) with one eager update, each run once from ``saved``
        (``snapshot``) on the batch in the static inputs; the state is ``saved`` again afterwards.

        Returns None when they agree: loss, max-Q and gradient norm within ``STATS_RTOL``, and the weights' step
        within ``STEP_RTOL`` of the eager one (relative L2 norm: float sums in another order may flip the sign of
        Adam's first step for a weight whose gradient is ~0, so weights are not compared one by one). Otherwise
        a sentence saying what disagreed and by how much.
        """
        agent, params = self.agent, list(self.agent.q.parameters())
        steps, stats = [], []
        for run in (self._update, candidate):
            restore_in_place(agent, saved)
            self.stats.sums.zero_()
            before = [p.detach().clone() for p in params]
            run()
            steps.append(torch.cat([(p.detach() - b).flatten() for p, b in zip(params, before)]))
            stats.append(self.stats.sums.clone())
        restore_in_place(agent, saved)
        self.stats.sums.zero_()
        eager, other = (s.double().cpu() for s in stats)
        off = (other - eager).abs() > self.STATS_RTOL * eager.abs() + 1e-6
        if off.any() or not torch.isfinite(other).all():
            names = [n for n, bad in zip(UPDATE_STATS, off.tolist()) if bad] or list(UPDATE_STATS)
            return (f"self-check: the captured update's {', '.join(names)} differ from the eager update's "
                    f"({dict(zip(UPDATE_STATS, other.tolist()))} vs {dict(zip(UPDATE_STATS, eager.tolist()))})")
        gap = float((steps[1] - steps[0]).norm() / steps[0].norm().clamp_min(1e-12))
        if not gap <= self.STEP_RTOL:
            return (f"self-check: the captured update moves the weights {gap:.2g} (relative L2) away from where the "
                    f"eager update moves them (tolerance {self.STEP_RTOL})")
        return None

    def _fall_back(self, saved: tuple[dict, dict], reason: str) -> None:
        """After a failed capture or self-check: the state before it (weights and Adam's state as they were, Adam's
        step counts on the host, no gradients, no loss counted), plain eager updates (not compiled) from now on,
        ``fallback_reason`` set and one warning saying why and how to skip the attempt."""
        agent = self.agent
        self.capture.synchronize()  # no warm-up work left in flight to overwrite what is restored
        restore_in_place(agent, saved)  # Adam state the warm-up created is zeroed: what a fresh Adam starts from
        self._capturable_adam(False)
        agent.optimizer.zero_grad(set_to_none=True)
        self.stats.sums.zero_()
        self._replay, self.graph_enabled, self.fallback_reason = None, False, reason
        self._compiled = None  # the plain update from now on: what the self-check trusts
        warnings.warn(f"not using a CUDA graph for the update: {reason}. Running each update eagerly instead (the "
                      f"same updates, more launches). To skip the capture and this warning: --cuda-graph false "
                      f"(Config(cuda_graph=False); DeviceLearner(..., graph=False))", CudaGraphFallbackWarning,
                      stacklevel=5)

    # -- planning: the slots of k updates, drawn on the host in one pass, one copy to the device -----------------
    def plan(self, k: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Draw k batches at once; returns ``(ints, floats)`` on the device: ``ints[u]`` the (B, stack+2) frame
        slots and action of update u's transitions, ``floats[u]`` their (2, B) rewards and dones."""
        B = self.batch_size
        index, actions, rewards, dones = self.memory.draw_windows(k * B)
        ints = np.concatenate([index, actions[:, None]], axis=1).reshape(k, B, -1)
        floats = np.stack([rewards.reshape(k, B), dones.reshape(k, B)], axis=1)
        ints, floats = self._upload(ints, floats)  # one copy of each, no wait
        return ints, floats

    def learn(self, k: int, step: int | None = None) -> None:
        """Run k updates (their stats are added to ``stats``; nothing is read back). ``step`` is not used."""
        if k <= 0:
            return
        with self._on_device():
            self.memory.bank.flush()  # every frame written so far is on the device before any gather
            ints, floats = self.plan(k)
            for u in range(k):
                self._ints.copy_(ints[u])
                self._floats.copy_(floats[u])
                if self.graph_enabled and self._replay is None:
                    self._capture()  # on failure: graph_enabled is False from now on
                if self.graph_enabled:
                    self._replay()
                else:
                    self._step()
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


check_module(globals())
