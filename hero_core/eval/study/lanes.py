"""Training a study's runs: which are finished, and the rest one run per lane (a process at one torch thread), with
a progress bar for the study beside each run's own.

Training itself is handed in (``train_run``, a picklable function of one job's JSON): measuring never imports the
training layer (docs/architecture.md); the command line (hero_core.cli.study) passes the recipe's trainer. A run
is finished once its checkpoint's config is written, which training does last, so an interrupted run resumes from
its saved state and a finished one is never trained again.
"""

from __future__ import annotations

from collections.abc import Callable

from hero_core.eval.study.spec import RunJob, StudyError, StudySpec
from hero_core.method.trained_settings import trained_otherwise, trained_settings


def run_settings(job: RunJob, spec: StudySpec) -> dict:
    """The training settings the study sets on ``job`` over its arm's recipe: what the trainer applies and what a
    finished run in the job's folder is checked against (``train_overrides`` last, as the trainer applies them)."""
    return {"variant": job.arm, "seed": job.seed, "steps": spec.steps, "target_skip": spec.skip,
            "batch_size": spec.batch_size, "seq_len": spec.seq_len, **spec.train_overrides}


def finished(job: RunJob, spec: StudySpec) -> bool:
    """Whether ``job``'s checkpoint is complete. A run the spec names is taken as finished when its folder holds a
    checkpoint; a run this study trained must also have been trained as this study asks (else it is refused: the
    folder belongs to another study)."""
    done = trained_settings(job.folder)
    if done is None:
        if job.given:
            raise StudyError(f"{job.name}: the study names {job.folder}, which holds no finished checkpoint")
        return False
    if job.given:
        return True
    clash = trained_otherwise(done, run_settings(job, spec))
    if clash:
        raise StudyError(f"{job.folder} holds a run trained with other settings ({clash}): use another --out")
    return True


def job_payload(job: RunJob, spec: StudySpec) -> dict:
    """What a lane needs to train one run, as JSON (a process gets it by pickling)."""
    return {"job": job.to_json(), "spec": spec.to_json()}


def train_missing(spec: StudySpec, jobs: list[RunJob], train_run: Callable[[dict], None], *,
                  max_runs: int | None = None, progress: bool = True, rank: int = 0, world_size: int = 1) -> list[str]:
    """Train every unfinished job, ``spec.lanes`` at a time; returns the names trained by this call.
    ``max_runs`` stops after that many (a slice of a long study; the rest continue on the next call). Under
    several processes (``accelerate launch``: one per GPU) rank r trains the unfinished jobs r, r + W, …"""
    from tqdm import tqdm

    # a rank's share is fixed by the plan's order, not by what is unfinished when it looks: ranks start together
    # but not at one instant
    mine = jobs[rank::world_size]
    missing = [j for j in mine if not finished(j, spec)]
    todo = missing if max_runs is None else missing[:max_runs]
    trained: list[str] = []
    with tqdm(total=len(mine), initial=len(mine) - len(missing), desc="study", unit="run", disable=not progress,
              position=0) as bar:
        if spec.lanes == 1 or len(todo) <= 1:
            for job in todo:
                train_run(job_payload(job, spec))
                trained.append(job.name)
                bar.update(1)
            return trained
        import multiprocessing

        # spawn, not fork: each lane starts a clean interpreter with its own single torch thread
        context = multiprocessing.get_context("spawn")
        with context.Pool(min(spec.lanes, len(todo)), initializer=_one_thread) as pool:
            for name in pool.imap_unordered(_train_named, [(train_run, job_payload(j, spec)) for j in todo]):
                trained.append(name)
                bar.update(1)
    return trained


def _one_thread() -> None:
    from hero_core.backbones.threads import set_threads

    set_threads(1)


def _train_named(item: tuple[Callable[[dict], None], dict]) -> str:
    train_run, payload = item
    train_run(payload)
    return payload["job"]["name"]
