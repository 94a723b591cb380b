"""Texts run under several labelled configurations, as the :class:`~hero_core.analysis.analysis.ItemRun` records
the analyses read (flips, quality gaps, token categories).

The analyses themselves are pure functions of traces and logits in :mod:`hero_core.analysis.analysis`; running the
model is measuring, so it lives here, on the one evaluation loop (:func:`hero_core.eval.engine.run_texts`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from hero_core.analysis.analysis import ItemRun
from hero_core.eval.engine import run_texts
from hero_core.eval.methods import HeroMethod


def check_matched(configs: Mapping[str, tuple], match_compute: Mapping[str, str]) -> None:
    """Each matched run and its reference must be routed runs in ``configs``, the reference listed first."""
    order = list(configs)
    for label, reference in match_compute.items():
        if label not in configs or reference not in configs:
            raise ValueError(f"match_compute names a run that is not in configs: {label!r} -> {reference!r}")
        if order.index(reference) >= order.index(label) or "dense" in (configs[reference][1], configs[label][1]):
            raise ValueError(f"{label!r} and its reference {reference!r} must be routed runs, the reference listed "
                             "first")


def run_items(configs: Mapping[str, tuple], texts_by_domain: Mapping[str, Sequence[str]], *,
              max_tokens: int | None = None, record_states: bool = False,
              match_compute: Mapping[str, str] | None = None,
              progress: Callable[[str], None] | None = None) -> list[ItemRun]:
    """Run every text under every configuration ``{label: (HeroModel, variant)}``.

    Each label gets a trace (skipped for ``variant="dense"``, whose trace holds no decisions) and the
    logits, tokenised identically (``max_tokens`` cuts long texts). All models must share a tokenizer.
    ``match_compute`` ``{label: reference_label}`` runs ``label`` at equal compute: on each text at the tau
    whose param skip is closest to the one the reference realised there (the reference must come earlier in
    ``configs``; the trace records the tau and ``tau_rule``). ``progress`` is called after each text."""
    if not configs:
        raise ValueError("configs is empty: pass {label: (HeroModel, variant)}")
    match_compute = dict(match_compute or {})
    check_matched(configs, match_compute)
    methods = [HeroMethod(model, variant, name=label) for label, (model, variant) in configs.items()]
    traced = [label for label, (_, variant) in configs.items() if variant != "dense"]
    tokenizer_of = next(iter(configs.values()))[0]
    runs: list[ItemRun] = []
    total = sum(len(v) for v in texts_by_domain.values())
    for domain, texts in texts_by_domain.items():
        texts = list(texts)
        for text_runs in run_texts(tokenizer_of, methods, texts, keep=("logits",), traced=traced,
                                   record_states=record_states, match_compute=match_compute,
                                   max_tokens=max_tokens):
            traces = {label: run.trace for label, run in text_runs.runs.items() if run.trace is not None}
            logits = {label: run.logits.cpu() for label, run in text_runs.runs.items()}
            runs.append(ItemRun(domain, texts[text_runs.index], traces, logits, text_runs.token_ids))
            if progress is not None:
                progress(f"{len(runs)}/{total} {domain}")
    return runs
