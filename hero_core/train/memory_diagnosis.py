"""Why a trained router's depth memory reads uniformly and learns nothing: the measurements behind
docs/experiments/memory-diagnosis (``scripts/memory_diagnosis.py`` runs them on the bundled checkpoints).

Five things are measured, each by one function here so tests can run them on the tiny model:

* **gradients** (:func:`text_gradients`, :func:`gradient_ratios`, :func:`gradient_consistency`): one backward of
  KL(dense || routed) summed over tokens, in training semantics (the straight-through call of hero_core.train.train),
  per parameter group as grad-norm / param-norm, and how consistent the per-text gradients of the memory's
  parameters are across texts (pairwise cosine; Adam's step share |mean g| / rms g);
* **the read** (:func:`read_statistics`): normalised entropy of every memory-attention row with >= 2 entries
  and the spread max/min of its weights, of the read itself, of the scores alone (alpha / decay) and of the
  decay alone, so one sees which of the two makes the read non-uniform;
* **keys and queries across depth** (:func:`depth_similarity`): the cosine between k_j = W_k s_j (and q_j) of
  different blocks of one token, raw and through the elu1 feature map;
* **rho and the weights** (:func:`forgetting_movement`, :func:`adam_eta_bound`, :func:`movement_since_bundled_stage`):
  how far eta moved from its init, and every group from the bundled stage a continuation started at, beside the
  farthest Adam could move one weight over the learning-rate schedule in between;
* **references by construction** (:func:`random_elu1_read`, :func:`scaled_dot_read`): the linear-attention read
  of random Gaussian q, k, and a softmax(q.k / sqrt(d_m)) read of the trained q, k.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

from hero_core.measures.metrics import kl_divergence, log_probs
from hero_core.method.memory import feature_map

# Parameter groups of a HeroRouter, by the first part of the parameter's name; memory_log_scale exists only for
# the softmax kernel. "adapters" sums the per-block adapters.
PARAM_GROUPS = ("state_encoder", "path_encoder", "to_q", "to_k", "to_v", "eta", "novelty_state", "novelty_context",
                "history_head", "local_head", "adapters", "memory_log_scale")
HEADS = ("history_head", "local_head")  # the reference the memory's gradients are compared with
# Per-text gradients are kept for these only: the memory's read parameters, and the heads as a contrast.
CONSISTENCY_GROUPS = ("to_q", "to_k", "eta", "memory_log_scale", *HEADS)
SPREAD_FLOOR = 1e-12  # a weight below this counts as this in max/min (a softmax read can reach 0)


def parameter_group(name: str) -> str:
    """The group of a router parameter name ("adapters.3.w1.weight" -> "adapters")."""
    return name.split(".", 1)[0]


# -- gradients ---------------------------------------------------------------------------------------------
def kl_to_dense(hero, input_ids: torch.Tensor, variant: str) -> torch.Tensor:
    """KL(dense || routed) of the next-token distributions, summed over the tokens of ``input_ids`` (1, T), with
    its graph: the routed call as hero_core.train.train makes it (records, gates with graph, straight-through)."""
    with torch.no_grad():
        dense = hero.forward(input_ids, None, hero.new_call("dense", record=False), use_cache=False)
    call = hero.new_call(variant, record=True, keep_gates=True, straight_through=True)
    with torch.enable_grad():
        routed = hero.forward(input_ids, None, call, use_cache=False)
        return kl_divergence(log_probs(dense), log_probs(routed)).sum()


@dataclass
class TextGradients:
    """Gradients of the summed KL over a set of texts: ``total`` per parameter name (the gradient of one loss
    summed over every text), ``per_text`` per text for :data:`CONSISTENCY_GROUPS` (flattened per group)."""

    total: dict[str, torch.Tensor]
    per_text: list[dict[str, torch.Tensor]]
    n_tokens: int


def text_gradients(hero, token_ids: Sequence[torch.Tensor], variant: str | None = None) -> TextGradients:
    """Backward of KL(dense || routed) once per text; the sum of the per-text gradients is the gradient of the
    KL summed over all texts and tokens (one backward per text only keeps the graphs small)."""
    router = hero.router
    variant = variant or router.config.variant
    named = [(n, p) for n, p in router.named_parameters() if p.requires_grad]
    total = {n: torch.zeros_like(p) for n, p in named}
    per_text, n_tokens = [], 0
    for ids in token_ids:
        router.zero_grad(set_to_none=True)
        kl_to_dense(hero, ids, variant).backward()
        n_tokens += ids.shape[-1]
        grads = {n: p.grad.detach().clone() if p.grad is not None else torch.zeros_like(p) for n, p in named}
        for n, g in grads.items():
            total[n] += g
        per_text.append({group: torch.cat([g.reshape(-1) for n, g in grads.items() if parameter_group(n) == group])
                         for group in CONSISTENCY_GROUPS if any(parameter_group(n) == group for n in grads)})
    router.zero_grad(set_to_none=True)
    return TextGradients(total=total, per_text=per_text, n_tokens=n_tokens)


def _group_norms(router, total: dict[str, torch.Tensor]) -> dict[str, tuple[float, float, int]]:
    """(grad norm, param norm, number of elements) per group present in the router."""
    sums: dict[str, list[float]] = {}
    for name, p in router.named_parameters():
        if name not in total:
            continue
        row = sums.setdefault(parameter_group(name), [0.0, 0.0, 0])
        row[0] += float(total[name].double().pow(2).sum())
        row[1] += float(p.detach().double().pow(2).sum())
        row[2] += p.numel()
    return {g: (math.sqrt(a), math.sqrt(b), int(n)) for g, (a, b, n) in sums.items()}


def gradient_ratios(router, grads: TextGradients) -> dict[str, dict[str, float]]:
    """Per parameter group: grad norm, param norm, their ratio, that ratio relative to the heads' (history and
    local head taken as one group), and the per-element RMS of the gradient of the *mean* KL per token (the
    scale training's loss has, to set beside Adam's eps = 1e-8)."""
    norms = _group_norms(router, grads.total)
    head_grad = math.sqrt(sum(norms[h][0] ** 2 for h in HEADS if h in norms))
    head_param = math.sqrt(sum(norms[h][1] ** 2 for h in HEADS if h in norms))
    head_ratio = head_grad / head_param if head_param > 0 else float("nan")
    out = {}
    for group in PARAM_GROUPS:
        if group not in norms:
            continue
        g, p, n = norms[group]
        ratio = g / p if p > 0 else float("nan")
        out[group] = {"grad_norm": g, "param_norm": p, "ratio": ratio, "ratio_vs_heads": ratio / head_ratio,
                      "numel": n, "grad_rms_mean_loss": g / math.sqrt(n) / max(grads.n_tokens, 1)}
    return out


def mean_pairwise_cosine(vectors: Sequence[torch.Tensor]) -> float:
    """Mean cosine similarity over all pairs of distinct vectors (NaN with fewer than two; a zero vector's
    cosine counts as 0)."""
    if len(vectors) < 2:
        return float("nan")
    unit = F.normalize(torch.stack([v.double().reshape(-1) for v in vectors]), dim=1)
    gram = unit @ unit.T
    n = len(vectors)
    return float((gram.sum() - gram.diagonal().sum()) / (n * (n - 1)))


def adam_step_share(vectors: Sequence[torch.Tensor]) -> float:
    """Mean over elements of |mean_t g_t| / sqrt(mean_t g_t^2) across texts t: the size of Adam's step relative to
    its learning rate once m and v have averaged over many texts (1 when every text pushes the same way, about
    0.8 / sqrt(n) for n texts of pure noise)."""
    stacked = torch.stack([v.double().reshape(-1) for v in vectors])
    rms = stacked.pow(2).mean(0).sqrt()
    keep = rms > 0
    if not bool(keep.any()):
        return float("nan")
    return float((stacked.mean(0).abs()[keep] / rms[keep]).mean())


def noise_step_share(n_texts: int, samples: int = 20000, seed: int = 0) -> float:
    """:func:`adam_step_share` of pure noise (independent Gaussian gradients) over ``n_texts`` texts, by sampling:
    the floor a gradient without signal reaches (1 for one text, ~0.8 / sqrt(n) for many)."""
    g = torch.Generator().manual_seed(seed)
    return adam_step_share(list(torch.randn(n_texts, samples, generator=g, dtype=torch.float64)))


def gradient_consistency(grads: TextGradients) -> dict[str, dict[str, float]]:
    """Per group of :data:`CONSISTENCY_GROUPS`: the mean pairwise cosine of the per-text gradients (signal: near
    1; noise: 0 +- 1 / sqrt(numel)), Adam's step share, and the pure-noise references of both."""
    out = {}
    n = len(grads.per_text)
    noise = noise_step_share(n) if n else float("nan")
    for group in CONSISTENCY_GROUPS:
        vectors = [t[group] for t in grads.per_text if group in t]
        if not vectors:
            continue
        numel = vectors[0].numel()
        out[group] = {"mean_cosine": mean_pairwise_cosine(vectors), "n_texts": n, "numel": numel,
                      "noise_cosine_sd": 1.0 / math.sqrt(numel), "adam_step_share": adam_step_share(vectors),
                      "noise_step_share": noise}
    return out


# -- the read ----------------------------------------------------------------------------------------------
def normalised_entropy(weights: np.ndarray) -> np.ndarray:
    """Entropy of each row of ``weights`` (n, m), m >= 2, renormalised to sum 1, divided by log m: 1 for a
    uniform row, 0 for a one-hot row."""
    w = np.asarray(weights, dtype=np.float64)
    if w.ndim != 2 or w.shape[1] < 2:
        raise ValueError(f"need rows of at least two weights, got shape {w.shape}")
    p = w / w.sum(axis=1, keepdims=True)
    plogp = np.where(p > 0, p * np.log(np.where(p > 0, p, 1.0)), 0.0)
    return -plogp.sum(axis=1) / math.log(w.shape[1])


def weight_spread(weights: np.ndarray) -> np.ndarray:
    """max / min of each row of ``weights`` (n, m) (1 for a uniform row); weights below SPREAD_FLOOR count as it."""
    w = np.asarray(weights, dtype=np.float64)
    return w.max(axis=1) / np.maximum(w.min(axis=1), SPREAD_FLOOR)


def decay_matrix(rho: np.ndarray) -> np.ndarray:
    """decay[j, i] = prod_{m=i+1..j-1} rho_m (0-based j, i; i < j, else 0): the weight the memory's decay gives
    entry i when block j reads it (hero_core.method.memory.DepthMemory.write)."""
    rho = np.asarray(rho, dtype=np.float64)
    R = len(rho)
    decay = np.zeros((R, R))
    for j in range(1, R):
        decay[j, :j] = np.cumprod(np.concatenate([[1.0], rho[1:j][::-1]]))[::-1]
    return decay


def _summary(entropy: np.ndarray, spread: np.ndarray) -> dict[str, float]:
    return {"normalised_entropy": float(entropy.mean()), "spread_mean": float(spread.mean()),
            "spread_median": float(np.median(spread)), "n_rows": int(len(entropy))}


def read_rows(memory_attention: np.ndarray, rho: np.ndarray) -> list[tuple[np.ndarray, np.ndarray]]:
    """(alpha rows (T, j), decay row (j,)) of every routed block j (0-based) with >= 2 earlier entries, from a
    trace's memory_attention (T, R, R); rows with no weight (no memory read) are dropped."""
    decay = decay_matrix(rho)
    out = []
    for j in range(2, memory_attention.shape[1]):
        rows = memory_attention[:, j, :j]
        rows = rows[rows.sum(axis=1) > 1e-12]
        if len(rows):
            out.append((rows, decay[j, :j]))
    return out


def read_statistics(traces: Sequence, rho: np.ndarray) -> dict[str, dict[str, float]]:
    """Entropy and spread of the memory reads of ``traces`` (rows with >= 2 entries, pooled): of the read alpha,
    of the scores alone (alpha / decay: what q and k choose) and of the decay alone (what rho alone makes)."""
    pooled: dict[str, list[np.ndarray]] = {k: [] for k in ("read_h", "read_s", "score_h", "score_s",
                                                              "decay_h", "decay_s")}
    for trace in traces:
        for alpha, decay in read_rows(trace.memory_attention, rho):
            scores = alpha / decay[None]
            pooled["read_h"].append(normalised_entropy(alpha))
            pooled["read_s"].append(weight_spread(alpha))
            pooled["score_h"].append(normalised_entropy(scores))
            pooled["score_s"].append(weight_spread(scores))
            flat = np.broadcast_to(decay, alpha.shape)
            pooled["decay_h"].append(normalised_entropy(flat))
            pooled["decay_s"].append(weight_spread(flat))
    if not pooled["read_h"]:
        return {}
    cat = {k: np.concatenate(v) for k, v in pooled.items()}
    return {"read": _summary(cat["read_h"], cat["read_s"]), "scores": _summary(cat["score_h"], cat["score_s"]),
            "decay_only": _summary(cat["decay_h"], cat["decay_s"])}


# -- keys and queries across depth -------------------------------------------------------------------------
def block_cosine(vectors: torch.Tensor) -> float:
    """Mean cosine between the vectors of different blocks of the same token, for ``vectors`` (R, T, d):
    1 when every block of a token gives the same direction."""
    unit = F.normalize(vectors.double(), dim=-1)
    gram = torch.einsum("rtd,std->trs", unit, unit)  # (T, R, R)
    R = vectors.shape[0]
    if R < 2:
        return float("nan")
    return float(((gram.sum((1, 2)) - gram.diagonal(dim1=1, dim2=2).sum(1)) / (R * (R - 1))).mean())


def projections(router, states: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """q_j = W_q s_j and k_j = W_k s_j for router states (R, T, d_s): each (R, T, d_m)."""
    with torch.no_grad():
        s = states.to(router.to_q.weight.dtype)
        return router.to_q(s), router.to_k(s)


def depth_similarity(router, states: torch.Tensor) -> dict[str, float]:
    """Across the blocks of one token: the mean cosine of keys, of queries, and of their elu1 features phi(.)
    (what a linear-attention score multiplies), with the mean norms of q and k."""
    q, k = projections(router, states)
    return {"key_cosine": block_cosine(k), "query_cosine": block_cosine(q),
            "key_feature_cosine": block_cosine(feature_map(k)), "query_feature_cosine": block_cosine(feature_map(q)),
            "key_norm": float(k.norm(dim=-1).mean()), "query_norm": float(q.norm(dim=-1).mean())}


def kernel_scores(router, states: torch.Tensor) -> list[np.ndarray]:
    """The router kernel's scores without decay, phi(q_j).phi(k_i) (elu1) or exp(beta q_j.k_i) (softmax), for
    every block j (0-based) with >= 2 earlier entries: rows (T, j), in the order of :func:`read_rows`."""
    q, k = projections(router, states)
    softmax = router.config.memory_kernel == "softmax"
    if not softmax:
        q, k = feature_map(q), feature_map(k)
    rows = []
    for j in range(2, q.shape[0]):
        dots = torch.einsum("td,itd->ti", q[j], k[:j]).double()
        if softmax:
            dots = torch.softmax(dots * float(router.memory_scale().detach()), dim=1)
        rows.append(dots.numpy())
    return rows


def scaled_dot_read(router, states: torch.Tensor) -> dict[str, float]:
    """What softmax(q_j.k_i / sqrt(d_m)) over the earlier blocks would read with the trained q, k (no decay):
    whether the geometry the memory learned could select anything under the usual attention scaling."""
    q, k = projections(router, states)
    scale = 1.0 / math.sqrt(q.shape[-1])
    entropy, spread = [], []
    for j in range(2, q.shape[0]):
        alpha = torch.softmax(torch.einsum("td,itd->ti", q[j], k[:j]).double() * scale, dim=1).numpy()
        entropy.append(normalised_entropy(alpha))
        spread.append(weight_spread(alpha))
    if not entropy:
        return {}
    return _summary(np.concatenate(entropy), np.concatenate(spread))


def random_elu1_read(n_rows: int = 300, n_keys: int = 29, d: int = 64, scale: float = 1.0,
                     seed: int = 0) -> dict[str, float]:
    """The elu1 read of random Gaussian q, k (entries N(0, scale^2)), no decay: n_rows queries over n_keys keys
    each. Features ELU + 1 are positive, so every score is a sum of positive terms and the read is flat unless
    q and k are large."""
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(n_rows, d, generator=g, dtype=torch.float64) * scale
    k = torch.randn(n_rows, n_keys, d, generator=g, dtype=torch.float64) * scale
    scores = torch.einsum("nd,nkd->nk", feature_map(q), feature_map(k)).numpy()
    return _summary(normalised_entropy(scores), weight_spread(scores)) | {"scale": scale, "d": d, "n_keys": n_keys}


# -- rho ---------------------------------------------------------------------------------------------------
def forgetting_movement(router) -> dict[str, float]:
    """rho = sigmoid(eta) against the config's rho_init: range, largest move of rho and of eta, and
    d rho / d eta = rho (1 - rho) at the init (how much rho a unit of eta buys)."""
    rho_init = float(router.config.rho_init)
    eta_init = math.log(rho_init / (1 - rho_init))
    eta = router.eta.detach().double()
    rho = torch.sigmoid(eta)
    return {"rho_init": rho_init, "rho_min": float(rho.min()), "rho_max": float(rho.max()),
            "max_abs_rho_change": float((rho - rho_init).abs().max()), "eta_init": eta_init,
            "max_abs_eta_change": float((eta - eta_init).abs().max()),
            "drho_deta_at_init": rho_init * (1 - rho_init)}


def training_stages(training: dict, stage_lr: Callable[[str], float | None]) -> list[dict]:
    """The stages a checkpoint trained through, oldest first: checkpoint, steps, peak lr, warmup and the memory's
    learning-rate multiplier. An earlier stage's record keeps no learning rate, so ``stage_lr(name)`` supplies it
    (None: unknown); its multiplier is taken as 1 (the recipe's default; the record keeps none either)."""
    cfg = training.get("train_config", {})
    stages = [{"checkpoint": s.get("checkpoint"), "steps": s.get("steps"), "lr": stage_lr(s.get("checkpoint", "")),
               "warmup": cfg.get("warmup", 0.03), "memory_lr_scale": 1.0}
              for s in training.get("earlier_stages", [])]
    stages.append({"checkpoint": "(this one)", "steps": training.get("steps_done", cfg.get("steps")),
                   "lr": cfg.get("lr"), "warmup": cfg.get("warmup", 0.03),
                   "memory_lr_scale": cfg.get("memory_lr_scale") or 1.0})
    return stages


def adam_eta_bound(stages: Sequence[dict]) -> float:
    """The farthest Adam moves one parameter over these stages: the sum of the learning rate over every step
    (hero_core.train.train_config.lr_at's warmup and cosine), i.e. a step of lr each time, what a gradient of
    constant sign gives. NaN when a stage's rate is unknown."""
    from hero_core.train.train_config import TrainConfig, lr_at  # training's own schedule

    total = 0.0
    for stage in stages:
        if stage["lr"] is None or stage["steps"] is None:
            return float("nan")
        cfg = TrainConfig(out="-", lr=float(stage["lr"]), steps=int(stage["steps"]), warmup=float(stage["warmup"]))
        total += stage["memory_lr_scale"] * sum(lr_at(step, cfg) for step in range(cfg.steps))
    return total


def parameter_movement(before, after) -> dict[str, dict[str, float]]:
    """How far each parameter group of router ``after`` lies from ``before`` (same config): the largest and the
    RMS change of one element (to set beside :func:`adam_eta_bound`), and ||after - before|| / ||before||."""
    old = dict(before.named_parameters())
    sums: dict[str, list[float]] = {}
    for name, p in after.named_parameters():
        delta = (p.detach().double() - old[name].detach().double()).reshape(-1)
        row = sums.setdefault(parameter_group(name), [0.0, 0.0, 0.0, 0])
        row[0] = max(row[0], float(delta.abs().max()))
        row[1] += float(delta.pow(2).sum())
        row[2] += float(old[name].detach().double().pow(2).sum())
        row[3] += delta.numel()
    return {g: {"max_abs_change": big, "rms_change": math.sqrt(sq / n),
                "relative_change": math.sqrt(sq / norm) if norm > 0 else float("nan")}
            for g, (big, sq, norm, n) in sums.items()}


def movement_since_bundled_stage(router, training: dict, stage_lr: Callable[[str], float | None]) -> dict | None:
    """:func:`parameter_movement` from the latest earlier stage of this checkpoint that is bundled (a continuation's
    exact start, or a stage on its way), with the Adam bound of the stages after it; None without such a stage."""
    from hero_core.method import checkpoint as ckpt

    stages = training_stages(training, stage_lr)
    bundled = set(ckpt.bundled_names())
    for k in range(len(stages) - 2, -1, -1):
        name = stages[k]["checkpoint"]
        if name in bundled:
            start = ckpt.build_router(ckpt.read_checkpoint(name))
            if start.config.to_dict() | {"extra": None} != router.config.to_dict() | {"extra": None}:
                continue  # another variant or shape: not this checkpoint's start
            return {"from": name, "steps": sum(s["steps"] for s in stages[k + 1:]),
                    "adam_bound": adam_eta_bound(stages[k + 1:]), "groups": parameter_movement(start, router)}
    return None


# -- one checkpoint ----------------------------------------------------------------------------------------
def diagnose(hero, texts: Sequence[str], *, max_tokens: int = 128,
             stage_lr: Callable[[str], float | None] = lambda name: None) -> dict:
    """Every measurement above for the router of ``hero`` on ``texts`` (each cut to ``max_tokens`` tokens)."""
    router = hero.router
    token_ids = [hero.encode([t], max_tokens=max_tokens).input_ids for t in texts]
    grads = text_gradients(hero, token_ids)
    traces = [hero.trace(t, record_states=True, max_tokens=max_tokens) for t in texts]
    states = torch.cat([torch.from_numpy(t.states["router_state"]) for t in traces], dim=1)  # (R, sum T, d_s)
    rho = router.forgetting().detach().double().numpy()
    stages = training_stages(hero.training_info, stage_lr)
    bound = adam_eta_bound(stages)
    movement = forgetting_movement(router)
    return {
        "variant": router.config.variant, "memory_kernel": router.config.memory_kernel, "tau": router.config.tau,
        "n_texts": len(texts), "n_tokens": grads.n_tokens,
        "gradients": gradient_ratios(router, grads), "consistency": gradient_consistency(grads),
        "read": read_statistics(traces, rho), "depth_similarity": depth_similarity(router, states),
        "scaled_dot_read": scaled_dot_read(router, states),
        "rho": movement | {"adam_eta_bound": bound,
                           "adam_rho_bound": bound * movement["drho_deta_at_init"]},
        "stages": stages, "movement": movement_since_bundled_stage(router, hero.training_info, stage_lr),
    }
