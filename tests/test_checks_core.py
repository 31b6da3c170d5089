"""The checks of the DQN core exercises (notebooks 06 and 07): td_targets, td_loss and the ε schedule.

Each right answer passes with its ✓ line, ``None`` is "not answered yet", and every typical mistake, written out
as a small wrong function, fails with its own hint.
"""
from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from dqn_course.lab import checks

# -- notebook 06: td_targets -------------------------------------------------------------------------------------


def _values(q_target, q_online, double):
    if double:
        return q_target.gather(1, q_online.argmax(1, keepdim=True)).squeeze(1)
    return q_target.max(1).values


@torch.no_grad()
def td_right(rewards, dones, next_states, online, target, gamma, double=False):
    v = _values(target(next_states), online(next_states) if double else None, double)  # plain: the target network only
    return rewards + gamma * (1 - dones) * v


def td_float64_list(rewards, dones, next_states, online, target, gamma, double=False):
    return td_right(rewards, dones, next_states, online, target, gamma, double).double().tolist()


@torch.no_grad()
def td_no_done_mask(rewards, dones, next_states, online, target, gamma, double=False):
    return rewards + gamma * _values(target(next_states), online(next_states), double)


@torch.no_grad()
def td_no_gamma(rewards, dones, next_states, online, target, gamma, double=False):
    return rewards + (1 - dones) * _values(target(next_states), online(next_states), double)


@torch.no_grad()
def td_fixed_gamma(rewards, dones, next_states, online, target, gamma, double=False):
    return td_right(rewards, dones, next_states, online, target, 0.99, double)


@torch.no_grad()
def td_mask_reversed(rewards, dones, next_states, online, target, gamma, double=False):
    return rewards + gamma * dones * _values(target(next_states), online(next_states), double)


@torch.no_grad()
def td_max_over_batch(rewards, dones, next_states, online, target, gamma, double=False):
    return rewards + gamma * (1 - dones) * target(next_states).max(0).values


@torch.no_grad()
def td_max_whole_tensor(rewards, dones, next_states, online, target, gamma, double=False):
    return rewards + gamma * (1 - dones) * torch.max(target(next_states))


@torch.no_grad()
def td_no_values(rewards, dones, next_states, online, target, gamma, double=False):
    return rewards + gamma * (1 - dones) * target(next_states).max(1)


@torch.no_grad()
def td_keepdim(rewards, dones, next_states, online, target, gamma, double=False):
    return td_right(rewards, dones, next_states, online, target, gamma, double)[:, None]


@torch.no_grad()
def td_broadcast(rewards, dones, next_states, online, target, gamma, double=False):
    return rewards + gamma * (1 - dones) * target(next_states).max(1, keepdim=True).values


@torch.no_grad()
def td_plain_online(rewards, dones, next_states, online, target, gamma, double=False):
    return td_right(rewards, dones, next_states, target, online, gamma, double)


def td_with_gradient(rewards, dones, next_states, online, target, gamma, double=False):
    v = _values(target(next_states), online(next_states), double)
    return rewards + gamma * (1 - dones) * v


@torch.no_grad()
def td_sign_reward(rewards, dones, next_states, online, target, gamma, double=False):
    return td_right(torch.sign(rewards), dones, next_states, online, target, gamma, double)


@torch.no_grad()
def td_clamp_reward(rewards, dones, next_states, online, target, gamma, double=False):
    return td_right(rewards.clamp(-1, 1), dones, next_states, online, target, gamma, double)


@torch.no_grad()
def td_double_ignored(rewards, dones, next_states, online, target, gamma, double=False):
    return td_right(rewards, dones, next_states, online, target, gamma)


@torch.no_grad()
def td_double_chosen_by_target(rewards, dones, next_states, online, target, gamma, double=False):
    q_target = target(next_states)
    return rewards + gamma * (1 - dones) * _values(q_target, q_target, double)


@torch.no_grad()
def td_double_valued_by_online(rewards, dones, next_states, online, target, gamma, double=False):
    if not double:
        return td_right(rewards, dones, next_states, online, target, gamma)
    q_online = online(next_states)
    return rewards + gamma * (1 - dones) * _values(q_online, q_online, double)


@torch.no_grad()
def td_double_roles_swapped(rewards, dones, next_states, online, target, gamma, double=False):
    if not double:
        return td_right(rewards, dones, next_states, online, target, gamma)
    return td_right(rewards, dones, next_states, target, online, gamma, double)


@torch.no_grad()
def td_mean_over_actions(rewards, dones, next_states, online, target, gamma, double=False):
    return rewards + gamma * (1 - dones) * target(next_states).mean(1)


@torch.no_grad()
def td_in_place(rewards, dones, next_states, online, target, gamma, double=False):
    v = _values(target(next_states), online(next_states), double)
    rewards += gamma * (1 - dones) * v
    return rewards


@torch.no_grad()
def td_float_frames(rewards, dones, next_states, online, target, gamma, double=False):
    return td_right(rewards, dones, next_states.float(), online, target, gamma, double)


@torch.no_grad()
def td_loop(rewards, dones, next_states, online, target, gamma, double=False):
    """The blog's loop typed out (``per_sample_targets``' body): right values, one forward pass per transition."""
    out = torch.empty_like(rewards)
    for i in range(rewards.shape[0]):
        s2 = next_states[i:i + 1]
        next_q = target(s2)[0]
        next_v = next_q[online(s2)[0].argmax()] if double else next_q.max()
        out[i] = rewards[i] + (0.0 if dones[i] else gamma * next_v)
    return out


@torch.no_grad()
def td_loop_double_only(rewards, dones, next_states, online, target, gamma, double=False):
    """Batched for plain DQN, a loop for Double DQN: the Double DQN half is refused."""
    if not double:
        return td_right(rewards, dones, next_states, online, target, gamma)
    return td_loop(rewards, dones, next_states, online, target, gamma, double)


@torch.no_grad()
def td_plain_runs_online(rewards, dones, next_states, online, target, gamma, double=False):
    """Right values, but plain DQN runs the online network too, for nothing."""
    return rewards + gamma * (1 - dones) * _values(target(next_states), online(next_states), double)


@torch.no_grad()
def td_target_twice(rewards, dones, next_states, online, target, gamma, double=False):
    """Right values, but the target network runs twice for the batch."""
    target(next_states)
    return td_right(rewards, dones, next_states, online, target, gamma, double)


@torch.no_grad()
def td_calls_forward(rewards, dones, next_states, online, target, gamma, double=False):
    """A loop that calls ``forward`` itself, round module hooks: still counted (the hooks sit inside the network)."""
    rows = [target.forward(next_states[i:i + 1])[0].max() for i in range(rewards.shape[0])]
    return rewards + gamma * (1 - dones) * torch.stack(rows)


@pytest.mark.parametrize("answer, hint", [
    (td_loop, r"plain DQN \(double=False\): the values are right, but the target network ran 32 times .*Python loop "
              r"over the batch.*section 1, \*Same numbers, one call instead of 32\*"),
    (td_loop_double_only, r"Double DQN \(double=True\): the values are right, but the target network ran 32 times "
                          r"and the online network 32.*Python loop over the batch.*section 1"),
    (td_calls_forward, r"target network ran 32 times.*Python loop over the batch"),
    (td_plain_runs_online, r"plain DQN's targets read the target network only.*section 1's hook counts"),
    (td_target_twice, r"the target network ran 2 times.*one batched forward pass of each network.*section 1"),
])
def test_td_targets_refuses_a_loop_and_extra_passes(answer, hint):
    with pytest.raises(AssertionError, match=hint):
        checks.check_td_targets(answer)


def test_td_targets_right(capsys):
    seed_state = torch.random.get_rng_state()
    assert checks.check_td_targets(td_right) is True
    assert capsys.readouterr().out.startswith("✓ td_targets")
    assert torch.equal(seed_state, torch.random.get_rng_state()), "the check must not move the learner's seed"


def td_float64(rewards, dones, next_states, online, target, gamma, double=False):
    return td_right(rewards, dones, next_states, online, target, gamma, double).double()


@torch.no_grad()
def td_syncs_the_target(rewards, dones, next_states, online, target, gamma, double=False):
    target.load_state_dict(online.state_dict())  # a copy belongs to the training loop, every C steps
    return td_right(rewards, dones, next_states, online, target, gamma, double)


_FIRST_TARGETS = {}


def td_remembers(rewards, dones, next_states, online, target, gamma, double=False):
    """Right values, cached by the batch: the target network's change never reaches them (caught by behaviour)."""
    key = (double, float(rewards.sum()))
    if key not in _FIRST_TARGETS:
        _FIRST_TARGETS[key] = td_right(rewards, dones, next_states, online, target, gamma, double)
    return _FIRST_TARGETS[key].clone()


@pytest.mark.parametrize("answer, hint", [
    (td_float64_list, "returned a list, not a tensor"),
    (td_float64, "returned float64 targets.*keep the batch's dtype"),
    (td_syncs_the_target, "changed the target network's weights"),
    (td_remembers, r"target network 5 higher, each target that goes on should rise by γ times it"),
])
def test_td_targets_refuses_the_wrong_type_and_checks_behaviour(answer, hint):
    _FIRST_TARGETS.clear()
    with pytest.raises(AssertionError, match=hint):
        checks.check_td_targets(answer)


def _targets_by_the_course(rewards, dones, next_states, online, target, gamma, double=False):
    from dqn_course.agent import td_targets

    return td_targets(rewards, dones, next_states, online, target, gamma, double)


@pytest.mark.parametrize("answer", ["agent.td_targets", "per_sample_targets", "DQNAgent.batched_targets",
                                    "a def around td_targets", "torch.max"])
def test_td_targets_refuses_the_course_and_the_pages_imports(answer):
    from dqn_course.agent import DQNAgent, td_targets
    from dqn_course.lab.targets import per_sample_targets

    answers = {"agent.td_targets": td_targets, "per_sample_targets": per_sample_targets,
               "DQNAgent.batched_targets": DQNAgent(n_actions=4, device="cpu", seed=0).batched_targets,
               "a def around td_targets": _targets_by_the_course, "torch.max": torch.max}
    with pytest.raises(AssertionError, match=r"write it yourself: a def of your own .*TD target"):
        checks.check_td_targets(answers[answer])


@pytest.mark.parametrize("answer, hint", [
    (td_no_done_mask, r"must not bootstrap: its next state's value must not count"),
    (td_no_gamma, "the discount is missing"),
    (td_fixed_gamma, "not a fixed 0.99"),
    (td_mask_reversed, "mask for endings is the wrong way round"),
    (td_max_over_batch, r"not over the batch's transitions"),
    (td_max_whole_tensor, "the largest Q-value of the whole batch"),
    (td_no_values, r"gives two things, the largest values and where they sit; the target takes the largest value"),
    (td_keepdim, r"in a \(B, 1\) column: the targets are a \(B,\) vector"),
    (td_broadcast, r"broadcast to \(B, B\)"),
    (td_plain_online, "plain DQN takes the max with the target network"),
    (td_with_gradient, r"carry a gradient .*where autograd records nothing"),
    (td_sign_reward, "do not clip the reward here"),
    (td_clamp_reward, "do not clip the reward here"),
    (td_double_ignored, "your targets equal plain DQN's"),
    (td_double_chosen_by_target, r"your targets equal plain DQN's.*online network chooses a\*"),
    (td_double_valued_by_online, "value a\\* with the target network"),
    (td_double_roles_swapped, "the roles are swapped"),
    (td_mean_over_actions, "not their mean"),
    (td_in_place, "changed its argument `rewards` in place"),
    (td_float_frames, "raised TypeError at `v = _values.*NatureCNN takes uint8 frames"),
])
def test_td_targets_wrong(answer, hint):
    with pytest.raises(AssertionError, match=hint):
        checks.check_td_targets(answer)


def test_td_targets_hints_never_reveal_the_expected_target():
    with pytest.raises(AssertionError) as caught:
        checks.check_td_targets(td_no_done_mask)
    assert "expected" not in str(caught.value)


def test_td_targets_unanswered(capsys):
    assert checks.check_td_targets(None) is None
    assert checks.check_td_targets(lambda *a, **k: None) is None
    assert "not answered yet" in capsys.readouterr().out.lower()


def test_td_targets_crash_names_the_call():
    def td_crashes(rewards, dones, next_states, online, target, gamma, double=False):
        raise KeyError("oops")

    with pytest.raises(AssertionError, match=r"td_targets\(rewards, .*\) raised KeyError at `raise KeyError"):
        checks.check_td_targets(td_crashes)


# -- notebook 06: td_loss ----------------------------------------------------------------------------------------


def _taken(q_values, actions):
    return q_values.gather(1, actions.long().unsqueeze(1)).squeeze(1)


def loss_right(q_values, actions, targets):
    return F.smooth_l1_loss(_taken(q_values, actions), targets)


def loss_huber_by_hand(q_values, actions, targets):
    error = (targets - _taken(q_values, actions)).abs()
    return torch.where(error < 1, 0.5 * error ** 2, error - 0.5).mean()


def loss_mse(q_values, actions, targets):
    return F.mse_loss(_taken(q_values, actions), targets)


def loss_gather_dim0(q_values, actions, targets):
    return F.smooth_l1_loss(q_values.gather(0, actions.unsqueeze(1)).squeeze(1), targets)


def loss_max(q_values, actions, targets):
    return F.smooth_l1_loss(q_values.max(1).values, targets)


def loss_no_squeeze(q_values, actions, targets):
    return F.smooth_l1_loss(q_values.gather(1, actions.unsqueeze(1)), targets)


def loss_sum(q_values, actions, targets):
    return F.smooth_l1_loss(_taken(q_values, actions), targets, reduction="sum")


def loss_item(q_values, actions, targets):
    return loss_right(q_values, actions, targets).item()


def loss_detached(q_values, actions, targets):
    return loss_right(q_values, actions, targets).detach()


@torch.no_grad()
def loss_no_grad(q_values, actions, targets):
    return loss_right(q_values, actions, targets)


def loss_per_transition(q_values, actions, targets):
    return F.smooth_l1_loss(_taken(q_values, actions), targets, reduction="none")


def loss_clipped_squared(q_values, actions, targets):
    return ((_taken(q_values, actions) - targets).clamp(-1, 1) ** 2).mean()


def loss_clipped_huber(q_values, actions, targets):
    error = (_taken(q_values, actions) - targets).clamp(-1, 1)
    return F.smooth_l1_loss(error, torch.zeros_like(error))


def loss_delta_2(q_values, actions, targets):
    return F.huber_loss(_taken(q_values, actions), targets, delta=2.0)


def loss_half_detached(q_values, actions, targets):
    error = _taken(q_values, actions) - targets
    return (F.smooth_l1_loss(error, torch.zeros_like(error)).detach() + 0.0 * q_values.sum())


def loss_fixed_batch(q_values, actions, targets):
    taken = q_values[torch.arange(32), actions]  # the batch size written in: right for 32 only
    error = (taken - targets).abs()
    return torch.where(error < 1, 0.5 * error ** 2, error - 0.5).mean()


def loss_pushes_every_action(q_values, actions, targets):
    nudge = q_values.sum() - q_values.sum().detach()  # zero, but it sends a gradient to every entry
    return loss_huber_by_hand(q_values, actions, targets) + 1e-3 * nudge


def loss_per_transition_then_mean(q_values, actions, targets):
    return F.smooth_l1_loss(_taken(q_values, actions), targets, reduction="none").mean()


def loss_huber_module(q_values, actions, targets):
    return torch.nn.HuberLoss(delta=1.0)(_taken(q_values, actions), targets)


def test_td_loss_right(capsys):
    seed_state = torch.random.get_rng_state()
    assert checks.check_td_loss(loss_huber_by_hand) is True
    assert capsys.readouterr().out.startswith("✓ td_loss")
    assert torch.equal(seed_state, torch.random.get_rng_state()), "the check must not move the learner's seed"


@pytest.mark.parametrize("answer, hint", [
    (loss_mse, "squared error .*Huber"),
    (loss_gather_dim0, r"among its own actions, not among the batch's transitions"),
    (loss_max, "not the max: the max belongs in the target"),
    (loss_no_squeeze, r"broadcast to \(B, B\): the picked Q-values must be a \(B,\) vector"),
    (loss_sum, "don't sum"),
    (loss_item, "a plain number has no gradient"),
    (loss_detached, "no gradient reaches q_values"),
    (loss_no_grad, "no gradient reaches q_values"),
    (loss_per_transition, "one loss per transition: average them over the batch"),
    (loss_clipped_squared, "'error clipping' IS the Huber loss"),
    (loss_clipped_huber, "'error clipping' IS the Huber loss"),
    (loss_delta_2, "Huber loss with a threshold of 2; DQN's is 1"),
    (loss_half_detached, "gradient in q_values is not the Huber loss's"),
    (loss_fixed_batch, r"raised IndexError|not on a batch of 7 with 6 actions"),
    (loss_pushes_every_action, "actions not taken received a gradient.*step 4"),
])
@pytest.mark.filterwarnings("ignore:Using a target size")  # the (B, 1) against (B,) mistake warns
def test_td_loss_wrong(answer, hint):
    with pytest.raises(AssertionError, match=hint):
        checks.check_td_loss(answer)


@pytest.mark.parametrize("answer", [loss_right, loss_per_transition_then_mean, loss_huber_module])
def test_td_loss_refuses_torchs_own_huber_loss(answer):
    with pytest.raises(AssertionError, match=r"the value is right, but the loss comes from a library's ready-made "
                                             r"Huber loss .*from its definition.*section 4, \*The Huber loss\*"):
        checks.check_td_loss(answer)


def _loss_by_the_course(q_values, actions, targets):
    from dqn_course.agent import td_loss

    return td_loss(q_values, actions, targets)


@pytest.mark.parametrize("answer", ["agent.td_loss", "F.smooth_l1_loss", "F.huber_loss", "a def around td_loss"])
def test_td_loss_refuses_the_course_and_the_pages_imports(answer):
    from dqn_course.agent import td_loss

    answers = {"agent.td_loss": td_loss, "F.smooth_l1_loss": F.smooth_l1_loss, "F.huber_loss": F.huber_loss,
               "a def around td_loss": _loss_by_the_course}
    with pytest.raises(AssertionError, match=r"write it yourself: a def of your own .*section 4, \*The Huber loss"):
        checks.check_td_loss(answers[answer])


def test_td_loss_unanswered(capsys):
    assert checks.check_td_loss(None) is None
    assert checks.check_td_loss(lambda *a: None) is None
    assert "not answered yet" in capsys.readouterr().out.lower()


def test_td_loss_crash_names_the_call():
    def loss_crashes(q_values, actions, targets):
        return F.smooth_l1_loss(q_values.gather(1, actions), targets)

    with pytest.raises(AssertionError, match=r"td_loss\(q_values, actions, targets\) raised RuntimeError at `return"):
        checks.check_td_loss(loss_crashes)


# -- notebook 06: quiz keys, against the arithmetic each question decides ------------------------------------------

def _nearest(options: dict[str, float], value: float) -> str:
    """The letter whose option lies nearest ``value`` by ratio (the options are 'about' figures)."""
    return min(options, key=lambda letter: abs(np.log(options[letter] / value)))


def test_batched_acting_on_a_gpu_key_is_the_whole_steps_ratio():
    calls, call_ms, emulators_ms = 16, 1.0, 16.0  # the question's profile: a call's price, whatever it carries
    speedup = (calls * call_ms + emulators_ms) / (call_ms + emulators_ms)
    assert checks.QUESTIONS["06.batched_acting_gpu"][0] == _nearest({"a": 16, "b": 2, "c": 32}, speedup)


def test_max_bias_clear_best_key_is_far_smaller_than_section_3s_tie():
    errors = np.random.default_rng(0).normal(0.0, 1.0, size=(100_000, 4))
    tie = errors.max(axis=1).mean()                                          # four actions worth 0: section 3
    clear = (errors + np.array([10.0, 0, 0, 0])).max(axis=1).mean() - 10.0   # one action worth 10, three worth 0
    assert abs(clear) < 0.1 * tie and checks.QUESTIONS["06.max_bias_clear_best"][0] == "a"


def test_target_network_key_gives_a_hard_copy_the_soft_blends_average_age():
    tau, k = 0.001, np.arange(100_000)
    soft_age = float((tau * (1 - tau) ** k * k).sum())  # weights from k steps back count tau (1 - tau)^k
    hard_age = {letter: (c - 1) / 2 for letter, c in {"a": 2_000, "b": 1_000, "c": 500}.items()}  # ages 0 .. C - 1
    assert checks.QUESTIONS["06.target_network"][0] == min(hard_age, key=lambda x: abs(hard_age[x] - soft_age))


def _updates_to_within_1(target: float, optimiser: type, lr: float) -> int:
    """Updates a value started at 0 needs, pushed by the Huber loss (threshold 1) alone, to come within 1 of
    ``target``: the question's state, whose update moves only its own value."""
    value = torch.zeros((), requires_grad=True)
    opt = optimiser([value], lr=lr)
    for update in range(1, 1_000_000):
        opt.zero_grad()
        F.huber_loss(value, torch.tensor(target), delta=1.0).backward()
        opt.step()
        if abs(target - value.item()) <= 1.0:
            return update
    raise AssertionError(f"a value pushed towards {target} did not come within 1 of it")


@pytest.mark.parametrize("optimiser, lr", [(torch.optim.SGD, 0.05), (torch.optim.Adam, 0.05)])
def test_huber_large_error_key_is_the_updates_a_50_times_larger_value_needs(optimiser, lr):
    ratio = _updates_to_within_1(500.0, optimiser, lr) / _updates_to_within_1(10.0, optimiser, lr)
    assert checks.QUESTIONS["06.huber_large_error"][0] == _nearest({"a": 1, "b": 50}, ratio)  # c: it never gets there


def test_huber_large_error_squared_error_would_close_both_in_a_few_times_the_updates():
    """The contrast the answer draws: with the squared error the push grows with the error (SGD: each update closes
    a fixed fraction), so the value 50 times as far off needs only a few times the updates, not 50."""
    def updates(target, lr=0.05):
        value, n = 0.0, 0
        while abs(target - value) > 1.0:
            value += lr * (target - value)  # the squared error's gradient is the error itself
            n += 1
        return n

    assert updates(500.0) / updates(10.0) < 5


# -- notebook 07: the ε schedule ---------------------------------------------------------------------------------


def eps_right(step, start, end, decay_steps):
    return start + (end - start) * min(1.0, step / decay_steps)


def eps_numpy(step, start, end, decay_steps):
    return np.float32(end) + np.float64(start - end) * np.clip(1 - step / decay_steps, 0, 1)


def eps_torch(step, start, end, decay_steps):
    return torch.tensor(eps_right(step, start, end, decay_steps), dtype=torch.float64)


def eps_no_floor(step, start, end, decay_steps):
    return start - (start - end) * step / decay_steps


def eps_to_zero(step, start, end, decay_steps):
    return start * max(0.0, 1 - step / decay_steps)


def eps_rises(step, start, end, decay_steps):
    return eps_right(step, end, start, decay_steps)


def eps_multiplicative(step, start, end, decay_steps):
    return max(end, start * 0.995 ** step)


def eps_exponential(step, start, end, decay_steps):
    return start * (end / start) ** min(1.0, step / decay_steps)


def eps_integer_division(step, start, end, decay_steps):
    return start + (end - start) * min(1, step // decay_steps)


def eps_decay_fraction(step, start, end, decay_steps):
    return eps_right(step, start, end, 0.1 * decay_steps)


def eps_one_step_early(step, start, end, decay_steps):
    return max(end, start - (start - end) * step / (decay_steps - 1))


def eps_one_step_late(step, start, end, decay_steps):
    return max(end, start - (start - end) * step / (decay_steps + 1))


def eps_one_step_early_floor_after(step, start, end, decay_steps):
    """Divides by decay_steps - 1, as eps_one_step_early, but floors only after decay_steps: at decay_steps itself
    ε is below `end`."""
    if step > decay_steps:
        return end
    return start - (start - end) * step / (decay_steps - 1)


def eps_one_step_ahead(step, start, end, decay_steps):
    return eps_right(step + 1, start, end, decay_steps)


def eps_one_step_behind(step, start, end, decay_steps):
    return start - (start - end) * min(1.0, (step - 1) / decay_steps)


def eps_ignores_start(step, start, end, decay_steps):
    return eps_right(step, 1.0, end, decay_steps)


def test_epsilon_schedule_right(capsys):
    seed_state = torch.random.get_rng_state()
    for answer in (eps_right, eps_numpy, eps_torch):
        assert checks.check_epsilon_schedule(answer) is True
    assert capsys.readouterr().out.startswith("✓ epsilon_schedule")
    assert torch.equal(seed_state, torch.random.get_rng_state())


@pytest.mark.parametrize("answer, hint", [
    (eps_no_floor, "keeps falling after decay_steps"),
    (eps_to_zero, "falls to 0 instead of to `end`"),
    (eps_rises, "ε rises"),
    (eps_multiplicative, "multiplicative decay .*linearly"),
    (eps_exponential, "multiplicative decay .*log.csv"),
    (eps_integer_division, "integer division"),
    (eps_decay_fraction, "not a fraction of the run"),
    (eps_ignores_start, "at step 0, ε should be `start`"),
    (eps_one_step_early, r"off by one step: ε reaches `end` at step 99,999, not at decay_steps = 100,000"),
    (eps_one_step_late, r"off by one step: ε reaches `end` at step 100,001"),
    (eps_one_step_early_floor_after, r"off by one step: ε reaches `end` at step 99,999, not at decay_steps"),
    (eps_one_step_ahead, r"off by one step: at every step ε is the line's value one step later"),
    (eps_one_step_behind, r"off by one step: at every step ε is the line's value one step earlier"),
])
def test_epsilon_schedule_wrong(answer, hint):
    with pytest.raises(AssertionError, match=hint):
        checks.check_epsilon_schedule(answer)


@pytest.mark.parametrize("answer", [eps_one_step_early, eps_one_step_late, eps_one_step_early_floor_after,
                                    eps_one_step_ahead, eps_one_step_behind])
def test_an_off_by_one_schedule_is_not_called_multiplicative(answer):
    with pytest.raises(AssertionError) as caught:
        checks.check_epsilon_schedule(answer)
    assert "off by one step" in str(caught.value) and "multiplicative" not in str(caught.value)


def test_epsilon_schedule_unanswered(capsys):
    assert checks.check_epsilon_schedule(None) is None
    assert checks.check_epsilon_schedule(lambda *a: None) is None
    assert "not answered yet" in capsys.readouterr().out.lower()


def test_epsilon_schedule_crash_names_the_call():
    def eps_crashes(step, start, end, decay_steps):
        return start - (start - end) * step / (decay_steps - decay_steps)

    with pytest.raises(AssertionError, match=r"epsilon_schedule\(0, 1.0, 0.01, 100_000\) raised ZeroDivisionError"):
        checks.check_epsilon_schedule(eps_crashes)


def eps_flag_once_done():
    """A schedule that remembers it reached the floor (a flag, as a loop's "decay over" switch would): right when
    asked step by step, wrong when a resumed run asks for a late step first."""
    done = set()

    def schedule(step, start, end, decay_steps):
        if (start, end, decay_steps) in done or step >= decay_steps:
            done.add((start, end, decay_steps))
            return end
        return start - (start - end) * step / decay_steps
    return schedule


def test_a_schedule_that_keeps_state_between_calls_is_told_eps_depends_on_the_step_alone():
    with pytest.raises(AssertionError, match="ε must depend on the step alone.*resumed run"):
        checks.check_epsilon_schedule(eps_flag_once_done())


def test_a_schedule_given_numpy_steps_passes():
    assert checks.check_epsilon_schedule(lambda step, start, end, n: end + (start - end) * max(0, 1 - step / n))


def _calls_the_course(step, start, end, decay_steps):
    from dqn_course.train import linear_epsilon

    return linear_epsilon(step, start, end, decay_steps)


@pytest.mark.parametrize("answer", ["linear_epsilon", "epsilon_at", "wrapper", "import inside", "train_beside",
                                    "fits_in_ram", "np.interp"])
def test_the_courses_schedule_and_the_pages_imports_are_refused(answer):
    from dqn_course.lab import diagnostics
    from dqn_course.profiling import fits_in_ram
    from dqn_course.train import epsilon_at, linear_epsilon

    answers = {"linear_epsilon": linear_epsilon, "epsilon_at": epsilon_at,
               "wrapper": lambda step, start, end, n: linear_epsilon(step, start, end, n),
               "import inside": _calls_the_course, "train_beside": diagnostics.train_beside,
               "fits_in_ram": fits_in_ram, "np.interp": np.interp}
    with pytest.raises(AssertionError, match="write it yourself: a def of the schedule.*section 1"):
        checks.check_epsilon_schedule(answers[answer])
