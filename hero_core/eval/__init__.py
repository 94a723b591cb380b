"""Evaluation: BIG-bench multiple choice with Retain, HumanEval, generated reasoning, per-domain quality.

Modules, one concept each:

    methods    what gets evaluated (:class:`Method`, :class:`HeroMethod`, :class:`CallableMethod`), its
               forwards and greedy decoding (through the one decode loop, :mod:`hero_core.core.decoding`)
    engine     the one loop that runs texts under several methods against a reference (dense): per-text
               NLL sums, KL, top-1 agreement, which FFNs ran, traces on request; frontier, domains suite,
               sweep and the bf16 check go through it
    scoring    log-likelihoods as lm-evaluation-harness splits them, multiple-choice accuracy, Retain
    suites     the registry :data:`~hero_core.eval.suites.SUITES`: one entry per suite (name, run, scores,
               headline) — main, extended, humaneval, reasoning, domains
    runner     :func:`evaluate` (every method on every suite, dense as the reference), the task selection
    harness    the lm-evaluation-harness bridge and the task files in ``hero_core/lm_eval_tasks``
    cli        ``python -m hero_core eval`` (``--answers``: the answers suite)
    answers    the answers suite: prompts with checkable answers (``answers.jsonl``, written by
               ``answers_data``), checked per answer; the share of dense's correct answers a method keeps
    bigbench, humaneval, baselines
               BIG-bench data, HumanEval execution, baseline policies (per-token quality against dense is
               :mod:`hero_core.core.metrics`, which the model itself uses)
    retain     Retain over the main suite + HumanEval with 95 % bootstrap intervals (over examples, over tasks)
               and the paired difference of two methods
    twins      the headline's checkpoints, each one's local twin and the twin's tau at matched param skip
    headline   the README's headline table (Retain and answers kept beside param skip) from the result files
    frontier   the skip-quality frontier of checkpoints on held-out text, with the oracle and random references
    sweep      one or more checkpoints over a data set of prompts (``python -m hero_core sweep``); its data
               sets are read by ``sweep_data``
    position_skip
               skip by absolute position in the prompt
    calibration
               tau for a target param skip on train-split text
    measured   the measured summary the app quotes (``python -m hero_core.eval.measured``)

Compute figures (param skip, net param skip, FLOP share saved, token-weighted over every token a suite
fed) come from :class:`hero_core.core.accounting.ComputeTally`.

A *method* is anything with the small :class:`Method` interface: a forward over a right-padded batch that
returns logits and which FFNs each token ran. :class:`HeroMethod` ``(hero, variant, tau)`` runs a HeRo
checkpoint as one of its variants (``dense`` runs the backbone unchanged); :class:`CallableMethod`
``(name, fn, tokenizer, profile)`` wraps ``fn(input_ids (B,T), attention_mask (B,T)) -> (logits (B,T,V),
executed (B,R,T) bool | None)``. Pass extra methods with ``evaluate(hero, methods=[...])``, e.g. a baseline
policy at matched skip::

    from hero_core.eval import HeroMethod, baselines, evaluate
    static = HeroMethod(hero, "hero", policy=baselines.static_pruning({3, 7}), name="static")
    evaluate(hero, ["hero", "no_history"], ["main"], limit=50, methods=[static])

Data hygiene: BIG-bench and HumanEval are evaluation-only (never read by training); reasoning and
domain texts come from the ``eval`` split of :mod:`hero_core.core.data`, disjoint from ``train`` by a hash
of each item. Few-shot exemplars of the reasoning suite come from the ``train`` split, so no
evaluation question appears in a prompt other than its own.
"""

from .answers import answers_kept, check_answer, run_answers
from .cli import add_arguments, run_cli
from .methods import CallableMethod, Forward, Generation, HeroMethod, Method
from .runner import evaluate
from .suites import SUITES

__all__ = ["SUITES", "CallableMethod", "Forward", "Generation", "HeroMethod", "Method", "add_arguments",
           "answers_kept", "check_answer", "evaluate", "run_answers", "run_cli"]
