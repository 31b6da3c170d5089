"""``python -m dqn_course.distributed``: the command line of ``cli.main``."""
from dqn_course.distributed.cli import main

main()
