"""The lab: helpers for the notebooks and benchmarks (measurements, demos, exercise checks).

Notebooks, ``benchmarks/``, ``data/make_figures.py`` and the tests import it; the library (every
other module of ``dqn_course``, training included) never does: ``tests/test_architecture.py`` checks.
"""
