"""Cached model calls: one model per :class:`ModelSpec` (``st.cache_resource``), one result per
(settings, prompt) (``st.cache_data``, as plain serialisable dicts rebuilt into traces).

Every cached call takes the typed, frozen values themselves (a ModelSpec, the sidebar's :class:`Settings`), in
their canonical form, so the cache keys on exactly what was chosen: no tuple that a caller must slice in order.

Models are shared by every session; they hold no per-call state (hero_core passes it through a
ContextVar), so concurrent sessions are safe.
"""

from __future__ import annotations

import copy
import logging
import os
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path

import streamlit as st
import torch

from hero_core import RoutingTrace, load_hero
from hero_core.analysis.attribution import Attribution, explain
from hero_core.backbones.pool import SHARED_BACKBONES
from hero_core.backbones.threads import THREADS_ENV, serving_threads, set_threads
from hero_core.measures.metrics import compare_to_dense, quality_dict
from hero_core.method.model import HeroModel

from .background import BACKGROUND, on_worker
from .settings import DEFAULT_CHOICE, DEFAULT_TAU, ModelSpec, Settings, tiny_mode

log = logging.getLogger(__name__)
WARMUP_PROMPT = "Warm up the kernels."


@dataclass(frozen=True)
class RunSpec:
    """One routed run of a prompt: the model, the variant and threshold, and the prompt itself."""

    model: ModelSpec
    variant: str
    tau: float
    prompt: str
    chat_template: bool = False
    max_tokens: int = 512
    label: str = ""
    kind: str = ""  # what the run is in words: run as trained, or an inference-time ablation (Compare's table)
    checkpoint_name: str = ""  # the loaded checkpoint's name and the variant it was trained as, when known
    trained: str = ""

    @classmethod
    def from_settings(cls, settings: Settings, prompt: str, chat_template: bool, **changes) -> RunSpec:
        fields = {"model": settings.model, "variant": settings.variant, "tau": settings.tau, "prompt": prompt,
                  "chat_template": chat_template, "max_tokens": settings.max_tokens} | changes
        return cls(**fields)

    @property
    def settings(self) -> Settings:
        """What the run computes with, as the cached calls key on it (its labels are for the page only)."""
        return Settings(self.model, self.variant, self.tau, self.max_tokens).canonical()


def _tiny_model(precision: str, device: str) -> HeroModel:
    from hero_core.method.tiny import tiny_backbone, tiny_hero

    hero = tiny_hero(device=device)
    if precision == "bf16":
        backbone = tiny_backbone()
        backbone.model.to(torch.bfloat16)
        return HeroModel(backbone, copy.deepcopy(hero.router), hero.checkpoint_name)
    if precision != "nf4":
        return hero
    # The same tiny weights, saved and re-loaded in 4-bit through the normal loader.
    from hero_core.backbones.loading import load_backbone

    folder = Path(tempfile.mkdtemp(prefix="hero-lens-")) / "tiny-random-llama"
    fresh = tiny_backbone()  # un-wrapped copy of the same seeded weights
    fresh.model.save_pretrained(folder)
    fresh.tokenizer.save_pretrained(folder)
    backbone = load_backbone(folder, quantization="nf4", device=device)
    return HeroModel(backbone, copy.deepcopy(hero.router), hero.checkpoint_name)


# Routers are ~7 MB each and share their backbone (hero_core.backbones.pool holds one per backbone, precision
# and device), so many can stay loaded: Compare with six runs loads the backbone once. Every cached computation
# here takes what a background job computed for it outside the cache's lock (components.background).
@st.cache_resource(show_spinner=False, max_entries=24)
def _load(spec: ModelSpec) -> HeroModel:
    return BACKGROUND.value(_loaded, spec, admit=False)


def _loaded(spec: ModelSpec) -> HeroModel:
    loads = SHARED_BACKBONES.loads
    if spec.tiny:
        hero = _tiny_model(spec.precision, spec.device)
    else:
        hero = load_hero(None if spec.checkpoint == DEFAULT_CHOICE else spec.checkpoint,
                         backbone=spec.backbone or None, quantization=spec.quantization, device=spec.device,
                         dtype="bf16" if spec.precision == "bf16" else "fp32", shared=True)
    # The first forward of a backbone pays one-off costs: pay them inside the loading spinner. A router put on a
    # backbone already in memory pays none (its first trace took what its second did, 0.13 s on the default
    # prompt), so Compare's new checkpoints skip the pass.
    if spec.tiny or SHARED_BACKBONES.loads != loads:
        hero.trace(WARMUP_PROMPT)
    return hero


def load_model(spec: ModelSpec) -> HeroModel:
    """The model for ``spec`` (cached); raises ValueError subclasses with a readable message.

    The real models also fix torch's thread count (hero_core.backbones.threads.serving_threads); the tiny test
    model leaves
    it alone unless ``$HERO_LENS_THREADS`` is set, so headless tests do not change their process."""
    _threads_for(spec)
    with st.spinner(f"Loading {spec.describe()} …"):
        return _load(spec.canonical())


def load_default_model() -> HeroModel:
    """The sidebar's default model, loaded into the cache the pages read (app/serve.py calls it as the server
    starts), with the threads a page would set."""
    spec = ModelSpec(tiny=tiny_mode())
    _threads_for(spec)
    return cached_model(spec)


def _threads_for(spec: ModelSpec) -> None:
    """Torch's threads for a load of ``spec`` (see :func:`load_model`)."""
    if not spec.tiny or THREADS_ENV in os.environ:
        set_threads(serving_threads())


def cached_model(spec: ModelSpec) -> HeroModel:
    """The cached model for ``spec``, loaded without a spinner (callable off a page, e.g. by a background job)."""
    return _cached_call(spec, "", False, _load, spec.canonical())


@st.cache_data(show_spinner=False, max_entries=256)
def _trace_dict(settings: Settings, prompt: str, chat_template: bool) -> dict:
    return BACKGROUND.value(_traced, settings, prompt, chat_template)


def _traced(settings: Settings, prompt: str, chat_template: bool) -> dict:
    hero = cached_model(settings.model)
    # quality=True: the dense model runs on the same tokens, so every route is shown with what it cost
    return hero.trace(prompt, variant=settings.variant, tau=settings.tau, chat_template=chat_template,
                      max_tokens=settings.max_tokens, quality=settings.variant != "dense").to_dict()


@st.cache_data(show_spinner=False, max_entries=256)
def _equal_compute_tau(settings: Settings, prompt: str, chat_template: bool, param_skip: float) -> float:
    """(The search sets its own tau: the caller passes :func:`_tau_free` settings.)"""
    return BACKGROUND.value(_tau_searched, settings, prompt, chat_template, param_skip)


def _tau_searched(settings: Settings, prompt: str, chat_template: bool, param_skip: float) -> float:
    hero = cached_model(settings.model)
    enc = hero.encode([prompt], chat_template=chat_template, max_tokens=settings.max_tokens)
    return hero.tau_for_param_skip(enc.input_ids, enc.attention_mask, settings.variant, param_skip)[0]


def equal_compute_tau(run: RunSpec, param_skip: float, *, page: bool = True) -> float:
    """The tau at which ``run`` realises the param skip closest to ``param_skip`` on its own prompt (``page``:
    with the page's spinner; off a page, without)."""
    return _cached_call(run.model, "Matching compute …", page, _equal_compute_tau, _tau_free(run.settings),
                        run.prompt, run.chat_template, round(float(param_skip), 6))


def _tau_free(settings: Settings) -> Settings:
    """``settings`` for a call that chooses its own taus (the matched-tau search, a sweep): one cache entry whatever
    tau the run had."""
    return replace(settings, tau=DEFAULT_TAU)


def _cached_call(model: ModelSpec, message: str, page: bool, call, *args):
    """``call(*args)`` (a cached computation): on a page after loading ``model`` under its spinner and with
    ``message``'s spinner; off a page plainly; on a background job computed first outside the cache's lock, then
    handed to the cache (a visitor asking for the same key meanwhile never waits for the job)."""
    if on_worker() is not None:
        compute = _BEHIND[call]
        BACKGROUND.prepare(compute, *args)
        try:
            return call(*args)
        finally:
            BACKGROUND.stored(compute, *args)
    if not page:
        return call(*args)
    load_model(model)
    with st.spinner(message):
        return call(*args)


def get_trace(run: RunSpec, *, page: bool = True) -> RoutingTrace:
    return RoutingTrace.from_dict(_cached_call(run.model, "Routing the prompt …", page, _trace_dict, run.settings,
                                               run.prompt, run.chat_template))


@st.cache_data(show_spinner=False, max_entries=64)
def _sweep_dicts(settings: Settings, prompt: str, chat_template: bool, taus: tuple[float, ...]) -> list[dict]:
    return BACKGROUND.value(_swept, settings, prompt, chat_template, taus)


def _swept(settings: Settings, prompt: str, chat_template: bool, taus: tuple[float, ...]) -> list[dict]:
    hero = cached_model(settings.model)
    return [t.to_dict() for t in hero.traces_at_taus(prompt, taus, settings.variant, chat_template=chat_template,
                                                     max_tokens=settings.max_tokens,
                                                     quality=settings.variant != "dense")]


def get_sweep(run: RunSpec, taus: tuple[float, ...], *, page: bool = True) -> list[RoutingTrace]:
    """``run`` at each tau of ``taus`` (its own tau ignored), with quality: a threshold sweep in batched passes
    (``page``: with the page's spinner)."""
    dicts = _cached_call(run.model, "Sweeping τ …", page, _sweep_dicts, _tau_free(run.settings), run.prompt,
                         run.chat_template, tuple(taus))
    return [RoutingTrace.from_dict(d) for d in dicts]


# the computation behind each cached function that a background job may fill
_BEHIND = {_load: _loaded, _trace_dict: _traced, _equal_compute_tau: _tau_searched, _sweep_dicts: _swept}


@st.cache_data(show_spinner=False, max_entries=64)
def _quality_dicts(runs: tuple[Settings, ...], reference: ModelSpec, prompt: str, chat: bool) -> list[dict]:
    """Quality of routed runs of ``prompt`` (all at one max_tokens) against the dense model ``reference`` on the
    same tokens; the dense logits are computed once for all runs."""
    ref = _load(reference)
    max_tokens = runs[0].max_tokens
    dense = ref.logits(prompt, variant="dense", chat_template=chat, max_tokens=max_tokens).cpu()
    ids = ref.encode([prompt], chat_template=chat, max_tokens=max_tokens).input_ids[0].cpu()
    out = []
    for run in runs:
        hero = _load(run.model)
        run_ids = hero.encode([prompt], chat_template=chat, max_tokens=max_tokens).input_ids[0].cpu()
        if not torch.equal(run_ids, ids):
            raise ValueError("the runs tokenise the prompt differently, so their quality cannot be compared token "
                             "by token: compare runs on the same backbone")
        routed = hero.logits(prompt, variant=run.variant, tau=run.tau, chat_template=chat,
                             max_tokens=max_tokens).cpu()
        out.append(compare_to_dense(dense, routed, ids))
    return out


def quality_of_trace(trace: RoutingTrace) -> dict:
    """A traced run's quality against the dense model of its own backbone and precision, as
    :func:`hero_core.measures.metrics.compare_to_dense` gives it, read off the trace (traced with ``quality=True``)."""
    q = trace.quality
    return quality_dict(q["nll"][:-1], q["dense_nll"][:-1], q["kl_to_dense"], q["top1_agree"])


def get_qualities(runs: list[RunSpec], reference: ModelSpec, traces: list[RoutingTrace]) -> list[dict]:
    """Per-run quality against the dense model of ``reference`` (all runs share one prompt and settings).

    A run on the reference's backbone and precision reads it off its trace: the trace was scored against that
    very dense pass, computed once per prompt and shared by every router on the backbone
    (hero_core.measures.dense_reference). Only a run at another precision is scored again, against the reference's."""
    if len({(r.prompt, r.chat_template, r.max_tokens) for r in runs}) > 1:
        raise ValueError("runs to score together must share the prompt, chat-template and length settings")
    same = [_same_dense_model(r.model, reference) and t.quality is not None for r, t in zip(runs, traces, strict=True)]
    others = [r for r, s in zip(runs, same, strict=True) if not s]
    scored = iter([])
    if others:
        for spec in {r.model for r in others} | {reference}:
            load_model(spec)
        with st.spinner("Scoring against the dense model …"):
            scored = iter(_quality_dicts(tuple(r.settings for r in others), reference.canonical(), runs[0].prompt,
                                         runs[0].chat_template))
    return [quality_of_trace(t) if s else next(scored) for t, s in zip(traces, same, strict=True)]


def _same_dense_model(model: ModelSpec, reference: ModelSpec) -> bool:
    """Whether ``model``'s dense pass is ``reference``'s: the same backbone, precision and device (any router)."""
    return (replace(model.canonical(), checkpoint=DEFAULT_CHOICE) ==
            replace(reference.canonical(), checkpoint=DEFAULT_CHOICE))


ATTRIBUTIONS = "attribution_cache"  # session state: {AttributionKey: Attribution dict}, newest last
MAX_ATTRIBUTIONS = 16


@dataclass(frozen=True)
class AttributionKey:
    """One attribution: the run's settings and prompt, the decision (token, block) and the method's options."""

    settings: Settings
    prompt: str
    chat_template: bool
    token: int
    block: int
    method: str
    n_steps: int
    baseline: str

    @classmethod
    def of(cls, run: RunSpec, token: int, block: int, method: str, n_steps: int, baseline: str) -> AttributionKey:
        return cls(run.settings, run.prompt, run.chat_template, token, block, method, n_steps, baseline)


def _attribution_dict(key: AttributionKey, progress) -> dict:
    """An attribution, cached per session (not st.cache_data: that would record the progress bar's updates
    and replay them on every cache hit)."""
    cache = st.session_state.setdefault(ATTRIBUTIONS, {})
    if key not in cache:
        run = key.settings
        cache[key] = explain(_load(run.model), key.prompt, key.token, key.block, variant=run.variant, tau=run.tau,
                             chat_template=key.chat_template, method=key.method, n_steps=key.n_steps,
                             baseline=key.baseline, max_tokens=run.max_tokens, progress=progress).to_dict()
        while len(cache) > MAX_ATTRIBUTIONS:
            cache.pop(next(iter(cache)))
    return cache[key]


def cached_attribution(run: RunSpec, token: int, block: int, *, method: str, n_steps: int,
                       baseline: str) -> Attribution | None:
    """The attribution this session already computed for these settings, or None (nothing is run)."""
    found = st.session_state.get(ATTRIBUTIONS, {}).get(AttributionKey.of(run, token, block, method, n_steps, baseline))
    return None if found is None else Attribution.from_dict(found)


def get_attribution(run: RunSpec, token: int, block: int, *, method: str, n_steps: int,
                    baseline: str) -> Attribution:
    if st.session_state.get("saved_active"):  # components.saved.ACTIVE: a saved trace is drawn, not this run
        raise ValueError("Attributions re-run the model on the prompt, so they cannot explain a saved trace: "
                         "choose “live model” under Saved traces in the sidebar to attribute a decision.")
    load_model(run.model)
    bar = st.empty()

    def progress(done: int, total: int, what: str) -> None:  # token ablation takes ~20 s at 131 tokens
        bar.progress(done / max(total, 1), text=f"Attributing the decision: {done} of {total} {what} …")

    with st.spinner(f"Attributing the decision ({method.replace('_', ' ')}) …"):
        result = _attribution_dict(AttributionKey.of(run, token, block, method, n_steps, baseline), progress)
    bar.empty()
    return Attribution.from_dict(result)
