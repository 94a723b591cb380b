"""Evaluation: BIG-bench multiple choice with Retain, HumanEval, generated reasoning, per-domain quality.

Five workflows, each a package with one entry point, over a few shared modules at this level.

Shared (used by more than one workflow):

    methods      what gets evaluated (:class:`~hero_core.eval.methods.Method`, ``HeroMethod``,
                 ``CallableMethod``), its forwards and greedy decoding (through the one decode loop,
                 :mod:`hero_core.method.decoding`)
    engine       the one loop that runs texts under several methods against a reference (dense): per-text
                 NLL sums, KL, top-1 agreement, which FFNs ran, traces on request
    scoring      log-likelihoods as lm-evaluation-harness splits them, multiple-choice accuracy, Retain
    baselines    reference routing policies (static, random, oracle; per-token quality against dense is
                 :mod:`hero_core.measures.metrics`, which the model itself uses)
    calibration  train-split text blocks of every domain, where a tau is matched to a param skip
    twins        the headline's checkpoints, each one's local twin and the twin's tau at matched param skip
    benchmarks/  BIG-bench data (``bigbench``) and HumanEval execution (``humaneval``)

Workflows:

    suites/      :func:`hero_core.eval.suites.runner.evaluate`: every method on every suite of the registry
                 (``registry``: main, extended, humaneval, reasoning, domains), dense as the reference;
                 ``python -m hero_core eval`` (``cli``); Retain with bootstrap intervals (``retain``), the
                 lm-evaluation-harness bridge (``harness``) and the README's headline table (``headline``)
    frontier/    :func:`hero_core.eval.frontier.curves.frontier`: the skip-quality frontier on held-out text
                 with the oracle and random references (``python -m hero_core frontier``); the results file's
                 sections (``results_sections``, ``results``), the summary the app quotes (``measured``) and skip by
                 prompt position (``position_skip``)
    answers/     :func:`hero_core.eval.answers.run.run_answers`: the answers suite, prompts with checkable
                 answers (``answers.jsonl``, written by ``python -m hero_core.eval.answers.prompts``), the share of
                 dense's correct answers a method keeps; reference policies (``references``) and its figure
    sweep/       :func:`hero_core.eval.sweep.run.sweep`: checkpoints over a data set of prompts
                 (``python -m hero_core sweep``); data sets (``data``), resumable shards (``shards``) and the
                 analyses' item runs (``item_runs``)
    study/       :func:`hero_core.eval.study.runner.run_study`: the seeded study (``python -m hero_core study``)

Compute figures (param skip, net param skip, FLOP share saved, token-weighted over every token a suite
fed) come from :class:`hero_core.measures.accounting.ComputeTally`.

A *method* is anything with the small ``Method`` interface: a forward over a right-padded batch that
returns logits and which FFNs each token ran. ``HeroMethod(hero, variant, tau)`` runs a HeRo
checkpoint as one of its variants (``dense`` runs the backbone unchanged); ``CallableMethod
(name, fn, tokenizer, profile)`` wraps ``fn(input_ids (B,T), attention_mask (B,T)) -> (logits (B,T,V),
executed (B,R,T) bool | None)``. Pass extra methods with ``evaluate(hero, methods=[...])``, e.g. a baseline
policy at matched skip::

    from hero_core.eval import baselines
    from hero_core.eval.methods import HeroMethod
    from hero_core.eval.suites.runner import evaluate
    static = HeroMethod(hero, "hero", policy=baselines.static_pruning({3, 7}), name="static")
    evaluate(hero, ["hero", "no_history"], ["main"], limit=50, methods=[static])

Data hygiene: BIG-bench and HumanEval are evaluation-only (never read by training); reasoning and
domain texts come from the ``eval`` split of :mod:`hero_core.data.texts`, disjoint from ``train`` by a hash
of each item. Few-shot exemplars of the reasoning suite come from the ``train`` split, so no
evaluation question appears in a prompt other than its own.

Nothing is imported here: the app imports single modules lazily, and importing the package stays cheap.
"""
