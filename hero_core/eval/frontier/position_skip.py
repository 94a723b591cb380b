"""Skip by absolute token position: how much routing depends on where a token sits, not what it is.

Why this exists: the routers were trained on 128-token blocks, and token 0 is the attention sink (it skips most
FFNs). A relative-position chart hides both effects; a prompt-level param skip mixes them in. Everything here
bins tokens by their absolute index in the item (token 0 alone), and reports param skip with and without the
first token.

Two halves:

* pure table work, torch-free (the app and :class:`hero_core.eval.sweep.run.SweepResult` use it):
  :data:`POSITION_EDGES`,
  :func:`position_bins`, :func:`bin_label`, :func:`param_skip_excluding_first`, :func:`bin_table`;
* the measurement behind ``scripts/position_skip.py``: held-out texts of each domain packed into long sequences
  (:func:`pack_texts`), traced under each checkpoint (:func:`measure`), summarised per bin with the ratio
  skip(512-2047) / skip(16-127) (:func:`summarise`), rendered as a table (:func:`markdown_table`) and a figure
  (:func:`position_skip_figure`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence

import numpy as np
import pandas as pd

from hero_core.method.model import DEFAULT_CHECKPOINT

POSITION_EDGES: tuple[float, ...] = (0, 1, 16, 128, 512, 2048, math.inf)
FIRST_TOKEN_LABEL = "0 (first token)"
DEFAULT_CHECKPOINTS = (DEFAULT_CHECKPOINT, "local-10", "hero-25")  # the default, a local router, a 25 % budget
SEQUENCE_TOKENS = 2048
# The ratio compares far positions with the ones the routers were trained on (past the sink, inside 128 tokens).
RATIO_NEAR, RATIO_FAR = 16, 512  # start edges of the two bins compared
TARGET_RATIO = 0.75  # skip(512-2047) within 25 % of skip(16-127)
TOKEN_COLUMNS = ("token_index", "ffn_executed", "ffn_skipped", "skip_rate", "param_skip")


# -- bins -------------------------------------------------------------------------------------------
def check_edges(edges: Sequence[float]) -> tuple[float, ...]:
    """``edges`` as a tuple, after checking they start at 0 and strictly increase (bins are [e_i, e_{i+1}))."""
    edges = tuple(edges)
    if len(edges) < 2 or edges[0] != 0:
        raise ValueError(f"position edges must start at 0 and hold at least two values, got {edges}")
    if any(b <= a for a, b in zip(edges, edges[1:])):
        raise ValueError(f"position edges must strictly increase, got {edges}")
    return edges


def bin_label(start: float, stop: float) -> str:
    """A readable label for the token indices in [start, stop): ``0 (first token)``, ``1-15``, ``2048+``."""
    if stop == start + 1:
        return FIRST_TOKEN_LABEL if start == 0 else f"{int(start)}"
    if math.isinf(stop):
        return f"{int(start)}+"
    return f"{int(start)}-{int(stop) - 1}"


def position_bins(positions: np.ndarray | Sequence[int], edges: Sequence[float] = POSITION_EDGES) -> np.ndarray:
    """The bin index of each absolute token index (bin i holds edges[i] <= position < edges[i + 1])."""
    edges = check_edges(edges)
    positions = np.asarray(positions)
    if len(positions) and (positions.min() < 0 or positions.max() >= edges[-1]):
        raise ValueError(f"token positions must lie in [0, {edges[-1]}); got {positions.min()}..{positions.max()}")
    return np.searchsorted(np.asarray(edges, dtype=float), positions, side="right") - 1


def param_skip_excluding_first(per_token: np.ndarray | Sequence[float]) -> float:
    """Param skip averaged over every token but the first (NaN for a one-token item, which has none left).

    Why: token 0 is the attention sink and skips far more FFNs than any other token, so on short prompts it
    alone lifts the pooled figure; this is the figure a long text would approach."""
    per_token = np.asarray(per_token, dtype=float)
    return float(per_token[1:].mean()) if len(per_token) > 1 else float("nan")


def bin_table(tokens: pd.DataFrame, by: Sequence[str] = ("run",),
              edges: Sequence[float] = POSITION_EDGES) -> pd.DataFrame:
    """Per (``by`` keys, absolute-position bin): n_tokens, skip rate, FFNs run and skipped per token, param skip.

    ``tokens`` has one row per token with :data:`TOKEN_COLUMNS` (``param_skip`` may be missing: then NaN, as in
    tables saved before it was recorded). Only bins that hold tokens appear, in position order."""
    edges = check_edges(edges)
    by = list(by)
    t = tokens.assign(bin=position_bins(tokens.token_index.to_numpy(), edges))
    if "param_skip" not in t:
        t = t.assign(param_skip=np.nan)
    if "ffn_skipped" not in t:  # older tables: recover it from the per-token skip rate and FFNs run
        routed = t.ffn_executed / (1.0 - t.skip_rate).where(t.skip_rate < 1.0)
        t = t.assign(ffn_skipped=routed - t.ffn_executed)
    g = t.groupby([*by, "bin"], sort=True).agg(
        n_tokens=("token_index", "size"), skip_rate=("skip_rate", "mean"),
        ffn_executed_per_token=("ffn_executed", "mean"), ffn_skipped_per_token=("ffn_skipped", "mean"),
        param_skip=("param_skip", "mean")).reset_index()
    g.insert(len(by) + 1, "label", [bin_label(edges[b], edges[b + 1]) for b in g["bin"]])
    g.insert(len(by) + 2, "start", [edges[b] for b in g["bin"]])
    g.insert(len(by) + 3, "stop", [edges[b + 1] for b in g["bin"]])
    return g


def skip_ratio(table: pd.DataFrame, near: int = RATIO_NEAR, far: int = RATIO_FAR) -> float:
    """FFNs skipped per token in the bin starting at ``far`` over the one starting at ``near`` (one group's
    :func:`bin_table` rows); NaN where either bin is empty or the near one skips nothing."""
    by_start = table.set_index("start").ffn_skipped_per_token
    if near not in by_start.index or far not in by_start.index or by_start[near] == 0:
        return float("nan")
    return float(by_start[far] / by_start[near])


# -- sequences --------------------------------------------------------------------------------------
def pack_texts(texts: Sequence[str], count_tokens: Callable[[str], int], n_sequences: int, max_tokens: int,
               separator: str) -> list[str]:
    """Up to ``n_sequences`` texts, each the next ``texts`` joined by ``separator`` until it holds at least
    ``max_tokens`` tokens (the caller cuts it there). A sequence the texts run out before filling is dropped,
    so every returned sequence is full length; fewer than asked means more texts are needed.

    ``separator`` is the end-of-text token in practice: training joined documents the same way
    (:func:`hero_core.data.blocks.token_blocks`)."""
    sequences, parts, n = [], [], 0
    for text in texts:
        parts.append(text)
        n += count_tokens(text) + (1 if len(parts) > 1 else 0)  # the separator is one token
        if n >= max_tokens:
            sequences.append(separator.join(parts))
            parts, n = [], 0
            if len(sequences) == n_sequences:
                break
    return sequences


def domain_sequences(hero, domain: str, n_sequences: int, max_tokens: int = SEQUENCE_TOKENS) -> list[str]:
    """``n_sequences`` held-out texts of ``domain`` (eval split) of at least ``max_tokens`` tokens each.

    Asks :func:`hero_core.data.texts.domain_texts` for more texts until they fill the sequences (doubling), so chat,
    whose replies are generated and cached once, generates no more than it needs."""
    from hero_core.data.texts import domain_texts

    def count(text: str) -> int:
        return len(hero.tokenizer(text, add_special_tokens=False)["input_ids"])

    n = 8 * n_sequences
    while True:
        texts = domain_texts(domain, "eval", n, hero=hero)
        sequences = pack_texts(texts, count, n_sequences, max_tokens, hero.tokenizer.eos_token)
        if len(sequences) == n_sequences:
            return sequences
        if len(texts) < n:  # the split has no more texts
            raise ValueError(f"{domain}: its eval split fills only {len(sequences)} sequences of {max_tokens} "
                             f"tokens, not {n_sequences}")
        n *= 2


# -- the measurement --------------------------------------------------------------------------------
def trace_tokens(trace) -> pd.DataFrame:
    """The :data:`TOKEN_COLUMNS` of one trace, one row per token (absolute index = position in the item)."""
    from hero_core.analysis.token_table import token_summary

    return token_summary(trace)[list(TOKEN_COLUMNS)]


def trace_sequences(models: Mapping[str, object], sequences: Mapping[str, Sequence[str]],
                    max_tokens: int = SEQUENCE_TOKENS, progress: Callable[[str], None] | None = None) -> pd.DataFrame:
    """Per-token rows (checkpoint, domain, sequence, tau, :data:`TOKEN_COLUMNS`) of every model (name ->
    HeroModel) on every sequence (domain -> texts), each model at its own tau and the variant it was trained as."""
    frames = []
    for name, model in models.items():
        for domain, texts in sequences.items():
            for i, text in enumerate(texts):
                if progress is not None:
                    progress(f"{name} · {domain} · sequence {i + 1}/{len(texts)}")
                trace = model.trace(text, variant=model.config.variant, max_tokens=max_tokens)
                frame = trace_tokens(trace)
                frame.insert(0, "tau", trace.tau)
                frame.insert(0, "sequence", i)
                frame.insert(0, "domain", domain)
                frame.insert(0, "checkpoint", name)
                frames.append(frame)
    return pd.concat(frames, ignore_index=True)


def measure(checkpoints: Sequence[str] = DEFAULT_CHECKPOINTS, domains: Sequence[str] = ("chat", "code", "reasoning"),
            n_sequences: int = 2, max_tokens: int = SEQUENCE_TOKENS, *, device: str = "cpu",
            progress: Callable[[str], None] | None = None) -> pd.DataFrame:
    """:func:`trace_sequences` of the named checkpoints on the same ``n_sequences`` packed held-out sequences
    of each domain.

    The backbone is loaded once, every checkpoint onto it (:func:`hero_core.method.model.load_checkpoints`)."""
    from hero_core.backbones.loading import load_backbone
    from hero_core.method.model import load_checkpoints

    if not checkpoints:
        raise ValueError("give at least one checkpoint")
    models = load_checkpoints(checkpoints, load_backbone(device=device))
    first = models[str(checkpoints[0])]
    if max_tokens > first.max_tokens:
        raise ValueError(f"sequences of {max_tokens} tokens exceed what the model traces ({first.max_tokens})")
    sequences = {d: domain_sequences(first, d, n_sequences, max_tokens) for d in domains}
    return trace_sequences(models, sequences, max_tokens, progress)


def summarise(tokens: pd.DataFrame, edges: Sequence[float] = POSITION_EDGES) -> dict:
    """What the measurement reports, per checkpoint: the bin table pooled over domains and per domain, the
    first token alone, param skip with and without it, and skip(512-2047) / skip(16-127) against the target."""
    out: dict = {"edges": [e if math.isfinite(e) else None for e in edges], "target_ratio": TARGET_RATIO,
                 "checkpoints": {}}
    for name, t in tokens.groupby("checkpoint", sort=False):
        pooled = bin_table(t, by=(), edges=edges)
        per_domain = bin_table(t, by=("domain",), edges=edges)
        ratio = skip_ratio(pooled)
        first = pooled[pooled.start == 0]
        out["checkpoints"][name] = {
            "tau": float(t.tau.iloc[0]), "n_tokens": len(t),
            "n_sequences": int(t.groupby(["domain", "sequence"]).ngroups),
            "param_skip": float(t.param_skip.mean()),
            "param_skip_excluding_first_token": float(t[t.token_index > 0].param_skip.mean()),
            "first_token": _records(first)[0] if len(first) else None,
            "bins": _records(pooled),
            "ratio_far_to_near": ratio, "meets_target": bool(ratio >= TARGET_RATIO) if math.isfinite(ratio) else None,
            "by_domain": {d: {"bins": _records(g.drop(columns="domain")), "ratio_far_to_near": skip_ratio(g)}
                          for d, g in per_domain.groupby("domain", sort=False)}}
    return out


def _records(table: pd.DataFrame) -> list[dict]:
    rows = table.drop(columns=["bin"]).to_dict("records")
    for row in rows:  # JSON has no infinity: an open last bin has stop null
        row["stop"] = None if math.isinf(row["stop"]) else int(row["stop"])
        row["start"] = int(row["start"])
    return rows


# -- rendering --------------------------------------------------------------------------------------
def _num(value) -> float:
    """A number read back from results.json, where NaN was written as null."""
    return float("nan") if value is None else float(value)


def markdown_table(summary: Mapping) -> str:
    """One row per checkpoint: FFNs skipped per token in each bin, param skip with and without token 0, the
    ratio skip(512-2047) / skip(16-127)."""
    labels = list(dict.fromkeys(row["label"] for c in summary["checkpoints"].values() for row in c["bins"]))
    head = ["checkpoint (tau)", *[f"{label}" for label in labels], "param skip %", "param skip % w/o token 0",
            "skip(512-2047) / skip(16-127)"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for name, c in summary["checkpoints"].items():
        by_label = {row["label"]: row for row in c["bins"]}
        cells = [f"{by_label[label]['ffn_skipped_per_token']:.2f}" if label in by_label else "–" for label in labels]
        ratio = _num(c["ratio_far_to_near"])
        verdict = "" if not math.isfinite(ratio) else (" (meets 0.75)" if ratio >= TARGET_RATIO else " (below 0.75)")
        lines.append(f"| {name} ({c['tau']:.2f}) | " + " | ".join(cells) +
                     f" | {100 * c['param_skip']:.1f} | {100 * c['param_skip_excluding_first_token']:.1f} | "
                     f"{ratio:.2f}{verdict} |")
    return "\n".join(lines)


def domain_table(summary: Mapping) -> str:
    """FFNs skipped per token by bin for each (checkpoint, domain), with the domain's own ratio."""
    rows = [(name, d, v) for name, c in summary["checkpoints"].items() for d, v in c["by_domain"].items()]
    labels = list(dict.fromkeys(row["label"] for _, _, v in rows for row in v["bins"]))
    head = ["checkpoint", "domain", *labels, "ratio"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for name, domain, v in rows:
        by_label = {row["label"]: row for row in v["bins"]}
        cells = [f"{by_label[label]['ffn_skipped_per_token']:.2f}" if label in by_label else "–" for label in labels]
        lines.append(f"| {name} | {domain} | " + " | ".join(cells) + f" | {_num(v['ratio_far_to_near']):.2f} |")
    return "\n".join(lines)


def position_skip_figure(summary: Mapping):
    """FFNs skipped per token against the absolute-position bin, one line per checkpoint (a plotly Figure)."""
    import plotly.graph_objects as go

    fig = go.Figure()
    for name, c in summary["checkpoints"].items():
        bins = c["bins"]
        fig.add_trace(go.Scatter(x=[row["label"] for row in bins], y=[row["ffn_skipped_per_token"] for row in bins],
                                 mode="lines+markers", name=name,
                                 customdata=[[row["n_tokens"], row["param_skip"]] for row in bins],
                                 hovertemplate="tokens %{x}: %{y:.2f} FFNs skipped, param skip %{customdata[1]:.1%} "
                                               "(%{customdata[0]} tokens)<extra>" + name + "</extra>"))
    fig.update_layout(title="FFNs skipped per token by absolute position (held-out text, 2,048-token sequences)",
                      template="plotly_white", width=900, height=460,
                      xaxis={"title": "absolute token position (bin of the token index)", "type": "category"},
                      yaxis={"title": "FFNs skipped per token", "rangemode": "tozero"},
                      legend={"orientation": "h", "y": -0.2})
    return fig


def reading(summary: Mapping) -> str:
    """A paragraph stating what the numbers show, generated from them (so a rerun cannot leave it stale)."""
    parts = []
    for name, c in summary["checkpoints"].items():
        by_start = {row["start"]: row for row in c["bins"]}
        first, near, far = by_start.get(0), by_start.get(RATIO_NEAR), by_start.get(RATIO_FAR)
        routed = first["ffn_executed_per_token"] + first["ffn_skipped_per_token"] if first else float("nan")
        text = f"**{name}**: token 0 skips {first['ffn_skipped_per_token']:.0f} of {routed:.0f} routed FFNs" \
            if first else f"**{name}**:"
        if near and far:
            ratio = _num(c["ratio_far_to_near"])
            text += (f"; tokens 16-127 skip {near['ffn_skipped_per_token']:.2f} per token and tokens 512-2047 "
                     f"{far['ffn_skipped_per_token']:.2f}, a ratio of {ratio:.2f}, "
                     + ("within" if ratio >= TARGET_RATIO else "outside") + " the 25 % target (>= 0.75)")
            domain_ratios = ", ".join(f"{d} {_num(v['ratio_far_to_near']):.2f}" for d, v in c["by_domain"].items())
            text += f" (per domain: {domain_ratios})"
        text += (f"; param skip is {100 * c['param_skip']:.1f} % over all tokens and "
                 f"{100 * c['param_skip_excluding_first_token']:.1f} % without each sequence's first token "
                 f"(one token in {c['n_tokens'] // c['n_sequences']}: the sink only moves short prompts' figures).")
        parts.append(text)
    return " ".join(parts)


def readme(results: Mapping) -> str:
    """The experiment note: the command, the setup, the tables and the generated reading."""
    meta, summary = results["meta"], results["summary"]
    sequences = ", ".join(f"{d}: {n}" for d, n in meta["sequences_per_domain"].items())
    return f"""# Skip by absolute token position

Generated by `{meta['command']}` (`--report` re-renders this page from `results.json`).

Held-out text (hero_core.data.texts's eval split) of each domain, whole texts joined by the end-of-text token (as in
training) and cut into sequences of {meta['max_tokens']} tokens ({sequences} sequences per domain), traced by each
checkpoint at its own tau and variant on {meta['device']} ({meta['seconds']:.0f} s). Positions are the token's
index in its sequence, binned with token 0 alone. Skip is FFNs skipped per token, of {meta['n_routed']} routed
FFNs; the ratio is skip(512-2047) / skip(16-127), and the target is a ratio of at least {TARGET_RATIO} (far tokens
within 25 % of the positions the routers were trained on: 128-token blocks). Measuring functions:
`hero_core/eval/frontier/position_skip.py`; figure: `docs/figures/position_skip.png`.

## FFNs skipped per token, by absolute position (all domains pooled)

{markdown_table(summary)}

## Per domain

{domain_table(summary)}

## Reading

{reading(summary)}

{_sample_note(summary)}
"""


def _sample_note(summary: Mapping) -> str:
    """How many tokens the numbers rest on (first checkpoint; every checkpoint reads the same sequences)."""
    c = next(iter(summary["checkpoints"].values()))
    counts = ", ".join(f"{row['label']}: {row['n_tokens']}" for row in c["bins"])
    return (f"Sample size: {c['n_sequences']} sequences ({c['n_tokens']} tokens) per checkpoint; tokens per bin: "
            f"{counts}. The first-token value rests on one token per sequence.")
