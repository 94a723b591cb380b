"""Train HeRo routers and adapters on a frozen backbone (``python -m hero_core train``).

Objective (docs/method.md, Eq. 11): ``L = L_target + alpha * L_skip``.

* ``L_target`` defaults to **self-distillation**: cross-entropy against the dense model's own next-token
  distribution (its top-k, renormalised, k = 32), precomputed once per data set and shared by every run.
  Why: the routed model is judged by how well it keeps the dense model's behaviour (Retain, KL, top-1
  agreement), and the full distribution carries far more signal per token than one label; at init the
  target loss is the teacher's entropy (~1.45 nats on our mix), so distance from dense is read off the log.
  ``--target lm`` uses the data's next tokens instead.
* **Budget** (``--budget``). Default ``hinge``: ``alpha * relu(mean_tokens(sum_j g_j) - E*)^2`` with E* the
  FFNs per token the target skip leaves, alpha fixed: no pull once the soft FFN use meets the budget.
  ``controller``: the paper's ``L_skip = mean_tokens (sum_j g_j)^2`` with ``log alpha`` moved by
  ``gain * (target_skip - realised_skip)`` each step; in our runs it swung +-20 points around its target.
  Either way a checkpoint can then get tau calibrated to the budget (hero_core.calibration).
* **Gate gradient** (``--gate-gradient``). Default ``straight_through``: the forward value is the hard
  branch, but g also receives d out / d g = FFN(u) - Adapter(u) on skipped tokens; ``paper``: only the
  g / 1 - g scaling carries gradient (every gate collapsed below tau at step 16 in our CPU-sized run).

Only router and adapter parameters train. The loop runs on CPU or one GPU, and unchanged under
``accelerate launch`` on several (gradients are averaged across processes explicitly, because the
router is called through the routing context rather than through a DDP-wrapped forward).
State (router, optimiser, step, alpha, RNG) is saved every ``--save-every`` steps, atomically, and a
rerun of the same command resumes from it.
"""

from __future__ import annotations

import json
import logging
import math
import random
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch
import torch.nn.functional as F

from ..core import checkpoint as ckpt
from ..core.config import BRANCH_SCALINGS, check_variant
from ..core.files import atomic_write, atomic_write_text
from ..core.inject import wrapped_layers
from ..core.model import HeroModel, fresh_router, load_hero
from ..core.precision import check_dtype, resolve_dtype
from .losses import (
    budget_hinge,
    distill_loss,
    hard_executed,
    near_tau_share,
    separation_penalty,
    usage_penalty,
    weighted_mean,
)
from .train_data import (
    adapter_cache_path,
    block_order,
    loss_weights,
    teacher_dtype,
    teacher_targets,
    training_set,
)
from .train_memory import memory_log_row, param_groups

log = logging.getLogger(__name__)


BUDGETS = ("hinge", "hard", "controller")
BUDGET_SCOPES = ("sequence", "batch")


TRAIN_TARGETS = ("distill", "lm")
# The distillation target over the teacher's top-k: "topk_renorm" renormalises those k probabilities to sum to 1
# (so the student learns a sharper distribution than the teacher's, and its perplexity on dense-written text can
# fall below dense); "topk_tail" keeps them as they are and adds one bucket holding the rest of the teacher's mass,
# matched by the student's mass outside the top-k: a target whose optimum is the teacher itself.
DISTILL_TARGETS = ("topk_renorm", "topk_tail")
MEMORY_KERNEL_CHOICES = ("elu1", "softmax")
GATE_GRADIENTS = ("straight_through", "paper")


def _check_choice(name: str, value, choices: tuple) -> None:
    if value not in choices:
        raise ValueError(f"{name} must be one of {choices}, got {value!r}")


@dataclass
class TrainConfig:
    """One training run. The measurements behind the defaults: docs/experiments/training-config-notes.md."""

    out: str  # checkpoint directory written at the end (and run state kept in out/_state)
    variant: str = "hero"
    target_skip: float = 0.25  # param skip (paper definition) the controller steers to
    steps: int = 300
    batch_size: int = 4
    seq_len: int = 128
    lr: float = 1e-4  # the paper's (1e-3 measured worse: see the notes)
    weight_decay: float = 0.01
    warmup: float = 0.03
    clip: float = 1.0
    alpha_init: float = 1e-3  # paper's alpha; the controller adapts it
    controller_gain: float = 0.5  # d log(alpha) per unit of skip error per step: 10x in ~18 steps at 25 % error
    alpha_max: float = 0.1
    target: str = "distill"  # distill | lm
    topk: int = 32
    distill_target: str = "topk_renorm"  # see DISTILL_TARGETS
    # Weight of assistant-reply tokens in the target loss (1: every token alike); hero_core.train.answer_tokens says
    # which tokens those are. Leans the routers towards keeping what a user reads, at the prompt's expense.
    answer_weight: float = 1.0
    # The depth memory (HeroConfig): its kernel, the softmax kernel's initial temperature (x 1/sqrt(d_m)) and
    # rho's initial value; memory_lr_scale multiplies the learning rate of the parameters that choose where the
    # memory reads (to_q, to_k, to_v, eta, the softmax temperature), whose gradients are 10-1000x smaller than
    # the heads' (docs/experiments/memory-diagnosis).
    memory_kernel: str = "elu1"
    memory_scale_init: float = 1.0
    rho_init: float = 0.98
    memory_lr_scale: float = 1.0
    data_mix: dict = field(default_factory=lambda: {"chat": 2.0, "code": 1.5, "reasoning": 1.0})
    data: str | None = None  # your own text (hero_core.corpus); None: the built-in mix of data_mix
    seed: int = 0
    # None: the steps read the training blocks in their cached order (every bundled run but one). A number
    # permutes that order with this seed and keeps the blocks themselves, so the dense teacher's cached targets
    # serve unchanged (``seed`` draws other blocks, and the teacher is computed again).
    order_seed: int | None = None
    save_every: int = 25
    routed_layers: list[int] | None = None
    storage_dtype: str = "float16"  # bundled checkpoints stay < 10 MB
    # Autocast precision of the forward/backward (master weights stay fp32): "auto" takes bf16 where a probe
    # shows it faster (hero_core.precision).
    dtype: str = "auto"
    threads: int = 0  # torch threads; 0 keeps torch's default (every core)
    data_blocks: int = 1600  # size of the (cached) training set in blocks; steps cycle through it
    init_from: str | None = None  # start from this checkpoint's weights (e.g. a tighter budget from a looser one)
    # "straight_through": g also learns from FFN(u) - Adapter(u) on skipped tokens; "paper": the paper's pure
    # hard-branch gradient.
    gate_gradient: str = "straight_through"
    # "hinge": alpha * relu(mean_tokens(sum_j g_j) - E*)^2 with E* the executed FFNs per token that the target
    # skip leaves, alpha fixed (``hinge_alpha``): no pull below the budget, so no overshoot. "controller": the
    # paper's L_skip with alpha steered by the controller. "hard": the same hinge on the *executed* FFNs per
    # token, 1[g >= tau] counted with a straight-through gradient, so training runs at the skip the router
    # will run at.
    budget: str = "hard"
    hinge_alpha: float = 0.05
    # Budget curriculum: the target skip rises linearly from the starting skip (0, or the init checkpoint's
    # target) to ``target_skip`` over this share of the steps, so the router leaves the dense model gradually.
    budget_ramp: float = 0.3
    # "sequence": every training sequence meets the budget on its own; "batch": only the batch mean does.
    budget_scope: str = "sequence"
    # "unscaled": executed FFN / adapter outputs are not multiplied by g or 1 - g (see config.BRANCH_SCALINGS);
    # "paper": the paper's scaling. Recorded in the checkpoint's HeroConfig.
    branch_scaling: str = "unscaled"
    warm_start: bool = True  # fit adapters to their FFNs by local distillation before training (warmstart.py)
    # Fit the local head to the warm-started adapters' error so training starts at the budget with the oracle's
    # choices instead of identical gates that all cross tau together (warmstart.fit_gate_to_adapter_error).
    gate_warm_start: bool = True
    warm_start_tokens: int = 8192
    # Gate separation: weight of mean(relu(m - |g - tau|)) / m with m = 0.1, which pushes gates out of the band
    # around tau where bf16 rounding or a tiny input change flips the decision. 0 turns it off.
    separation: float = 0.0

    def __post_init__(self) -> None:
        check_variant(self.variant, allow_dense=False)
        if not 0.0 <= self.target_skip < 1.0:
            raise ValueError(f"target_skip must be in [0, 1), got {self.target_skip}")
        if self.target not in TRAIN_TARGETS:
            raise ValueError("target must be 'distill' or 'lm'")
        _check_choice("distill_target", self.distill_target, DISTILL_TARGETS)
        _check_choice("memory_kernel", self.memory_kernel, MEMORY_KERNEL_CHOICES)
        if not self.memory_lr_scale > 0 or not self.memory_scale_init > 0 or not 0 < self.rho_init < 1:
            raise ValueError("memory_lr_scale and memory_scale_init must be positive, rho_init in (0, 1)")
        if not self.answer_weight > 0:
            raise ValueError(f"answer_weight must be positive, got {self.answer_weight}")
        _check_choice("budget", self.budget, BUDGETS)
        _check_choice("budget_scope", self.budget_scope, BUDGET_SCOPES)
        if self.gate_gradient not in GATE_GRADIENTS:
            raise ValueError("gate_gradient must be 'straight_through' or 'paper'")
        _check_choice("branch_scaling", self.branch_scaling, BRANCH_SCALINGS)
        check_dtype(self.dtype)
        if not 0.0 <= self.budget_ramp <= 1.0:
            raise ValueError(f"budget_ramp must be in [0, 1], got {self.budget_ramp}")
        for name in ("steps", "batch_size", "seq_len", "topk", "save_every", "data_blocks"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be positive")


# -- budget curriculum ----------------------------------------------------------------------------
def target_skip_at(step: int, cfg: TrainConfig, start_skip: float) -> float:
    """Budget curriculum: linear from ``start_skip`` to ``cfg.target_skip`` over the first budget_ramp of steps."""
    ramp_steps = cfg.budget_ramp * cfg.steps
    if ramp_steps < 1:
        return cfg.target_skip
    return start_skip + (cfg.target_skip - start_skip) * min(1.0, (step + 1) / ramp_steps)


# -- state ---------------------------------------------------------------------------------------------
NO_TIME_SPENT = {"wall_s": 0.0, "cpu_s": 0.0}


def _save_state(state_dir: Path, hero: HeroModel, optimizer, step: int, alpha: float,
                spent: dict[str, float]) -> None:
    from safetensors.torch import save_file

    state_dir.mkdir(parents=True, exist_ok=True)
    tensors = {f"router.{k}": v.detach().cpu().contiguous() for k, v in hero.router.state_dict().items()}
    names = {id(p): n for n, p in hero.router.named_parameters()}
    opt_meta = {}
    for group in optimizer.param_groups:
        for p in group["params"]:
            st = optimizer.state.get(p, {})
            for key, value in st.items():
                if torch.is_tensor(value):
                    tensors[f"opt.{names[id(p)]}.{key}"] = value.detach().cpu().contiguous()
            opt_meta[names[id(p)]] = {k: float(v) for k, v in st.items() if not torch.is_tensor(v)}
    meta = {"step": step, "alpha": alpha, "python_rng": repr(random.getstate()), "opt_meta": opt_meta,
            "spent": spent}
    atomic_write(state_dir / "state.safetensors", lambda tmp: save_file(tensors, tmp))
    atomic_write_text(state_dir / "state.json", json.dumps(meta))


def _load_state(state_dir: Path, hero: HeroModel, optimizer) -> tuple[int, float, dict[str, float]] | None:
    from safetensors.torch import load_file

    if not (state_dir / "state.json").is_file():
        return None
    meta = json.loads((state_dir / "state.json").read_text())
    tensors = load_file(state_dir / "state.safetensors")
    hero.router.load_state_dict({k[len("router."):]: v for k, v in tensors.items() if k.startswith("router.")})
    for name, p in hero.router.named_parameters():
        st = {key.split(".")[-1]: v.to(p.device) for key, v in tensors.items()
              if key.startswith(f"opt.{name}.") and key.count(".") == name.count(".") + 2}
        st.update({k: torch.tensor(v) if k == "step" else v for k, v in meta["opt_meta"].get(name, {}).items()})
        if st:
            optimizer.state[p] = st
    return int(meta["step"]), float(meta["alpha"]), meta.get("spent", NO_TIME_SPENT)


# -- the loop ------------------------------------------------------------------------------------------
def lr_at(step: int, cfg: TrainConfig) -> float:
    warm = max(1, int(cfg.warmup * cfg.steps))
    if step < warm:
        return cfg.lr * (step + 1) / warm
    progress = (step - warm) / max(1, cfg.steps - warm)
    return cfg.lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * progress)))  # cosine to 10 %


def _stages(training: dict, name: str) -> list[dict]:
    """The training stages a start checkpoint went through, oldest first, so a chain of runs stays on record."""
    cfg = training.get("train_config", {})
    own = {"checkpoint": name, "steps": training.get("steps_done"), "tokens_seen": training.get("tokens_seen"),
           "target_skip": cfg.get("target_skip"), "variant": cfg.get("variant"),
           "budget_scope": cfg.get("budget_scope", "batch"), "timing": training.get("timing")}
    return list(training.get("earlier_stages", [])) + [own]


def train(cfg: TrainConfig, hero: HeroModel | None = None, *, progress: bool = True,
          stop_after: int | None = None) -> Path:
    """Train and write the checkpoint to ``cfg.out``; returns its directory.

    ``stop_after`` ends the process's work early (tests of resume); the saved state lets a rerun finish."""
    from accelerate import Accelerator
    from tqdm import tqdm

    # cpu=True on a machine without CUDA: accelerate otherwise ignores the launcher's WORLD_SIZE there and every
    # process trains alone on the full batch.
    accelerator = Accelerator(cpu=not torch.cuda.is_available())
    clock = (time.perf_counter(), time.process_time())  # this process's share of the run's time
    if cfg.threads > 0:
        torch.set_num_threads(cfg.threads)
    torch.manual_seed(cfg.seed)
    random.seed(cfg.seed)
    if hero is None:
        hero = load_hero(device=str(accelerator.device.type))
    out = Path(cfg.out)
    state_dir = out / "_state"
    # Fresh router of the requested variant on this backbone (the bundled default is never fine-tuned).
    injected = wrapped_layers(hero.model)
    if cfg.routed_layers is not None and list(cfg.routed_layers) != injected:
        raise ValueError(f"routed_layers {cfg.routed_layers} differ from the wrapped model's {injected}")
    router = fresh_router(hero.backbone, variant=cfg.variant, routed_layers=injected,
                          branch_scaling=cfg.branch_scaling, memory_kernel=cfg.memory_kernel,
                          memory_scale_init=cfg.memory_scale_init, rho_init=cfg.rho_init)
    compute_dtype = resolve_dtype(cfg.dtype, hero.device)
    router.config.extra = {"train_config": asdict(cfg), "compute_dtype": str(compute_dtype).removeprefix("torch.")}
    log.info("training %s in %s autocast (asked for %s), %d torch threads", out.name, compute_dtype, cfg.dtype,
             torch.get_num_threads())
    start_skip = 0.0
    if cfg.init_from is not None:
        start_from = ckpt.read_checkpoint(cfg.init_from)
        ckpt.check_backbone(start_from, hero.backbone.fingerprint, hero.backbone.name)
        if start_from.config.branch_scaling != cfg.branch_scaling:
            raise ValueError(f"{cfg.init_from} was trained with branch_scaling={start_from.config.branch_scaling!r}, "
                             f"this run asks for {cfg.branch_scaling!r}: start fresh or match it")
        router.load_state_dict({k: v.float() for k, v in ckpt.build_router(start_from).state_dict().items()})
        start_skip = float(start_from.training.get("train_config", {}).get("target_skip", 0.0))
        router.config.extra["tokens_before"] = int(start_from.training.get("tokens_seen", 0))
        router.config.extra["earlier_stages"] = _stages(start_from.training, Path(cfg.init_from).name)
    # The new router on the given model's backbone, as a copy: the caller's HeroModel keeps its own router.
    hero = hero.with_router(router, out.name)
    router.train()  # with_router hands the router over in eval mode; a fresh module starts in train mode

    blocks, data_card = training_set(hero, cfg)
    n_blocks = len(blocks)
    targets = teacher_targets(hero, cfg, blocks, progress=progress) if cfg.target == "distill" else None
    weights = loss_weights(hero, cfg, blocks)

    optimizer = torch.optim.AdamW(param_groups(hero.router, cfg), lr=cfg.lr, weight_decay=cfg.weight_decay)
    start, alpha = 0, cfg.alpha_init
    spent_before = NO_TIME_SPENT  # time of earlier, interrupted processes of this run

    def spent() -> dict[str, float]:
        return {"wall_s": round(spent_before["wall_s"] + time.perf_counter() - clock[0], 1),
                "cpu_s": round(spent_before["cpu_s"] + time.process_time() - clock[1], 1)}
    if cfg.warm_start and cfg.init_from is None and not (state_dir / "state.json").is_file():
        from .warmstart import cached_warm_start

        # Every fresh run on the same data fits the same adapters: the fit is cached beside the teacher's.
        cache = adapter_cache_path(hero, cfg, router.config.adapter_rank)
        router.config.extra["warm_start"] = cached_warm_start(hero.model, hero.router, blocks, cache,
                                                              max_tokens=cfg.warm_start_tokens, progress=progress)
        if cfg.gate_warm_start and cfg.target_skip > 0:
            from .warmstart import fit_gate_to_adapter_error

            share = cfg.target_skip * hero.profile.total_params / hero.profile.ffn_params / hero.config.n_routed
            router.config.extra["gate_warm_start"] = fit_gate_to_adapter_error(
                hero.model, hero.router, blocks, min(share, 0.95), progress=progress)
            start_skip = cfg.target_skip  # the fitted gates already skip at the budget: no ramp from 0
        if accelerator.is_main_process:  # every rank fits the same adapters (same data, same seed)
            _save_state(state_dir, hero, optimizer, 0, alpha, spent())  # a resumed run does not fit them again
            (state_dir / "warm_start.json").write_text(json.dumps(
                {k: router.config.extra[k] for k in ("warm_start", "gate_warm_start") if k in router.config.extra}))
        accelerator.wait_for_everyone()
    elif (state_dir / "warm_start.json").is_file():
        saved = json.loads((state_dir / "warm_start.json").read_text())
        router.config.extra.update(saved)
        if "gate_warm_start" in saved:
            start_skip = cfg.target_skip
    resumed = _load_state(state_dir, hero, optimizer)
    log_path = out / "train_log.jsonl"
    out.mkdir(parents=True, exist_ok=True)
    if resumed:
        start, alpha, spent_before = resumed
        log.info("resuming %s at step %d", out, start)
        # Steps logged after the last save were lost with the process: they run again, so drop their rows.
        rows = log_path.read_text().splitlines() if log_path.is_file() else []
        log_path.write_text("".join(r + "\n" for r in rows if json.loads(r)["step"] <= start))
    else:
        log_path.write_text("")
    total_params = hero.profile.total_params
    ffn_params = hero.profile.ffn_params
    hero.router.train()
    bar = tqdm(range(start, cfg.steps), desc=f"train {out.name}", initial=start, total=cfg.steps,
               disable=not progress or not accelerator.is_main_process)
    rank, world = accelerator.process_index, accelerator.num_processes
    order = block_order(cfg, n_blocks)
    for step in bar:
        t0 = time.perf_counter()
        rows = order[torch.arange(step * cfg.batch_size, (step + 1) * cfg.batch_size) % n_blocks]
        rows = rows[rank::world] if world > 1 else rows
        batch = blocks[rows].to(hero.device)
        for group in optimizer.param_groups:
            group["lr"] = lr_at(step, cfg) * group["lr_scale"]
        call = hero.new_call(cfg.variant, record=True, keep_gates=True,
                             straight_through=cfg.gate_gradient == "straight_through")
        # E*: FFNs a token may run on average so that the skipped ones make up the step's target skip.
        step_target = target_skip_at(step, cfg, start_skip)
        executed_budget = hero.config.n_routed - step_target * total_params / ffn_params
        with torch.autocast(hero.device.type, dtype=torch.bfloat16, enabled=compute_dtype == torch.bfloat16):
            logits = hero.forward(batch, None, call, use_cache=False)
        # weights of the predicted tokens (positions 1..T-1), as the targets below are shifted
        step_weights = None if weights is None else weights[rows][:, 1:].to(hero.device)
        if targets is not None:
            loss_target = distill_loss(logits[:, :-1], targets["indices"][rows][:, :-1].to(hero.device),
                                       targets["logprobs"][rows][:, :-1].to(hero.device),
                                       tail=cfg.distill_target == "topk_tail",
                                       weights=step_weights)
        else:
            token_nll = F.cross_entropy(logits[:, :-1].transpose(1, 2).float(), batch[:, 1:], reduction="none")
            loss_target = weighted_mean(token_nll, step_weights)
        gates = call.passes[-1].gates
        l_skip = usage_penalty(gates)
        if cfg.budget in ("hinge", "hard"):
            alpha = cfg.hinge_alpha
            counted = hard_executed(gates, call.tau) if cfg.budget == "hard" else gates
            sequences = batch.shape[0] if cfg.budget_scope == "sequence" else 1
            loss = loss_target + alpha * budget_hinge(counted, executed_budget, sequences)
        else:
            loss = loss_target + alpha * l_skip
        if cfg.separation > 0:
            loss = loss + cfg.separation * separation_penalty(gates, call.tau)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if world > 1:  # the router is not DDP-wrapped: average its gradients by hand
            for p in hero.router.parameters():
                if p.grad is not None:
                    p.grad = accelerator.reduce(p.grad, reduction="mean")
        grad_norm = torch.nn.utils.clip_grad_norm_(hero.router.parameters(), cfg.clip)
        optimizer.step()

        executed = call.passes[-1].executed()  # (R, N)
        skipped = (~executed).float().sum(0)
        realised = float((skipped * ffn_params / total_params).mean())
        if cfg.budget == "controller":
            step_factor = math.exp(cfg.controller_gain * (cfg.target_skip - realised))
            alpha = float(min(cfg.alpha_max, max(1e-6, alpha * step_factor)))
        dt = time.perf_counter() - t0
        row = {"step": step + 1, "loss": loss.item(), "loss_target": loss_target.item(), "l_skip": l_skip.item(),
               "alpha": alpha, "param_skip": realised, "target_skip": step_target,
               "mean_gate": torch.stack(gates).mean().item(), "near_tau": near_tau_share(gates, call.tau),
               "grad_norm": float(grad_norm), "lr": lr_at(step, cfg), "tokens_per_s": batch.numel() * world / dt,
               **memory_log_row(hero.router, call.passes[-1].records)}
        if accelerator.is_main_process:
            with log_path.open("a") as fh:
                fh.write(json.dumps(row) + "\n")
            bar.set_postfix(skip=f"{100 * realised:.1f}%", kd=f"{row['loss_target']:.3f}",
                            tok_s=f"{row['tokens_per_s']:.0f}", near_tau=f"{row['near_tau']:.2f}")
        done = step + 1
        if accelerator.is_main_process and (done % cfg.save_every == 0 or done == cfg.steps):
            _save_state(state_dir, hero, optimizer, done, alpha, spent())
        if stop_after is not None and done >= stop_after:
            return out
    hero.router.eval()
    if accelerator.is_main_process:
        tokens_seen = cfg.steps * cfg.batch_size * cfg.seq_len + int(router.config.extra.get("tokens_before", 0))
        summary = {"train_config": asdict(cfg), "steps_done": cfg.steps, "tokens_seen": tokens_seen,
                   "compute_dtype": router.config.extra["compute_dtype"],
                   "teacher_dtype": (str(teacher_dtype(hero, cfg)).removeprefix("torch.") if targets is not None
                                     else None),
                   "init_from": Path(cfg.init_from).name if cfg.init_from else None,
                   "warm_start": router.config.extra.get("warm_start"),
                   "gate_warm_start": router.config.extra.get("gate_warm_start"),
                   "final": json.loads(log_path.read_text().splitlines()[-1]) if log_path.read_text() else {},
                   "earlier_stages": router.config.extra.get("earlier_stages", []),
                   "data_card": data_card,
                   "timing": spent()}  # summed over the processes that ran it, when it was resumed
        ckpt.save_checkpoint(out, hero.router, hero.backbone.fingerprint, hero.backbone.name, training=summary,
                             storage_dtype=cfg.storage_dtype)
    return out
