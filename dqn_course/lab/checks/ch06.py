"""Notebooks 06 (batched targets) and 06b (the whole ladder): their checks, predictions and questions.
"""
from __future__ import annotations


from dqn_course.contracts import check_module
from dqn_course.lab.checks.core import (PREDICTIONS, QUESTIONS, Prediction, _call_learner, _not_answered_yet, _passed,
                                        _require_learners_code)


PAIR_HINT = ("a max along an axis gives two things, the largest values and where they sit; the target takes the "
             "largest value itself, maxₐ′ Q_target(s′, a′) (*The target each learning step moves towards*)")


TD_BATCH, TD_N_ACTIONS, TD_GAMMA = 32, 4, 0.9  # check_td_targets' batch; γ is not the usual 0.99 on purpose


def _td_check_inputs():
    """The seeded batch and networks of ``check_td_targets``: 32 transitions, two different ``NatureCNN(4)``s
    whose parameters require grad, their last layers scaled so Q-values are of the order of the rewards."""
    import numpy as np
    import torch

    from dqn_course.networks import NatureCNN

    torch.manual_seed(606)
    online, target = NatureCNN(TD_N_ACTIONS), NatureCNN(TD_N_ACTIONS)  # two draws: they differ
    with torch.no_grad():
        for net in (online, target):
            net.net[-1].weight.mul_(300.0)
    rng = np.random.default_rng(606)
    # Coarse 7x7 blocks of random gray, so the screens differ in what the convolutions see (not only in noise).
    coarse = rng.integers(0, 256, size=(TD_BATCH, 4, 7, 7), dtype=np.uint8)
    next_states = torch.as_tensor(np.repeat(np.repeat(coarse, 12, axis=2), 12, axis=3))
    dones = (rng.random(TD_BATCH) < 0.25).astype(np.float32)
    dones[:2] = 1.0, 0.0
    rewards = rng.choice([-3.0, -1.0, 0.0, 0.5, 1.0, 2.0], TD_BATCH).astype(np.float32)
    rewards[:3] = 2.0, -3.0, 0.5
    return torch.as_tensor(rewards), torch.as_tensor(dones), next_states, online, target


def _td_targets_hint(got, r, d, q_target, q_online, gamma: float, double: bool) -> str:
    """What a wrong batch of targets ``got`` most likely forgot: it is compared with the usual mistakes."""
    import torch

    v_plain = q_target.max(1).values
    v_double = q_target.gather(1, q_online.argmax(1, keepdim=True)).squeeze(1)
    v_online = q_online.max(1).values
    v = v_double if double else v_plain
    clip = ("do not clip the reward here: the training loop clips rewards before it stores them, so a targets "
            "function gets them ready to use (this check uses rewards such as 2, -3 and 0.5 to see it)")
    candidates = [
        (r + gamma * v, "a transition with done = 1 (game over or a lost life) must not bootstrap: its next "
                        "state's value must not count (*Why (1 − done)*, above section 1)"),
        (r + gamma * d * v, "the mask for endings is the wrong way round: the next state's value must count for the "
                            "transitions that go on, you kept it only for the terminal ones (*Why (1 − done)*)"),
        (r + (1 - d) * v, "the discount is missing: the next state's value counts γ times, the `gamma` argument "
                          "(*The target each learning step moves towards*)"),
        (r + 0.99 * (1 - d) * v, "the discount is the γ the function is given, not a fixed 0.99: the check "
                                 "passes another γ (*The target each learning step moves towards*)"),
        (torch.sign(r) + gamma * (1 - d) * v, clip),
        (r.clamp(-1, 1) + gamma * (1 - d) * v, clip),
        (r + gamma * (1 - d) * q_target.max(), "that is the largest Q-value of the whole batch: each transition "
                                               "takes the max over its own actions, along the action axis"),
        (r + gamma * (1 - d) * q_target.mean(1), "V(s') is the best action's value, the max over actions, "
                                                 "not their mean"),
    ]
    if double:
        candidates += [
            (r + gamma * (1 - d) * v_plain,
             "with `double` on, your targets equal plain DQN's: did you ignore `double`, or choose a* with the target "
             "network? The online network chooses a* = argmax_a Q_online(s', a), the target network values it: "
             "Q_target(s', a*) (section 3)"),
            (r + gamma * (1 - d) * v_online, "Double DQN: value a* with the target network, Q_target(s', a*), not "
                                             "with the online network that chose it"),
            (r + gamma * (1 - d) * q_online.gather(1, q_target.argmax(1, keepdim=True)).squeeze(1),
             "Double DQN: the roles are swapped: the online network chooses a*, the target network values it"),
        ]
    else:
        candidates.append((r + gamma * (1 - d) * v_online,
                           "plain DQN takes the max with the target network (the slowly moving copy), not the "
                           "online network (*Why a target network*)"))
    return next((h for c, h in candidates if torch.allclose(got, c, rtol=1e-4, atol=1e-4)),
                "compare each part of your targets with the TD target's formula (*The target each learning step "
                "moves towards*): the reward, the discount, the mask for endings, the next state's value from the "
                "target network")


def _td_shape_hint(shape: tuple) -> str:
    """Why td_targets' result of ``shape`` is not one target per transition."""
    b, n = TD_BATCH, TD_N_ACTIONS
    return {(b, 1): "one value per transition, but in a (B, 1) column: the targets are a (B,) vector",
            (b, b): "a (B, 1) column met a (B,) row and broadcast to (B, B): the picked values must be a (B,) "
                    "vector before they are combined",
            (b, n): "that is one value per action: take the max over each transition's own actions a′ to get one "
                    "value of its next state (*The target each learning step moves towards*)",
            (n,): ("that is one value per action: take the max over each transition's own actions a′, not over the "
                   "batch's transitions (*The target each learning step moves towards*)"),
            (): "that is one number for the whole batch: keep one target per transition (no sum or mean)",
            (1,): "that is one number for the whole batch: keep one target per transition (no sum or mean)",
            }.get(shape, "one target per transition: combine (B,) tensors only")


def _counter(runs: dict[str, int], key: str):
    """A forward hook that adds 1 to ``runs[key]`` at each forward pass of the module it is registered on."""
    def count(*_):
        runs[key] += 1
    return count


def _require_one_pass_per_network(name: str, runs: dict[str, int], double: bool) -> None:
    """Refuse targets whose values are right but whose networks ran other than once each for the whole batch
    (``runs``: forward passes of each network during one call): a loop over the transitions runs them B times."""
    used = {"target": 1, "online": 1 if double else 0}
    if runs == used:
        return
    counts = f"the target network ran {runs['target']} times and the online network {runs['online']}"
    if max(runs.values()) >= TD_BATCH:
        raise AssertionError(
            f"{name}: the values are right, but {counts} for {TD_BATCH} transitions: that is a Python loop over the "
            "batch, one forward pass per transition. The exercise asks for the targets of the whole batch at once, "
            "one batched forward pass per network it needs (section 1, *Same numbers, one call instead of 32*, "
            "and its hook counts)")
    if not double and runs["online"]:
        raise AssertionError(
            f"{name}: the values are right, but {counts}: plain DQN's targets read the target network only, so "
            "running the online network is a forward pass for nothing (section 1's hook counts: no call to the "
            "online network for plain DQN)")
    raise AssertionError(
        f"{name}: the values are right, but {counts} for {TD_BATCH} transitions; the targets need one batched "
        "forward pass of each network they read, "
        + ("both for Double DQN: the online network chooses a*, the target network values it (section 3)"
           if double else "the target network alone for plain DQN")
        + " (section 1, *Same numbers, one call instead of 32*)")


def check_td_targets(td_targets) -> bool | None:
    """Notebook 06: ``td_targets(rewards, dones, next_states, online, target, gamma, double=False)`` for a batch.

    ``rewards`` and ``dones`` are float32 (B,), ``next_states`` uint8 (B, 4, 84, 84), ``online`` and ``target``
    ``NatureCNN``s. The answer must be r + γ (1 - done) V(s') with V(s') = max_a Q_target(s', a), or with
    ``double``, Q_target(s', argmax_a Q_online(s', a)), as a float32 tensor (B,) that carries no gradient.

    Refused first: anything that is not the learner's own code (``dqn_course.agent.td_targets``, the page's
    ``per_sample_targets``, ``DQNAgent.batched_targets``, a library function, or a def that calls them). Then, plain
    and double, on a seeded batch of 32 with two networks that differ and whose parameters require grad (so a
    missing ``no_grad`` shows), γ = 0.9 and rewards such as 2, -3 and 0.5 (the training loop clips rewards before
    it stores them, so a targets function that clips them again is wrong): the values, compared with
    ``dqn_course.agent.td_targets``; the result's type, dtype and shape (a list or a float64 tensor is refused: the
    agent's loss takes the targets beside float32 Q-values); no gradient; the inputs and both networks left as they
    were; one batched forward pass of each network the targets read, counted by forward hooks (plain: the target
    network once, the online network never; Double DQN: each once), so a loop over the transitions is refused
    even when its values are right; and the behaviour of bootstrapping: raising every Q-value of the target network
    by the same amount raises each target that goes on by γ times it and leaves the terminal ones (done = 1) at
    their reward, while the same change to the online network moves no target. Raises ``AssertionError`` with a hint
    naming the likely mistake.
    """
    if td_targets is None:
        return _not_answered_yet("write td_targets(rewards, dones, next_states, online, target, gamma, double=False)")
    _require_learners_code(td_targets, "td_targets(rewards, dones, next_states, online, target, gamma, double=False)",
                           "a def of your own that computes the TD target of the whole batch at once (*The target "
                           "each learning step moves towards*, and section 3, *Overestimation and Double DQN*)")
    import copy

    import torch

    from dqn_course.agent import td_targets as reference

    def call(rewards, dones, next_states, online, target, double):
        return _call_learner(td_targets, (rewards, dones, next_states, online, target, TD_GAMMA, double),
                             f"td_targets(rewards, dones, next_states, online, target, gamma={TD_GAMMA}, "
                             f"double={double})",
                             {"return_types": PAIR_HINT,
                              "converted to an index": "if you multiplied by the result of a max along an "
                                                       "axis: " + PAIR_HINT,
                              "must match the size": "one value per transition (B,): take the max over each "
                                                     "transition's own actions a′, not over the batch's "
                                                     "transitions (*The target each learning step moves towards*)"})

    def raised(net, by: float):
        """A copy of ``net`` whose every Q-value is ``by`` higher (its last layer's bias moved)."""
        net = copy.deepcopy(net)
        with torch.no_grad():
            net.net[-1].bias.add_(by)
        return net

    with torch.random.fork_rng(devices=[]):  # leave the learner's own torch seed as it was
        r, d, next_states, online, target = _td_check_inputs()
        g = TD_GAMMA
        weights = {name: [p.detach().clone() for p in net.parameters()]
                   for name, net in (("online", online), ("target", target))}
        with torch.no_grad():
            q_target, q_online = target(next_states), online(next_states)
        for double in (False, True):
            name = "Double DQN (double=True)" if double else "plain DQN (double=False)"
            expected = reference(r, d, next_states, online, target, g, double).detach()
            given = (r.clone(), d.clone(), next_states.clone())
            runs = {"online": 0, "target": 0}  # forward passes of each network during this one call
            hooks = [net.net.register_forward_hook(_counter(runs, net_name))
                     for net_name, net in (("online", online), ("target", target))]
            try:
                got = call(*given, online, target, double)
            finally:
                for hook in hooks:
                    hook.remove()
            if got is None:
                return _not_answered_yet("td_targets still returns None; return a tensor of shape (B,)")
            for arg, before, after in zip(("rewards", "dones", "next_states"), (r, d, next_states), given):
                assert torch.equal(before, after), (
                    f"{name}: td_targets changed its argument `{arg}` in place (an in-place operation on it): the "
                    "batch it reads belongs to the caller; compute the targets into a new tensor")
            for net_name, net in (("online", online), ("target", target)):
                assert all(torch.equal(p, w) for p, w in zip(net.parameters(), weights[net_name])), (
                    f"{name}: td_targets changed the {net_name} network's weights: computing targets reads the "
                    "networks, it never trains or copies them (*Why a target network*: the copy is made every C "
                    "steps by the training loop)")
            assert type(got).__module__ != "torch.return_types", (
                f"{name}: td_targets returned {type(got).__name__}(values, indices): {PAIR_HINT}")
            assert isinstance(got, torch.Tensor), (
                f"{name}: td_targets returned a {type(got).__name__}, not a tensor: the agent hands the targets to "
                "the loss beside the network's Q-values, a tensor; build them with tensor operations on the batch")
            shape = tuple(got.shape)
            assert shape == tuple(expected.shape), (
                f"{name}: td_targets should return one target per transition, shape {tuple(expected.shape)}, got "
                f"{shape}: {_td_shape_hint(shape)}")
            assert got.dtype == torch.float32, (
                f"{name}: td_targets returned {str(got.dtype).replace('torch.', '')} targets; the batch's rewards "
                "and the network's Q-values are float32, and the targets must be too (a float64 loss runs many "
                "times slower on most GPUs, and some refuse it): keep the batch's dtype, converting nothing")
            values = got.detach().cpu()
            if not torch.allclose(values, expected, rtol=1e-4, atol=1e-4):
                wrong = ~torch.isclose(values, expected, rtol=1e-4, atol=1e-4)
                i = int(wrong.nonzero()[0])
                hint = _td_targets_hint(values, r, d, q_target, q_online, g, double)
                raise AssertionError(
                    f"{name}: {int(wrong.sum())} of {TD_BATCH} targets are wrong, e.g. transition {i} (reward "
                    f"{float(r[i]):g}, done {float(d[i]):g}): yours is {float(values[i]):.4f}. Hint: {hint}.")
            assert not got.requires_grad, (
                f"{name}: the values are right, but the targets carry a gradient (requires_grad is True), so "
                "loss.backward() would differentiate through them too, as if the goal itself were to be moved: "
                "a target is a constant the prediction moves towards, computed where autograd records nothing "
                "(the paragraph under the exercise, and the hand computation of two targets in *The target each "
                "learning step moves towards*)")
            _require_one_pass_per_network(name, runs, double)
            by = 5.0
            higher = call(r.clone(), d.clone(), next_states.clone(), online, raised(target, by), double)
            moved = (torch.as_tensor(higher).detach().cpu() - values)
            terminal = d > 0
            assert torch.allclose(moved[terminal], torch.zeros(int(terminal.sum())), atol=1e-4), (
                f"{name}: with every Q-value of the target network {by:g} higher, the targets of terminal "
                "transitions (done = 1) moved: a transition that ends does not bootstrap, its target is its reward "
                "whatever the networks say (*Why (1 − done)*)")
            assert torch.allclose(moved[~terminal], torch.full((int((~terminal).sum()),), g * by), atol=1e-3), (
                f"{name}: with every Q-value of the target network {by:g} higher, each target that goes on should "
                f"rise by γ times it, {g * by:g}: the next state's value comes from the target network, discounted "
                "once (*The target each learning step moves towards*)")
            same = call(r.clone(), d.clone(), next_states.clone(), raised(online, by), target, double)
            assert torch.allclose(torch.as_tensor(same).detach().cpu(), values, atol=1e-4), (
                f"{name}: with every Q-value of the online network {by:g} higher (so its best action is the same), "
                "the targets moved: the online network never values the next state. Plain DQN does not read it; "
                "Double DQN lets it only choose a*, and the target network values that choice (section 3)")
    return _passed("td_targets matches dqn_course.agent.td_targets for plain and Double DQN, as float32 (B,) "
                   "without a gradient; terminal transitions do not bootstrap, and only the target network values "
                   "the next state")


TD_LOSS_BATCH = 32  # check_td_loss' batch (4 actions: B is not the number of actions, so axis mix-ups show)


def _td_loss_inputs():
    """Seeded (q_values (B, 4), actions int64 (B,), targets (B,)) for ``check_td_loss``: the TD errors of the
    taken actions spread over [-3, 3], so some lie beyond 1 (where Huber and the squared error differ) and some
    within."""
    import torch

    gen = torch.Generator().manual_seed(616)
    q_values = 2.0 * torch.randn(TD_LOSS_BATCH, TD_N_ACTIONS, generator=gen)
    actions = torch.randint(0, TD_N_ACTIONS, (TD_LOSS_BATCH,), generator=gen)
    actions[:TD_N_ACTIONS] = torch.arange(TD_N_ACTIONS)
    errors = torch.linspace(-3.0, 3.0, TD_LOSS_BATCH)[torch.randperm(TD_LOSS_BATCH, generator=gen)]
    targets = q_values.gather(1, actions.unsqueeze(1)).squeeze(1) + errors
    return q_values, actions, targets


def _td_loss_hint(got: float, q_values, actions, targets) -> str:
    """What a wrong loss value ``got`` most likely did: it is compared with the usual mistakes."""
    import math
    import warnings

    import torch
    import torch.nn.functional as F

    taken = q_values.gather(1, actions.unsqueeze(1))
    error = taken.squeeze(1) - targets
    mse = "that is the squared error (MSE); DQN uses the Huber loss (section 4, *The Huber loss*): squared for " \
          "|error| < 1, linear beyond, so one large error cannot make a huge gradient step"
    clipped = ("the error was clipped to [-1, 1] before the loss: the Nature paper's 'error clipping' IS the Huber "
               "loss (its gradient is the error clipped to [-1, 1]); clipping twice gives every |error| > 1 a zero "
               "gradient. The Huber loss takes the raw error")
    with warnings.catch_warnings():  # the (B, 1) against (B,) mistake makes torch warn about broadcasting
        warnings.simplefilter("ignore")
        candidates = [
            (F.smooth_l1_loss(taken, targets), "Q(s, a) of shape (B, 1) against targets of shape (B,) broadcast "
                                               "to (B, B): the picked Q-values must be a (B,) vector, like the "
                                               "targets"),
            (F.mse_loss(taken, targets), "Q(s, a) of shape (B, 1) against targets of shape (B,) broadcast to "
                                         "(B, B): the picked Q-values must be a (B,) vector (and the loss is the "
                                         "Huber loss)"),
        ]
    candidates += [
        ((error ** 2).mean(), mse),
        (0.5 * (error ** 2).mean(), mse),
        (F.smooth_l1_loss(q_values.gather(0, actions.unsqueeze(1)).squeeze(1), targets),
         "pick each transition's Q(s, a) among its own actions, not among the batch's transitions (section 4, "
         "*The Huber loss*, step 4)"),
        (F.smooth_l1_loss(q_values.max(1).values, targets), "use Q(s, a) of the action taken in each transition "
                                                            "(picked by `actions`), not the max: the max belongs "
                                                            "in the target"),
        (F.smooth_l1_loss(taken.squeeze(1), targets, reduction="sum"), "average over the batch (mean), don't sum: "
                                                                      "a sum makes the step size grow with the "
                                                                      "batch size"),
        ((error.clamp(-1, 1) ** 2).mean(), clipped),
        (0.5 * (error.clamp(-1, 1) ** 2).mean(), clipped),
        (F.smooth_l1_loss(error.clamp(-1, 1), torch.zeros_like(error)), clipped),
    ]
    for delta in (0.1, 0.5, 2.0, 5.0, 10.0):
        why = f"that is a Huber loss with a threshold of {delta:g}; DQN's is 1 (PyTorch's default for it)"
        candidates += [(F.huber_loss(taken.squeeze(1), targets, delta=delta), why),
                       (F.smooth_l1_loss(taken.squeeze(1), targets, beta=delta), why)]
    return next((h for c, h in candidates if math.isclose(got, float(c), rel_tol=1e-4, abs_tol=1e-6)),
                "the loss is the mean over the batch of the Huber loss (section 4) between Q(s, a) of the "
                "taken actions and the targets")


LIBRARY_LOSS_NODES = ("SmoothL1LossBackward", "HuberLossBackward")  # autograd's nodes of torch's own Huber losses


def _library_loss_in(grad_fn) -> str | None:
    """The name of the first node of torch's own Huber loss (smooth L1 or Huber, a module or a function, any
    reduction) in the autograd graph that ends at ``grad_fn``, or None: a loss typed from its definition has none."""
    seen, todo = set(), [grad_fn]
    while todo:
        node = todo.pop()
        if node is None or node in seen:
            continue
        seen.add(node)
        if type(node).__name__.startswith(LIBRARY_LOSS_NODES):
            return type(node).__name__
        todo.extend(next_node for next_node, _ in node.next_functions)
    return None


def check_td_loss(td_loss) -> bool | None:
    """Notebook 06: ``td_loss(q_values, actions, targets)``, the Huber loss (δ = 1) between Q(s, a) of the taken
    actions and the targets, averaged over the batch: one number that carries the gradient to ``q_values``.

    ``q_values`` is (B, n_actions) float, ``actions`` int64 (B,), ``targets`` float (B,). Refused first: anything
    that is not the learner's own code (``dqn_course.agent.td_loss``, which the page imports as ``library_loss``,
    a library function, or a def that calls them). Then compared with ``dqn_course.agent.td_loss`` on a seeded
    batch of 32 with 4 actions (B is not the number of actions, so an axis mix-up shows) whose TD errors lie both
    within and beyond 1 (where Huber and the squared error differ): the value; then the loss must be written from
    its definition (torch's own smooth L1 or Huber loss anywhere in its autograd graph is refused); then the
    gradient ``backward`` leaves in ``q_values`` (only the taken actions' entries receive one, each the error clipped
    to [-1, 1] over B); then on a second batch of another size (7 transitions, 6 actions), so nothing may be fixed
    to 32 or to 4. Raises ``AssertionError`` with a hint naming the likely mistake.
    """
    if td_loss is None:
        return _not_answered_yet("write td_loss(q_values, actions, targets)")
    _require_learners_code(td_loss, "td_loss(q_values, actions, targets)",
                           "a def of your own that picks Q(s, a) of the taken actions and takes the Huber loss of "
                           "their TD errors (section 4, *The Huber loss*)")
    import math

    import torch

    from dqn_course.agent import td_loss as reference

    with torch.random.fork_rng(devices=[]):  # leave the learner's own torch seed as it was
        q_values, actions, targets = _td_loss_inputs()
        q_ref = q_values.clone().requires_grad_(True)
        expected = reference(q_ref, actions, targets)
        expected.backward()
        q_in = q_values.clone().requires_grad_(True)
        given = (actions.clone(), targets.clone())
        got = _call_learner(td_loss, (q_in,) + given, "td_loss(q_values, actions, targets)",
                            {"return_types": PAIR_HINT})
        if got is None:
            return _not_answered_yet("td_loss still returns None; return the loss (a tensor holding one number)")
        for arg, before, after in zip(("actions", "targets"), (actions, targets), given):
            assert torch.equal(before, after), (
                f"td_loss changed its argument `{arg}` in place: compute into new tensors")
        assert isinstance(got, torch.Tensor), (
            f"td_loss returned a {type(got).__name__}, not a tensor: a plain number has no gradient, so nothing "
            "could learn from it. Return the loss tensor itself, not a Python number made from it")
        shape = tuple(got.shape)
        if got.numel() != 1:
            hint = {(TD_LOSS_BATCH,): "that is one loss per transition: average them over the batch",
                    (TD_LOSS_BATCH, 1): "that is one loss per transition: average them over the batch",
                    (TD_LOSS_BATCH, TD_LOSS_BATCH): ("a (B, 1) column met a (B,) row and broadcast to (B, B): the "
                                                     "picked Q-values must be a (B,) vector; then average")}.get(
                shape, "average the per-transition losses over the batch")
            raise AssertionError(f"td_loss should return one number (a 0-dim tensor), got shape {shape}: {hint}.")
        value = float(got.detach())
        if not math.isclose(value, float(expected.detach()), rel_tol=1e-4, abs_tol=1e-6):
            hint = _td_loss_hint(value, q_values, actions, targets)
            raise AssertionError(f"td_loss returned {value:.4f} on the check's batch, which is not it. Hint: {hint}.")
        no_grad = ("the value is right, but no gradient reaches q_values: the loss must be computed where autograd "
                   "records, from tensors still attached to q_values (nothing detached or turned into numbers), so "
                   "the backward pass can train the network")
        assert got.requires_grad and got.grad_fn is not None, no_grad
        library = _library_loss_in(got.grad_fn)
        assert library is None, (
            "the value is right, but the loss comes from a library's ready-made Huber loss (autograd recorded "
            f"{library}): the exercise asks for it written from its definition, the squared piece where the error "
            "is small and the linear piece beyond, then the batch mean (section 4, *The Huber loss*, steps 1 and 2)")
        try:
            got.reshape(()).backward()
        except RuntimeError as exc:
            raise AssertionError(f"loss.backward() on td_loss's result failed: {exc}") from None
        assert q_in.grad is not None, no_grad
        untaken = torch.ones_like(q_in.grad, dtype=torch.bool).scatter_(1, actions.unsqueeze(1), False)
        assert not q_in.grad[untaken].any(), (
            "the value is right, but actions not taken received a gradient: only Q(s, a) of the action taken in "
            "each transition is compared with its target, so only that entry of q_values is pushed (section 4, "
            "*The Huber loss*, step 4)")
        assert torch.allclose(q_in.grad, q_ref.grad, rtol=1e-4, atol=1e-6), (
            "the value is right, but the gradient in q_values is not the Huber loss's: let the gradient flow "
            "through Q(s, a) of the taken actions only (no part of the error detached)")
        gen = torch.Generator().manual_seed(617)  # another batch size and number of actions
        q_other = (2.0 * torch.randn(7, 6, generator=gen)).requires_grad_(True)
        actions_other = torch.randint(0, 6, (7,), generator=gen)
        targets_other = 3.0 * torch.randn(7, generator=gen)
        want = float(reference(q_other.detach(), actions_other, targets_other))
        other = _call_learner(td_loss, (q_other, actions_other.clone(), targets_other.clone()),
                              "td_loss(q_values, actions, targets) on a batch of 7 transitions with 6 actions")
        assert isinstance(other, torch.Tensor) and other.numel() == 1 and math.isclose(
            float(other.detach()), want, rel_tol=1e-4, abs_tol=1e-6), (
            "td_loss is right on the batch of 32 with 4 actions, but not on a batch of 7 with 6 actions: nothing in "
            "it may be fixed to the batch size or the number of actions; both come from the shapes of its "
            "arguments")
    return _passed("td_loss matches dqn_course.agent.td_loss: the mean Huber loss over the batch of Q(s, a) of "
                   "the taken actions, and its gradient, which reaches only those entries; on batches of 32 and 7")


PREDICTIONS.update({
    "06.reward_half_life": Prediction("the first delay, in steps, at which a reward counts less than half (γ = 0.99)",
                                      0.1, lambda m: {
        50: "a reward does not lose 1% of its first weight each step, which would halve it in 50 steps: each step "
            "keeps γ of the weight that is left, so the losses shrink as the weight does (*The target each learning "
            "step moves towards*, step 1 unrolled)",
        100: "at 1/(1 − γ) steps the weight has fallen further, to about 1/e, not to one half (*The target each "
             "learning step moves towards*, step 1 unrolled)"},
        "a reward k steps ahead counts γ to the power k (*The target each learning step moves towards*, step 1 "
        "unrolled): find the first k at which that weight falls below one half"),
    "06.step_calls": Prediction("forward calls of one Double DQN learning step with the loop", 0, lambda m: {
        64: "the targets are only part of a learning step: Q(s, a) of the batch's states takes a forward pass too "
            "(section 4's opening: the parts of a full step)",
        33: "with Double DQN the loop runs both networks for every transition (section 3, and section 1's hook "
            "counts)",
        3: "this step's targets come from the per-sample loop, one call per transition (section 1), not from one "
           "batched pass per network",
        96: "Q(s, a) of the batch is one batched pass of the online network, not one per transition (section 4's "
            "opening: the parts of a full step)"},
        "count the forward passes of one learn(): for the targets, one per transition for each network the loop runs "
        "(section 1's hook counts; with Double DQN both networks, section 3), then Q(s, a) of the batch's states "
        "(section 4's opening: the parts of a full step)"),
    "06b.top_factor": Prediction("the factor from a million transitions on the top rung to a million on the bottom "
                                 "rung", 0.1, lambda m: {
        403_200 / 7_072: "the top rung stores s and s' as two separate 4-stacks, 8 frames per transition, while the "
                         "bottom rung writes one frame per step (notebook 00, and notebook 04)",
        268_800 / 7_072: "the top rung keeps the raw screens in colour, three bytes per pixel, not gray ones (notebook "
                         "00)",
        806_400 / 28_224: "the bottom rung stores one frame per step, not a 4-stack: its stacks are rebuilt from the "
                          "frames around each index when a batch is sampled (notebook 04)"},
        "work out each rung's bytes per transition: the top rung's frames per transition and the bytes of one raw "
        "screen (notebook 00), the bottom rung's one 84 × 84 frame and its slot's bookkeeping (notebook 04); at a "
        "million transitions the cost a fill pays once hardly counts"),
    "06b.blog_factor": Prediction("the factor from the blog agent's bytes per step to the bottom rung's", 0.2,
                                  lambda m: {
        8_400 / 7_072: "the blog stores a 105 × 80 state, but it is a view that keeps the whole 210 × 160 gray image "
                       "alive (notebook 01, section 1)",
        100_800 / 7_072: "the blog turns each screen gray before it stores it: one byte per pixel, not three "
                         "(notebook 01, section 1)",
        2 * 33_600 / 7_072: "one image per step serves as that step's s' and the next step's s (notebook 01, "
                            "section 2)",
        806_400 / 7_072: "that is the top rung, raw 4-stacks of s and s'; the blog agent keeps one gray image per step "
                         "(notebook 01, sections 1 and 2)"},
        "set what the blog agent keeps alive per step (notebook 01, sections 1 and 2) against the bottom rung's frame "
        "and its slot's bookkeeping (notebook 04); both measured figures carry a little RSS beyond what is stored"),
})


QUESTIONS.update({
    "06.batched_acting_gpu": ("b", "before, a step costs 16 calls of 1 ms and the emulators' 16 ms, 32 ms; after, one "
                                   "call and the same 16 ms, 17 ms: about 1.9 times as fast. Batching removes 15 of "
                                   "the 16 fixed prices (the *Why* at the top), but not the emulators, the rest of the "
                                   "step: section 5's model of a whole step's ratio, (T_loop + R) / (T_batched + R), "
                                   "with R the emulators' time",
                              {"a": "one call instead of 16 is what the network's share of the step gains; what else "
                                    "does each step spend its time on, and does batching change it (section 5, the "
                                    "model of a whole step's ratio)?",
                               "c": "batching merges the network's 16 calls into one; the 16 emulators still step on "
                                    "the CPU, 16 ms each step, whatever the network does: what is left of the step "
                                    "(section 5, the model of a whole step's ratio)?"}),
    "06.max_bias_clear_best": (
        "a", "the upward bias comes from near-ties: with one action ten error-spreads ahead, the max is nearly always "
             "that action's estimate, whose error averages to zero. Overestimation is worst where actions are close in "
             "value, as in many states of a game where most actions change little",
        {"b": "the spread of each error is the same, but the max only picks an error when the estimates compete: can an"
              " error of about 1 lift an action worth 0 above one worth 10? (section 3, *Overestimation and Double "
              "DQN*)",
         "c": "the max adds one estimate's error, not the largest of them all: the estimate it picks here is nearly "
              "always the best action's, whose error is as often below as above (section 3)"}),
    "06.larger_frames_ratio": (
        "c", "both ways do the same arithmetic, now four times as much or more, and only the loop pays the fixed price "
             "of a call 32 times: that price, nearly all of the loop's extra time, is a smaller share of each way's "
             "time, so the ratio falls towards 1 (the model of section 5, the rest of the step beside the targets, with"
             " the arithmetic in the role of the rest)",
        {"a": "the loop's extra time is not extra arithmetic: both ways do the same arithmetic, per state, whatever the"
              " frames' size; what only the loop pays is the fixed price of its 32 calls (the *Why* at the top, and "
              "section 5's model of a ratio)",
         "b": "the ratio is one of times, not of calls: each way's time is its calls' fixed price plus the arithmetic "
              "both share, and the shared part is what grew (the *Why* at the top, and section 5's model of a ratio)"}),
    "06.truncation_bootstraps": ("c", "done = 1 says that a state has no future; with the countdown on screen, the "
                                      "last state shows that the race is over, so it has none. A truncation is a "
                                      "clock the agent cannot see, which is why it bootstraps (Pardo et al., 2018, "
                                      "make this distinction)",
                                 {"a": "a truncation stops a game at a time the state does not show; here the frame "
                                       "shows the countdown at 0: does that state still have a future? (*Why (1 − "
                                       "done)*)",
                                  "b": "(1 − done) removes only the next state's value from the target; the "
                                       "transition stays in the batch, and its loss pulls its value towards its "
                                       "reward (*Why (1 − done)*)"}),
    "06.target_network": (
        "a", "the soft blend keeps 1 − τ of the target's weights at each step, so weights from k steps back count τ(1 −"
             " τ) to the power k, and their average age is (1 − τ)/τ, about 1/τ = 1,000 steps (the same sum as the "
             "discount's horizon 1/(1 − γ), *Step 1's pause, answered*). A hard copy is 0 steps old just after a copy "
             "and C − 1 just before the next: about C/2 on average. The same average age needs C of about 2/τ = 2,000 "
             "steps; by this measure the course's copy every 1,000 steps is like a blend with τ = 0.002",
        {"b": "about 1,000 steps is the soft blend's average age, about 1/τ; but a hard copy every C steps is not C "
              "steps old all the time: how old is it on average between two copies (*Why a target network*)?",
         "c": "a hard copy every C steps is on average about C/2 steps old: which C makes that equal to the soft "
              "blend's average age, about 1/τ (*Why a target network*, its weights fading as a reward's do in *Step 1's"
              " pause, answered*)?"}),
    "06.huber_large_error": (
        "b", "beyond the threshold the Huber loss's gradient is ±1, whatever the error's size: both states are pushed "
             "with 1 at every update, so each value moves by the same step, and the one that must travel about 500 "
             "takes about (500 − 1) / (10 − 1), some 55 times, as many updates as the one that must travel about 10. "
             "With the squared error the push grows with the error, and both close a fixed fraction of their error "
             "per update. This is one reason the Nature DQN clipped the rewards (notebook 00, section 5): targets "
             "stay small, and so do the errors",
        {"a": "with the squared error a value 50 times as far off would be pushed 50 times as hard; beyond the "
              "Huber threshold, how hard is each of the two pushed (section 4, *The Huber loss*, step 2)?",
         "c": "beyond the threshold the push is capped, not removed: what is the loss's gradient there, and does it "
              "ever fall to 0 before the error is within the threshold (section 4, *The Huber loss*, step 2)?"}),
    "06b.small_ring_after_large": ("b", "the 1.4 GB array was far above glibc's mmap threshold (notebook 01b, "
                                        "section 1): it had a mapping of its own, and deleting it handed those pages "
                                        "back to the operating system, so nothing of it waits in the process for the "
                                        "small ring. Whether the small ring's 7,056,000 bytes then come from a "
                                        "mapping of their own or from the allocator's heap, they are new pages, and "
                                        "writing every slot makes each of them resident once: about 7 MB. Tried in "
                                        "one process (NumPy, glibc): the small ring grew RSS by its own bytes, to "
                                        "within a page",
                                   {"a": "the allocator keeps what small blocks freed; where did the pages of an array "
                                         "far above its mmap threshold go when it was deleted (notebook 01b, section "
                                         "1)?",
                                    "c": "a page is counted once, however often it is written: an array made by "
                                         "np.zeros takes no pages until it is written (notebook 01b, section 3, "
                                         "*np.zeros pages arrive when they are written*)"}),
    "06b.fill_every_slot": ("b", "an episode of T transitions takes T + 1 slots: its last frame is written but starts "
                                 "no transition (section 1, the column n), and padded stacks are rebuilt from the "
                                 "episode's first frame at sample time. Here 5 slots of 7,072 bytes per 4 "
                                 "transitions: 7,072 × 5 / 4 = 8,840 bytes. In Breakout's long episodes that extra "
                                 "slot is a small share; in a game of short episodes it is a quarter more",
                            {"a": "the ring's capacity counts frames, not transitions: what does an episode's last "
                                  "frame start, and over how many transitions is its slot spread (section 1, the "
                                  "column n)?",
                             "c": "a stack padded at an episode start repeats the episode's first frame, which the "
                                  "ring rebuilds when it samples: how many frames does one step still write (section "
                                  "1, FrameSharingMemory's n)?"}),
})


check_module(globals())
