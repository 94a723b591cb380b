"""The two benchmarks' own data, shared by the workflows: BIG-bench tasks (``bigbench``: fetch, extract, read
multiple-choice examples) and HumanEval (``humaneval``: problems, prompts, execution in a subprocess).

Nothing is imported here, so importing one of them loads only that one.
"""
