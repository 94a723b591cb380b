"""What each checkpoint saves counted net, beside static pruning at the same net saving, on both held-out sets.

``python -m hero_core.eval.frontier.net_table --checkpoint hero-10-r7-s1 --checkpoint hero-10-r4`` (``make net-saving``)

For every checkpoint, run at its own tau as a user gets it, per domain of each held-out set (the built-in eval split
and the texts outside the training mix, :mod:`hero_core.data.outside`):

* **param skip** (the paper's metric) and **FLOPs saved net** -- the share of a dense token's FLOPs not spent, after
  charging the router at every routed block and the adapter of every skipped FFN (token-weighted);
* the **perplexity ratio** routed / dense with its 95 % bootstrap interval over texts;
* **static pruning at the same net saving**: the least influential FFNs (ShortGPT's block influence on the
  calibration blocks) dropped for every token, with the checkpoint's own adapters in their place, charged only its
  adapters (it computes no router); its ratio is read between the whole numbers of dropped FFNs that bracket the
  checkpoint's net saving, linearly in log-perplexity. A checkpoint saving nothing net is read against dense itself.

A checkpoint whose net saving is zero or negative costs more than the dense model: the table says so.
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

import numpy as np

from hero_core.data.outside import OUTSIDE_DOMAINS, outside_texts
from hero_core.data.texts import DOMAINS, held_out_texts
from hero_core.measures.accounting import dense_token_flops, token_compute
from hero_core.measures.metrics import ratio_interval

HELD_OUT_SETS = {"eval split": DOMAINS, "outside": OUTSIDE_DOMAINS}
SET_WORDS = {"eval split": "held-out split of the training mix's sources",
             "outside": "text outside the training mix (package docs, package code, HumanEval)"}
TEXTS_PER_DOMAIN = 12
MAX_TOKENS = 192


def held_out_sets(hero, n: int = TEXTS_PER_DOMAIN) -> dict[str, dict[str, list[str]]]:
    """Both held-out sets, per domain ``n`` texts."""
    return {"eval split": held_out_texts(n, hero),
            "outside": {d: outside_texts(d, n) for d in OUTSIDE_DOMAINS}}


def _domain_figures(hero, methods, texts: list[str]) -> dict[str, dict]:
    """Per method on ``texts``: token-weighted param skip and net FLOPs saved, and the pooled perplexity ratio."""
    from hero_core.eval.engine import run_texts
    from hero_core.eval.methods import HeroMethod

    cells: dict[str, list] = {m.name: [] for m in methods}
    for text in run_texts(hero, methods, texts, HeroMethod(hero, "dense"), max_tokens=MAX_TOKENS, batch_size=2):
        for m in methods:
            run = text.runs[m.name]
            figures = token_compute(run.executed, m.profile)
            inverse_dense = (1.0 / dense_token_flops(m.profile, np.arange(run.n_tokens))).sum()
            cells[m.name].append((run.nll_sum, run.dense_nll_sum, run.n_pred, figures["param_skip"].sum(),
                                  figures["flop_share_saved"].sum(), inverse_dense, run.n_tokens))
    out = {}
    for name, rows in cells.items():
        nll, dense, n_pred, skip, saved, inverse, n_tok = (np.asarray(c, dtype=float) for c in zip(*rows, strict=True))
        ratio, low, high = ratio_interval(nll, dense, n_pred)
        out[name] = {"param_skip": float(skip.sum() / n_tok.sum()), "net_saved": float(saved.sum() / n_tok.sum()),
                     "mean_inverse_dense_flops": float(inverse.sum() / n_tok.sum()),
                     "ratio": ratio, "low": low, "high": high, "nll": nll.tolist(), "dense_nll": dense.tolist(),
                     "n_pred": n_pred.tolist()}
    return out


def static_at_net(static: dict[int, dict], net: float) -> dict:
    """Static pruning's perplexity ratio at net saving ``net``, read between the measured numbers of dropped FFNs
    (``static``: k -> figures, k = 0 being dense) linearly in log-ratio; ``k`` is the (fractional) FFNs dropped."""
    ks = sorted(static)
    nets = [static[k]["net_saved"] for k in ks]
    if net <= 0:
        return {"k": 0.0, "ratio": 1.0, "net_saved": 0.0}
    if net > nets[-1]:
        raise ValueError(f"static pruning measured up to {nets[-1]:.3f} net, asked at {net:.3f}")
    i = next(i for i in range(1, len(ks)) if nets[i] >= net)
    w = (net - nets[i - 1]) / (nets[i] - nets[i - 1])
    log_ratio = (1 - w) * math.log(static[ks[i - 1]]["ratio"]) + w * math.log(static[ks[i]]["ratio"])
    return {"k": ks[i - 1] + w * (ks[i] - ks[i - 1]), "ratio": math.exp(log_ratio), "net_saved": net}


def measure_checkpoint(hero, sets: dict[str, dict[str, list[str]]], influence: list[float]) -> dict:
    """One checkpoint at its own tau on both sets, with static pruning bracketing its net saving."""
    from hero_core.eval.baselines import least_influential, static_pruning
    from hero_core.eval.methods import HeroMethod

    run = HeroMethod(hero, hero.config.variant, name="run")
    out = {"checkpoint": hero.checkpoint_name, "variant": hero.config.variant, "tau": hero.config.tau,
           "router_share": hero.profile.router_params * hero.config.n_routed / hero.profile.total_params,
           "head_hidden": hero.config.head_hidden, "d_encoder": hero.config.d_encoder, "sets": {}}
    p = hero.profile
    per_ffn = 2.0 * (p.ffn_params - p.adapter_params)  # FLOPs one dropped FFN saves a token, its adapter charged
    for set_name, domains in sets.items():
        rows = {}
        for domain, texts in domains.items():
            figures = _domain_figures(hero, [run], texts)["run"]
            # FFNs static pruning drops for the run's net saving: a token saves k * per_ffn / (its dense FLOPs)
            k_needed = max(0.0, figures["net_saved"]) / (per_ffn * figures["mean_inverse_dense_flops"])
            ks = sorted({0, math.floor(k_needed), math.floor(k_needed) + 1})
            statics = [HeroMethod(hero, "hero", name=f"static-{k}",
                                  policy=static_pruning(least_influential(influence, k))) for k in ks if k > 0]
            static = {0: {"net_saved": 0.0, "ratio": 1.0}} | {
                int(name.split("-")[1]): fig for name, fig in _domain_figures(hero, statics, texts).items()}
            rows[domain] = {**_public(figures), "static": static_at_net(static, figures["net_saved"]),
                            "static_measured": {k: _public(v) for k, v in static.items()}}
        out["sets"][set_name] = rows
    return out


def _public(figures: dict) -> dict:
    return {k: v for k, v in figures.items() if k not in ("nll", "dense_nll", "n_pred")}


def measure(names: list[str], texts_per_domain: int = TEXTS_PER_DOMAIN) -> dict:
    """Every checkpoint in ``names`` on one backbone, both held-out sets, one influence ranking per checkpoint."""
    from hero_core.eval.baselines import block_influence
    from hero_core.eval.calibration import calibration_blocks
    from hero_core.method.model import load_routers

    heroes = load_routers(names)
    sets = held_out_sets(heroes[0], texts_per_domain)
    blocks = calibration_blocks(heroes[0])
    calibration_texts = [heroes[0].tokenizer.decode(row) for row in blocks.tolist()]
    influence = block_influence(heroes[0], calibration_texts)  # of the dense FFNs: the same for every checkpoint
    return {"format_version": 1, "texts_per_domain": texts_per_domain, "max_tokens": MAX_TOKENS,
            "sets": {name: {"domains": list(domains), "words": SET_WORDS[name]} for name, domains in sets.items()},
            "checkpoints": [measure_checkpoint(hero, sets, influence) for hero in heroes]}


def pct(x: float) -> str:
    return f"{100 * x:.1f} %"


def net_words(net: float) -> str:
    """A net saving in words: a run that saves nothing net costs more than dense, and says so."""
    return pct(net) if net > 0 else f"{pct(net)} (costs more than dense)"


def render_markdown(report: dict) -> str:
    """The table of docs/net_saving.md: one row per checkpoint and held-out set."""
    lines = ["| checkpoint | router share | held-out set | param skip | FLOPs saved net | perplexity ratio "
             "(per domain) | static pruning at the same net saving |", "|---|---|---|---|---|---|---|"]
    for c in report["checkpoints"]:
        for set_name, rows in c["sets"].items():
            domains = report["sets"][set_name]["domains"]
            skip = np.mean([rows[d]["param_skip"] for d in domains])
            net = np.mean([rows[d]["net_saved"] for d in domains])
            ratios = " / ".join(f"{rows[d]['ratio']:.2f} [{rows[d]['low']:.2f}, {rows[d]['high']:.2f}]"
                                for d in domains)
            static = " / ".join(f"{rows[d]['static']['ratio']:.2f}" for d in domains)
            lines.append(f"| {c['checkpoint']} | {pct(c['router_share'])} | {set_name} ({', '.join(domains)}) | "
                         f"{pct(skip)} | {net_words(net)} | {ratios} | {static} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--checkpoint", action="append", required=True, help="a bundled name or a folder; repeat")
    parser.add_argument("--texts", type=int, default=TEXTS_PER_DOMAIN, help="texts per domain (default: %(default)s)")
    parser.add_argument("--out", type=Path, default=Path("docs/net_saving.json"))
    args = parser.parse_args(argv)
    report = measure(args.checkpoint, args.texts)
    args.out.write_text(json.dumps(report, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    print(render_markdown(report))
    print(f"wrote {args.out} (python -m hero_core.reports.net_saving_report draws docs/net_saving.md and the README)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
