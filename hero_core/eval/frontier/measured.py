"""What this project measured about the history and the depth memory, for the pages to quote beside the paper.

The full results live in ``docs/results.json`` (``scripts/make_frontier.py``), but ``docs/`` is not shipped: the
Docker image leaves it out (``.dockerignore``) and a wheel carries only ``hero_core``. So ``make results`` also
writes a small summary next to the bundled checkpoints, which travel with ``hero_core`` — the measurements belong
to them — and the app reads only that:

    python -m hero_core.eval.frontier.measured [docs/results.json]   # -> hero_core/checkpoints/measured.json

Every number in it is derived from ``docs/results.json`` by :func:`summarise` (a test checks the committed file
against it), so the app never states a measured result that the results file does not hold.
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path
from typing import Any

from hero_core.eval.frontier.curves import at_skip
from hero_core.eval.twins import counterparts, parse_name
from hero_core.files import atomic_write_text, say_wrote
from hero_core.method.checkpoint import BUNDLED_DIR
from hero_core.method.model import DEFAULT_CHECKPOINT
from hero_core.words.reference_labels import REFERENCE_LABELS

MEASURED_FILE = BUNDLED_DIR / "measured.json"
RESULTS_FILE = Path(__file__).resolve().parents[3] / "docs" / "results.json"
FORMAT_VERSION = 1


def _history_pairs(curves: dict) -> list[tuple[str, str]]:
    """(hero checkpoint, its local twin) pairs: hero-10 / local-10, hero-25 / local-25, hero-10-r4 / local-10 … The
    final checkpoint of each recipe only, as in docs/results.md's equal-compute table: an earlier stage (hero-10-s1)
    is the same recipe part-trained, and counting it too would count one comparison twice."""
    return [(hero, local) for hero, local in _matched_pairs(curves)
            if curves[local].get("variant") == "no_history"]


def _own_point(curve: dict) -> dict | None:
    """The point of a checkpoint's curve at its own (trained) tau."""
    return next((p for p in curve["points"] if abs(p["knob"] - curve["tau"]) < 1e-9), None)


def verdict(hero: dict, local: dict) -> str:
    """``history better`` / ``history worse`` when the 95 % intervals of the perplexity ratio are apart,
    ``no clear difference`` when they overlap (a lower ratio is better)."""
    if hero["ratio_high"] < local["ratio_low"]:
        return "history better"
    if hero["ratio_low"] > local["ratio_high"]:
        return "history worse"
    return "no clear difference"


def history_rows(frontier: dict) -> list[dict]:
    """Per (hero/local pair, domain): both perplexity ratios at the param skip the hero checkpoint realises at
    its own tau (the local curve interpolated there, as in docs/results.md), with :func:`verdict`."""
    rows = []
    for hero_name, local_name, domain, skip, hero, local in _at_reference_skip(frontier, _history_pairs):
        rows.append({"hero": hero_name, "local": local_name, "domain": domain, "param_skip": skip,
                     **{f"hero_{k}": hero[k] for k in ("perplexity_ratio", "ratio_low", "ratio_high")},
                     **{f"local_{k}": local[k] for k in ("perplexity_ratio", "ratio_low", "ratio_high")},
                     "verdict": verdict(hero, local)})
    return rows


def _at_reference_skip(frontier: dict, pairs):
    """(reference, other, domain, skip, reference's point, other's point) for each of ``pairs(curves)`` and domain:
    the reference at its own tau, the other curve interpolated to the param skip the reference realises there;
    left out where the other curve does not reach that skip (no comparison at equal compute)."""
    curves = frontier.get("curves", {})
    for reference, other in pairs(curves):
        point = _own_point(curves[reference])
        if point is None:
            continue
        for domain in frontier.get("domains", []):
            skip = point[domain]["param_skip"]
            theirs = at_skip(curves[other], domain, skip)
            if theirs is not None:
                yield reference, other, domain, skip, point[domain], theirs


def _matched_pairs(curves: dict) -> list[tuple[str, str]]:
    """(hero checkpoint, counterpart): every final checkpoint each final hero checkpoint is read against
    (hero_core.eval.twins.counterparts: local-10 and no_memread-10 for hero-10; local-10 and no_memread-10-r4
    for hero-10-r4), which every comparison in docs/results.md is read against."""
    checkpoints = [n for n, c in sorted(curves.items()) if c.get("kind", "checkpoint") == "checkpoint"]
    return [(hero, other) for hero in checkpoints if curves[hero].get("variant") == "hero" and _final(hero)
            for other in counterparts(hero, checkpoints) if _final(other)]


def _final(name: str) -> bool:
    """A finished checkpoint, not an earlier stage of one (hero-10-s1, hero-10-seq)."""
    parsed = parse_name(name)
    return parsed is not None and not parsed.stage


def matched_rows(frontier: dict) -> list[dict]:
    """Per (hero-N, other-N) pair and domain: both perplexity ratios with their 95 % intervals at the param skip the
    hero checkpoint realises at its own tau (the other curve interpolated there), and which is better: the name of
    the better checkpoint when the intervals are apart, else "" (no clear difference)."""
    curves = frontier.get("curves", {})
    rows = []
    for reference, other, domain, skip, ours, theirs in _at_reference_skip(frontier, _matched_pairs):
        found = verdict(ours, theirs)
        rows.append({"reference": reference, "other": other, "other_variant": curves[other].get("variant"),
                     "domain": domain, "param_skip": skip,
                     **{f"reference_{k}": ours[k] for k in ("perplexity_ratio", "ratio_low", "ratio_high")},
                     **{f"other_{k}": theirs[k] for k in ("perplexity_ratio", "ratio_low", "ratio_high")},
                     "better": {"history better": reference, "history worse": other}.get(found, "")})
    return rows


def matched_between(measured: dict | None, reference: str, other: str) -> list[dict]:
    """The shipped matched-compute rows of one pair (either order given), reference first; [] when not measured."""
    rows = (measured or {}).get("matched") or []
    return [r for r in rows if {r["reference"], r["other"]} == {reference, other}]


def matched_words(rows: list[dict]) -> str:
    """One sentence per pair: where each checkpoint was better, at the hero checkpoint's own param skip."""
    if not rows:
        return "No matched-compute measurement of these checkpoints is shipped."
    parts = []
    for row in rows:
        who = f"**{row['better']}** better" if row["better"] else "no clear difference"
        parts.append(f"{who} on {row['domain']}")
    return f"{rows[0]['reference']} against {rows[0]['other']}: {'; '.join(parts)}."


def matched_method(measured: dict | None) -> str:
    """How the matched rows were measured, said once above them."""
    n = (measured or {}).get("texts_per_domain")
    return (f"Measured on {(measured or {}).get('backbone') or 'this backbone'}, {n or '?'} held-out texts per domain "
            "the routers never saw; perplexity ratio to the dense model at the hero checkpoint's own param skip (the "
            "other curve interpolated there); \"better\" only where the 95 % bootstrap intervals are apart. From "
            "docs/results.json via hero_core/checkpoints/measured.json.")


def baseline_rows(frontier: dict, router: str = DEFAULT_CHECKPOINT) -> list[dict]:
    """Per domain and reference (static pruning, random, MoD top-k, oracle): its perplexity ratio with the 95 %
    interval at the param skip ``router`` realises at its own tau, beside the router's; a reference whose curve does
    not reach that skip is left out (no comparison at equal compute)."""
    curves = frontier.get("curves", {})
    point = _own_point(curves[router]) if router in curves else None
    if point is None:
        return []
    rows = []
    for domain in frontier.get("domains", []):
        ours = point[domain]
        for name, label in REFERENCE_LABELS.items():
            theirs = at_skip(curves[name], domain, ours["param_skip"]) if name in curves else None
            if theirs is None:
                continue
            rows.append({"router": router, "reference": name, "label": label, "domain": domain,
                         "param_skip": ours["param_skip"], "adapters_of": curves[name].get("adapters_of"),
                         **{f"router_{k}": ours[k] for k in ("perplexity_ratio", "ratio_low", "ratio_high")},
                         **{f"reference_{k}": theirs[k] for k in ("perplexity_ratio", "ratio_low", "ratio_high")}})
    return rows


def frontier_curves(frontier: dict, router: str = DEFAULT_CHECKPOINT) -> dict[str, dict]:
    """The curves a reader needs to see the router among its references: the router, the runs it is read against
    (its twins) and every reference, each as per-domain lists of (param skip, ratio, low, high), sorted by skip."""
    curves = frontier.get("curves", {})
    if router not in curves:
        return {}
    names = [router, *counterparts(router, list(curves)), *(n for n in REFERENCE_LABELS if n in curves)]
    return {name: {"kind": curves[name].get("kind", "checkpoint"), "adapters_of": curves[name].get("adapters_of"),
                   **{domain: sorted([p[domain]["param_skip"], p[domain]["perplexity_ratio"], p[domain]["ratio_low"],
                                      p[domain]["ratio_high"]] for p in curves[name]["points"] if domain in p)
                      for domain in frontier.get("domains", [])}}
            for name in dict.fromkeys(names)}


def baseline_words(measured: dict | None) -> str:
    """The router against each reference at its own param skip, domain by domain, from the intervals."""
    rows = (measured or {}).get("baselines") or []
    if not rows:
        return ("No measurement of the routers against fixed baselines ships with this install "
                "(hero_core/checkpoints/measured.json; `make results` writes it).")
    skips = ", ".join(dict.fromkeys(f"{r['domain']} {r['param_skip']:.1%}" for r in rows))
    parts = []
    for name, label in REFERENCE_LABELS.items():
        mine = [r for r in rows if r["reference"] == name]
        if not mine:
            continue
        said = {}
        for r in mine:
            word = ("ahead" if r["router_ratio_high"] < r["reference_ratio_low"] else
                    "behind" if r["router_ratio_low"] > r["reference_ratio_high"] else "no clear difference")
            said.setdefault(word, []).append(r["domain"])
        parts.append(f"{label}: " + ", ".join(f"{word} on {_listed(ds)}" for word, ds in said.items()))
    return (f"**{rows[0]['router']}** against the references at its own param skip ({skips}), by held-out "
            "perplexity ratio (ahead or behind only where the 95 % intervals are apart) — " + "; ".join(parts) + ".")


def _listed(items: list[str]) -> str:
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} and {items[-1]}"


def _mean(values: list[float]) -> float | None:
    finite = [v for v in values if isinstance(v, (int, float)) and math.isfinite(v)]
    return sum(finite) / len(finite) if finite else None


def summarise(results: dict) -> dict[str, Any]:
    """The summary the app reads, from the content of docs/results.json."""
    frontier = results.get("frontier", {})
    entropy = {name: {"mean": _mean([d["normalised_entropy"] for d in by_domain.values()]),
                      **{domain: d["normalised_entropy"] for domain, d in by_domain.items()}}
               for name, by_domain in results.get("memory_entropy", {}).items()}
    return {"format_version": FORMAT_VERSION, "source": "docs/results.json (scripts/make_frontier.py)",
            "backbone": frontier.get("backbone"), "texts_per_domain": frontier.get("limit"),
            "max_tokens": frontier.get("max_tokens"),
            "split": frontier.get("split"), "history_vs_local": history_rows(frontier),
            "matched": matched_rows(frontier), "baselines": baseline_rows(frontier),
            "frontier": frontier_curves(frontier), "memory_entropy": entropy}


def write(results_path: Path = RESULTS_FILE, out: Path = MEASURED_FILE) -> Path:
    results = json.loads(Path(results_path).read_text(encoding="utf-8"))
    return atomic_write_text(out, json.dumps(summarise(results), indent=1, sort_keys=True) + "\n")


def load(path: Path = MEASURED_FILE) -> dict | None:
    """The summary, or None when it is absent or unreadable (the pages then say the result is unavailable)."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and data.get("format_version") == FORMAT_VERSION else None


def history_words(measured: dict | None) -> str:
    """One paragraph: what this backbone's hero-vs-local comparison at equal compute found, from the numbers."""
    rows = (measured or {}).get("history_vs_local") or []
    if not rows:
        return ("No measured comparison of the history against the local router is available in this install "
                "(hero_core/checkpoints/measured.json is missing or empty; `make results` writes it).")
    counts = {v: sum(r["verdict"] == v for r in rows) for v in ("history better", "history worse",
                                                                  "no clear difference")}
    pairs = sorted({f"{r['hero']} / {r['local']}" for r in rows})
    domains = sorted({r["domain"] for r in rows})
    return (f"On {measured.get('backbone') or 'this backbone'} ({', '.join(pairs)}; "
            f"{measured.get('texts_per_domain') or '?'} held-out texts in each of {', '.join(domains)}; perplexity "
            f"ratio to the dense model at the hero checkpoint's own param skip), the router with history was clearly "
            f"better (95 % intervals apart) in **{counts['history better']}**, clearly worse in "
            f"**{counts['history worse']}** and not clearly different in **{counts['no clear difference']}** of "
            f"{len(rows)} budget × domain comparisons.")


def history_in_domains(measured: dict | None, domains: tuple[str, ...]) -> str | None:
    """The verdicts restricted to ``domains`` (those a claim is about), or None when none was measured there."""
    rows = [r for r in (measured or {}).get("history_vs_local") or [] if r["domain"] in domains]
    if not rows:
        return None
    counts = [sum(r["verdict"] == v for r in rows) for v in ("history better", "history worse",
                                                              "no clear difference")]
    return (f"On {' and '.join(domains)} the router with history was clearly better in **{counts[0]}**, clearly "
            f"worse in **{counts[1]}** and not clearly different in **{counts[2]}** of {len(rows)} comparisons.")


def memory_entropy_of(measured: dict | None, checkpoint: str) -> float | None:
    """The mean normalised read entropy measured for a bundled checkpoint on held-out text (None if unknown)."""
    found = (measured or {}).get("memory_entropy", {}).get(checkpoint)
    return None if not found else found.get("mean")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", type=Path, nargs="?", default=RESULTS_FILE)
    parser.add_argument("--out", type=Path, default=MEASURED_FILE)
    args = parser.parse_args(argv)
    return say_wrote(write(args.results, args.out))


if __name__ == "__main__":
    raise SystemExit(main())
