"""The skip-quality frontier on held-out text. Entry point: :func:`hero_core.eval.frontier.curves.frontier`
(``python -m hero_core frontier``).

``curves`` (the frontier, with oracle, random and static references), ``results_sections`` and ``results`` (the
sections of docs/results.json and the command that writes them), ``measured`` (the summary the app quotes, written by
``python -m hero_core.eval.frontier.measured``) and ``position_skip`` (skip by absolute position in the prompt).

Nothing is imported here: the app reads ``measured`` and ``position_skip`` without loading a model.
"""
