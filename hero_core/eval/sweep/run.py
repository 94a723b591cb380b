"""Data-set sweeps: run one or more checkpoints over every prompt of a file and keep what a study needs.

``sweep(hero, prompts, checkpoints=["hero-10", "local-10"])`` routes each prompt under each run (with the
dense model on the same tokens for quality) and, where ``match_compute`` is on, also runs every run after the
first at the param skip the first one realised on that prompt (``param_skip=``), so quality is compared at
equal compute. Memory stays bounded: per item it keeps one summary row per run, one row per token and one
row per routed block, never the traces themselves.

The same loop serves the app (one cached call per item, :func:`run_item`), notebooks (:func:`sweep`) and
``python -m hero_core sweep data.jsonl --checkpoint hero-10 --checkpoint local-10 --out results/``, which runs
unchanged under ``accelerate launch``: rank r takes items r, r + W, …, writes each finished item to its own shard
as it goes (:mod:`hero_core.eval.sweep.shards`: a rerun resumes, a killed run keeps what it finished), and rank 0
merges the shards from disk into the tables.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import sys
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from hero_core.analysis.token_categories import CATEGORIES, CATEGORY_LABELS, token_categories
from hero_core.analysis.token_table import token_summary
from hero_core.choices import check_distinct
from hero_core.eval.frontier.position_skip import POSITION_EDGES, bin_table, param_skip_excluding_first
from hero_core.eval.sweep.prompt_sets import BUNDLED_SETS, Item, bundled_items, load_prompts
from hero_core.eval.sweep.shards import SHARD_DIR, ShardWriter, finished_items, merged_parts
from hero_core.measures.metrics import perplexity_ratio, ratio_interval
from hero_core.method.trace import RoutingTrace, quality_fields

TABLES = ("items", "tokens", "layers")


# -- runs -----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class SweepRun:
    """One routed configuration: a model (router), the variant it runs as and its tau (None: the checkpoint's)."""

    label: str
    model: object  # HeroModel (not imported: this module must stay importable for table work without torch use)
    variant: str
    tau: float | None = None


def with_checkpoint(hero, name: str):
    """``hero``'s backbone with another checkpoint's router (the backbone is not loaded twice)."""
    from hero_core.method.model import load_checkpoint

    if name == hero.checkpoint_name:
        return hero
    return load_checkpoint(name, hero.backbone)


def make_runs(hero, checkpoints: Sequence | None = None, variants: Sequence[str] | None = None) -> list[SweepRun]:
    """Runs for each checkpoint (a name, a directory or a HeroModel; default: ``hero`` itself) under each of
    ``variants`` (default: the variant each checkpoint was trained as)."""
    models = [hero] if not checkpoints else [c if hasattr(c, "trace") else with_checkpoint(hero, str(c))
                                             for c in checkpoints]
    runs = []
    for model in models:
        for variant in variants or [model.config.variant]:
            if len(models) == 1 and variants:
                label = variant
            else:
                label = model.checkpoint_name + (f" · {variant}" if variants else "")
            runs.append(SweepRun(label, model, variant))
    check_distinct("run labels", [r.label for r in runs], "give each checkpoint once")
    return runs


# -- per-item rows ---------------------------------------------------------------------------------
def _item_row(trace: RoutingTrace, run: str, index: int, item: Item, matched_to: str | None) -> dict:
    s, q = trace.summary(), trace.quality or {}
    nll = np.asarray(q.get("nll", [np.nan]))[:-1]
    dense = np.asarray(q.get("dense_nll", [np.nan]))[:-1]
    n_pred = len(nll)
    ratio = perplexity_ratio(nll, dense) if n_pred else 1.0
    return {"run": run, "item": index, "id": item.id, "domain": item.domain, "checkpoint": trace.checkpoint,
            "variant": trace.variant, "matched_to": matched_to or "", "tau": trace.tau, "n_tokens": trace.n_tokens,
            "param_skip": s["param_skip"],
            "param_skip_excluding_first_token": param_skip_excluding_first(trace.compute()["param_skip"]),
            "net_param_skip": s["net_param_skip"],
            "flop_share_saved": s["flop_share_saved"], "ffn_per_token": s["ffn_executed_per_token"],
            "skip_rate": s["skip_rate"], "nll_sum": float(nll.sum()), "dense_nll_sum": float(dense.sum()),
            "n_pred": n_pred, "perplexity_ratio": ratio,
            "mean_kl": float(np.mean(q["kl_to_dense"])) if "kl_to_dense" in q else float("nan"),
            "top1_agreement": float(np.mean(q["top1_agree"])) if "top1_agree" in q else float("nan"),
            "notices": " | ".join(trace.notices), "prompt": item.text}


def sweep_methods(runs: Sequence[SweepRun], match_compute: bool) -> tuple[list, dict[str, str]]:
    """The HeroMethods of ``runs`` in order, each routed run after the first followed by its matched-compute copy
    (named ``"<label> @ <first label> compute"``), and ``{matched copy: first label}``."""
    from hero_core.eval.methods import HeroMethod

    methods, matched_to = [], {}
    for k, run in enumerate(runs):
        methods.append(HeroMethod(run.model, run.variant, run.tau, name=run.label))
        if k > 0 and match_compute and run.variant != "dense":
            matched = HeroMethod(run.model, run.variant, name=f"{run.label} @ {runs[0].label} compute")
            methods.append(matched)
            matched_to[matched.name] = runs[0].label
    return methods, matched_to


def run_item(runs: Sequence[SweepRun], item: Item, index: int, *, max_tokens: int | None = 256,
             chat_template: bool = False, match_compute: bool = True) -> dict[str, list[dict]]:
    """All runs on one item: ``{"items": [...], "tokens": [...], "layers": [...]}`` rows (plain dicts, so the
    app can cache them and ranks can exchange them). Matched-compute runs add item rows only.

    The item goes through :func:`hero_core.eval.engine.run_texts`: the dense model (the first run's backbone,
    which every run of a sweep shares) runs once, and each routed run is scored against it."""
    from hero_core.eval.engine import run_texts
    from hero_core.eval.methods import HeroMethod

    rows: dict[str, list[dict]] = {name: [] for name in TABLES}
    if not runs:
        return rows
    methods, matched_to = sweep_methods(runs, match_compute)
    reference = HeroMethod(runs[0].model, "dense") if any(m.routed for m in methods) else None
    [text] = run_texts(runs[0].model, methods, [item.text], reference, max_tokens=max_tokens,
                       chat_template=chat_template, keep={"tokens"}, traced=[m.name for m in methods],
                       match_compute=matched_to)
    for method in methods:
        run = text.runs[method.name]
        trace = run.trace
        if method.routed:  # the dense run is the reference itself: it has no quality fields
            trace.quality = quality_fields(run.token_quality)
        if method.name in matched_to:
            rows["items"].append(_item_row(trace, method.name, index, item, matched_to[method.name]))
            continue
        rows["items"].append(_item_row(trace, method.name, index, item, None))
        tokens = token_summary(trace)
        tokens.insert(0, "category", token_categories(trace.tokens, item.domain))
        tokens.insert(0, "domain", item.domain)
        tokens.insert(0, "item", index)
        tokens.insert(0, "run", method.name)
        tokens["position"] = tokens["token_index"] / max(trace.n_tokens - 1, 1)  # 0 = first token, 1 = last
        rows["tokens"].extend(tokens.to_dict("records"))
        skipped = (~trace.executed).sum(axis=1)
        rows["layers"].extend({"run": method.name, "item": index, "block": j + 1, "layer": layer,
                               "n_tokens": trace.n_tokens, "n_skipped": int(skipped[j])}
                              for j, layer in enumerate(trace.routed_layers))
    return rows


# -- the result -------------------------------------------------------------------------------------
@dataclass
class SweepResult:
    """Tables of a sweep. ``items``: one row per (run, item), matched-compute runs included (``matched_to``);
    ``tokens``: one row per (run, item, token); ``layers``: one row per (run, item, routed block)."""

    items: pd.DataFrame
    tokens: pd.DataFrame
    layers: pd.DataFrame
    meta: dict = field(default_factory=dict)

    @classmethod
    def from_parts(cls, parts: Sequence[Mapping[str, list[dict]]], meta: dict | None = None) -> SweepResult:
        frames = {}
        for name in TABLES:
            frame = pd.DataFrame([row for part in parts for row in part[name]])
            if len(frame):
                frame = frame.sort_values(["item", "run"] if name == "items" else ["run", "item"], kind="stable")
            frames[name] = frame.reset_index(drop=True)
        return cls(frames["items"], frames["tokens"], frames["layers"], dict(meta or {}))

    @property
    def runs(self) -> list[str]:
        return list(dict.fromkeys(self.items.loc[self.items.matched_to == "", "run"])) if len(self.items) else []

    def layer_skip(self) -> pd.DataFrame:
        """Per (run, routed block): skip rate pooled over every token of every item."""
        g = self.layers.groupby(["run", "block", "layer"], sort=False)[["n_skipped", "n_tokens"]].sum().reset_index()
        g["skip_rate"] = g.n_skipped / g.n_tokens.clip(lower=1)
        return g

    def skip_by_category(self) -> pd.DataFrame:
        """Per (run, token category): n_tokens, share of tokens, skip rate, FFNs run per token."""
        g = self.tokens.groupby(["run", "category"], sort=False).agg(
            n_tokens=("skip_rate", "size"), skip_rate=("skip_rate", "mean"),
            ffn_executed_per_token=("ffn_executed", "mean")).reset_index()
        g["share_of_tokens"] = g.n_tokens / g.run.map(self.tokens.groupby("run").size())
        g["category_label"] = g.category.map(CATEGORY_LABELS)
        order = {c: i for i, c in enumerate(CATEGORIES)}
        return g.sort_values(["run", "category"], key=lambda s: s.map(order) if s.name == "category" else s,
                             kind="stable").reset_index(drop=True)

    def skip_by_position(self, bins: int = 10) -> pd.DataFrame:
        """Per (run, relative-position bin, 0 = first token … 1 = last): skip rate and FFNs run per token."""
        t = self.tokens.assign(bin=np.minimum((self.tokens.position * bins).astype(int), bins - 1))
        g = t.groupby(["run", "bin"], sort=True).agg(n_tokens=("skip_rate", "size"), skip_rate=("skip_rate", "mean"),
                                                     ffn_executed_per_token=("ffn_executed", "mean")).reset_index()
        g["position"] = (g["bin"] + 0.5) / bins
        return g

    def skip_by_absolute_position(self, edges: Sequence[float] = POSITION_EDGES) -> pd.DataFrame:
        """Per (run, absolute-position bin): n_tokens, skip rate, FFNs run and skipped per token, param skip.

        Bins are [edges[i], edges[i + 1]) of the token's index in its item; the default edges keep token 0 (the
        attention sink, which skips most FFNs) alone and split the rest at the routers' 128-token training
        blocks. Unlike :meth:`skip_by_position` this does not stretch a 20-token and a 2,000-token prompt onto
        the same axis, so position effects stay visible. Columns: see
        :func:`hero_core.eval.frontier.position_skip.bin_table`."""
        return bin_table(self.tokens, by=("run",), edges=edges)

    def quality(self, seed: int = 0) -> pd.DataFrame:
        """Per run (matched ones included): token-weighted param skip and the pooled perplexity ratio against
        dense with its 95 % bootstrap interval over items."""
        rows = []
        for run, g in self.items.groupby("run", sort=False):
            ratio, low, high = _ratio(g.nll_sum, g.dense_nll_sum, g.n_pred, seed)
            rows.append({"run": run, "matched_to": g.matched_to.iloc[0], "n_items": len(g),
                         "n_tokens": int(g.n_tokens.sum()), "param_skip": _weighted(g.param_skip, g.n_tokens),
                         "param_skip_excluding_first_token": _excluding_first(g),
                         "ffn_per_token": _weighted(g.ffn_per_token, g.n_tokens), "perplexity_ratio": ratio,
                         "ratio_low": low, "ratio_high": high, "mean_kl": _weighted(g.mean_kl, g.n_tokens),
                         "top1_agreement": _weighted(g.top1_agreement, g.n_tokens)})
        return pd.DataFrame(rows)

    def matched(self, seed: int = 0) -> pd.DataFrame:
        """Each matched run against the reference run on the same items at (nearly) the same compute:
        the perplexity ratio matched / reference with a 95 % bootstrap interval over items (> 1: the
        reference, usually the history-aware router, is better at equal compute)."""
        rows = []
        for run, g in self.items[self.items.matched_to != ""].groupby("run", sort=False):
            ref = self.items[(self.items.run == g.matched_to.iloc[0])].set_index("item").loc[g.item]
            ratio, low, high = _ratio(g.nll_sum.to_numpy(), ref.nll_sum.to_numpy(), g.n_pred.to_numpy(), seed)
            rows.append({"run": run, "reference": g.matched_to.iloc[0], "n_items": len(g),
                         "param_skip": _weighted(g.param_skip, g.n_tokens),
                         "param_skip_excluding_first_token": _excluding_first(g),
                         "reference_param_skip": _weighted(ref.param_skip, ref.n_tokens),
                         "reference_param_skip_excluding_first_token": _excluding_first(ref),
                         "ratio_vs_reference": ratio, "ratio_low": low, "ratio_high": high})
        return pd.DataFrame(rows, columns=["run", "reference", "n_items", "param_skip",
                                           "param_skip_excluding_first_token", "reference_param_skip",
                                           "reference_param_skip_excluding_first_token", "ratio_vs_reference",
                                           "ratio_low", "ratio_high"])

    def save(self, out: str | os.PathLike, formats: Sequence[str] = ("csv", "parquet")) -> list[Path]:
        """Write every table in each format, plus ``summary.json`` (quality, matched, meta)."""
        out = Path(out)
        out.mkdir(parents=True, exist_ok=True)
        written = []
        for name in TABLES:
            frame = getattr(self, name)
            for fmt in formats:
                path = out / f"{name}.{fmt}"
                frame.to_csv(path, index=False) if fmt == "csv" else frame.to_parquet(path, index=False)
                written.append(path)
        summary = {"meta": self.meta, "quality": self.quality().to_dict("records"),
                   "matched": self.matched().to_dict("records")}
        path = out / "summary.json"
        path.write_text(json.dumps(summary, indent=2, default=float), encoding="utf-8")
        return [*written, path]


def _weighted(values, weights) -> float:
    v, w = np.asarray(values, dtype=float), np.asarray(weights, dtype=float)
    ok = ~np.isnan(v)
    return float((v[ok] * w[ok]).sum() / w[ok].sum()) if w[ok].sum() > 0 else float("nan")


def _excluding_first(items: pd.DataFrame) -> float:
    """Param skip over the items' tokens but each item's first, weighted by those n_tokens - 1 tokens (NaN for
    tables saved before the column existed)."""
    if "param_skip_excluding_first_token" not in items:
        return float("nan")
    return _weighted(items.param_skip_excluding_first_token, items.n_tokens - 1)


def _ratio(nll, reference, n_pred, seed: int) -> tuple[float, float, float]:
    nll, reference, n_pred = (np.asarray(x, dtype=float) for x in (nll, reference, n_pred))
    if not len(nll) or n_pred.sum() == 0:
        return 1.0, float("nan"), float("nan")
    return ratio_interval(nll, reference, n_pred, seed=seed)


def table_bytes(frame: pd.DataFrame, fmt: str) -> bytes:
    """A table as CSV or Parquet bytes (downloads)."""
    if fmt == "csv":
        return frame.to_csv(index=False).encode("utf-8")
    if fmt == "parquet":
        buffer = io.BytesIO()
        frame.to_parquet(buffer, index=False)
        return buffer.getvalue()
    raise ValueError(f"unknown table format {fmt!r}; use csv or parquet")


# -- the loop -------------------------------------------------------------------------------------
def sweep(hero, prompts: Sequence[Item | str], *, checkpoints: Sequence | None = None,
          variants: Sequence[str] | None = None, max_tokens: int | None = 256, chat_template: bool = False,
          match_compute: bool = True, progress: Callable[[int, int], None] | None = None,
          should_stop: Callable[[], bool] | None = None, rank: int = 0, world_size: int = 1,
          skip: Collection[int] = (), on_item: Callable[[int, dict], None] | None = None) -> SweepResult:
    """Run each checkpoint (see :func:`make_runs`) over ``prompts``; returns the tables.

    ``progress(done, total)`` is called after each item, ``should_stop()`` before each (True: stop and return
    what is done, ``meta["stopped"]`` says so). ``rank`` / ``world_size`` take every ``world_size``-th item
    from ``rank`` on (item numbers stay global), for a caller that merges the ranks' parts. ``skip``: item numbers
    already done (a resumed sweep). ``on_item(index, rows)`` takes each finished item instead of the result
    (:mod:`hero_core.eval.sweep.shards` writes it to disk), so memory stays flat however many items there are;
    the returned result then holds no rows."""
    items = [p if isinstance(p, Item) else Item(str(i), str(p)) for i, p in enumerate(prompts)]
    if not items:
        raise ValueError("no prompts to sweep")
    if not 0 <= rank < world_size:
        raise ValueError(f"rank {rank} is outside 0..{world_size - 1}")
    runs = make_runs(hero, checkpoints, variants)
    skip = set(skip)
    mine = [i for i in range(rank, len(items), world_size) if i not in skip]
    parts, stopped = [], False
    for done, index in enumerate(mine):
        if should_stop is not None and should_stop():
            stopped = True
            break
        rows = run_item(runs, items[index], index, max_tokens=max_tokens, chat_template=chat_template,
                        match_compute=match_compute)
        if on_item is None:
            parts.append(rows)
        else:
            on_item(index, rows)
        if progress is not None:
            progress(done + 1, len(mine))
    meta = {"runs": [r.label for r in runs], "n_items": len(items), "n_done": len(parts), "stopped": stopped,
            "max_tokens": max_tokens, "chat_template": chat_template, "match_compute": match_compute,
            "backbone": hero.backbone.name}
    return SweepResult.from_parts(parts, meta)


# -- command line -------------------------------------------------------------------------------------
def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("data", type=Path, help="prompts: .jsonl / .json / .csv / .txt, or bundled:NAME[:N] "
                                           f"with NAME one of {', '.join(BUNDLED_SETS)}")
    p.add_argument("--backbone", default=None, help="local HF model directory (default: embedded SmolLM2-135M)")
    p.add_argument("--quantization", choices=["nf4"], default=None, help="load the backbone in 4-bit NF4")
    p.add_argument("--device", default="auto", help="auto | cpu | cuda (under accelerate: each rank's own)")
    p.add_argument("--dtype", default="fp32", choices=["fp32", "bf16", "auto"], help="backbone precision")
    p.add_argument("--chat", action="store_true", help="wrap each prompt in the model's chat template")
    p.add_argument("--checkpoint", action="append", default=None,
                   help="repeat for several runs (bundled name or directory; default: the bundled default)")
    p.add_argument("--variant", action="append", default=None,
                   help="run each checkpoint as these variants (default: the variant it was trained as)")
    p.add_argument("--max-tokens", type=int, default=256, help="cut longer prompts (with a notice)")
    p.add_argument("--no-match-compute", action="store_true",
                   help="skip the runs at the first run's param skip (each run at its own tau only)")
    p.add_argument("--format", action="append", choices=["csv", "parquet"], default=None,
                   help="table formats to write (default: both)")
    p.add_argument("--shard-every", type=int, default=8,
                   help="items each rank keeps in memory before writing them to its shard (out/shards/)")
    p.add_argument("--out", type=Path, required=True,
                   help="folder for items/tokens/layers tables and summary.json; its shards/ let a rerun resume")


def _items_from(spec: Path, hero) -> list[Item]:
    text = str(spec)
    if text.startswith("bundled:"):
        name, _, n = text.removeprefix("bundled:").partition(":")
        return bundled_items(name, int(n) if n.isdigit() else 20, hero=hero)
    return load_prompts(spec)


def run_cli(args) -> int:
    from hero_core.method.model_args import load_from_args

    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    state = None
    if world_size > 1:  # under accelerate launch (or torchrun): one process per rank
        from accelerate import PartialState

        state = PartialState(cpu=args.device == "cpu")
        if args.device == "auto":
            args.device = str(state.device)
    rank = state.process_index if state else 0
    load_args = argparse.Namespace(**{**vars(args), "checkpoint": (args.checkpoint or [None])[0]})
    hero = load_from_args(load_args)
    items = _items_from(args.data, hero)
    checkpoints = args.checkpoint if args.checkpoint and os.environ.get("HERO_LENS_TINY") != "1" else None

    def report(done: int, total: int) -> None:
        if rank == 0 and (done == total or done % max(1, total // 20) == 0):
            print(f"rank 0: {done}/{total} items", file=sys.stderr)

    # Every finished item goes to this rank's shard as it comes, so a killed run keeps it and a rerun resumes.
    settings = {"items": [[it.id, it.text] for it in items], "checkpoints": checkpoints, "variants": args.variant,
                "max_tokens": args.max_tokens, "chat": args.chat, "match_compute": not args.no_match_compute,
                "backbone": args.backbone, "quantization": args.quantization, "dtype": args.dtype}
    writer = ShardWriter(args.out, rank, settings, every=args.shard_every)
    done_before = finished_items(args.out)
    if state is not None:  # every rank reads what was finished before any rank adds to it: one count, said once
        state.wait_for_everyone()
    if rank == 0 and done_before:
        print(f"resuming: {len(done_before)} of {len(items)} items are already in {args.out / SHARD_DIR}",
              file=sys.stderr)
    result = sweep(hero, items, checkpoints=checkpoints, variants=args.variant, max_tokens=args.max_tokens,
                   chat_template=args.chat, match_compute=not args.no_match_compute, progress=report,
                   rank=rank, world_size=world_size, skip=done_before, on_item=writer.add)
    writer.flush()
    if state is not None:
        import torch.distributed as dist

        state.wait_for_everyone()  # every rank's shards are on disk before rank 0 reads them
        dist.destroy_process_group()  # a process group left open at exit keeps the launcher waiting
    if rank != 0:
        return 0
    parts = merged_parts(args.out)
    merged = SweepResult.from_parts(parts, {**result.meta, "n_done": len(parts), "world_size": world_size})
    written = merged.save(args.out, formats=args.format or ("csv", "parquet"))
    print(merged.quality().round(4).to_string(index=False))
    if len(merged.matched()):
        print(merged.matched().round(4).to_string(index=False))
    print(f"{merged.meta['n_done']} items × {len(merged.runs)} runs written to {args.out} "
          f"({', '.join(p.name for p in written)})")
    return 0
