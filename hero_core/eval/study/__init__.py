"""A study in one command (``python -m hero_core study``): does history help on *your* model?

Every arm (HeRo, its local twin without history, its twin without the memory read) trained over several seeds under
the degradation guard, each run measured at one matched param skip, the arms compared with a paired hierarchical
bootstrap, and a report (``study.json``, ``study.md``) the app's Study page opens. The modules, one job each:
``spec`` (settings, runs, plan), ``lanes`` (training the unfinished runs side by side), ``measures`` (one run's
measurements), ``stats`` (spread and the paired bootstrap), ``report`` (JSON and page), ``bundled`` (the bundled
study of the memory question: docs/seeds.md), ``runner`` (:func:`run_study`, the one entry point).
"""

from hero_core.eval.study.runner import run_study
from hero_core.eval.study.spec import StudyError, StudySpec

__all__ = ["StudyError", "StudySpec", "run_study"]
