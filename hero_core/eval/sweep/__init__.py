"""Checkpoints over a data set of prompts. Entry point: :func:`hero_core.eval.sweep.run.sweep`
(``python -m hero_core sweep``).

``run`` (the sweep and its result tables), ``prompt_sets`` (the prompt data sets), ``shards`` (results written as they
come, so a rerun resumes) and ``item_runs`` (the analyses' per-item runs on the one evaluation loop).

Nothing is imported here: the app reads result tables without loading a model.
"""
