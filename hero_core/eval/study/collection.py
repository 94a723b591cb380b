"""Every finished run's measurements for the report (:func:`collect`): each read from the store while its settings
match, or measured now and stored, with the dense model's grades and the notes the report prints.

What every run shares is loaded once, on the first run that must be measured (:class:`_Measuring`): the held-out
texts, the calibration blocks and each graded measure's items. A graded measure whose items cannot be had here
(BIG-bench's tasks missing) is dropped from the study with a note, not an error.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from hero_core.eval.study import measures as m
from hero_core.eval.study.spec import RunJob, StudySpec

# Each graded measure: how its items are loaded (once per study) and how one model is graded on them
GRADERS = {"mc": (lambda spec: m.read_tasks(spec.tasks), m.measure_mc),
           "bigbench": (m.bigbench_examples, m.measure_bigbench), "answers": (m.answer_rows, m.measure_answers)}


def collect(spec: StudySpec, jobs: list[RunJob], backbone, progress: bool) -> tuple[dict, dict, dict]:
    """Every finished run's measurements, from the store or measured now (``backbone`` None: stored only); the
    dense model's grades per graded measure; the report's notes."""
    kinds = graded_kinds(spec)
    notes = study_notes(spec)
    dense = {k: (m.stored(m.store_file(spec.store, "dense", k), st) or {}).get("grades") for k, st in kinds.items()}
    measuring = _Measuring(spec, kinds, dense, notes)
    measured = {}
    for job in jobs:
        run = measuring.stored(job)
        if measuring.lacking(run) and backbone is not None:
            measuring.measure(job, run, backbone)
        if run.ppl is not None:
            measured[job.name] = {"ppl": run.ppl, "refs": run.refs, "health": run.ppl.get("health"),
                                  **{k: run.graded.get(k) for k in GRADERS}}
    note_unreferenced(spec, measured, notes)
    return measured, dense, notes


def graded_kinds(spec: StudySpec) -> dict[str, dict]:
    """The graded measures this study takes, with the settings their stored files carry: multiple choice on
    ``--tasks``, BIG-bench on ``--bigbench`` where that path is here."""
    kinds = {"mc": m.tasks_settings(spec)} if spec.tasks else {}
    if spec.bigbench and Path(spec.bigbench).expanduser().exists():
        kinds["bigbench"] = m.bigbench_settings(spec)
    if spec.answers:
        kinds["answers"] = m.answers_settings(spec)
    return kinds


def study_notes(spec: StudySpec) -> dict[str, str]:
    """What the report says of each graded measure (taken or why not), and of the chat ratio on the built-in data."""
    notes = {"mc": (f"Multiple choice: the items of {spec.tasks}, accuracy and accuracy retained against dense on the "
                    "same items." if spec.tasks else "Multiple-choice accuracy left out: no --tasks file given."),
             "bigbench": bigbench_note(spec),
             "answers": (f"Answers kept: the first {spec.answers} prompts of the answers suite (every category in "
                         "turn), greedy; the share of dense's correct answers each run also gets right." if spec.answers
                         else "Answers kept left out: no --answers N given.")}
    if not spec.data:
        notes["chat"] = ("A chat ratio below 1 is not a gain over dense: the held-out chat texts are the dense model's "
                         "own replies, and routers trained on the renormalised top-k target put more probability on "
                         "dense's own tokens than dense does (docs/results.md). Compare arms with each other, not "
                         "with 1.")
    return notes


def bigbench_note(spec: StudySpec) -> str:
    if not spec.bigbench:
        return "BIG-bench left out: no checkout or archive given (--bigbench PATH)."
    if not Path(spec.bigbench).expanduser().exists():
        return f"BIG-bench left out: {spec.bigbench} is not on this machine."
    return (f"BIG-bench: Retain (mean over the main suite's tasks of routed / dense accuracy, %) on the first "
            f"{m.BIGBENCH_LIMIT} examples of each task, from {spec.bigbench}.")


def note_unreferenced(spec: StudySpec, measured: dict, notes: dict) -> None:
    """Say which runs lack the references at the same skip (a --render of a study measured without them)."""
    unreferenced = [name for name, run in measured.items() if spec.references and run["refs"] is None]
    if unreferenced:
        notes["references"] = (f"References at the same skip not measured yet for {len(unreferenced)} run(s) "
                               f"({', '.join(unreferenced)}): the command without --render measures them.")


@dataclass
class _Run:
    """One run's measurements so far; None: neither stored with matching settings nor measured yet."""

    ppl: dict | None
    refs: dict | None
    graded: dict[str, dict | None]


class _Measuring:
    """What one :func:`collect` shares between runs: the settings each stored file must carry, the graded measures
    still taken (``kinds``, the caller's dict, shrunk when one's items cannot be had), the dense grades and the notes
    (the caller's dicts, filled in), and what is loaded once for every run measured."""

    def __init__(self, spec: StudySpec, kinds: dict[str, dict], dense: dict, notes: dict) -> None:
        self.spec, self.kinds, self.dense, self.notes = spec, kinds, dense, notes
        self.ppl_settings = m.ppl_settings(spec)
        self.refs_settings = self.ppl_settings | {"references": list(m.REFERENCES)}
        self.texts = self.blocks = None
        self.items: dict = {}

    def stored(self, job: RunJob) -> _Run:
        store, spec = self.spec.store, self.spec
        return _Run(ppl=m.stored(m.store_file(store, job.name, "ppl"), self.ppl_settings),
                    refs=(m.stored_references(m.store_file(store, job.name, "refs"), self.refs_settings)
                          if spec.references else None),
                    graded={k: m.stored(m.store_file(store, job.name, k), st) for k, st in self.kinds.items()})

    def lacking(self, run: _Run) -> bool:
        """Whether anything this study takes is missing for the run (or the dense grades it is read against)."""
        return (run.ppl is None or (self.spec.references and run.refs is None)
                or any(run.graded[k] is None or self.dense[k] is None for k in self.kinds))

    def measure(self, job: RunJob, run: _Run, backbone) -> None:
        """Measure and store what the run lacks: perplexity, the references, each graded measure."""
        from hero_core.method.model import load_checkpoint

        hero = load_checkpoint(job.folder, backbone)
        if self.texts is None:
            self.texts, self.blocks = m.held_out_texts(hero, self.spec), m.calibration(hero, self.spec)
        if run.ppl is None:
            run.ppl = self._perplexity(hero, job)
        if self.spec.references and run.refs is None:
            run.refs = m.measure_references(hero, self.texts, self.blocks, self.spec) | {"settings": self.refs_settings}
            m.write(m.store_file(self.spec.store, job.name, "refs"), run.refs)
        for kind in list(self.kinds):
            self._grade(hero, job, run, kind)

    def _perplexity(self, hero, job: RunJob) -> dict:
        """Held-out perplexity at the study's tau, stored with what identifies the run (seed, variant, health)."""
        info = hero.training_info
        ppl = m.measure_ppl(hero, self.texts, self.blocks, self.spec) | {
            "settings": self.ppl_settings, "seed": info.get("train_config", {}).get("seed", job.seed),
            "variant": hero.config.variant, "health": info.get("health"),
            "tokens_seen": int(info.get("tokens_seen", 0))}
        m.write(m.store_file(self.spec.store, job.name, "ppl"), ppl)
        return ppl

    def _grade(self, hero, job: RunJob, run: _Run, kind: str) -> None:
        """Grade the run on one measure at its tau, and the dense model too where its grades are not stored."""
        items = self._items(kind)
        if items is None:
            return
        grade, store = GRADERS[kind][1], self.spec.store
        if self.dense[kind] is None:
            self.dense[kind] = grade(hero, items, None)
            m.write(m.store_file(store, "dense", kind), {"settings": self.kinds[kind], "grades": self.dense[kind]})
        if run.graded[kind] is None:
            run.graded[kind] = {"settings": self.kinds[kind], "grades": grade(hero, items, run.ppl["tau"])}
            m.write(m.store_file(store, job.name, kind), run.graded[kind])

    def _items(self, kind: str):
        """A graded measure's items, loaded once; None where they are not usable here: the report says why and the
        study goes on without that measure."""
        from hero_core.eval.benchmarks.bigbench import BigBenchError

        if kind not in self.items:
            try:
                self.items[kind] = GRADERS[kind][0](self.spec)
            except BigBenchError as err:
                self.notes[kind] = f"BIG-bench left out: {err}"
                del self.kinds[kind]
                return None
        return self.items[kind]
