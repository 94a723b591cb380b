"""Does history help, over training seeds: every seed of every arm of the memory question on held-out text at one
matched param skip, each arm's mean and spread over its seeds (every seed listed), and the difference between two
arms with a hierarchical bootstrap interval.

The arms (hero_core.train.recipes.SEED_ARMS) are the first training stage of HeRo with the default's memory levers,
its local twin (no history) and its twin without the memory read; seed 0 is the bundled run, seeds 1 and 2 live
under checkpoints/seeds/. Matching: one target param skip for every run (the HeRo arm's mean skip at its own tau on
calibration blocks from the train split), and each run's tau bisected to meet it there; the held-out texts are
each domain's eval split, never trained on.

The interval of a difference resamples seeds first (with replacement, within each arm) and then texts within each
resampled seed, so neither source of noise is hidden; a difference whose interval holds 0 is "not separable".
``python -m hero_core.eval.seeds`` (``make results-seeds``) writes docs/seeds.json and docs/seeds.md.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..core.metrics import percentile_interval, pooled_perplexity_ratio

DOMAINS = ("chat", "code", "reasoning")
BOOTSTRAP = 4000


@dataclass
class TextSums:
    """One run on one domain's texts: per-text sums, the unit the bootstrap resamples."""

    nll: np.ndarray  # (n_texts,) routed NLL summed over the text's predictions
    nll_dense: np.ndarray  # (n_texts,) the dense model's on the same tokens
    n_pred: np.ndarray  # (n_texts,) predictions per text

    def ratio(self, picks: np.ndarray | None = None) -> float | np.ndarray:
        """Pooled perplexity ratio; with ``picks`` (n_boot, n) one per resample."""
        if picks is None:
            return pooled_perplexity_ratio(self.nll, self.nll_dense, self.n_pred)
        diff = (self.nll - self.nll_dense)[picks].sum(-1)
        return np.exp(diff / np.maximum(self.n_pred[picks].sum(-1), 1))

    def to_json(self) -> dict:
        return {"nll": self.nll.tolist(), "nll_dense": self.nll_dense.tolist(), "n_pred": self.n_pred.tolist()}

    @classmethod
    def from_json(cls, data: dict) -> TextSums:
        return cls(*(np.asarray(data[k], dtype=float) for k in ("nll", "nll_dense", "n_pred")))


def arm_spread(runs: list[TextSums]) -> dict:
    """An arm's pooled ratio per seed, and their mean, standard deviation (over seeds) and range."""
    ratios = [run.ratio() for run in runs]
    return {"per_seed": ratios, "mean": float(np.mean(ratios)),
            "sd": float(np.std(ratios, ddof=1)) if len(ratios) > 1 else float("nan"),
            "min": float(min(ratios)), "max": float(max(ratios)), "seeds": len(ratios)}


def hierarchical_difference(arm_a: list[TextSums], arm_b: list[TextSums], *, n_boot: int = BOOTSTRAP,
                            seed: int = 0) -> dict:
    """Mean over seeds of arm a's ratio minus arm b's, with a 95 % interval from a two-level bootstrap: per
    replicate each arm's seeds are drawn with replacement, then each drawn seed's texts with replacement."""
    rng = np.random.default_rng(seed)

    def replicate_means(arm: list[TextSums]) -> np.ndarray:
        drawn = rng.integers(0, len(arm), size=(n_boot, len(arm)))  # (n_boot, seeds)
        per_seed = np.empty((n_boot, len(arm)))
        for slot in range(len(arm)):
            for index, run in enumerate(arm):
                rows = np.flatnonzero(drawn[:, slot] == index)
                if rows.size:
                    picks = rng.integers(0, len(run.nll), size=(rows.size, len(run.nll)))
                    per_seed[rows, slot] = run.ratio(picks)
        return per_seed.mean(1)

    point = float(np.mean([r.ratio() for r in arm_a]) - np.mean([r.ratio() for r in arm_b]))
    replicates = replicate_means(arm_a) - replicate_means(arm_b)
    low, high = percentile_interval(replicates)
    return {"difference": point, "low": low, "high": high, "n_boot": n_boot,
            "verdict": "not separable" if low <= 0 <= high else ("lower" if high < 0 else "higher")}


# -- measuring the runs ---------------------------------------------------------------------------------------
def arm_runs(arm: str) -> list[str]:
    """The bundled runs of ``arm`` (a SEED_ARMS base name) over the seeds that exist here, seed 0 first."""
    from ..core.checkpoint import bundled_names, seed_names
    from ..train.recipes import seed_runs

    have = set(bundled_names()) | set(seed_names())
    return [name for name in (n if n == arm else f"seeds/{n}" for n in seed_runs(arm)) if name in have]


def measure(models: dict, texts_by_domain: dict[str, list[str]], target_skip: float, calibration,
            *, max_tokens: int = 192, progress: bool = False) -> dict:
    """Every model (name -> HeroModel, one backbone) at the tau meeting ``target_skip`` on ``calibration`` blocks,
    on the texts; returns {name: {"tau", "calibration_skip", domain: {"param_skip", "sums"}}}."""
    from ..core.accounting import token_compute
    from .calibration import calibrate_tau
    from .engine import run_texts
    from .methods import HeroMethod

    first = next(iter(models.values()))
    methods, out = [], {}
    for name, hero in models.items():
        tau, realised = calibrate_tau(hero, calibration, target_skip, iters=10)
        methods.append(HeroMethod(hero, hero.config.variant, tau=tau, name=name))
        out[name] = {"tau": tau, "calibration_skip": realised}
    for domain, texts in texts_by_domain.items():
        sums = {m.name: ([], [], [], []) for m in methods}
        for text in run_texts(first, methods, texts, HeroMethod(first, "dense"), max_tokens=max_tokens,
                              batch_size=2, desc=f"seeds {domain}", progress=progress):
            for m in methods:
                run, (nll, dense, n_pred, skip) = text.runs[m.name], sums[m.name]
                nll.append(run.nll_sum)
                dense.append(run.dense_nll_sum)
                n_pred.append(run.n_pred)
                skip.append(float(token_compute(run.executed, m.profile)["param_skip"].mean()))
        for name, (nll, dense, n_pred, skip) in sums.items():
            out[name][domain] = {"param_skip": float(np.mean(skip)),
                                 "sums": TextSums(*(np.asarray(x, dtype=float) for x in (nll, dense, n_pred)))}
    return out


def summarise(arms: dict[str, list[str]], measured: dict, domains=DOMAINS, *, n_boot: int = BOOTSTRAP) -> dict:
    """Per arm and domain the spread over seeds; per domain hero minus each other arm (hierarchical interval)."""
    out = {"arms": {}, "differences": {}}
    for arm, names in arms.items():
        out["arms"][arm] = {"runs": names, "taus": [measured[n]["tau"] for n in names],
                            **{d: {**arm_spread([measured[n][d]["sums"] for n in names]),
                                   "param_skip": [measured[n][d]["param_skip"] for n in names]} for d in domains}}
    hero, *others = arms
    for other in others:
        out["differences"][f"{hero} - {other}"] = {
            d: hierarchical_difference([measured[n][d]["sums"] for n in arms[hero]],
                                       [measured[n][d]["sums"] for n in arms[other]], n_boot=n_boot)
            for d in domains}
    return out


# -- the page ---------------------------------------------------------------------------------------------------
def render_markdown(report: dict) -> str:
    """docs/seeds.md: every seed's number, each arm's mean and spread, the differences with their intervals."""
    s = report["summary"]
    lines = ["# Does history help? Across training seeds",
             "",
             f"Generated by `python -m hero_core.eval.seeds` ({report['date']}) from docs/seeds.json. First training "
             f"stage (750 steps, {report['tokens_seen'] / 1e6:.2f} M tokens) of each arm; every run at one matched "
             f"param skip of **{report['target_skip']:.1%}** (its tau bisected on train-split calibration blocks), "
             f"scored on {report['limit']} held-out texts per domain (at most {report['max_tokens']} tokens each). "
             "Lower perplexity ratio (routed / dense) is better.",
             "",
             "## Every seed", "",
             "| arm | run | seed | tau | " + " | ".join(f"{d} ratio (skip)" for d in report["domains"]) + " |",
             "|---|---|---|---|" + "---|" * len(report["domains"])]
    for arm, row in s["arms"].items():
        for i, (run, tau) in enumerate(zip(row["runs"], row["taus"], strict=True)):
            cells = [f"{row[d]['per_seed'][i]:.3f} ({row[d]['param_skip'][i]:.1%})" for d in report["domains"]]
            lines.append(f"| {arm} | {run} | {report['seeds'][run]} | {tau:.3f} | " + " | ".join(cells) + " |")
    lines += ["", "## Each arm over its seeds", "",
              "| arm | seeds | " + " | ".join(f"{d}: mean ± sd [min, max]" for d in report["domains"]) + " |",
              "|---|---|" + "---|" * len(report["domains"])]
    for arm, row in s["arms"].items():
        cells = [f"{row[d]['mean']:.3f} ± {row[d]['sd']:.3f} [{row[d]['min']:.3f}, {row[d]['max']:.3f}]"
                 for d in report["domains"]]
        lines.append(f"| {arm} | {len(row['runs'])} | " + " | ".join(cells) + " |")
    lines += ["", "## Differences between arms (ratio points; negative = the first arm is better)", "",
              "Interval: 95 %, hierarchical bootstrap (seeds, then texts within each seed).", "",
              "| comparison | " + " | ".join(report["domains"]) + " |", "|---|" + "---|" * len(report["domains"])]
    for name, row in s["differences"].items():
        cells = [f"{row[d]['difference']:+.3f} [{row[d]['low']:+.3f}, {row[d]['high']:+.3f}] {row[d]['verdict']}"
                 for d in report["domains"]]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    lines += ["", answer_sentence(report), ""]
    return "\n".join(lines)


def answer_sentence(report: dict) -> str:
    """The one-sentence answer to "does history help on this backbone?" that the README and the pages quote."""
    s, domains = report["summary"], report["domains"]
    row = s["differences"].get("hero - local")
    if row is None:
        return "No local-twin seeds were measured: the question is not answered here."
    seeds = f"{len(s['arms']['hero']['runs'])} vs {len(s['arms']['local']['runs'])} seeds"
    parts = [f"{d} {row[d]['difference']:+.3f} [{row[d]['low']:+.3f}, {row[d]['high']:+.3f}]" for d in domains]
    better = [d for d in domains if row[d]["verdict"] == "lower"]
    worse = [d for d in domains if row[d]["verdict"] == "higher"]
    if not better and not worse:
        verdict = "history does not separate from the local router on any domain"
    else:
        verdict = "; ".join(x for x in (
            f"HeRo is better on {', '.join(better)}" if better else "",
            f"the local router is better on {', '.join(worse)}" if worse else "") if x)
    return (f"**Does history help on this backbone?** Over {seeds} at {report['target_skip']:.1%} param skip, "
            f"{verdict} (HeRo − local perplexity ratio, 95 % interval over seeds and texts: {'; '.join(parts)}).")


def run(limit: int, max_tokens: int, out: Path, progress: bool = True) -> dict:
    """Load every seed of every arm on one backbone, measure them and write docs/seeds.json and docs/seeds.md."""
    import datetime

    from ..core.backbones import load_backbone
    from ..core.data import domain_texts
    from ..core.model import load_checkpoints
    from ..train.recipes import SEED_ARMS
    from .calibration import calibration_blocks, realised_skip

    arm_names = dict(zip(("hero", "local", "no_memread"), SEED_ARMS, strict=True))
    arms = {arm: arm_runs(base) for arm, base in arm_names.items()}
    arms = {arm: names for arm, names in arms.items() if names}
    models = load_checkpoints([n for names in arms.values() for n in names], load_backbone(device="cpu"))
    first = next(iter(models.values()))
    calibration = calibration_blocks(first)
    target = float(np.mean([realised_skip(models[n], calibration, models[n].config.variant, models[n].config.tau)
                            for n in arms["hero"]]))
    texts = {d: domain_texts(d, "eval", limit, hero=first) for d in DOMAINS}
    measured = measure(models, texts, target, calibration, max_tokens=max_tokens, progress=progress)
    report = {"date": datetime.date.today().isoformat(), "target_skip": target, "limit": limit,
              "max_tokens": max_tokens, "domains": list(DOMAINS), "arms": arms,
              "seeds": {n: models[n].training_info.get("train_config", {}).get("seed", 0) for n in models},
              "tokens_seen": int(first.training_info.get("tokens_seen", 0)),
              "health": {n: models[n].training_info.get("health") for n in models},
              "runs": {n: {"tau": m["tau"], "calibration_skip": m["calibration_skip"],
                           **{d: {"param_skip": m[d]["param_skip"], **m[d]["sums"].to_json()} for d in DOMAINS}}
                       for n, m in measured.items()},
              "summary": summarise(arms, measured)}
    out.write_text(json.dumps(report, indent=1, sort_keys=True) + "\n")
    out.with_suffix(".md").write_text(render_markdown(report))
    return report


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
                                     allow_abbrev=False)
    parser.add_argument("--limit", type=int, default=40, help="held-out texts per domain")
    parser.add_argument("--max-tokens", type=int, default=192, help="tokens per text at most")
    parser.add_argument("--out", type=Path, default=Path("docs/seeds.json"), help="JSON written here, .md beside it")
    args = parser.parse_args()
    report = run(args.limit, args.max_tokens, args.out)
    print(answer_sentence(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
