"""What a study is: its settings (:class:`StudySpec`), the runs they make (arm x seed, each with its folder), and
the plan printed before anything trains (runs, tokens, an estimate of the time from a step measured here).

A spec is written to ``OUT/study_spec.json`` when a study starts, so the same command continues it and the report
and the app read what was asked; a rerun whose settings differ is refused instead of mixing two studies.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

DEFAULT_ARMS = ("hero", "no_history", "no_memread")
MATCHES = ("param", "net")
SPEC_FILE = "study_spec.json"
DATA_CONTENT = "data (the files' content)"
# Settings that change no number already measured: how many processes train side by side, and which further
# measures are taken (each stored measurement carries its own settings).
# Where the study lives is not what it measures either, nor where --data lies: its content is (data_sha256).
NOT_RESULTS = ("lanes", "references", "tasks", "bigbench", "answers", "out", "measures_dir", "data")


class StudyError(ValueError):
    """A study that cannot run or be read as asked; the message says why and what to do."""


@dataclass
class StudySpec:
    out: str
    arms: tuple[str, ...] = DEFAULT_ARMS
    seeds: int = 3
    skip: float = 0.10  # param skip every run trains to (and, with match "param", is measured at)
    # What every run is measured at: "param" -- the tau giving ``skip`` param skip (the paper's metric); "net" -- the
    # tau giving ``net_saving`` of a dense token's FLOPs saved after the router and adapters are charged, so routers
    # of different cost meet at equal net compute (the references likewise, charged their adapters only).
    match: str = "param"
    net_saving: float = 0.06
    steps: int = 750
    backbone: str | None = None  # a local Hugging Face directory; None: the embedded model
    data: str | None = None  # the user's text (hero_core.data.corpus); None: the built-in chat / code / reasoning mix
    data_sha256: str | None = None  # what identifies --data: a digest of its files' bytes (checks.data_digest)
    tasks: str | None = None  # JSONL of {question, choices, answer}: multiple-choice accuracy retained against dense
    bigbench: str | None = None  # a BIG-bench checkout or archive; None: left out (the report says so)
    answers: int = 0  # prompts of the answers suite whose correct answers each run must keep (0: left out)
    lanes: int = 1
    limit: int = 40  # held-out texts per domain
    max_tokens: int = 192  # tokens per held-out text at most
    batch_size: int = 4
    seq_len: int = 128
    references: bool = True  # static pruning, random skipping and the oracle at the same skip
    train_overrides: dict = field(default_factory=dict)  # further TrainConfig fields (quick trials, tests)
    existing: dict = field(default_factory=dict)  # "arm/seed" -> a finished run folder used as is (never retrained)
    measures_dir: str | None = None  # where each run's measurements are stored (default OUT/measures)
    title: str = "Does history help?"

    def __post_init__(self) -> None:
        self.arms = tuple(self.arms)
        if len(self.arms) < 2 or len(set(self.arms)) != len(self.arms):
            raise StudyError(f"a study compares at least two distinct arms, got {list(self.arms)}")
        for name in ("seeds", "steps", "lanes", "limit", "max_tokens", "batch_size", "seq_len"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise StudyError(f"--{name.replace('_', '-')} must be a whole number of at least 1, got {value!r}")
        if self.answers < 0:
            raise StudyError(f"--answers is a number of prompts (0 leaves them out), got {self.answers}")
        if self.match not in MATCHES:
            raise StudyError(f"--match must be one of {', '.join(MATCHES)}, got {self.match!r}")
        if not 0.0 < self.net_saving < 1.0:
            raise StudyError(f"--net-saving is a share of a dense token's FLOPs in (0, 1), got {self.net_saving}")
        if not 0.0 < self.skip < 1.0:
            raise StudyError(f"--skip is a share of the parameters in (0, 1), got {self.skip}")

    @property
    def store(self) -> Path:
        return Path(self.measures_dir) if self.measures_dir else Path(self.out) / "measures"

    def results_settings(self) -> dict:
        """Every setting that changes a number, as JSON (what a rerun must match)."""
        data = asdict(self)
        return {k: (list(v) if isinstance(v, tuple) else v) for k, v in data.items() if k not in NOT_RESULTS}

    def to_json(self) -> dict:
        """Every setting, paths as given (what a lane process rebuilds the spec from)."""
        return {k: (list(v) if isinstance(v, tuple) else v) for k, v in asdict(self).items()}

    def record(self) -> dict:
        """The settings as the study folder keeps them: its own paths relative to it, so the folder can move."""
        out = Path(self.out)
        return self.to_json() | {"out": ".", "measures_dir": relative(self.store, out)}

    @classmethod
    def from_json(cls, data: dict) -> StudySpec:
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})


def relative(path: Path | str, start: Path | str) -> str:
    import os

    return os.path.relpath(Path(path).resolve(), Path(start).resolve())


@dataclass(frozen=True)
class RunJob:
    """One arm x seed: its name in the report and the folder its checkpoint is (or will be) in."""

    arm: str
    seed: int
    name: str
    folder: str
    given: bool  # a finished run the spec names (the bundled study): used, never trained
    checkpoint: str  # how the report names it: a bundled name as is, a folder relative to the study's

    def to_json(self) -> dict:
        return asdict(self)


def plan_runs(spec: StudySpec) -> list[RunJob]:
    """Every run of the study, arm by arm, seed 0 first."""
    jobs = []
    for arm in spec.arms:
        for seed in range(spec.seeds):
            given = spec.existing.get(f"{arm}/{seed}")
            bundled = given is not None and not Path(given).is_dir()
            name = (given if bundled else Path(given).name) if given else f"{arm}-seed{seed}"
            folder = str(resolve_given(given)) if given else str(Path(spec.out) / "runs" / name)
            checkpoint = given if bundled else relative(folder, spec.out)
            jobs.append(RunJob(arm, seed, name, folder, given is not None, checkpoint))
    return jobs


def resolve_given(name_or_path: str) -> Path:
    """A run the spec names: a bundled checkpoint name (``seeds/local-10-s1-seed1``) or a directory."""
    from hero_core.method.checkpoint import resolve

    return resolve(name_or_path)


def load_or_write_spec(spec: StudySpec, *, write: bool = True) -> None:
    """Check that the spec in OUT asks for the same study (lanes may differ) or that study grown by seeds or arms,
    and write it there (``write``): the first time, or grown."""
    path = Path(spec.out) / SPEC_FILE
    if path.is_file():
        stored = StudySpec.from_json(json.loads(path.read_text(encoding="utf-8")))
        kept, asked = stored.results_settings(), spec.results_settings()
        if None in (stored.data_sha256, spec.data_sha256) and stored.data == spec.data:
            # a folder written before --data was identified by content, or --render without the data here: the
            # same path is all there is to compare
            kept["data_sha256"] = asked["data_sha256"]
        if kept == asked:
            return
        if not _grown(kept, asked):
            changed = sorted(DATA_CONTENT if k == "data_sha256" else k for k, v in asked.items() if kept.get(k) != v)
            raise StudyError(f"{path.parent} holds another study (settings differ: {', '.join(changed)}); pass "
                             "the same settings to continue it, or another --out")
    if not write:
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(spec.record(), indent=1, sort_keys=True) + "\n", encoding="utf-8")


def _grown(kept: dict, asked: dict) -> bool:
    """Whether ``asked`` is the stored study grown: more seeds per arm, or more arms (the stored ones first, in their
    order), or both; every run it had still its own, and nothing else changed. Each run's measures are stored by
    run, so the study goes on from them."""
    old_arms, new_arms = list(kept["arms"]), list(asked["arms"])
    more_seeds, more_arms = asked["seeds"] > kept["seeds"], len(new_arms) > len(old_arms)
    if asked["seeds"] < kept["seeds"] or new_arms[:len(old_arms)] != old_arms or not (more_seeds or more_arms):
        return False
    others = [k for k in asked if k not in ("seeds", "arms", "existing") and kept.get(k) != asked[k]]
    had, has = kept.get("existing") or {}, asked.get("existing") or {}
    return not others and all(has.get(run) == given for run, given in had.items())


# -- the plan ---------------------------------------------------------------------------------------------------
def measure_step_seconds(hero, spec: StudySpec, repeats: int = 3) -> float:
    """Seconds of one optimisation step on this machine at one thread (what a lane runs on): a forward and
    backward of one batch through the routed model, the median of ``repeats`` after one warm-up. The dense
    teacher's cache and the guard's evaluations are not in it (the estimate says so)."""
    import torch

    from hero_core.backbones.precision import resolve_dtype
    from hero_core.backbones.threads import threads_for_a_while

    with threads_for_a_while(1):
        # training's own precision: bf16 autocast where a probe shows it faster (TrainConfig.dtype "auto")
        bf16 = resolve_dtype("auto", hero.device) == torch.bfloat16
        vocab = hero.model.config.vocab_size
        ids = torch.randint(0, vocab, (spec.batch_size, spec.seq_len), generator=torch.Generator().manual_seed(0))
        times = []
        for _ in range(repeats + 1):
            start = time.perf_counter()
            call = hero.new_call("hero", 0.5, keep_gates=True, straight_through=True)
            with torch.autocast(hero.device.type, dtype=torch.bfloat16, enabled=bf16):
                logits = hero.forward(ids.to(hero.device), None, call)
            logits.float().logsumexp(-1).mean().backward()
            hero.router.zero_grad(set_to_none=True)
            times.append(time.perf_counter() - start)
        return float(sorted(times[1:])[len(times[1:]) // 2])


def plan(spec: StudySpec, jobs: list[RunJob], finished: set[str], step_seconds: float | None,
         backbone_name: str) -> dict:
    """The study before it runs: what trains, what is already there, tokens, and the estimated time."""
    to_train = [j for j in jobs if j.name not in finished]
    tokens_per_run = spec.steps * spec.batch_size * spec.seq_len
    waves = -(-len(to_train) // spec.lanes) if to_train else 0  # runs one after another in the busiest lane
    hours = None if step_seconds is None else waves * spec.steps * step_seconds / 3600
    return {"backbone": backbone_name, "data": spec.data or "the built-in chat / code / reasoning mix",
            "arms": list(spec.arms), "seeds": spec.seeds, "skip": spec.skip, "steps": spec.steps,
            "runs": [{"arm": j.arm, "seed": j.seed, "name": j.name, "checkpoint": j.checkpoint,
                      "finished": j.name in finished} for j in jobs],
            "to_train": [j.name for j in to_train], "tokens_per_run": tokens_per_run,
            "tokens_to_train": tokens_per_run * len(to_train), "lanes": spec.lanes,
            "step_seconds": step_seconds, "estimated_hours": hours}


def plan_lines(p: dict) -> list[str]:
    """The plan as the command prints it."""
    lines = [f"Study on {p['backbone']} ({p['data']}): arms {', '.join(p['arms'])} x {p['seeds']} seed(s), each "
             f"trained {p['steps']} steps to {p['skip']:.0%} param skip ({p['tokens_per_run']:,} tokens per run)."]
    for run in p["runs"]:
        state = "finished, kept" if run["finished"] else "to train"
        lines.append(f"  {run['arm']:<12} seed {run['seed']}  {run['name']:<36} {state}")
    if not p["to_train"]:
        lines.append("Nothing to train: every run is finished.")
    elif p["estimated_hours"] is None:
        lines.append(f"{len(p['to_train'])} run(s) to train on {p['lanes']} lane(s).")
    else:
        lines.append(f"{len(p['to_train'])} run(s) to train ({p['tokens_to_train']:,} tokens) on {p['lanes']} "
                     f"lane(s): {_duration(p['estimated_hours'])} on this machine, from a measured step of "
                     f"{p['step_seconds']:.2f} s at one thread (the dense teacher's cache and the guard's "
                     "evaluations come on top).")
    return lines


def _duration(hours: float) -> str:
    if hours < 1 / 60:
        return "under a minute"
    return f"about {hours * 60:.0f} min" if hours < 1 else f"about {hours:.1f} h"
