"""What ``scripts/make_frontier.py`` measures beside the frontier, into docs/results.json: greedy chat answers
against dense (common prefix, answers shown side by side), the memory-attention entropy, the read-matters ablation
(learned against uniform read) and the default checkpoint on a bf16 backbone. Each takes the loaded checkpoints by name
(hero_core.eval.frontier.results.load_models) and returns its JSON section.
"""

from __future__ import annotations

import statistics

from hero_core.data.texts import DOMAINS, held_out_texts
from hero_core.method.model import DEFAULT_CHECKPOINT

SHOWN_PROMPTS = ("What is the capital of France?", "Give me three tips for staying focused while studying.",
                 "Explain why the sky is blue in two sentences.", "Write a Python function that reverses a string.",
                 "If I have 3 apples and buy 5 more, how many apples do I have?")
PREFIX_TOKENS = 24
MAX_TOKENS = 192  # tokens per held-out text (chat and reasoning texts are shorter; code is cut here)


def common_prefix(a: list[int], b: list[int], n: int) -> int:
    k = 0
    for x, y in zip(a[:n], b[:n]):
        if x != y:
            break
        k += 1
    return k


def generations(models: dict, n_prompts: int, stage_one: tuple[str, ...]) -> dict:
    """Greedy chat answers against dense: the common prefix within PREFIX_TOKENS on ``n_prompts`` held-out prompts
    (hero-10, local-10 and the ``stage_one`` checkpoints loaded), and SHOWN_PROMPTS' answers side by side."""
    from hero_core.data.texts import chat_prompts

    hero = next(iter(models.values()))
    tok = hero.tokenizer
    held_out = chat_prompts("eval")[:n_prompts]
    routed = [name for name in ("hero-10", "local-10") if name in models] or list(models)[:1]
    compared = routed + [name for name in stage_one if name in models]  # common prefix only, not shown

    def answer(model, prompt, variant):
        text, _ = model.generate(prompt, max_new_tokens=PREFIX_TOKENS, variant=variant, chat_template=True)
        return text, tok(text, add_special_tokens=False)["input_ids"]

    prefixes = {name: [] for name in compared}
    for prompt in held_out:
        _, dense_ids = answer(hero, prompt, "dense")
        for name in compared:
            _, ids = answer(models[name], prompt, models[name].config.variant)
            prefixes[name].append(common_prefix(dense_ids, ids, PREFIX_TOKENS))
    shown = []
    for prompt in SHOWN_PROMPTS:
        row = {"prompt": prompt, "dense": models[routed[0]].generate(prompt, max_new_tokens=48, variant="dense",
                                                                     chat_template=True)[0]}
        for name in routed:
            row[name] = models[name].generate(prompt, max_new_tokens=48, variant=models[name].config.variant,
                                              chat_template=True)[0]
        shown.append(row)
    return {"prompts": len(held_out), "prefix_tokens": PREFIX_TOKENS,
            "common_prefix": {n: {"median": statistics.median(v), "mean": statistics.fmean(v), "values": v}
                              for n, v in prefixes.items()},
            "shown": shown}


def memory_readers(models: dict):
    """(name, model) of the checkpoints whose variant reads its memory (no_memread and local have no map)."""
    from hero_core.method.config import VARIANTS

    return [(name, model) for name, model in models.items() if VARIANTS[model.config.variant].memory_read]


def memory_entropy(models: dict, limit: int) -> dict:
    from hero_core.analysis.memory_stats import memory_stats

    texts = held_out_texts(limit, next(iter(models.values())))  # every model shares one backbone
    out = {}
    for name, model in memory_readers(models):
        traces = {d: [model.trace(t, variant=model.config.variant, max_tokens=256) for t in ts]
                  for d, ts in texts.items()}
        stats = memory_stats(traces)
        out[name] = {row["domain"]: {"normalised_entropy": row["normalised_entropy"],
                                     "previous_share": row["previous_share"],
                                     "uniform_previous_share": row["uniform_previous_share"]}
                     for row in stats.to_dict("records")}
    return out


def learned_and_uniform_read(model, texts: dict[str, list[str]], max_tokens: int) -> dict[str, dict[str, dict]]:
    """Held-out quality of ``model`` at its own tau with its learned memory read and with every read replaced by
    the uniform average of the same values: {"learned" | "uniform": {domain: summary}} (evaluate_points)."""
    from hero_core.eval.frontier.curves import evaluate_points
    from hero_core.eval.methods import HeroMethod

    variant = model.config.variant
    methods = [HeroMethod(model, variant, name="learned"),
               HeroMethod(model, variant, name="uniform", memory_read="uniform")]
    return evaluate_points(model, methods, texts, max_tokens=max_tokens)


def read_matters(models: dict, limit: int) -> dict:
    """Per memory-reading checkpoint and domain, at its own tau: the share of decisions that flip when every read
    is replaced by the uniform average of the same values, the learned read's entropy, and the perplexity ratio
    to dense with the learned and with the uniform read (95 % bootstrap intervals over texts)."""
    from hero_core.analysis.read_ablation import read_effect

    texts = held_out_texts(limit, next(iter(models.values())))
    out = {}
    for name, model in memory_readers(models):
        quality = learned_and_uniform_read(model, texts, MAX_TOKENS)
        out[name] = {d: {**read_effect(model, texts[d], max_tokens=MAX_TOKENS), "texts": len(texts[d]),
                         "learned": quality["learned"][d],
                         "uniform": quality["uniform"][d]} for d in DOMAINS}
        print(f"read matters {name}: " + ", ".join(f"{d} {100 * v['flip_share']:.2f} % flips"
                                                   for d, v in out[name].items()), flush=True)
    return out


def bf16_check(models: dict, limit: int, name: str = DEFAULT_CHECKPOINT) -> dict:
    """Checkpoint ``name`` (the default one unless told) on a bf16 backbone against the same router on fp32: decision
    flips and perplexity ratios, both against the fp32 dense model, on held-out text; each domain's entry names the
    checkpoint. Empty when ``name`` is not among ``models``."""
    from hero_core.eval.engine import run_texts
    from hero_core.eval.methods import HeroMethod
    from hero_core.measures.metrics import pooled_perplexity_ratio
    from hero_core.method.model import load_hero

    if name not in models:
        return {}
    fp32 = models[name]
    # the same checkpoint on the pool's bf16 backbone, checked against it as every load is
    bf16 = load_hero(name, device="cpu", dtype="bf16", shared=True)
    methods = [HeroMethod(fp32, "hero", name="fp32"), HeroMethod(bf16, "hero", name="bf16")]
    out = {}
    for domain, texts in held_out_texts(limit, fp32).items():
        flips = cells = near = 0
        sums = {"fp32": 0.0, "bf16": 0.0, "dense": 0.0}
        n = 0
        for text in run_texts(fp32, methods, texts, HeroMethod(fp32, "dense"), max_tokens=MAX_TOKENS,
                              traced=["fp32", "bf16"]):
            a, b = text.runs["fp32"].trace, text.runs["bf16"].trace
            flips += int((a.executed != b.executed).sum())
            cells += a.executed.size
            near += int((abs(a.gate - a.tau) < 0.05).sum())
            sums["dense"] += text.runs["fp32"].dense_nll_sum
            sums["fp32"] += text.runs["fp32"].nll_sum
            sums["bf16"] += text.runs["bf16"].nll_sum
            n += text.runs["fp32"].n_pred
        ratios = {k: pooled_perplexity_ratio(sums[k], sums["dense"], n) for k in ("fp32", "bf16")}
        out[domain] = {"checkpoint": name, "texts": limit, "flip_rate": flips / cells,
                       "gates_within_0.05_of_tau": near / cells, "ratio_fp32": ratios["fp32"],
                       "ratio_bf16": ratios["bf16"], "bf16_vs_fp32": ratios["bf16"] / ratios["fp32"] - 1}
    return out
