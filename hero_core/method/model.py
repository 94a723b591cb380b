"""HeroModel: a frozen causal LM with HeRo routers, and the public calls that run and record it."""

from __future__ import annotations

import copy
import logging
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import numpy as np
import torch
import torch.nn as nn

from hero_core.backbones.families import ffn_width
from hero_core.backbones.loading import Backbone, count_parameters, load_backbone
from hero_core.measures.accounting import ComputeProfile
from hero_core.measures.metrics import kept_rows, log_probs, quality_of_log_probs, token_quality
from hero_core.method import checkpoint as ckpt
from hero_core.method.call_state import RoutingCall, routing_call
from hero_core.method.config import PAPER_ENCODER, PAPER_HEAD_HIDDEN, HeroConfig, check_tau, check_variant
from hero_core.method.decoding import Decoded, cut_at_stop, decode_steps, sample_token, text_stop
from hero_core.method.inject import decoder_layers, ffn_parameter_count, inject, matmul_parameter_count, wrapped_layers
from hero_core.method.memory import check_memory_read
from hero_core.method.router import HeroRouter
from hero_core.method.side_by_side import side_by_side, spare_core
from hero_core.method.tau_search import matched_tau, traces_at_taus
from hero_core.method.trace import RoutingTrace, quality_fields
from hero_core.words.labels import piece_texts

log = logging.getLogger(__name__)

DEFAULT_CHECKPOINT = "hero-10-r7"  # 10 % param skip, a selective depth memory, the router sized to its backbone
UNTRAINED = "untrained"
DEFAULT_MAX_TOKENS = 2048  # prompts are cut here (with a notice) so memory stays bounded
_CHARS_PER_TOKEN_CAP = 32  # pre-cut absurdly long strings before tokenising them


class PromptError(ValueError):
    """A prompt that cannot be run; the message says why."""


@dataclass
class Encoded:
    input_ids: torch.Tensor  # (B, T), right-padded
    attention_mask: torch.Tensor  # (B, T)
    notices: list[list[str]]  # per prompt


def clean_prompt(prompt: object) -> str:
    if not isinstance(prompt, str):
        raise PromptError(f"a prompt must be a string, got {type(prompt).__name__}")
    # Lone surrogates (e.g. from a broken copy-paste) cannot be encoded; replace them visibly.
    text = prompt.encode("utf-8", "replace").decode("utf-8")
    if not text.strip():
        raise PromptError("the prompt is empty: type some text to route")
    return text

def compute_profile(model: nn.Module, router: HeroRouter, variant: str | None = None) -> ComputeProfile:
    """What a token costs on ``model`` with ``router`` run as ``variant`` (default: the one trained): the router
    is charged only what that variant computes (HeroRouter.parameter_counts)."""
    cfg = model.config
    head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
    backbone = ComputeProfile(total_params=count_parameters(model), ffn_params=ffn_parameter_count(model),
                              adapter_params=0, router_params=0, linear_params=matmul_parameter_count(model),
                              n_layers=cfg.num_hidden_layers, attention_width=cfg.num_attention_heads * head_dim,
                              d_memory=0)
    return with_router_costs(backbone, router, variant)


def with_router_costs(profile: ComputeProfile, router: HeroRouter, variant: str | None = None) -> ComputeProfile:
    """``profile`` (any run's on the same backbone: what the backbone costs is the same for all) with ``router``'s
    costs in place of its own: its adapters, and what ``variant`` computes of it (HeroRouter.parameter_counts)."""
    counts = router.parameter_counts(variant)
    return replace(profile, adapter_params=counts["adapter_per_block"], router_params=counts["router_per_block"],
                   d_memory=router.config.d_memory if counts["reads_memory"] else 0)


class HeroModel:
    """A frozen backbone with HeRo routers. Stateless between calls: safe to share across threads."""

    def __init__(self, backbone: Backbone, router: HeroRouter, checkpoint_name: str,
                 training: dict | None = None) -> None:
        """Wrap ``backbone``'s blocks for ``router`` (once: a backbone an earlier HeroModel wrapped for the same
        routed layers is taken as it is, so one loaded backbone serves several checkpoints)."""
        self.backbone = backbone
        self.model = backbone.model
        self.tokenizer = backbone.tokenizer
        self.router = router.to(backbone.device)
        self.router.eval()
        self.checkpoint_name = checkpoint_name
        self.training_info = training or {}
        wrapped = wrapped_layers(self.model)
        if wrapped is None:
            inject(self.model, router.config.routed_layers)
        elif wrapped != list(router.config.routed_layers):
            raise ValueError(f"router routes layers {router.config.routed_layers}, but this backbone is wrapped "
                             f"for {wrapped}")
        self.profile = compute_profile(self.model, self.router)

    def with_router(self, router: HeroRouter, checkpoint_name: str, training: dict | None = None) -> HeroModel:
        """Another router on the same (already wrapped) backbone, e.g. to compare checkpoints without
        loading the backbone twice. The routed layers must match."""
        if router.config.routed_layers != self.config.routed_layers:
            raise ValueError(f"router routes layers {router.config.routed_layers}, but this backbone is wrapped "
                             f"for {self.config.routed_layers}")
        other = copy.copy(self)
        other.router = router.to(self.device).eval()
        other.checkpoint_name = checkpoint_name
        other.training_info = training or {}
        other.profile = compute_profile(self.model, other.router)
        return other

    @property
    def config(self) -> HeroConfig:
        return self.router.config

    def profile_for(self, variant: str) -> ComputeProfile:
        """The compute profile of a run of ``variant`` (``profile`` is the trained variant's): a variant is charged
        only the router parts it computes, so ``no_history`` on a HeRo checkpoint pays for the local head alone."""
        if variant in ("dense", self.config.variant):
            return self.profile
        return compute_profile(self.model, self.router, variant)

    @property
    def device(self) -> torch.device:
        return self.backbone.device

    @property
    def max_tokens(self) -> int:
        return min(DEFAULT_MAX_TOKENS, getattr(self.model.config, "max_position_embeddings", DEFAULT_MAX_TOKENS))

    # -- tokenisation -------------------------------------------------------------------------
    def format_prompt(self, prompt: str, chat_template: bool = False) -> str:
        if not chat_template:
            return prompt
        if not getattr(self.tokenizer, "chat_template", None):
            raise PromptError("this tokenizer has no chat template (a base model): run the prompt as plain text, "
                              "without --chat on the command line or the app's chat-template option")
        return self.tokenizer.apply_chat_template([{"role": "user", "content": prompt}], tokenize=False,
                                                  add_generation_prompt=True)

    def encode(self, prompts: Sequence[str], *, chat_template: bool = False,
               max_tokens: int | None = None) -> Encoded:
        limit = max_tokens or self.max_tokens
        if limit < 1:
            raise PromptError(f"max_tokens must be at least 1, got {limit}")
        rows, notices = [], []
        for prompt in prompts:
            text = self.format_prompt(clean_prompt(prompt), chat_template)
            notes = []
            cut = len(text) > limit * _CHARS_PER_TOKEN_CAP  # very long text is cut before tokenising
            if cut:
                text = text[: limit * _CHARS_PER_TOKEN_CAP]
            ids = self.tokenizer(text, add_special_tokens=True)["input_ids"]
            if len(ids) > limit:
                had = f"more than {len(ids):,}" if cut else f"{len(ids):,}"
                notes.append(f"prompt truncated to its first {limit:,} tokens (it had {had})")
                ids = ids[:limit]
            if not ids:
                raise PromptError("the prompt produced no tokens")
            rows.append(ids)
            notices.append(notes)
        width = max(len(r) for r in rows)
        pad = self.tokenizer.pad_token_id or 0
        input_ids = torch.full((len(rows), width), pad, dtype=torch.long)
        mask = torch.zeros((len(rows), width), dtype=torch.long)
        for i, ids in enumerate(rows):  # right padding: real tokens keep positions 0..n-1
            input_ids[i, : len(ids)] = torch.tensor(ids)
            mask[i, : len(ids)] = 1
        return Encoded(input_ids.to(self.device), mask.to(self.device), notices)

    # -- running ------------------------------------------------------------------------------
    def new_call(self, variant: str, tau: float | None = None, *, record: bool = True,
                 record_states: bool = False, keep_gates: bool = False, policy=None,
                 straight_through: bool = False, memory_read: str = "learned") -> RoutingCall:
        """``memory_read="uniform"`` replaces every depth-memory read by the plain mean of the same stored values
        (a flat memory-attention map, everything else unchanged): the test of whether the read matters."""
        check_variant(variant)
        return RoutingCall(router=self.router, variant=variant, tau=check_tau(self.config.tau if tau is None else tau),
                           record=record, record_states=record_states, keep_gates=keep_gates, policy=policy,
                           straight_through=straight_through, memory_read=check_memory_read(memory_read))

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None, call: RoutingCall,
                **kwargs) -> torch.Tensor:
        """Run the backbone under ``call``; returns logits (B, T, V). Gradients flow when enabled."""
        with routing_call(call):
            return self.model(input_ids=input_ids, attention_mask=attention_mask, **kwargs).logits

    def tau_for_param_skip(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None, variant: str,
                           param_skip: float, *, iters: int = 12, memory_read: str = "learned") -> tuple[float, float]:
        """The tau whose run on this very input realises the param skip closest to ``param_skip``; returns (tau,
        realised param skip). How it searches: :func:`hero_core.method.tau_search.matched_tau`."""
        return matched_tau(self, input_ids, attention_mask, variant, param_skip, iters=iters, memory_read=memory_read)

    def _resolve_tau(self, enc: Encoded, variant: str, tau: float | None,
                     param_skip: float | None, memory_read: str = "learned") -> tuple[float | None, str]:
        """tau for a call and how it was chosen: the checkpoint's, the caller's, or matched to a param skip."""
        if param_skip is None:
            return tau, "checkpoint" if tau is None else "given"
        if tau is not None:
            raise PromptError("give either tau or param_skip, not both")
        if variant == "dense":
            raise PromptError("the dense variant runs every FFN: param_skip applies to routed variants only")
        if isinstance(param_skip, bool) or not isinstance(param_skip, (int, float)) or not 0.0 <= param_skip < 1.0:
            raise PromptError(f"param_skip must be a number in [0, 1), got {param_skip!r}")
        chosen, realised = self.tau_for_param_skip(enc.input_ids, enc.attention_mask, variant, float(param_skip),
                                                   memory_read=memory_read)
        return chosen, f"param_skip={float(param_skip):.4g} (realised {realised:.4g}, tau bisected on this input)"

    def trace(self, prompt: str | Sequence[str], variant: str = "hero", *, tau: float | None = None,
              record_states: bool = False, chat_template: bool = False, max_tokens: int | None = None,
              policy=None, param_skip: float | None = None, quality: bool = False,
              memory_read: str = "learned") -> RoutingTrace | list[RoutingTrace]:
        """Route a prompt (or a list, batched with padding) and record every decision.

        ``policy`` (see :mod:`hero_core.eval.baselines`) replaces the router's hard decision. ``param_skip``
        picks tau for this run so its realised param skip is the closest reachable to it (equal-compute
        comparisons); the trace records the tau and the rule in ``tau_rule``. ``quality`` also runs the dense
        model on the same tokens and records per-token ``nll``, ``dense_nll``, ``kl_to_dense`` and ``top1_agree``.
        ``memory_read="uniform"`` reads the depth memory with equal weights (see :meth:`new_call`)."""
        single = isinstance(prompt, str)
        traces, _, _ = self._routed_run([prompt] if single else list(prompt), variant, tau=tau,
                                     record_states=record_states, chat_template=chat_template,
                                     max_tokens=max_tokens, policy=policy, param_skip=param_skip, quality=quality,
                                     memory_read=memory_read)
        return traces[0] if single else traces

    def traces_at_taus(self, prompt: str, taus: Sequence[float], variant: str = "hero", *,
                       chat_template: bool = False, max_tokens: int | None = None,
                       quality: bool = False) -> list[RoutingTrace]:
        """:meth:`trace` of one prompt at each tau in ``taus``, the thresholds side by side in batched passes
        (:func:`hero_core.method.tau_search.traces_at_taus`)."""
        return traces_at_taus(self, prompt, taus, variant, chat_template=chat_template, max_tokens=max_tokens,
                              quality=quality)

    def trace_and_logits(self, prompt: str, variant: str = "hero", **options) -> tuple[RoutingTrace, torch.Tensor]:
        """:meth:`trace` of one prompt and its next-token logits (T, V, fp32) from the same pass: what trace()
        and logits() give one after the other, at half the forward passes. ``options`` as for :meth:`trace`."""
        traces, logits, mask = self._routed_run([prompt], variant, **options)
        return traces[0], logits[0][mask[0].bool()].float()

    def _routed_run(self, prompts: list[str], variant: str, *, tau: float | None = None,
                    record_states: bool = False, chat_template: bool = False, max_tokens: int | None = None,
                    policy=None, param_skip: float | None = None, quality: bool = False,
                    memory_read: str = "learned") -> tuple[list[RoutingTrace], torch.Tensor, torch.Tensor]:
        """The routed pass behind trace(): its traces, its logits (B, T, V) and the attention mask (B, T)."""
        if not prompts:
            raise PromptError("no prompts given")
        enc = self.encode(prompts, chat_template=chat_template, max_tokens=max_tokens)
        tau, rule = self._resolve_tau(enc, variant, tau, param_skip, memory_read)
        call = self.new_call(variant, tau, record_states=record_states, policy=policy, memory_read=memory_read)

        # Each pass also takes its own log-softmax (and dense its probabilities) on its own thread: over a 49k
        # vocabulary these are most of what the quality fields cost after the passes.
        def routed_pass() -> tuple[torch.Tensor, torch.Tensor | None]:
            logits = self.forward(enc.input_ids, enc.attention_mask, call, use_cache=False)
            return logits, log_probs(logits) if quality else None

        def dense_pass() -> tuple[torch.Tensor, torch.Tensor] | None:  # every FFN on the same tokens
            if not quality:
                return None
            # once per input and backbone, whichever router asks (hero_core.measures.dense_reference)
            dense_log = self.dense_log_probs(enc)
            return dense_log, dense_log.exp()

        (routed, routed_log), dense = side_by_side(routed_pass, dense_pass,
                                                   together=quality and spare_core(self.device))
        traces = []
        for b in range(len(prompts)):
            keep = enc.attention_mask[b].bool()
            trace = self.trace_of(call, b, enc.input_ids[b][keep].tolist(), enc.notices[b], tau_rule=rule)
            if dense is not None:
                dense_log, dense_p = (kept_rows(x[b], keep) for x in dense)
                trace.quality = quality_fields(quality_of_log_probs(dense_log, kept_rows(routed_log[b], keep),
                                                                    enc.input_ids[b][keep], dense_p))
            traces.append(trace)
        return traces, routed, enc.attention_mask

    def dense_log_probs(self, enc: Encoded) -> torch.Tensor:
        """The dense model's log-probabilities (B, T, V) on ``enc``: computed once per input and backbone, whichever
        router asks (hero_core.measures.dense_reference)."""
        return self.backbone.dense_reference.log_probs(enc.input_ids, enc.attention_mask, lambda: log_probs(
            self.forward(enc.input_ids, enc.attention_mask, self.new_call("dense", record=False), use_cache=False)))

    def logits(self, prompt: str, variant: str = "hero", *, tau: float | None = None,
               chat_template: bool = False, max_tokens: int | None = None, policy=None,
               param_skip: float | None = None, memory_read: str = "learned") -> torch.Tensor:
        """Next-token logits (T, V), tokenised exactly as :meth:`trace` does (``param_skip``, ``memory_read`` as
        there)."""
        enc = self.encode([prompt], chat_template=chat_template, max_tokens=max_tokens)
        tau, _ = self._resolve_tau(enc, variant, tau, param_skip, memory_read)
        call = self.new_call(variant, tau, record=False, policy=policy, memory_read=memory_read)
        with torch.no_grad():
            return self.forward(enc.input_ids, enc.attention_mask, call, use_cache=False)[0].float()

    def decode(self, input_ids: torch.Tensor, call: RoutingCall, max_new_tokens: int, *,
               pick: Callable[[torch.Tensor], torch.Tensor] | None = None, stop_at_eos: bool = True,
               stop: Callable[[list[int]], bool] | None = None, on_token: Callable[[int], None] | None = None,
               timer: Callable[[], Callable[[], object]] | None = None, logits_to_keep: int = 0) -> Decoded:
        """The decode loop with the KV cache: the prompt ``input_ids`` (B, P) in one pass, then one pass per
        fed token, all under ``call`` (its passes hold the routing of every fed token).

        Up to ``max_new_tokens`` tokens are picked (``pick``: (B, V) logits -> (B,) ids, greedy by default);
        decoding stops early at the end-of-text token (``stop_at_eos``) or when ``stop(new ids)`` is true.
        The last picked token is never fed back. ``timer()`` is started after the first pick and stopped
        after the last (the steps, prefill excluded); ``logits_to_keep`` applies to the prefill."""
        from transformers import DynamicCache

        cache = DynamicCache(config=self.model.config)

        def feed(next_ids: torch.Tensor | None) -> torch.Tensor:
            if next_ids is None:
                keep = {"logits_to_keep": logits_to_keep} if logits_to_keep else {}
                return self.forward(input_ids, None, call, cache=cache, use_cache=True, **keep)[:, -1]
            return self.forward(next_ids[:, None], None, call, cache=cache, use_cache=True)[:, -1]

        eos = self.tokenizer.eos_token_id if stop_at_eos else None
        with torch.no_grad():
            return decode_steps(feed, max_new_tokens, pick=pick, eos_id=eos, stop=stop, on_token=on_token,
                                timer=timer)

    def generate(self, prompt: str, max_new_tokens: int = 64, variant: str = "hero", *, tau: float | None = None,
                 do_sample: bool = False, temperature: float = 1.0, top_p: float = 1.0, seed: int | None = None,
                 chat_template: bool = False, record_states: bool = False,
                 on_token: Callable[[str, int], None] | None = None,
                 param_skip: float | None = None, stop: Sequence[str] = (),
                 memory_read: str = "learned", policy=None) -> tuple[str, RoutingTrace]:
        """Decode with the KV cache (:meth:`decode`), routing every new token. ``on_token(text, n_executed)``
        streams; decoding stops at the end-of-text token or once the text holds one of ``stop``.

        Returns the generated text (without the prompt, cut before the first ``stop`` string) and the trace
        over prompt + generated tokens. ``param_skip`` picks tau on the prompt (as :meth:`trace` does) and
        decodes at that tau; ``policy`` (see :mod:`hero_core.eval.baselines`) replaces the router's hard
        decision, on the prompt and on every new token."""
        if not isinstance(max_new_tokens, int) or max_new_tokens < 0:
            raise PromptError(f"max_new_tokens must be a non-negative integer, got {max_new_tokens!r}")
        if do_sample and not temperature > 0:
            raise PromptError(f"temperature must be positive when sampling, got {temperature!r}")
        enc = self.encode([prompt], chat_template=chat_template,
                          max_tokens=max(1, self.max_tokens - max_new_tokens))
        generator = torch.Generator(device="cpu").manual_seed(seed) if seed is not None else None
        tau, rule = self._resolve_tau(enc, variant, tau, param_skip, memory_read)
        if param_skip is not None:
            rule = rule.replace("on this input", "on the prompt")
        call = self.new_call(variant, tau, record_states=record_states, memory_read=memory_read, policy=policy)
        ids = enc.input_ids

        def pick(logits: torch.Tensor) -> torch.Tensor:
            if not do_sample:
                return logits.argmax(-1)
            return torch.tensor([sample_token(logits[0].float(), temperature, top_p, generator)], device=self.device)

        def stream(token_id: int) -> None:
            records = call.passes[-1].records  # empty in the dense variant: every FFN ran
            n_exec = sum(bool(r.executed[-1]) for r in records) if records else self.config.n_routed
            on_token(self.tokenizer.decode([token_id]), n_exec)

        out = self.decode(ids, call, max_new_tokens, pick=pick, stop=text_stop(self.tokenizer, stop),
                          on_token=stream if on_token is not None else None)
        new_ids = out.new_ids[0].tolist()
        all_ids = ids[0].tolist() + new_ids[:-1] if new_ids else ids[0].tolist()
        # The last sampled token was never fed back, so it has no routing record: the trace covers the
        # tokens that went through the model.
        trace = self.trace_of(call, 0, all_ids, enc.notices[0], n_prompt_tokens=ids.shape[1], tau_rule=rule)
        return cut_at_stop(self.tokenizer.decode(new_ids, skip_special_tokens=True), stop), trace

    def score_tokens(self, token_ids: Sequence[int], variant: str = "hero", *,
                     tau: float | None = None) -> dict[str, np.ndarray]:
        """Per-token quality (RoutingTrace.quality's fields) of ``variant`` against dense on these exact tokens,
        teacher-forced: e.g. a generated continuation, scored without re-tokenising its text."""
        if not token_ids:
            raise PromptError("no tokens to score")
        ids = torch.tensor([list(token_ids)], device=self.device)
        with torch.no_grad():
            routed = self.forward(ids, None, self.new_call(variant, tau, record=False), use_cache=False)[0]
            dense = self.forward(ids, None, self.new_call("dense", record=False), use_cache=False)[0]
        return _token_quality(dense, routed, ids[0])

    # -- trace assembly -----------------------------------------------------------------------
    def trace_of(self, call: RoutingCall, batch_index: int, token_ids: list[int], notices: list[str],
                 n_prompt_tokens: int | None = None, tau_rule: str = "checkpoint") -> RoutingTrace:
        """The :class:`RoutingTrace` of batch row ``batch_index`` of a finished ``call`` on this model."""
        return RoutingTrace.from_call(
            call, batch_index, token_ids=list(token_ids), tokens=piece_texts(self.tokenizer.decode, token_ids),
            backbone=self.backbone.name + (" (nf4)" if self.backbone.quantization else ""),
            checkpoint=self.checkpoint_name, routed_layers=list(self.config.routed_layers),
            forgetting=self.router.forgetting().detach().cpu().double().numpy(), profile=self.profile_for(call.variant),
            notices=notices, n_prompt_tokens=n_prompt_tokens, tau_rule=tau_rule,
            forgetting_init=self.config.rho_init, memory_kernel=self.config.memory_kernel)


def _token_quality(dense: torch.Tensor, routed: torch.Tensor, ids: torch.Tensor) -> dict[str, np.ndarray]:
    """Per-token quality of a routed run against dense on the same T tokens (see RoutingTrace.quality)."""
    return quality_fields(token_quality(dense, routed, ids))



def default_routed_layers(n_layers: int) -> list[int]:
    return list(range(n_layers))


def fresh_router(backbone: Backbone, variant: str = "hero", routed_layers: list[int] | None = None,
                 **overrides) -> HeroRouter:
    cfg = backbone.model.config
    layers = routed_layers if routed_layers is not None else default_routed_layers(len(decoder_layers(backbone.model)))
    # an untrained router (tests, the benchmark's stand-ins, the app's untrained mode) keeps the paper's widths unless
    # told; training passes its own (TrainConfig: 0 = sized to the backbone)
    overrides = {"head_hidden": PAPER_HEAD_HIDDEN, "d_encoder": PAPER_ENCODER} | overrides
    config = HeroConfig(routed_layers=layers, d_model=cfg.hidden_size, d_ffn=ffn_width(cfg),
                        variant=variant, **overrides)
    return HeroRouter(config)


def spread_gates(router: HeroRouter, std: float = 0.3) -> HeroRouter:
    """Random head weights, so a fresh router's gates spread around 0.5 and it skips some FFNs: the tests'
    routers and the benchmark's synthetic stand-ins. In place (under ``torch.no_grad``); returns the router."""
    with torch.no_grad():
        nn.init.normal_(router.local_head.mlp[2].weight, std=std)
        nn.init.normal_(router.history_head[2].weight, std=std)
    return router


def load_checkpoint(name: str | os.PathLike, backbone: Backbone) -> HeroModel:
    """One checkpoint (a bundled name or a directory) on an already loaded ``backbone``, once it is checked to have
    been trained for that backbone; a backbone an earlier HeroModel wrapped is shared, not loaded or wrapped again.

    The one way a finished checkpoint meets a backbone: :func:`load_hero` and :func:`load_routers` (a backbone from
    the shared pool), a training run's start checkpoint and every script go through it, so each is checked and its
    training health logged. Resuming an interrupted run's state (optimiser and all) is training's own
    (hero_core.train.train_steps.load_state)."""
    found = ckpt.read_checkpoint(name)
    ckpt.check_backbone(found, backbone.fingerprint, backbone.name)
    health = found.training.get("health") or {}
    # a run the guard had to act on is said at warning level (seen by default); a healthy one at info
    level = logging.WARNING if health.get("degradations") or health.get("kept") == "best" else logging.INFO
    log.log(level, "checkpoint %s: %s", found.name, ckpt.health_line(found.training.get("health")))
    return HeroModel(backbone, ckpt.build_router(found), found.name, found.training)


def load_checkpoints(names: Sequence[str | os.PathLike], backbone: Backbone) -> dict[str, HeroModel]:
    """Several checkpoints on one loaded backbone (:func:`load_checkpoint`), keyed by the names as given."""
    return {str(name): load_checkpoint(name, backbone) for name in names}


def load_hero(checkpoint: str | os.PathLike | None = None, *, backbone: str | os.PathLike | None = None,
              quantization: str | None = None, device: str = "auto", seed: int = 0,
              dtype: str = "fp32", shared: bool = False) -> HeroModel:
    """Load a backbone (embedded SmolLM2-135M-Instruct by default) with a router checkpoint.

    ``checkpoint`` is a bundled name (``hero-10-r7`` (the default), ``hero-10-r4``, ``hero-10``, ``local-10``,
    ``hero-25``, ``local-25``, ``hero-40``, ``local-40``, ``no_memread-10``, ``no_aux-10``, ``no_pos-10``, …), a
    checkpoint directory, or None for the bundled default; when no trained checkpoint fits, fresh (untrained) routers
    are used and a warning says so.

    ``dtype`` is the backbone's precision in full-precision mode: ``fp32`` (default, the reference), ``bf16``,
    or ``auto`` (bf16 where a probe shows it faster, hero_core.backbones.precision). Routers keep fp32
    weights; on a bf16 backbone a prefill's decision runs under bf16 autocast when the router was trained under it
    (hero_core.method.inject.decision_precision).

    ``shared=True`` takes the backbone from the process's pool (:mod:`hero_core.backbones.pool`): every call
    with the same backbone, precision, device and quantisation gets the same loaded weights, and only the router
    differs (what the app and :func:`load_routers` do). ``False`` loads a private copy.
    """
    if shared:
        from hero_core.backbones.pool import SHARED_BACKBONES

        bb = SHARED_BACKBONES.get(backbone, quantization=quantization, device=device, dtype=dtype)
    else:
        from hero_core.backbones.loading import resolve_device
        from hero_core.backbones.precision import resolve_dtype

        torch_dtype = resolve_dtype(dtype, resolve_device(device))
        bb = load_backbone(backbone, quantization=quantization, device=device, dtype=torch_dtype)
    return hero_on_backbone(checkpoint, bb, seed=seed)


def hero_on_backbone(checkpoint: str | os.PathLike | None, bb: Backbone, *, seed: int = 0) -> HeroModel:
    """``checkpoint`` (None: the bundled default, or fresh routers where none fits ``bb``) on a loaded backbone."""
    if checkpoint is None:
        if DEFAULT_CHECKPOINT in ckpt.bundled_names():
            try:
                return load_checkpoint(DEFAULT_CHECKPOINT, bb)
            except ckpt.BackboneMismatchError:
                pass  # trained for the embedded backbone, not this one: fresh routers below
        log.warning("no trained checkpoint for %s: using fresh, untrained routers (gates start near 1)", bb.name)
        torch.manual_seed(seed)
        return HeroModel(bb, fresh_router(bb), UNTRAINED)
    return load_checkpoint(checkpoint, bb)


def load_routers(checkpoints: Sequence[str | os.PathLike | None], *, backbone: str | os.PathLike | None = None,
                 quantization: str | None = None, device: str = "auto", dtype: str = "fp32") -> list[HeroModel]:
    """Several router checkpoints on one shared backbone (the process's pool), in the order given; None is the
    bundled default. The backbone is loaded at most once, however many checkpoints are asked for."""
    return [load_hero(name, backbone=backbone, quantization=quantization, device=device, dtype=dtype, shared=True)
            for name in checkpoints]
