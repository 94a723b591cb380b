"""Benchmark routed against dense inference, decoding, tracing, training and memory (``python -m hero_core bench``).

Everything runs side by side in one process, so the comparisons share weights, threads and machine load.
Every section but memory runs once per backbone precision (``--dtypes``, default ``fp32,bf16``: the
backbone loaded in that dtype, routers in fp32), and the JSON keeps each precision's sections in
``result["precisions"][name]``; targets are evaluated in each precision and tagged with it. The sections:

* **prefill**: dense vs each routed configuration (``hero-25``, ``hero-40``) on batches of prompts; the
  achieved speed-up (dense time / routed time) next to the *ideal* one implied by the FLOPs the routed
  pass really skipped (its executed matrix through :mod:`hero_core.measures.accounting`):
  ``ideal = sum_t dense_flops_t / sum_t (dense_flops_t - saved_flops_t)``, router and adapter work charged.
* **decode**: greedy KV-cache decoding of equal-length prompts at batch 1 and 8, tokens/s, same ideal.
* **recording**: a routed forward with ``record=True`` vs ``record=False`` (and the trace assembly).
* **overhead**: the ``dense`` variant through the wrappers vs the bare backbone (wrappers taken off).
* **training**: a routed forward + backward + AdamW step on a copy of the router (as ``train.py`` does)
  vs a dense forward + backward to the input embeddings.
* **memory**: peak resident memory of the backbone in full precision vs NF4, one subprocess per config.

Timing: after warm-up, the configurations of a section run interleaved (rotating order) ``reps``
times; figures are medians with quartiles, min and max. A ratio is the median of the *paired* per-rep
ratios (the two runs of a pair are adjacent in time, so slow drifts of machine load cancel). Wall
time is the headline; process CPU time is kept too: with one thread it is much less sensitive to
other processes sharing the cores. The thread count is set explicitly and the load average is
recorded at the start, the end and before every section.

When a checkpoint named by ``--checkpoints`` is missing (or trained for another backbone), a
*synthetic* router stands in: a fresh router with spread gates whose threshold tau is calibrated on
the benchmark's prompt text so that it skips as many FFNs as the name's target param skip implies. The JSON and the
report say so: its speed figures are real, its quality is meaningless.

Modules: ``timing`` (interleaved repetitions, statistics, machine facts), ``inputs`` (the configuration,
token batches, routed configurations), ``sections`` (one function per section), ``memory_probe`` (the
per-configuration process, ``python -m hero_core.bench.memory_probe``), ``targets`` (the schema and the
targets, read by ``scripts/bench_report.py``), ``run`` (the run and its command line). The FLOP ideal is
:func:`hero_core.measures.accounting.flop_ideal`; decoding is :meth:`hero_core.method.model.HeroModel.decode`.
"""

from hero_core.bench.inputs import BenchConfig
from hero_core.bench.run import add_arguments, run_benchmark, run_cli
from hero_core.bench.targets import SCHEMA, TARGETS

__all__ = ["SCHEMA", "TARGETS", "BenchConfig", "add_arguments", "run_benchmark", "run_cli"]
