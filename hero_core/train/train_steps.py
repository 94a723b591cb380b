"""The steps of a training run around its loop, for hero_core.train.train.train alone: set-up, warm start,
resume, the saved state that lets a rerun resume, and the final checkpoint."""

from __future__ import annotations

import json
import logging
import random
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

import torch

from hero_core.backbones.precision import resolve_dtype
from hero_core.backbones.threads import set_threads
from hero_core.files import atomic_write, atomic_write_text
from hero_core.method import checkpoint as ckpt
from hero_core.method.inject import wrapped_layers
from hero_core.method.model import HeroModel, fresh_router, load_checkpoint
from hero_core.train.train_data import adapter_cache_path, loss_weights, teacher_dtype, teacher_targets, training_set
from hero_core.train.train_memory import param_groups

if TYPE_CHECKING:
    from hero_core.method.router import HeroRouter
    from hero_core.train.health import HealthGuard
    from hero_core.train.train_config import TrainConfig

log = logging.getLogger(__name__.removesuffix("_steps"))  # train()'s messages stay under its module's logger


# -- state ---------------------------------------------------------------------------------------------
NO_TIME_SPENT = {"wall_s": 0.0, "cpu_s": 0.0}


def save_state(state_dir: Path, hero: HeroModel, optimizer, step: int, alpha: float,
               spent: dict[str, float], guard: dict | None = None) -> None:
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
            "spent": spent, "guard": guard}
    atomic_write(state_dir / "state.safetensors", lambda tmp: save_file(tensors, tmp))
    atomic_write_text(state_dir / "state.json", json.dumps(meta))


def load_state(state_dir: Path, hero: HeroModel, optimizer) -> tuple[int, float, dict[str, float]] | None:
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


def _stages(training: dict, name: str) -> list[dict]:
    """The training stages a start checkpoint went through, oldest first, so a chain of runs stays on record."""
    cfg = training.get("train_config", {})
    own = {"checkpoint": name, "steps": training.get("steps_done"), "tokens_seen": training.get("tokens_seen"),
           "target_skip": cfg.get("target_skip"), "variant": cfg.get("variant"),
           "budget_scope": cfg.get("budget_scope", "batch"), "timing": training.get("timing")}
    return list(training.get("earlier_stages", [])) + [own]


# -- the run's set-up ------------------------------------------------------------------------------
class RunClock:
    """This process's share of the run's time, plus what earlier, interrupted processes of the run spent."""

    def __init__(self) -> None:
        self.start = (time.perf_counter(), time.process_time())
        self.before = NO_TIME_SPENT  # set on resume

    def spent(self) -> dict[str, float]:
        return {"wall_s": round(self.before["wall_s"] + time.perf_counter() - self.start[0], 1),
                "cpu_s": round(self.before["cpu_s"] + time.process_time() - self.start[1], 1)}


@dataclass
class BlockSet:
    """Training blocks of one length with what the loss reads for them."""

    blocks: torch.Tensor  # (n_blocks, length) token ids
    targets: dict | None  # the dense teacher's top-k (distillation); None: the data's next tokens
    weights: torch.Tensor | None  # per-token loss weights; None: a plain mean


@dataclass
class TrainingRun:
    """What the steps of one training run share, set up once before the first step."""

    cfg: TrainConfig
    hero: HeroModel  # the caller's backbone with the router being trained
    accelerator: object
    clock: RunClock
    out: Path
    compute_dtype: torch.dtype
    start_skip: float  # where the budget curriculum starts
    data: BlockSet  # the seq_len blocks most steps read
    long: BlockSet | None  # the long blocks every cfg.long_every-th step reads (cfg.long_seq_len); None: none
    data_card: dict
    optimizer: torch.optim.Optimizer
    validation: BlockSet | None = None  # held-out blocks of the degradation guard (hero_core.train.train_guard)
    guard: HealthGuard | None = None

    @property
    def state_dir(self) -> Path:
        return self.out / "_state"

    @property
    def log_path(self) -> Path:
        return self.out / "train_log.jsonl"


def set_threads_and_seeds(cfg: TrainConfig) -> None:
    """Before anything draws from the RNGs: the same seed gives the same router, warm start and run."""
    if cfg.threads > 0:
        set_threads(cfg.threads)
    torch.manual_seed(cfg.seed)
    random.seed(cfg.seed)


def _new_router(cfg: TrainConfig, hero: HeroModel, name: str) -> tuple[HeroRouter, torch.dtype]:
    """A fresh router of the requested variant on this backbone (the bundled default is never fine-tuned), with
    the run's config recorded in it; returns it and the autocast dtype the run computes in."""
    injected = wrapped_layers(hero.model)
    if cfg.routed_layers is not None and list(cfg.routed_layers) != injected:
        raise ValueError(f"routed_layers {cfg.routed_layers} differ from the wrapped model's {injected}")
    router = fresh_router(hero.backbone, variant=cfg.variant, routed_layers=injected,
                          branch_scaling=cfg.branch_scaling, memory_kernel=cfg.memory_kernel,
                          memory_scale_init=cfg.memory_scale_init, rho_init=cfg.rho_init,
                          head_hidden=cfg.head_hidden, d_encoder=cfg.d_encoder)
    compute_dtype = resolve_dtype(cfg.dtype, hero.device)
    router.config.extra = {"train_config": asdict(cfg), "compute_dtype": str(compute_dtype).removeprefix("torch.")}
    log.info("training %s in %s autocast (asked for %s), %d torch threads", name, compute_dtype, cfg.dtype,
             torch.get_num_threads())
    return router, compute_dtype


def _start_from_checkpoint(cfg: TrainConfig, hero: HeroModel, router: HeroRouter) -> float:
    """Load ``cfg.init_from``'s weights into the router, keeping its history on record; returns the skip the
    budget curriculum starts from (that checkpoint's target, 0 without one)."""
    if cfg.init_from is None:
        return 0.0
    start_from = load_checkpoint(cfg.init_from, hero.backbone)  # checked against this backbone, health logged
    if start_from.config.branch_scaling != cfg.branch_scaling:
        raise ValueError(f"{cfg.init_from} was trained with branch_scaling={start_from.config.branch_scaling!r}, "
                         f"this run asks for {cfg.branch_scaling!r}: start fresh or match it")
    start_widths = (start_from.config.head_hidden, start_from.config.d_encoder)
    if start_widths != (router.config.head_hidden, router.config.d_encoder):
        raise ValueError(f"{cfg.init_from} has router widths head_hidden={start_widths[0]}, "
                         f"d_encoder={start_widths[1]}; "
                         f"this run asks for {router.config.head_hidden}, {router.config.d_encoder}: set head_hidden "
                         "and d_encoder to the start checkpoint's")
    router.load_state_dict({k: v.float() for k, v in start_from.router.state_dict().items()})
    training = start_from.training_info
    router.config.extra["tokens_before"] = int(training.get("tokens_seen", 0))
    router.config.extra["earlier_stages"] = _stages(training, Path(cfg.init_from).name)
    return float(training.get("train_config", {}).get("target_skip", 0.0))


def set_up_run(cfg: TrainConfig, hero: HeroModel, accelerator, clock: RunClock, progress: bool) -> TrainingRun:
    """The router, data, teacher targets and optimiser of the run, in the order that draws the seeded RNG alike."""
    out = Path(cfg.out)
    router, compute_dtype = _new_router(cfg, hero, out.name)
    start_skip = _start_from_checkpoint(cfg, hero, router)
    # The new router on the given model's backbone, as a copy: the caller's HeroModel keeps its own router.
    hero = hero.with_router(router, out.name)
    router.train()  # with_router hands the router over in eval mode; a fresh module starts in train mode
    data, data_card = _block_set(hero, cfg, progress)
    long = None
    if cfg.long_seq_len:
        # the same data cut into long blocks, with their own teacher cache (keyed by length and count)
        long_cfg = replace(cfg, seq_len=cfg.long_seq_len, data_blocks=cfg.long_blocks, long_seq_len=0)
        long, _ = _block_set(hero, long_cfg, progress)
        data_card = {**data_card, "long_blocks": {"seq_len": cfg.long_seq_len, "blocks": len(long.blocks),
                                                  "every": cfg.long_every}}
    optimizer = torch.optim.AdamW(param_groups(hero.router, cfg), lr=cfg.lr, weight_decay=cfg.weight_decay)
    return TrainingRun(cfg, hero, accelerator, clock, out, compute_dtype, start_skip, data, long, data_card,
                       optimizer)


def _block_set(hero: HeroModel, cfg: TrainConfig, progress: bool) -> tuple[BlockSet, dict]:
    """The run's blocks of cfg.seq_len tokens, their teacher targets and loss weights, and the data card."""
    blocks, data_card = training_set(hero, cfg)
    targets = teacher_targets(hero, cfg, blocks, progress=progress) if cfg.target == "distill" else None
    return BlockSet(blocks, targets, loss_weights(hero, cfg, blocks)), data_card


def warm_start_or_restore(run: TrainingRun, progress: bool) -> None:
    """Fit the adapters (and gates) of a fresh run, or take the fit's report from the run's saved state."""
    cfg, extra = run.cfg, run.hero.router.config.extra
    if cfg.warm_start and cfg.init_from is None and not (run.state_dir / "state.json").is_file():
        _warm_start(run, progress)
    elif (run.state_dir / "warm_start.json").is_file():
        saved = json.loads((run.state_dir / "warm_start.json").read_text())
        extra.update(saved)
        if "gate_warm_start" in saved:
            run.start_skip = cfg.target_skip


def _warm_start(run: TrainingRun, progress: bool) -> None:
    """Fit the adapters to their FFNs and, with a budget, the gates to the adapters' error; saved as step 0."""
    from hero_core.train.warmstart import cached_warm_start

    cfg, hero, accelerator = run.cfg, run.hero, run.accelerator
    router = hero.router
    # Every fresh run on the same data fits the same adapters: the fit is cached beside the teacher's.
    cache = adapter_cache_path(hero, cfg, router.config.adapter_rank)
    router.config.extra["warm_start"] = cached_warm_start(hero.model, hero.router, run.data.blocks, cache,
                                                          max_tokens=cfg.warm_start_tokens, progress=progress)
    if cfg.gate_warm_start and cfg.target_skip > 0:
        from hero_core.train.warmstart import fit_gate_to_adapter_error

        share = cfg.target_skip * hero.profile.total_params / hero.profile.ffn_params / hero.config.n_routed
        router.config.extra["gate_warm_start"] = fit_gate_to_adapter_error(
            hero.model, hero.router, run.data.blocks, min(share, 0.95), progress=progress)
        run.start_skip = cfg.target_skip  # the fitted gates already skip at the budget: no ramp from 0
    if accelerator.is_main_process:  # every rank fits the same adapters (same data, same seed)
        # a resumed run does not fit them again
        save_state(run.state_dir, hero, run.optimizer, 0, cfg.alpha_init, run.clock.spent())
        (run.state_dir / "warm_start.json").write_text(json.dumps(
            {k: router.config.extra[k] for k in ("warm_start", "gate_warm_start") if k in router.config.extra}))
    accelerator.wait_for_everyone()


def resume(run: TrainingRun) -> tuple[int, float]:
    """Load the saved state of an interrupted run, if any, and start its log; returns the first step and alpha."""
    resumed = load_state(run.state_dir, run.hero, run.optimizer)
    log_path = run.log_path
    run.out.mkdir(parents=True, exist_ok=True)
    if not resumed:
        log_path.write_text("")
        return 0, run.cfg.alpha_init
    start, alpha, run.clock.before = resumed
    log.info("resuming %s at step %d", run.out, start)
    # Steps logged after the last save were lost with the process: they run again, so drop their rows.
    rows = log_path.read_text().splitlines() if log_path.is_file() else []
    log_path.write_text("".join(r + "\n" for r in rows if json.loads(r)["step"] <= start))
    return start, alpha


def progress_bar(run: TrainingRun, start: int, progress: bool):
    """The steps still to run, shown on the main process only."""
    from tqdm import tqdm

    return tqdm(range(start, run.cfg.steps), desc=f"train {run.out.name}", initial=start, total=run.cfg.steps,
                disable=not progress or not run.accelerator.is_main_process)


# -- after each step -----------------------------------------------------------------------------------
def save_state_if_due(run: TrainingRun, done: int, alpha: float) -> None:
    """Save the run's state every ``save_every`` steps and after the last, so a rerun resumes there."""
    if run.accelerator.is_main_process and (done % run.cfg.save_every == 0 or done == run.cfg.steps):
        save_state(run.state_dir, run.hero, run.optimizer, done, alpha, run.clock.spent(),
                   run.guard.to_json() if run.guard else None)


# -- the end -------------------------------------------------------------------------------------------
def write_checkpoint(run: TrainingRun) -> None:
    """Save the trained router to ``cfg.out`` with a summary of the run (main process only)."""
    cfg, hero = run.cfg, run.hero
    extra = hero.router.config.extra
    hero.router.eval()
    if not run.accelerator.is_main_process:
        return
    tokens_seen = cfg.tokens_per_process() + int(extra.get("tokens_before", 0))
    log_text = run.log_path.read_text()
    summary = {"train_config": asdict(cfg), "steps_done": cfg.steps, "tokens_seen": tokens_seen,
               "compute_dtype": extra["compute_dtype"],
               "teacher_dtype": (str(teacher_dtype(hero, cfg)).removeprefix("torch.") if run.data.targets is not None
                                 else None),
               "init_from": Path(cfg.init_from).name if cfg.init_from else None,
               "warm_start": extra.get("warm_start"),
               "gate_warm_start": extra.get("gate_warm_start"),
               "final": json.loads(log_text.splitlines()[-1]) if log_text else {},
               "earlier_stages": extra.get("earlier_stages", []),
               "health": extra.get("health"),
               "data_card": run.data_card,
               "timing": run.clock.spent()}  # summed over the processes that ran it, when it was resumed
    ckpt.save_checkpoint(run.out, hero.router, hero.backbone.fingerprint, hero.backbone.name, training=summary,
                         storage_dtype=cfg.storage_dtype)
