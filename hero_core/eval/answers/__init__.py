"""The answers suite: prompts with checkable answers, the share of dense's correct answers a method keeps. Entry
point: :func:`hero_core.eval.answers.run.run_answers` (``python -m hero_core eval --answers``).

``run`` (checking, running, the report), ``prompts`` (``python -m hero_core.eval.answers.prompts`` rewrites
``answers.jsonl`` beside it), ``references`` (the random and oracle reference policies) and ``figure``.

Nothing is imported here, so reading the report does not load the model code.
"""
