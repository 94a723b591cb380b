"""The benchmark: routed against dense inference, decoding, tracing, training and memory. Entry point:
:func:`hero_core.bench.run.run_benchmark` (``python -m hero_core bench``; :mod:`hero_core.bench.run` says what each
section measures).

Modules: ``timing`` (interleaved repetitions, statistics, machine facts), ``inputs`` (the configuration,
token batches, routed configurations), ``sections`` (one function per section), ``memory_probe`` (the
per-configuration process, ``python -m hero_core.bench.memory_probe``), ``targets`` (the schema and the
targets, read by ``scripts/bench_report.py``), ``run`` (the run and its command line); ``routers_memory`` and
``sweep_memory`` (resident memory of many routers on one backbone, and of a sweep as its data set grows).

Nothing is imported here: a module takes what it needs from the one that holds it.
"""
