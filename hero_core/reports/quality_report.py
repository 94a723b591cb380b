"""Render docs/results.md, docs/figures/frontier.png and the README's quality block from docs/results.json.

Every number comes from the JSON written by ``scripts/make_frontier.py``. The oracle is a reference that
needs the FFN's output to decide whether to skip it (not deployable); the paper's budgets are marked, its
numbers are quoted only in docs/results.md's labelled table. The figure is the app's plotly frontier
(:func:`hero_core.viz.frontier_figure.bundled_frontier_chart`), rendered by kaleido in the installed Chromium.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from hero_core.eval.frontier.curves import at_skip
from hero_core.eval.frontier.measured import frontier_curves
from hero_core.eval.frontier.net_axis import run_profiles
from hero_core.eval.study.bundled import load_shipped as load_seeds
from hero_core.eval.twins import control_caveat
from hero_core.files import say_wrote
from hero_core.method.model import DEFAULT_CHECKPOINT
from hero_core.reports import net_saving_report
from hero_core.reports.pages import add_path_arguments, table_head, table_row
from hero_core.reports.readme_block import replace_block
from hero_core.viz.figure_export import figure_image
from hero_core.viz.frontier_figure import DOCS_ROUTERS, bundled_frontier_chart, bundled_net_frontier_chart
from hero_core.words.ratio_text import ratio_text
from hero_core.words.reference_labels import REFERENCE_LABELS

ROOT = Path(__file__).resolve().parents[2]
POSITION_RESULTS = ROOT / "docs" / "experiments" / "position-skip" / "results.json"

DOMAINS = ("chat", "code", "reasoning")
TARGETS = {  # checkpoint: (min param skip, max perplexity ratio, min top-1 agreement or None)
    DEFAULT_CHECKPOINT: (0.10, 1.10, 0.85),
    "hero-10": (0.10, 1.10, 0.85),
    "hero-25": (0.25, 2.0, None),
    "hero-40": (0.38, 6.0, None),
    "hero-25-r7": (0.25, 2.0, None),
    "hero-40-r7": (0.38, 6.0, None),
}
GREEDY_TARGET = ("hero-10", 12)  # greedy chat answers: median leading tokens (of PREFIX) equal to the dense answer


def own_point(curve: dict) -> dict | None:
    """The point of a checkpoint's curve at its own (trained) tau."""
    return next((p for p in curve["points"] if abs(p["knob"] - curve["tau"]) < 1e-9), None)


BELOW_ONE = "†"  # marks a perplexity ratio below 1, explained by BELOW_ONE_NOTE wherever a table can show one
BELOW_ONE_NOTE = (f"{BELOW_ONE} A perplexity ratio below 1 is not a gain over the dense model: the held-out chat texts "
                  "are the dense model's own greedy replies, and checkpoints trained on the renormalised top-k target "
                  "learn a distribution sharper than the teacher's, so they put more probability than dense on dense's "
                  "own argmax tokens. The top-1 agreement and the answers suite are the measures to read there.")


def _ratio(cell: dict) -> str:
    """The cell's ratio with its interval, marked when below 1 (see :data:`BELOW_ONE_NOTE`)."""
    return ratio_text(cell, mark=BELOW_ONE if cell["perplexity_ratio"] < 1 else "")


def own_tau_table(frontier: dict, names: list[str]) -> list[str]:
    head = ["checkpoint", "variant", "tau"]
    for d in DOMAINS:
        head += [f"{d}: param skip %", f"{d}: ppl ratio [95 % CI]", f"{d}: top-1 %"]
    lines = table_head(*head)
    for name in names:
        curve = frontier["curves"].get(name)
        point = own_point(curve) if curve else None
        if point is None:
            continue
        cells = [name, curve["variant"], f"{curve['tau']:g}"]
        for d in DOMAINS:
            c = point[d]
            cells += [f"{100 * c['param_skip']:.1f}", _ratio(c), f"{100 * c['top1_agreement']:.1f}"]
        lines.append(table_row(*cells))
    return lines


def target_lines(frontier: dict, generations: dict | None = None) -> list[str]:
    lines = table_head("checkpoint", "target", "measured (chat / code / reasoning)", "met?")
    for name, (skip, ratio, top1) in TARGETS.items():
        curve = frontier["curves"].get(name)
        point = own_point(curve) if curve else None
        if point is None:
            lines.append(f"| {name} | — | not trained | no |")
            continue
        skips = [point[d]["param_skip"] for d in DOMAINS]
        ratios = [point[d]["perplexity_ratio"] for d in DOMAINS]
        agree = [point[d]["top1_agreement"] for d in DOMAINS]
        ok = min(skips) >= skip and max(ratios) <= ratio and (top1 is None or min(agree) >= top1)
        target = f"skip ≥ {100 * skip:.0f} %, ratio ≤ {ratio:g}" + (f", top-1 ≥ {100 * top1:.0f} %" if top1 else "")
        measured = (f"skip {' / '.join(f'{100 * s:.1f}' for s in skips)} %, ratio "
                    f"{' / '.join(f'{r:.2f}' for r in ratios)}"
                    + (f", top-1 {' / '.join(f'{100 * a:.0f}' for a in agree)} %" if top1 else ""))
        lines.append(f"| {name} | {target} | {measured} | {'yes' if ok else 'no'} |")
    name, median_needed = GREEDY_TARGET
    prefix = (generations or {}).get("common_prefix", {}).get(name)
    if prefix is not None:
        n = generations["prefix_tokens"]
        target = f"greedy chat answers: median ≥ {median_needed} of the first {n} tokens equal to dense"
        measured = f"median {prefix['median']:g} of {n} ({generations['prompts']} prompts)"
        lines.append(table_row(name, target, measured, "yes" if prefix["median"] >= median_needed else "no"))
    return lines


def matched_table(frontier: dict) -> list[str]:
    """hero vs local (and the references) interpolated at the param skip each hero checkpoint realises."""
    curves = frontier["curves"]
    references = ("random", "static", "expert_choice", "oracle")
    lines = table_head("budget", "domain", "param skip % (hero's own tau)", "hero", "local",
                       *(REFERENCE_LABELS[r] for r in references), "hero ≤ local?")
    for budget in ("10", "25", "40"):
        hero, local = curves.get(f"hero-{budget}"), curves.get(f"local-{budget}")
        point = own_point(hero) if hero else None
        if point is None or local is None:
            continue
        for d in DOMAINS:
            skip = point[d]["param_skip"]
            cells = {"hero": point[d]}
            for name, curve in (("local", local), *((r, curves.get(r)) for r in references)):
                cells[name] = at_skip(curve, d, skip) if curve else None
            shown = [_ratio(cells[k]) if cells[k] else ("not run" if k in references and k not in curves
                                                       else "outside its range")
                     for k in ("hero", "local", *references)]
            verdict = "–"
            if cells["local"]:
                verdict = "yes" if cells["hero"]["perplexity_ratio"] <= cells["local"]["perplexity_ratio"] else "no"
                if cells["hero"]["ratio_high"] >= cells["local"]["ratio_low"] and \
                        cells["local"]["ratio_high"] >= cells["hero"]["ratio_low"]:
                    verdict += " (intervals overlap)"
            lines.append(f"| {budget} % | {d} | {100 * skip:.1f} | " + " | ".join(shown) + f" | {verdict} |")
    return lines


def plot(frontier: dict, out: Path) -> None:
    """docs/figures/frontier.png: the app's frontier chart of the bundled budgets, exported as PNG; and beside it
    (:func:`net_figure_path`) the same runs against FLOPs saved net, each charged what it computes."""
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_bytes(figure_image(bundled_frontier_chart(frontier)))
    curves = {name: curve for router in DOCS_ROUTERS for name, curve in frontier_curves(frontier, router).items()}
    net_figure_path(out).write_bytes(figure_image(bundled_net_frontier_chart(frontier, run_profiles(curves))))


def net_figure_path(figure: Path) -> Path:
    return figure.with_name(f"{figure.stem}_net{figure.suffix}")


def generation_lines(gen: dict) -> list[str]:
    lines = [f"Greedy answers (chat template, {gen['prompts']} held-out chat prompts): tokens of the routed answer "
             f"equal to the dense answer before the first difference, within the first {gen['prefix_tokens']}.", "",
             "| checkpoint | median common prefix | mean |", "|---|---|---|"]
    for name, stats in gen["common_prefix"].items():
        lines.append(f"| {name} | {stats['median']:g} / {gen['prefix_tokens']} | {stats['mean']:.1f} |")
    lines += ["", "Five prompts, 48 new tokens each (dense beside the routed checkpoints at their own tau):", ""]
    names = [k for k in gen["shown"][0] if k not in ("prompt",)]
    for row in gen["shown"]:
        lines.append(f"**{row['prompt']}**")
        lines.append("")
        for name in names:
            text = " ".join(row[name].split()).replace("|", "\\|")
            lines.append(f"- *{name}*: {text}")
        lines.append("")
    return lines


def entropy_lines(entropy: dict) -> list[str]:
    lines = ["| checkpoint | " + " | ".join(f"{d}: entropy / uniform" for d in DOMAINS)
             + " | previous-block share (uniform) |", "|---|" + "---|" * (len(DOMAINS) + 1)]
    for name, per in entropy.items():
        cells = [f"{per[d]['normalised_entropy']:.3f}" for d in DOMAINS if d in per]
        prev = per[DOMAINS[0]]
        lines.append(f"| {name} | " + " | ".join(cells)
                     + f" | {prev['previous_share']:.3f} ({prev['uniform_previous_share']:.3f}) |")
    return lines


def read_matters_lines(read: dict) -> list[str]:
    """Per checkpoint and domain: the learned read's entropy, the decisions a uniform read flips, and quality with
    the learned and the uniform read."""
    lines = table_head("checkpoint", "domain", "read entropy / uniform", "decisions flipped by a uniform read %",
                       "ppl ratio, learned read [95 % CI]", "ppl ratio, uniform read [95 % CI]",
                       "param skip % learned / uniform")
    for name, per in read.items():
        for d in DOMAINS:
            r = per[d]
            lines.append(table_row(name, d, f"{r['read_entropy']:.3f}", f"{100 * r['flip_share']:.2f}",
                                   _ratio(r["learned"]), _ratio(r["uniform"]),
                                   f"{100 * r['learned']['param_skip']:.1f} / {100 * r['uniform']['param_skip']:.1f}"))
    return lines


def training_lines(checkpoints: dict) -> list[str]:
    lines = table_head("checkpoint", "variant", "branch", "tokens seen", "starts from", "precision", "train wall s",
                       "CPU s", "CPU s with earlier stages", "adapter warm start median R²",
                       "gates within 0.1 of tau (last step)")
    for name, c in checkpoints.items():
        t = c["training"]
        timing = t.get("timing", {})
        tokens = "–" if t.get("tokens_seen") is None else f"{t['tokens_seen']:,}"
        chain = [timing, *(stage.get("timing", {}) for stage in t.get("earlier_stages", []))]
        total_cpu = f"{sum(s.get('cpu_s', 0.0) for s in chain):.1f}" if all("cpu_s" in s for s in chain) else "–"
        # A continuation fits no adapters of its own: they came with the checkpoint it starts from.
        r2 = (t.get("warm_start") or {}).get("r2_median")
        warm = f"{r2:.2f}" if r2 is not None else ("from " + t["init_from"] if t.get("init_from") else "–")
        near = t.get("final", {}).get("near_tau")
        lines.append(f"| {name} | {c['variant']} | {c['branch_scaling']} | {tokens} | "
                     f"{t.get('init_from') or '–'} | {t.get('compute_dtype', '–')} | {timing.get('wall_s', '–')} | "
                     f"{timing.get('cpu_s', '–')} | {total_cpu} | {warm} | "
                     f"{'–' if near is None else f'{near:.2f}'} |")
    return lines


ABLATION_STAGES = (("hero-10", "local-10", "no_memread-10", "no_aux-10", "no_pos-10"),
                   ("hero-10-s1", "local-10-s1", "no_memread-10-s1", "no_aux-10-s1", "no_pos-10-s1"),
                   # recipe 2 (selective memory) against its twin, the local router and recipe 1, at equal tokens
                   ("hero-10-r2", "no_memread-10-r2", "local-10", "hero-10", "no_memread-10"),
                   # recipe 3 (recipe 2 with answer-weighted distillation) against its twin and recipe 2
                   ("hero-10-r3", "no_memread-10-r3", "hero-10-r2", "local-10", "hero-10"),
                   # recipe 4, the default (recipe 2's memory, hero-10's tokens) against its twin, local and recipe 1
                   ("hero-10-r4", "no_memread-10-r4", "local-10", "hero-10", "no_memread-10"),
                   # recipe 7, the default: recipe 4 with the router sized to the backbone, against recipe 4 and local
                   ("hero-10-r7", "hero-10-r4", "local-10", "hero-10"),
                   ("hero-10-r2-s1", "no_memread-10-r2-s1", "local-10-s1", "hero-10-s1", "no_memread-10-s1"))


def matched_ablation_table(frontier: dict, names: list[str]) -> list[str]:
    """The checkpoints swept over tau read at the skip the first one realises at its own tau, domain by domain."""
    curves = frontier["curves"]
    hero = own_point(curves[names[0]])
    swept = [n for n in names[1:] if len(curves[n]["points"]) > 1]
    if hero is None or not swept:
        return []
    lines = ["", f"At {names[0]}'s own param skip (each swept checkpoint interpolated between its tau points, as in "
                 "the hero-against-local table); checkpoints measured at one tau only are not in it:", "",
             "| domain | param skip % | " + " | ".join([names[0], *swept]) + " |",
             "|---|---|" + "---|" * (1 + len(swept))]
    for d in DOMAINS:
        skip = hero[d]["param_skip"]
        cells = [_ratio(hero[d])]
        for n in swept:
            at = at_skip(curves[n], d, skip)
            cells.append(_ratio(at) if at else "outside its range")
        lines.append(f"| {d} | {100 * skip:.1f} | " + " | ".join(cells) + " |")
    return lines


def ablation_tables(frontier: dict, checkpoints: dict, stages: tuple = ABLATION_STAGES) -> list[str]:
    """One table per training stage, holding the checkpoints that saw as many tokens as its hero row; the rest are
    named, with their tokens, so an under-trained ablation is never read against a fully trained hero."""
    lines = []
    for stage in stages:
        present = [n for n in stage if n in frontier["curves"]]
        if len(present) >= 2 and stage[0] in present:
            lines += stage_tables(frontier, checkpoints, stage[0], present)
    return lines


def stage_tables(frontier: dict, checkpoints: dict, hero: str, present: list[str]) -> list[str]:
    """One stage's tables: the runs trained on as many tokens as ``hero`` at their own tau and at matched skip, with
    their caveats and guard notes, and the runs left out for their tokens."""
    tokens = {n: checkpoints.get(n, {}).get("training", {}).get("tokens_seen") for n in present}
    matched = [n for n in present if tokens[n] == tokens[hero]]
    lines = [f"After {tokens[hero]:,} training tokens each:" if tokens[hero] else "", ""]
    lines += own_tau_table(frontier, matched)
    lines += own_tau_skip_note(frontier, hero, matched)
    lines += matched_ablation_table(frontier, matched)
    seeds = load_seeds()
    caveats = {n: control_caveat(n, checkpoints.get(n, {}).get("training"), seeds) for n in matched}
    lines += [f"\n**Caveat.** {caveats[n]}" for n in matched if caveats[n]]
    lines += guard_notes({n: checkpoints.get(n, {}) for n in matched if not caveats[n]})
    left_out = [f"`{n}` ({tokens[n]:,} tokens)" if tokens[n] else f"`{n}`" for n in present if n not in matched]
    if left_out:
        lines += ["", f"Left out of this table, trained on a different number of tokens: {', '.join(left_out)}."]
    return [*lines, ""]


def own_tau_skip_note(frontier: dict, hero: str, matched: list[str]) -> list[str]:
    """How far the runs' param skips at their own tau lie from ``hero``'s (none to say for a lone run)."""
    points = {n: own_point(frontier["curves"][n]) for n in matched}
    if points[hero] is None or len(matched) < 2:
        return []
    gap = max(abs(p[d]["param_skip"] - points[hero][d]["param_skip"])
              for p in points.values() if p is not None for d in DOMAINS)
    return ["", f"Each runs at its own tau, so the param skip differs from {hero}'s by up to "
                f"{100 * gap:.1f} points on a domain: part of a difference in ratio is that skip, not "
                "the component (the frontier figure shows what a point of skip costs)."]


def guard_notes(checkpoints: dict) -> list[str]:
    """A note for each checkpoint whose degradation guard rolled it back: from the rollback on, it trained at a lower
    learning rate than a run the guard never touched, so its row differs from the others in that too."""
    notes = []
    for name, c in checkpoints.items():
        health = c.get("training", {}).get("health") or {}
        # a degradation the guard only warned about (on_degrade=warn) is recorded without a to_step: no rollback
        rollbacks = [r for r in health.get("rollbacks") or [] if r.get("to_step") is not None]
        if not rollbacks:
            continue
        steps = ", ".join(f"at step {r['at_step']} to step {r['to_step']} (learning rate x{r['lr_scale']:g})"
                          for r in rollbacks)
        notes.append(f"\n**Trained under the degradation guard.** `{name}` degraded and was rolled back {steps}; "
                     f"final held-out loss {health['final_loss']:.3f} against its best {health['best_loss']:.3f}. "
                     "From the rollback on it trained at a lower learning rate than the runs the guard never "
                     "touched, so its row differs from theirs in that as well as in its component.")
    return notes


def section(title: str, intro: str, body: list[str]) -> list[str]:
    """A ``##`` section of the page: its title, an intro paragraph and the body, with the blank lines between."""
    return [f"## {title}", "", intro, "", *body]


def net_saving_lines(report: dict | None) -> list[str]:
    """Each checkpoint's FLOPs saved net beside its param skip, static pruning at the same net saving beside its
    perplexity ratio (docs/net_saving.json, the README's net table), or what measures it where it is missing."""
    head = ["", "## What each checkpoint saves, counted net", ""]
    if report is None:
        return head + ["Not measured yet: `make net-saving`."]
    table = net_saving_report.readme_lines(report, intervals="net_saving.md")
    return head + table + ["", "Measured by `make net-saving`."]


def render(result: dict, figure: Path, net_report: dict | None = None) -> str:
    fr = result["frontier"]
    names = [n for n in ("hero-10", "local-10", "hero-25", "local-25", "hero-40", "local-40") if n in fr["curves"]]
    out = ["# Quality of the bundled routers", "",
           "Generated by `scripts/quality_report.py` from `docs/results.json` (written by `scripts/make_frontier.py`, "
           f"`make results`, {result['wall_seconds']:.0f} s). Do not edit by hand.", "",
           f"Held-out text: {fr['limit']} texts per domain from the evaluation split of `hero_core.data.texts` "
           f"(disjoint from training by a hash of each text's key), {fr['max_tokens']} tokens each. Perplexity ratio = "
           "routed / dense perplexity of the same tokens, pooled over texts, with a 95 % bootstrap interval over "
           "texts; top-1 = share of positions where routed and dense predict the same next token.", "",
           "## Targets", ""] + target_lines(fr, result.get("generations")) + net_saving_lines(net_report) + [
           "", "## The bundled checkpoints at their own tau", ""] + own_tau_table(fr, names) + [
           "", f"![Skip–quality frontier]({os.path.relpath(figure, ROOT / 'docs')})", "",
           "The same runs against FLOPs saved net: each point moved to what its run saves once the router (at every "
           "routed block, with its memory reads) and the adapters of the FFNs it skips are charged; static pruning, "
           "random skipping, MoD top-k and the oracle compute no router and pay their adapters only "
           "(`hero_core.eval.frontier.net_axis`). A point left of 0 costs more than the dense model.", "",
           f"![Frontier against FLOPs saved net]({os.path.relpath(net_figure_path(figure), ROOT / 'docs')})", "",
           "## HeRo against the local router at equal compute", "",
           "Each row takes the param skip the hero checkpoint realises at its own tau on that domain and reads the "
           "other curves at the same skip (log-linear interpolation between their tau points). The oracle runs both "
           "branches and skips where the adapter changes the block output least: it needs the FFN's output to "
           "decide, so it saves nothing. It is a greedy reference, not an upper bound: it ranks skips by their error "
           "at one block and cannot see how that error grows through later blocks, which a trained router learns end "
           "to end; a router below the oracle's ratio has learnt exactly that. Static pruning (ShortGPT) drops the "
           "same least influential FFNs for every token (block influence from train-split text, never the "
           "evaluation's), with the same adapters in their place; MoD top-k runs each block's FFN on the top share of "
           "a sequence's tokens by hero-10's gate, which needs the whole sequence at once (not causal, so not a "
           "router a decoder can run).", ""]
    out += matched_table(fr)
    stage_one = [n for n in ("hero-10", "hero-10-s1", "local-10", "local-10-s1") if n in fr["curves"]]
    if any(n.endswith("-s1") for n in stage_one):
        out += ["", *section("hero-10 and local-10 after their first stage",
                             "`hero-10` / `local-10` train in two stages (`scripts/make_checkpoints.py`); `-s1` is the "
                             "first stage alone, bundled so the second stage's effect can be read on the same texts.",
                             own_tau_table(fr, stage_one))]
    out += ["", *section("Ablations at the 10 % budget (trained)",
                         "Each ablation takes hero-10's recipe and removes one component (`local-10` is the paper's "
                         "w/o History). A table compares only checkpoints that have seen the same number of training "
                         "tokens, so a difference is the component's, not the training's.",
                         ablation_tables(fr, result.get("checkpoints", {})))]
    if "generations" in result:
        out += ["", "## Greedy generations", ""] + generation_lines(result["generations"])
    if result.get("memory_entropy"):
        # no blank line first: the section before always ends with one
        out += section("Is the memory read selective?",
                       "Entropy of each memory-attention row over the earlier blocks, divided by the entropy of "
                       "uniform weights (1 = read evenly), averaged over tokens and blocks from the third on; and the "
                       "weight on the immediately previous block beside its uniform value.",
                       entropy_lines(result["memory_entropy"]))
    if result.get("read_matters"):
        texts = next(iter(result["read_matters"].values()))["chat"]["texts"]
        out += ["", *section("Does the memory read matter?",
                             f"Each checkpoint that reads its depth memory, at its own tau, on {texts} held-out texts "
                             "per domain routed twice: with its learned read and with every read replaced by the "
                             "uniform average of the same stored values (`hero.trace(..., memory_read=\"uniform\")`). "
                             "A flip is a (token, block) decision that differs; a flip also changes every later "
                             "block's input, so this is the read's whole effect on routing.",
                             read_matters_lines(result["read_matters"]))]
    if result.get("bf16"):
        # results written before the check named its checkpoint measured hero-10
        checked = next(iter(result["bf16"].values())).get("checkpoint", "hero-10")
        out += ["", "## bf16 on CPU", "",
                f"{checked}'s router on a bf16 backbone against the same router on fp32, on held-out text; both "
                "perplexity ratios against the fp32 dense model. On bf16 the prompt's decisions run under bf16 "
                "autocast, as the router was trained (docs/method.md, \"Precision at inference\"). A flip is a "
                "(token, block) decision that differs; it also changes every later block's input.", "",
                "| domain | flip rate % | gates within 0.05 of tau % | ppl ratio fp32 | ppl ratio bf16 | "
                "bf16 vs fp32 |",
                "|---|---|---|---|---|---|"]
        for d, r in result["bf16"].items():
            out.append(f"| {d} | {100 * r['flip_rate']:.2f} | {100 * r['gates_within_0.05_of_tau']:.1f} | "
                       f"{r['ratio_fp32']:.3f} | {r['ratio_bf16']:.3f} | {100 * r['bf16_vs_fp32']:+.1f} % |")
    out += position_lines(POSITION_RESULTS, figure.parent / "position_skip.png")
    out += ["", "## Training", ""] + training_lines(result["checkpoints"])
    out += ["", BELOW_ONE_NOTE]
    return "\n".join(out) + "\n"


def position_lines(results_path: Path, figure: Path) -> list[str]:
    """Skip by absolute position on 2,048-token held-out sequences (scripts/position_skip.py writes the JSON and
    the figure); nothing when that measurement has not been run."""
    from hero_core.eval.frontier.position_skip import TARGET_RATIO, markdown_table

    if not results_path.is_file():
        return []
    results = json.loads(results_path.read_text())
    meta = results["meta"]
    return ["", "## Skip by absolute position", "",
            f"FFNs skipped per token (of {meta['n_routed']}) by the token's index in 2,048-token held-out sequences "
            f"(`{meta['command']}`, {sum(meta['sequences_per_domain'].values())} sequences); token 0, the attention "
            "sink, is its own column and the param skip is given with and without it. Target: skip at 512–2,047 "
            f"at least {TARGET_RATIO:.2f} of the skip at 16–127. Per domain: "
            f"[docs/experiments/position-skip]({os.path.relpath(results_path.parent, ROOT / 'docs')}/README.md).",
            "", markdown_table(results["summary"]), "",
            f"![Skip by position]({os.path.relpath(figure, ROOT / 'docs')})"]


def read_summary_lines(read: dict) -> list[str]:
    """One row per memory-reading checkpoint: read entropy and the decisions a uniform read flips, per domain."""
    lines = table_head("checkpoint", "read entropy / uniform (chat / code / reasoning)",
                       "decisions flipped by a uniform read %")
    for name, per in read.items():
        entropy = " / ".join(f"{per[d]['read_entropy']:.3f}" for d in DOMAINS)
        flips = " / ".join(f"{100 * per[d]['flip_share']:.2f}" for d in DOMAINS)
        lines.append(f"| {name} | {entropy} | {flips} |")
    return lines


# the default first, the paper-width recipe it resizes and its recipe-5 continuations, then the paper-kernel checkpoint
# and the other budgets
README_CHECKPOINTS = ("hero-10-r7", "hero-10-r4", "hero-10-r5", "hero-13-r5", "hero-10", "local-10", "hero-10-r2",
                     "hero-25", "local-25", "hero-40", "local-40")


def readme_lines(result: dict) -> list[str]:
    """The README's compact block: each bundled budget at its own tau and the read-matters summary. The targets,
    the equal-compute ablation tables and the generations stay in docs/results.md."""
    fr = result["frontier"]
    names = [n for n in README_CHECKPOINTS if n in fr["curves"]]
    lines = [*own_tau_table(fr, names)]
    if result.get("read_matters"):
        lines += ["", "**Does the read matter?** Each read replaced by the uniform average of the same values:", "",
                  *read_summary_lines(result["read_matters"])]
    return [*lines, "", BELOW_ONE_NOTE]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    add_path_arguments(parser, {"quality": ROOT / "docs" / "results.json", "--out": ROOT / "docs" / "results.md",
                                "--figure": ROOT / "docs" / "figures" / "frontier.png", "--readme": ROOT / "README.md"})
    args = parser.parse_args()
    result = json.loads(args.quality.read_text())
    plot(result["frontier"], args.figure)
    net_report = net_saving_report.REPORT
    args.out.write_text(render(result, args.figure,
                               json.loads(net_report.read_text()) if net_report.is_file() else None))
    if args.readme.is_file():
        replace_block(args.readme, "quality", readme_lines(result))
    return say_wrote(args.out, args.figure, net_figure_path(args.figure))


if __name__ == "__main__":
    sys.exit(main())
