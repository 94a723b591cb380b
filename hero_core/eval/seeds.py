"""Does history help, over training seeds: every seed of every arm of the memory question on held-out text at one
matched param skip, each arm's mean and spread over its seeds (every seed listed), and the difference between two
arms with a hierarchical bootstrap interval.

The arms (hero_core.core.checkpoint_info.SEED_ARMS) are the first training stage of HeRo with the default's
memory levers, its local twin (no history) and its twin without the memory read; seed 0 is the bundled run, seeds 1
and 2 live under checkpoints/seeds/. Matching: every run at the tau that gives :data:`TARGET_SKIP` (10 % param skip,
the budget all three trained to) on calibration blocks from the train split; the held-out texts are each domain's
eval split, never trained on.

The interval of a difference resamples seeds first (with replacement, within each arm) and then examples within each
resampled seed, so neither source of noise is hidden; a difference whose interval holds 0 is "not separable".
``python -m hero_core.eval.seeds`` (``make results-seeds``) stores each run's measurements in docs/seeds/ and writes
docs/seeds.json and docs/seeds.md.
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
# The compute every run is matched to: the budget every arm trained to (10 % param skip), met on the calibration
# blocks by each run's own tau. Declared before any seed run was measured, so no run's result chose it.
TARGET_SKIP = 0.10
MEASURES = ("ppl", "retain")


@dataclass
class TextSums:
    """One run on one domain's texts: per-text sums, the unit the bootstrap resamples."""

    nll: np.ndarray  # (n_texts,) routed NLL summed over the text's predictions
    nll_dense: np.ndarray  # (n_texts,) the dense model's on the same tokens
    n_pred: np.ndarray  # (n_texts,) predictions per text

    def point(self) -> float:
        """Pooled perplexity ratio routed / dense."""
        return pooled_perplexity_ratio(self.nll, self.nll_dense, self.n_pred)

    def resample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        """The pooled ratio on ``n`` resamples of the texts."""
        picks = rng.integers(0, len(self.nll), size=(n, len(self.nll)))
        diff = (self.nll - self.nll_dense)[picks].sum(-1)
        return np.exp(diff / np.maximum(self.n_pred[picks].sum(-1), 1))

    def to_json(self) -> dict:
        return {"nll": self.nll.tolist(), "nll_dense": self.nll_dense.tolist(), "n_pred": self.n_pred.tolist()}

    @classmethod
    def from_json(cls, data: dict) -> TextSums:
        return cls(*(np.asarray(data[k], dtype=float) for k in ("nll", "nll_dense", "n_pred")))


@dataclass
class TaskScores:
    """One run on the BIG-bench main suite: per-example grades beside dense's on the same examples (Retain, %)."""

    routed: dict[str, np.ndarray]  # task -> (n_examples,) 1/0
    dense: dict[str, np.ndarray]

    def point(self) -> float:
        from .scoring import retain

        return retain({t: float(v.mean()) for t, v in self.routed.items()},
                      {t: float(v.mean()) for t, v in self.dense.items()})

    def resample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        """Retain on ``n`` resamples of each task's examples (routed and dense on the same examples)."""
        from .retain import retain_replicates

        picks = {t: rng.integers(0, len(v), size=(n, len(v))) for t, v in self.dense.items()}
        return retain_replicates(self.routed, self.dense, picks)


def arm_spread(runs: list) -> dict:
    """An arm's measure per seed, and their mean, standard deviation (over seeds) and range."""
    values = [run.point() for run in runs]
    return {"per_seed": values, "mean": float(np.mean(values)),
            "sd": float(np.std(values, ddof=1)) if len(values) > 1 else float("nan"),
            "min": float(min(values)), "max": float(max(values)), "seeds": len(values)}


def hierarchical_difference(arm_a: list, arm_b: list, *, n_boot: int = BOOTSTRAP, seed: int = 0) -> dict:
    """Mean over seeds of arm a's measure minus arm b's, with a 95 % interval from a two-level bootstrap: per
    replicate each arm's seeds are drawn with replacement, then each drawn seed's examples with replacement."""
    rng = np.random.default_rng(seed)

    def replicate_means(arm: list) -> np.ndarray:
        drawn = rng.integers(0, len(arm), size=(n_boot, len(arm)))  # (n_boot, seeds)
        per_seed = np.empty((n_boot, len(arm)))
        for slot in range(len(arm)):
            for index, run in enumerate(arm):
                rows = np.flatnonzero(drawn[:, slot] == index)
                if rows.size:
                    per_seed[rows, slot] = run.resample(rng, rows.size)
        return np.nanmean(per_seed, axis=1)

    point = float(np.mean([r.point() for r in arm_a]) - np.mean([r.point() for r in arm_b]))
    replicates = replicate_means(arm_a) - replicate_means(arm_b)
    low, high = percentile_interval(replicates[~np.isnan(replicates)])
    return {"difference": point, "low": low, "high": high, "n_boot": n_boot,
            "verdict": "not separable" if low <= 0 <= high else ("lower" if high < 0 else "higher")}


# -- measuring the runs ---------------------------------------------------------------------------------------
def arm_runs(arm: str) -> list[str]:
    """The bundled runs of ``arm`` (a SEED_ARMS base name) over the seeds that exist here, seed 0 first."""
    from ..core.checkpoint import bundled_names, seed_names
    from ..core.checkpoint_info import seed_runs

    have = set(bundled_names()) | set(seed_names())
    return [name for name in (n if n == arm else f"seeds/{n}" for n in seed_runs(arm)) if name in have]


def measure_ppl(hero, texts_by_domain: dict[str, list[str]], calibration, *, max_tokens: int,
                progress: bool = False) -> dict:
    """One run at the tau meeting :data:`TARGET_SKIP` on ``calibration``: per held-out domain its param skip and
    per-text NLL sums against dense."""
    from ..core.accounting import token_compute
    from .calibration import calibrate_tau
    from .engine import run_texts
    from .methods import HeroMethod

    tau, realised = calibrate_tau(hero, calibration, TARGET_SKIP, iters=10)
    method = HeroMethod(hero, hero.config.variant, tau=tau, name=hero.checkpoint_name)
    out = {"tau": tau, "calibration_skip": realised, "domains": {}}
    for domain, texts in texts_by_domain.items():
        rows = []
        for text in run_texts(hero, [method], texts, HeroMethod(hero, "dense"), max_tokens=max_tokens,
                              batch_size=2, desc=f"{hero.checkpoint_name} {domain}", progress=progress):
            run = text.runs[method.name]
            rows.append((run.nll_sum, run.dense_nll_sum, run.n_pred,
                         float(token_compute(run.executed, method.profile)["param_skip"].mean())))
        nll, dense, n_pred, skip = (np.asarray(col, dtype=float) for col in zip(*rows, strict=True))
        out["domains"][domain] = {"param_skip": float(skip.mean()), **TextSums(nll, dense, n_pred).to_json()}
    return out


def measure_retain(hero, tau: float, tasks: list[str], limit: int, progress: bool = False) -> dict:
    """Per-example grades of the run (at ``tau``; None: dense) on the BIG-bench ``tasks``, ``limit`` examples each."""
    from .methods import HeroMethod
    from .suites import evaluate_bigbench

    method = HeroMethod(hero, "dense") if tau is None else HeroMethod(hero, hero.config.variant, tau=tau,
                                                                      name=hero.checkpoint_name)
    result = evaluate_bigbench(method, tasks, limit, progress=progress)
    return {"param_skip": float(result["compute"].get("param_skip", 0.0)),
            "grades": {t: r["grades"] for t, r in result["tasks"].items()}}


def run_measures(run: dict, retain: dict | None, dense: dict | None, domains=DOMAINS) -> dict:
    """A measured run's measures as bootstrap units: {"ppl": {domain: TextSums}, "retain": TaskScores} (no
    "retain" without its grades and dense's)."""
    units = {"ppl": {d: TextSums.from_json(run["domains"][d]) for d in domains}}
    if retain is not None and dense is not None:
        units["retain"] = TaskScores({t: np.asarray(v, dtype=float) for t, v in retain["grades"].items()},
                                     {t: np.asarray(v, dtype=float) for t, v in dense["grades"].items()})
    return units


def summarise(arms: dict[str, list[str]], units: dict[str, dict], domains=DOMAINS, *, n_boot: int = BOOTSTRAP) -> dict:
    """Per arm the spread over seeds of each measure (perplexity ratio per domain, Retain); per measure hero minus
    each other arm with its hierarchical interval. ``units``: run name -> :func:`run_measures`."""
    def pick(name: str, measure: str):
        kind, _, domain = measure.partition(":")
        return units[name][kind][domain] if domain else units[name][kind]

    measures = [f"ppl:{d}" for d in domains] + (["retain"] if all("retain" in u for u in units.values()) else [])
    out = {"measures": measures, "arms": {}, "differences": {}}
    for arm, names in arms.items():
        out["arms"][arm] = {"runs": names, **{m: arm_spread([pick(n, m) for n in names]) for m in measures}}
    hero, *others = arms
    for other in others:
        out["differences"][f"{hero} - {other}"] = {
            m: hierarchical_difference([pick(n, m) for n in arms[hero]], [pick(n, m) for n in arms[other]],
                                       n_boot=n_boot) for m in measures}
    return out


# -- the page ---------------------------------------------------------------------------------------------------
MEASURE_NAMES = {"ppl:chat": "chat ppl ratio", "ppl:code": "code ppl ratio", "ppl:reasoning": "reasoning ppl ratio",
                 "retain": "Retain %"}


def _value(measure: str, x: float) -> str:
    if x != x:  # NaN: a spread over one seed
        return "–"
    return f"{x:.1f}" if measure == "retain" else f"{x:.3f}"


def _signed(measure: str, x: float) -> str:
    return f"{x:+.1f}" if measure == "retain" else f"{x:+.3f}"


def render_markdown(report: dict) -> str:
    """docs/seeds.md: every seed's numbers, each arm's mean and spread, the differences with their intervals."""
    s, measures = report["summary"], report["summary"]["measures"]
    heads = [MEASURE_NAMES.get(m, m) for m in measures]
    lines = ["# Does history help? Across training seeds", "",
             f"Generated by `python -m hero_core.eval.seeds` ({report['date']}) from the per-run measurements in "
             "docs/seeds/. The first training stage (750 steps) of each arm, every run at one matched compute: the "
             f"tau that gives **{report['target_skip']:.0%} param skip** on train-split calibration blocks. "
             f"Perplexity ratio (routed / dense, lower is better) on {report['limit']} held-out texts per domain "
             f"(at most {report['max_tokens']} tokens each). " + (
                 f"Retain (mean over tasks of routed / dense accuracy, %) on the BIG-bench main suite at "
                 f"{report['retain_limit']} examples per task." if "retain" in measures else
                 "Retain is not in this report: "
                 + report.get("retain_missing", "no run has its BIG-bench grades.")),
             "",
             "A chat ratio below 1 is not a gain over dense: the held-out chat texts are the dense model's own "
             "replies, and routers trained on the renormalised top-k target put more probability on dense's own "
             "tokens than dense does (docs/results.md). Compare arms with each other, not with 1.", "",
             "## Every seed", "",
             "| arm | run | seed | tau | param skip (held-out text) | " + " | ".join(heads) + " |",
             "|---|---|---|---|---|" + "---|" * len(measures)]
    for arm, row in s["arms"].items():
        for i, run in enumerate(row["runs"]):
            info = report["runs"][run]
            cells = [_value(m, row[m]["per_seed"][i]) for m in measures]
            lines.append(f"| {arm} | {run} | {info['seed']} | {info['tau']:.3f} | {info['param_skip']:.1%} | "
                         + " | ".join(cells) + " |")
    lines += ["", "## Each arm over its seeds (mean ± sd [min, max])", "",
              "| arm | seeds | " + " | ".join(heads) + " |", "|---|---|" + "---|" * len(measures)]
    for arm, row in s["arms"].items():
        cells = [f"{_value(m, row[m]['mean'])} ± {_value(m, row[m]['sd'])} [{_value(m, row[m]['min'])}, "
                 f"{_value(m, row[m]['max'])}]" for m in measures]
        lines.append(f"| {arm} | {len(row['runs'])} | " + " | ".join(cells) + " |")
    lines += ["", "## Differences between arms", "",
              "Mean over seeds of the first arm minus the second, with a 95 % interval from a hierarchical bootstrap "
              "(seeds drawn with replacement within each arm, then examples within each drawn seed). Perplexity: "
              "negative = the first arm is better; Retain: positive = the first arm is better.", "",
              "| comparison | " + " | ".join(heads) + " |", "|---|" + "---|" * len(measures)]
    for name, row in s["differences"].items():
        cells = [f"{_signed(m, row[m]['difference'])} [{_signed(m, row[m]['low'])}, {_signed(m, row[m]['high'])}] "
                 f"{row[m]['verdict']}" for m in measures]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    single = [arm for arm, row in s["arms"].items() if len(row["runs"]) < 2]
    if single:
        lines += ["", f"Measured with one seed so far: {', '.join(single)}. Such an arm brings no seed-to-seed spread "
                      "into an interval, so its rows are intervals over texts only."]
    lines += ["", answer_sentence(report), ""]
    health = [f"- {run}: {h}" for run, h in report.get("health", {}).items()]
    if health:
        lines += ["## Training health of each run", "", *health, ""]
    return "\n".join(lines)


def answer_sentence(report: dict) -> str:
    """The answer to "does history help on this backbone?" that the README and the pages quote."""
    s = report["summary"]
    row = s["differences"].get("hero - local")
    if row is None:
        return "No local-twin seeds are measured here: the question is not answered."
    n_hero, n_local = len(s["arms"]["hero"]["runs"]), len(s["arms"]["local"]["runs"])
    seeds = f"training seeds (HeRo {n_hero}, local {n_local})"
    over = ("seeds and texts" if min(n_hero, n_local) > 1 else
            "texts only where an arm has one seed, so not over its training runs")
    ppl = [m for m in s["measures"] if m.startswith("ppl:")]
    better = [m.split(":")[1] for m in ppl if row[m]["verdict"] == "lower"]
    worse = [m.split(":")[1] for m in ppl if row[m]["verdict"] == "higher"]
    if not better and not worse:
        on_ppl = "held-out perplexity does not separate them on any domain"
    else:
        on_ppl = "; ".join(x for x in (f"HeRo has the lower perplexity on {', '.join(better)}" if better else "",
                                       f"the local router on {', '.join(worse)}" if worse else "") if x)
    retain = row.get("retain")
    on_retain = ""
    if retain is not None:
        verdict = {"not separable": "does not separate them", "higher": "puts HeRo ahead",
                   "lower": "puts the local router ahead"}[retain["verdict"]]
        on_retain = (f"; Retain {verdict} ({_signed('retain', retain['difference'])} points "
                     f"[{_signed('retain', retain['low'])}, {_signed('retain', retain['high'])}])")
    parts = _per_domain(row, ppl)
    return (f"**Does history help on this backbone?** Over {seeds} at {report['target_skip']:.0%} param skip, "
            f"{on_ppl} (HeRo − local perplexity ratio, 95 % interval over {over}: {parts}){on_retain}."
            + _memory_read_sentence(s, ppl))


def _per_domain(row: dict, ppl: list[str]) -> str:
    """One arm difference per domain with its interval: ``chat -0.018 [-0.054, +0.023], code …``."""
    return ", ".join(f"{m.split(':')[1]} {_signed(m, row[m]['difference'])} [{_signed(m, row[m]['low'])}, "
                     f"{_signed(m, row[m]['high'])}]" for m in ppl)


def _memory_read_sentence(summary: dict, ppl: list[str]) -> str:
    """The memory read's arm in one more sentence, where it is measured: HeRo against its twin without the read."""
    row = summary["differences"].get("hero - no_memread")
    if row is None:
        return ""
    n = len(summary["arms"]["no_memread"]["runs"])
    apart = [m.split(":")[1] for m in ppl if row[m]["verdict"] != "not separable"]
    said = (f"separates them on {', '.join(apart)}" if apart else "does not separate them on any domain either")
    parts = _per_domain(row, ppl)
    return (f" Against its twin without the memory read ({n} seed{'s' if n > 1 else ''}), perplexity {said} "
            f"(HeRo − no-read: {parts}).")


# -- the command ----------------------------------------------------------------------------------------------
ROOT = Path(__file__).resolve().parents[2]
STORE = ROOT / "docs" / "seeds"  # one JSON per measured run (and dense's grades), committed: the page's source
SHIPPED = ROOT / "hero_core" / "checkpoints" / "seeds.json"  # the answer the app quotes (docs/ is not shipped)


def shipped_summary(report: dict) -> dict:
    """What the app quotes: the answer, each arm's seeds and spread, the arm differences with their intervals."""
    s = report["summary"]
    return {"format_version": 1, "date": report["date"], "target_skip": report["target_skip"],
            "answer": answer_sentence(report), "measures": s["measures"],
            "arms": {arm: {"runs": row["runs"], **{m: {k: row[m][k] for k in ("mean", "sd", "per_seed")}
                                                   for m in s["measures"]}} for arm, row in s["arms"].items()},
            "differences": s["differences"], "source": "docs/seeds.json (python -m hero_core.eval.seeds)"}


def load_shipped(path: Path = SHIPPED) -> dict | None:
    """The shipped across-seed summary, or None when none was written (or it cannot be read)."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _stored(path: Path, settings: dict) -> dict | None:
    if not path.is_file():
        return None
    data = json.loads(path.read_text(encoding="utf-8"))
    return data if data.get("settings") == settings else None


def _file(store: Path, name: str, measure: str) -> Path:
    return store / f"{name.replace('/', '__')}.{measure}.json"


def ppl_settings(args) -> dict:
    return {"limit": args.limit, "max_tokens": args.max_tokens, "target_skip": TARGET_SKIP}


def runs_named(only: list[str], known: list[str]) -> list[str]:
    """``only`` as checkpoint names: a seed run named as the recipe table names it (``no_memread-10-r2-s1-seed1``)
    is the one under ``seeds/``; any other name is kept as given (a directory, or an error when loaded)."""
    return [f"seeds/{n}" if n not in known and f"seeds/{n}" in known else n for n in only]


def measure_missing(ppl: dict, retain_limit: int, store: Path = STORE, progress: bool = True,
                    only: list[str] | None = None) -> None:
    """Measure every bundled run of the three arms (or ``only`` these) that ``store`` lacks: the held-out
    perplexity under ``ppl`` settings, and Retain at ``retain_limit`` examples per task (0: not measured). One run
    at a time, each file written as soon as it is done, so an interrupted command keeps what it measured."""
    from ..core.backbones import load_backbone
    from ..core.checkpoint_info import SEED_ARMS
    from ..core.data import domain_texts
    from ..core.model import load_checkpoint
    from .calibration import calibration_blocks
    from .suites import load_eval_tasks

    known = [n for arm in SEED_ARMS for n in arm_runs(arm)]
    names = runs_named(only, known) if only else known
    retain = {"retain_limit": retain_limit, "target_skip": TARGET_SKIP}
    store.mkdir(parents=True, exist_ok=True)
    backbone, tasks = None, load_eval_tasks()["main"]
    for name in names:
        ppl_path, retain_path = _file(store, name, "ppl"), _file(store, name, f"retain-{retain_limit}")
        if _stored(ppl_path, ppl) and (not retain_limit or _stored(retain_path, retain)):
            continue
        backbone = backbone or load_backbone(device="cpu")
        hero = load_checkpoint(name, backbone)
        calibration = calibration_blocks(hero)
        run = _stored(ppl_path, ppl)
        if run is None:
            texts = {d: domain_texts(d, "eval", ppl["limit"], hero=hero) for d in DOMAINS}
            run = measure_ppl(hero, texts, calibration, max_tokens=ppl["max_tokens"], progress=progress)
            info = hero.training_info
            run |= {"settings": ppl, "seed": info.get("train_config", {}).get("seed", 0),
                    "variant": hero.config.variant, "health": info.get("health"),
                    "tokens_seen": int(info.get("tokens_seen", 0))}
            ppl_path.write_text(json.dumps(run) + "\n")
            print(f"measured {name}: tau {run['tau']:.3f}", flush=True)
        if retain_limit:
            dense_path = _file(store, "dense", f"retain-{retain_limit}")
            if _stored(dense_path, retain) is None:
                dense_path.write_text(json.dumps({"settings": retain,
                                                  **measure_retain(hero, None, tasks, retain_limit, progress)}))
            retain_path.write_text(json.dumps({"settings": retain, **measure_retain(
                hero, run["tau"], tasks, retain_limit, progress)}) + "\n")


def report_from_store(ppl: dict, retain_limit: int, store: Path = STORE) -> dict | None:
    """The across-seed report from the stored measurements; None until HeRo and another arm are measured. Retain
    enters only where every run and dense have it at ``retain_limit``."""
    import datetime

    from ..core.checkpoint import health_line
    from ..core.checkpoint_info import SEED_ARMS

    retain = {"retain_limit": retain_limit, "target_skip": TARGET_SKIP}
    dense = _stored(_file(store, "dense", f"retain-{retain_limit}"), retain) if retain_limit else None
    runs, arms, units = {}, {}, {}
    for arm, base in zip(("hero", "local", "no_memread"), SEED_ARMS, strict=True):
        names = [n for n in arm_runs(base) if _stored(_file(store, n, "ppl"), ppl)]
        for n in names:
            runs[n] = _stored(_file(store, n, "ppl"), ppl)
            scores = _stored(_file(store, n, f"retain-{retain_limit}"), retain) if retain_limit else None
            units[n] = run_measures(runs[n], scores, dense)
        if names:
            arms[arm] = names
    if "hero" not in arms or len(arms) < 2:
        return None
    return {"date": datetime.date.today().isoformat(), "target_skip": TARGET_SKIP, **ppl,
            "retain_limit": retain_limit, "domains": list(DOMAINS), "arms": arms,
            "runs": {n: {"seed": r["seed"], "tau": r["tau"], "calibration_skip": r["calibration_skip"],
                         "param_skip": float(np.mean([r["domains"][d]["param_skip"] for d in DOMAINS]))}
                     for n, r in runs.items()},
            "health": {n: health_line(r.get("health")) for n, r in runs.items()},
            "retain_missing": ("no BIG-bench grades are stored for every run (the task data must be on the machine "
                               "that measures them: `python -m hero_core eval --fetch-bigbench`)."),
            "summary": summarise(arms, units)}


def retain_available(retain_limit: int) -> int:
    """``retain_limit``, or 0 (perplexity only, said on the console) when the BIG-bench tasks are not on this
    machine: the archive comes from PyPI once (`python -m hero_core eval --fetch-bigbench`), and a measurement
    never downloads."""
    if not retain_limit:
        return 0
    from .bigbench import BigBenchError, ensure_tasks
    from .suites import load_eval_tasks

    try:
        ensure_tasks(load_eval_tasks()["main"], download=False)
    except (BigBenchError, OSError) as err:
        print(f"Retain left out: the BIG-bench tasks are not here ({err}); measuring perplexity only", flush=True)
        return 0
    return retain_limit


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
                                     allow_abbrev=False)
    parser.add_argument("--limit", type=int, default=40, help="held-out texts per domain")
    parser.add_argument("--max-tokens", type=int, default=192, help="tokens per held-out text at most")
    parser.add_argument("--retain-limit", type=int, default=100,
                        help="examples per BIG-bench task for Retain (0: perplexity only; needs the BIG-bench data, "
                             "python -m hero_core eval --fetch-bigbench)")
    parser.add_argument("--only", nargs="*", default=None, help="measure only these runs (e.g. as they finish)")
    parser.add_argument("--report-only", action="store_true", help="render from the stored measurements alone")
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "seeds.json",
                        help="the report's JSON (docs/seeds.md is written beside it)")
    args = parser.parse_args()
    ppl = ppl_settings(args)
    if not args.report_only:
        measure_missing(ppl, retain_available(args.retain_limit), only=args.only)
    report = report_from_store(ppl, args.retain_limit)
    if report is None:
        print("not enough measured runs for a report yet (HeRo and at least one other arm)")
        return 0
    args.out.write_text(json.dumps(report, indent=1, sort_keys=True) + "\n")
    args.out.with_suffix(".md").write_text(render_markdown(report))
    SHIPPED.write_text(json.dumps(shipped_summary(report), indent=1, sort_keys=True) + "\n")
    print(answer_sentence(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
