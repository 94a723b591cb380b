"""The evaluation suites. Entry point: :func:`hero_core.eval.suites.runner.evaluate` (every method on every suite,
dense as the reference), on the command line ``python -m hero_core eval`` (:mod:`hero_core.cli.evaluate`).

``registry`` (the suites: main, extended, humaneval, reasoning, domains), ``runner`` (``evaluate`` and the task
selection), ``cli``, ``harness`` (the lm-evaluation-harness bridge), ``retain`` (Retain with bootstrap intervals) and
``headline`` (the README's headline table from the Retain and answers result files).

Nothing is imported here: the entry point pulls in torch and the suites, which a caller of ``retain`` or
``headline`` alone does not need.
"""
