"""DQN scaled out on Ray Core, Ape-X style (actors that act, one that learns), with the frame-sharing replay.

::

    RolloutWorker x N  --chunks of frames-->  ReplayServer (MultiStreamMemory, one stream per worker)
      | own env, CPU net,                         |
      | its own ε (Ape-X)                         | batches (prefetched)
      | pulls weights every episode               v
      +<------------  ParameterServer  <------  Learner (GPU when there is one; CPU otherwise)
                      (numpy weights,          pushes weights every `push_every` updates
                       in the object store)    Evaluator plays the latest weights at the end

    python -m dqn_course.distributed --workers 2 --total-steps 20000          # local Ray on this machine
    python -m dqn_course.distributed --address HEAD_IP:6379 --workers 16 ...   # join an existing cluster

The package, one module per job (each imports only those below it):

- ``cli``: the command line (``parse_command``, ``main``);
- ``driver``: ``run``, which starts the actors, feeds them until the run is done and sums it up;
- ``roles``: ``Chunk`` and the actors' classes; ``session``: ``RaySession``; ``placement``: whether a run
  fits the cluster (``check_cluster_fits``, ``ClusterTooSmallError``), and the reports while actors wait;
- ``config``: ``DistConfig``; ``ray_private``: every use of Ray's private APIs, one function each.

Every role is a plain class, turned into an actor by ``ray.remote`` in ``run`` (so tests can also run
one in-process). Workers send ``Chunk``s: K transitions as one new frame per step plus the few full
stacks an episode start needs, far fewer bytes than s and s' stacks, and what the replay actor
stores anyway (notebook 04's layout). Semantics mirror ``dqn_course.train``: rewards are clipped
(``np.sign``) for learning, a lost life is ``done`` but not an episode end. Exploration follows Ape-X
(each worker a fixed ε) rather than ``train``'s annealed ε, and the learner runs as fast as it can
instead of one update per 4 steps: that decoupling is what the distribution buys.
"""
try:
    import ray  # noqa: F401
except ImportError as e:  # Ray is the "distributed" extra
    raise ImportError('dqn_course.distributed needs Ray: pip install "dqn-course[distributed]"') from e

from dqn_course.distributed.cli import Command, main, parse_command
from dqn_course.distributed.config import DistConfig, worker_epsilons
from dqn_course.distributed.driver import Progress, run
from dqn_course.distributed.placement import (ActorsPendingError, ClusterTooSmallError, check_cluster_fits,
                                              cluster_nodes)
from dqn_course.distributed.ray_private import DiagnosticsUnavailable, RayVersionError
from dqn_course.distributed.roles import (Chunk, Evaluator, Learner, ParameterServer, ReplayServer, RolloutWorker,
                                          load_numpy_weights, weights_digest, weights_to_numpy)
from dqn_course.distributed.session import ClusterJoinError, RaySession

__all__ = ["ActorsPendingError", "Chunk", "ClusterJoinError", "ClusterTooSmallError", "Command",
           "DiagnosticsUnavailable", "DistConfig", "Evaluator", "Learner", "ParameterServer", "Progress",
           "RaySession", "RayVersionError", "ReplayServer", "RolloutWorker", "check_cluster_fits", "cluster_nodes",
           "load_numpy_weights", "main", "parse_command", "run", "weights_digest", "weights_to_numpy",
           "worker_epsilons"]
