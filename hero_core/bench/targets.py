"""The benchmark's JSON schema name and its targets (:data:`TARGETS`), checked on a finished result.

Free of torch so that ``scripts/bench_report.py`` imports them instead of keeping a copy."""

from __future__ import annotations

import math
from typing import Any

SCHEMA = "hero-lens-bench/1"
TARGETS = {  # name -> (description, threshold, direction)
    "prefill_efficiency": ("prefill {shape}, {router}: achieved / ideal speed-up", 0.90, ">="),
    "decode_efficiency": ("decode batch 1, {router}: achieved / ideal speed-up", 0.90, ">="),
    "recording_overhead": ("trace recording (record=True) over record=False", 0.10, "<="),
    "wrapper_overhead": ("dense variant through the wrappers over the bare backbone", 0.05, "<="),
}
TARGET_PREFILL_SHAPE = (4, 512)


def _target(key: str, value: float | None, router: str = "", note: str = "", shape: str = "") -> dict[str, Any]:
    text, threshold, direction = TARGETS[key]
    met = None if value is None or not math.isfinite(value) else (
        value >= threshold if direction == ">=" else value <= threshold)
    return {"key": key, "description": text.format(router=router, shape=shape), "router": router or None,
            "value": value,
            "threshold": threshold, "direction": direction, "met": met, "note": note}


def evaluate_targets(result: dict[str, Any]) -> list[dict[str, Any]]:
    targets = []
    names = list(result.get("routers", {}))
    prefill = result.get("prefill") or []
    if prefill and names:
        exact = [r for r in prefill if (r["batch"], r["tokens"]) == TARGET_PREFILL_SHAPE]
        row = exact[0] if exact else max(prefill, key=lambda r: r["n_tokens"])
        want = "x".join(map(str, TARGET_PREFILL_SHAPE))
        note = "" if exact else f"the target is set at {want}, which this run did not measure; largest shape shown"
        router = "hero-40" if "hero-40" in names else names[-1]
        targets.append(_target("prefill_efficiency", row["routed"][router]["efficiency"], router, note,
                               shape=f"{row['batch']}x{row['tokens']}"))
    decode = [r for r in result.get("decode") or [] if r["batch"] == 1]
    for name in names if decode else []:
        targets.append(_target("decode_efficiency", decode[0]["routed"][name]["efficiency"], name))
    if result.get("recording"):
        targets.append(_target("recording_overhead", result["recording"]["record_ratio"]["median"] - 1.0,
                               result["recording"]["router"]))
    if result.get("overhead"):
        targets.append(_target("wrapper_overhead", result["overhead"]["dense_over_bare"]["median"] - 1.0))
    return targets
