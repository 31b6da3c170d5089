"""One-call self-checks for the notebooks' exercises, a module per chapter (or pair of chapters that share one).

Each ``check_*`` function takes the learner's answer (a number, or a function or class the learner wrote: the
course's own code is refused), runs it against the course's implementation or arithmetic, prints a line starting
with "✓" when it is right, and raises ``AssertionError`` with a hint when it is not. ``core`` holds what every
chapter shares (the verdicts, predict-then-measure, the short questions, the refusal of the course's code);
``ch00_01`` ... ``ch10`` hold each chapter's checks, hints, quiz keys and predictions. A notebook calls every check
the same way, ``checks.check_...`` (all are here).
tests/test_checks_*.py prove that every check passes the right answer and rejects wrong ones with its hint, and
tests/test_checks_learners_code.py that the course's own code is refused.
"""
from __future__ import annotations

from dqn_course.lab.checks.core import (PREDICTIONS, QUESTIONS, REDO, Prediction, check_prediction,
                                        check_prediction_of, check_question)
from dqn_course.lab.checks.ch00_01 import check_next_stack, check_own_preprocess, check_pretouch
from dqn_course.lab.checks.ch02_03 import check_preprocess, check_scaled_net
from dqn_course.lab.checks.ch04_05 import check_ring, check_stack_at
from dqn_course.lab.checks.ch06 import (PAIR_HINT, TD_BATCH, TD_GAMMA, TD_LOSS_BATCH, TD_N_ACTIONS, check_td_loss,
                                        check_td_targets)
from dqn_course.lab.checks.ch06b import check_bytes_per_transition
from dqn_course.lab.checks.ch07 import EPSILON_CASES, check_epsilon_schedule, check_resume_from, check_run_warnings
from dqn_course.lab.checks.ch07c import CAPSTONE_STOP, check_capstone, check_capstone_loop
from dqn_course.lab.checks.ch08 import check_sum_tree_find
from dqn_course.lab.checks.ch09 import (check_checkpoint_to_resume, check_compressed_slot,
                                        check_save_atomically)
from dqn_course.lab.checks.ch10 import check_rate_limiter

__all__ = ['REDO', 'check_prediction', 'Prediction', 'PREDICTIONS', 'QUESTIONS', 'check_prediction_of',
           'check_question', 'check_next_stack',
           'check_own_preprocess',
           'check_pretouch',
           'check_preprocess', 'check_stack_at', 'check_ring', 'PAIR_HINT', 'TD_BATCH', 'TD_N_ACTIONS', 'TD_GAMMA',
           'check_td_targets', 'TD_LOSS_BATCH', 'check_td_loss', 'EPSILON_CASES',
           'check_epsilon_schedule', 'check_resume_from', 'check_run_warnings', 'check_capstone', 'check_capstone_loop',
           'CAPSTONE_STOP',
           'check_sum_tree_find', 'check_compressed_slot',
           'check_checkpoint_to_resume',
           'check_save_atomically', 'check_rate_limiter', 'check_bytes_per_transition', 'check_scaled_net']
