"""The training set of a run: token blocks drawn from every domain's train split, the order the steps read them
in, and the dense teacher's targets and warm-started adapters cached beside them (hero_core.train uses these)."""

from __future__ import annotations

import random
from pathlib import Path
from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F

from hero_core.files import atomic_write

if TYPE_CHECKING:
    from hero_core.method.model import HeroModel
    from hero_core.train.train_config import TrainConfig


def training_set(hero: HeroModel, cfg: TrainConfig) -> tuple[torch.Tensor, dict]:
    """The run's (n_blocks, seq_len) training blocks and its data card: the text under ``cfg.data`` (at most
    ``cfg.data_blocks`` of its blocks, drawn with ``cfg.seed``), or the built-in mix of ``cfg.data_mix``."""
    if cfg.data is None:
        mix = builtin_mix(hero, cfg)
        card = {"source": "built-in mix (hero_core.data.texts; python -m hero_core data --describe)", "mix": mix,
                "blocks": cfg.data_blocks, "seq_len": cfg.seq_len,
                "held_out": "each domain's eval split (sha256 of the item's key % 5 == 0), never trained on"}
        if mix != cfg.data_mix:
            card["note"] = "chat left out: the tokenizer has no chat template, so the base model trains on plain text"
        return training_blocks(hero, cfg, cfg.data_blocks), card
    from hero_core.data.corpus import load_corpus

    corpus = load_corpus(cfg.data, hero.tokenizer, cfg.seq_len, min_blocks=cfg.batch_size)
    rows = corpus.blocks
    if len(rows) > cfg.data_blocks:
        rows = random.Random(cfg.seed).sample(rows, cfg.data_blocks)
    corpus.card["blocks_used"] = len(rows)
    return torch.tensor(rows, dtype=torch.long), corpus.card


def builtin_mix(hero: HeroModel, cfg: TrainConfig) -> dict:
    """``cfg.data_mix``, less the chat and short-answer domains for a tokenizer without a chat template: their data
    is the model's own replies to chat-formatted prompts, which a base model has no format for."""
    if getattr(hero.tokenizer, "chat_template", None):
        return dict(cfg.data_mix)
    from hero_core.data.texts import SELF_DISTILLED_DOMAINS

    return {domain: weight for domain, weight in cfg.data_mix.items() if domain not in SELF_DISTILLED_DOMAINS}


def training_blocks(hero: HeroModel, cfg: TrainConfig, n_blocks: int) -> torch.Tensor:
    """(n_blocks, seq_len) token ids drawn from the train split of every built-in domain, mixed by cfg.data_mix
    (chat left out for a tokenizer without a chat template, see :func:`builtin_mix`)."""
    from hero_core.data.blocks import token_blocks
    from hero_core.data.texts import domain_texts

    weights = {d: w for d, w in builtin_mix(hero, cfg).items() if w > 0}
    if not weights:
        raise ValueError(f"the data mix {cfg.data_mix} leaves no domain to train on for this tokenizer")
    total = sum(weights.values())
    per_domain: list[list[int]] = []
    for domain, w in weights.items():
        want = max(1, round(n_blocks * w / total))
        # Texts to draw ``want`` blocks from: every chat or short-answer prompt (the self-distilled replies are the
        # scarce part), a stdlib chunk gives ~8 blocks, a reasoning problem about half of one.
        # Longer blocks take proportionally more texts.
        per_block = max(1, cfg.seq_len // 128)
        n_texts = {"chat": None, "qa": None, "code": max(8, want * per_block // 3),
                   "reasoning": want * 2 * per_block}[domain]
        texts = domain_texts(domain, "train", n_texts, hero=hero, seed=cfg.seed)
        blocks = token_blocks(texts, hero.tokenizer, cfg.seq_len)
        if not blocks:
            raise ValueError(f"no {cfg.seq_len}-token blocks in the {domain} data")
        per_domain.extend(blocks[i % len(blocks)] for i in range(want))
    random.Random(cfg.seed).shuffle(per_domain)
    return torch.tensor(per_domain[:n_blocks], dtype=torch.long)


# The held-out texts the degradation guard reads: the *tail* of each domain's held-out list, so they stay apart from
# the evaluations (the frontier and the suites read each list from its head, 40-120 items).
VALIDATION_TEXTS = {"chat": 24, "code": 6, "reasoning": 60}
VALIDATION_REASONING_POOL = 400  # reasoning problems drawn for the held-out list whose tail the guard reads


def validation_blocks(hero: HeroModel, cfg: TrainConfig) -> torch.Tensor | None:
    """(n, seq_len) held-out blocks for the run's degradation guard, at most ``cfg.eval_blocks``: from the held-out
    items of ``cfg.data``, or the tail of each built-in domain's held-out list mixed as the training data is. The
    same for every seed, so the guard's losses compare across seeds. None when the held-out split makes no block."""
    if cfg.data is not None:
        from hero_core.data.corpus import load_corpus

        rows = load_corpus(cfg.data, hero.tokenizer, cfg.seq_len).held_out_blocks[:cfg.eval_blocks]
        return torch.tensor(rows, dtype=torch.long) if rows else None
    from hero_core.data.blocks import token_blocks
    from hero_core.data.reasoning import reasoning_problems
    from hero_core.data.texts import chat_cache_path, chat_prompts, code_texts, self_distilled

    weights = {d: w for d, w in builtin_mix(hero, cfg).items() if w > 0 and d in VALIDATION_TEXTS}
    total = sum(weights.values())
    rows: list[list[int]] = []
    for domain, w in weights.items():
        k = VALIDATION_TEXTS[domain]
        if domain == "chat":
            texts = self_distilled(hero, chat_prompts("eval")[-k:], chat_cache_path(hero.backbone.name, "eval"), 96)
        elif domain == "code":
            texts = code_texts("eval")
            random.Random("code-0").shuffle(texts)  # the evaluations' order (hero_core.data.texts.domain_texts)
            texts = texts[-k:]
        else:
            texts = [p.text for p in reasoning_problems(VALIDATION_REASONING_POOL, "eval")[-k:]]
        blocks = token_blocks(texts, hero.tokenizer, cfg.seq_len)
        rows.extend(blocks[:max(1, round(cfg.eval_blocks * w / total))])
    return torch.tensor(rows[:cfg.eval_blocks], dtype=torch.long) if rows else None


def block_order(cfg: TrainConfig, n_blocks: int) -> torch.Tensor:
    """Which block the i-th row of the training cycle reads: the cached order, or a permutation of it."""
    if cfg.order_seed is None:
        return torch.arange(n_blocks)
    return torch.randperm(n_blocks, generator=torch.Generator().manual_seed(cfg.order_seed))


def loss_weights(hero: HeroModel, cfg: TrainConfig, blocks: torch.Tensor) -> torch.Tensor | None:
    """Per-token weights of the target loss: None (a plain mean) unless ``cfg.answer_weight`` leans it towards
    assistant replies; a chat template is needed to find them."""
    if cfg.answer_weight == 1.0:
        return None
    from hero_core.train.answer_tokens import answer_mask, answer_weights, assistant_header, turn_end_ids

    header = assistant_header(hero.tokenizer)
    if not header:
        raise ValueError("answer_weight needs a tokenizer with a chat template: without one no token is an answer")
    return answer_weights(answer_mask(blocks, header, turn_end_ids(hero.tokenizer, header)), cfg.answer_weight)


def teacher_cache_path(hero: HeroModel, cfg: TrainConfig, n_blocks: int) -> Path:
    from hero_core.backbones.loading import cache_dir

    if cfg.data is not None:  # the corpus's digest: an edited text gets its own teacher and adapters
        from hero_core.data.corpus import corpus_key

        mix = f"data{corpus_key(cfg.data)}"
    else:
        mix = "-".join(f"{k}{v:g}" for k, v in sorted(builtin_mix(hero, cfg).items()))
    precision = "" if teacher_dtype(hero, cfg) == torch.float32 else "-bf16"
    name = f"{hero.backbone.name}-L{cfg.seq_len}-n{n_blocks}-k{cfg.topk}-s{cfg.seed}-{mix}{precision}.safetensors"
    return cache_dir() / "teacher" / name


def adapter_cache_path(hero: HeroModel, cfg: TrainConfig, rank: int) -> Path:
    """Where the adapter warm start for this data set and adapter rank is cached (no suffix)."""
    data = teacher_cache_path(hero, cfg, cfg.data_blocks).with_suffix("")
    return data.parent.parent / "adapters" / f"{data.name}-t{cfg.warm_start_tokens}-r{rank}"


def teacher_dtype(hero: HeroModel, cfg: TrainConfig) -> torch.dtype:
    """Precision of the dense teacher's pass: the run's autocast precision (bf16 where the CPU runs it ~3x faster).
    bf16 moves the stored top-k log-probs by ~1e-2 nats, far below the distillation loss (~1.5 nats); checkpoints
    record which teacher they learned from (training.teacher_dtype)."""
    from hero_core.backbones.precision import resolve_dtype

    return resolve_dtype(cfg.dtype, hero.device)


def teacher_targets(hero: HeroModel, cfg: TrainConfig, blocks: torch.Tensor, progress: bool = True) -> dict:
    """Dense model's top-k next-token log-probs for every block, computed once and cached (safetensors)."""
    from safetensors.torch import load_file, save_file

    path = teacher_cache_path(hero, cfg, len(blocks))
    if path.is_file():
        cached = load_file(path)
        if torch.equal(cached["blocks"], blocks):
            return cached
    out = dense_topk(hero, cfg, blocks, progress)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, lambda tmp: save_file(out, tmp))
    return out


def dense_topk(hero: HeroModel, cfg: TrainConfig, blocks: torch.Tensor, progress: bool = False) -> dict:
    """The dense model's top-k next-token log-probs of ``blocks``, uncached (the teacher's targets)."""
    from tqdm import tqdm

    indices, logprobs = [], []
    call = hero.new_call("dense", record=False)
    dtype = teacher_dtype(hero, cfg)
    with torch.no_grad(), torch.autocast(hero.device.type, dtype=torch.bfloat16, enabled=dtype == torch.bfloat16):
        for start in tqdm(range(0, len(blocks), 8), desc="dense teacher", disable=not progress):
            batch = blocks[start: start + 8].to(hero.device)
            logits = hero.forward(batch, None, call, use_cache=False).float()
            top = F.log_softmax(logits, -1).topk(cfg.topk, dim=-1)
            indices.append(top.indices.int().cpu())
            logprobs.append(top.values.half().cpu())
            call.passes.clear()
    return {"blocks": blocks, "indices": torch.cat(indices), "logprobs": torch.cat(logprobs)}
