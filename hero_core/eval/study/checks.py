"""What a study checks before it writes or trains anything: ``--data`` is there and holds enough text for training,
for the held-out texts and for a calibration block; ``--tasks`` reads as multiple-choice items; and ``--data`` is
identified by its content (a digest of its files' bytes), so the same text at another path continues a study and
other text at the same path is refused. The numeric settings are checked where the spec is made
(:class:`~hero_core.eval.study.spec.StudySpec`), the backbone by loading it, the skip by :func:`check_reachable`.

A start refused here leaves the study folder as it was: the corrected command is then taken.
"""

from __future__ import annotations

import hashlib
from dataclasses import replace
from pathlib import Path

from hero_core.eval.study import measures as m
from hero_core.eval.study.spec import StudyError, StudySpec


def data_digest(path: str) -> str:
    """A digest of the bytes of every file ``--data`` stands for, in the order training reads them (each file's
    format too, which decides how its bytes are read); neither the folder's nor the files' names count."""
    from hero_core.data.corpus import corpus_files

    digest = hashlib.sha256()
    for file in corpus_files(path):
        body = file.read_bytes()
        digest.update(f"{file.suffix.lower()}:{len(body)}:".encode())
        digest.update(body)
    return digest.hexdigest()[:16]


def identified(spec: StudySpec, *, render_only: bool = False) -> StudySpec:
    """``spec`` with its ``--data`` digest. A missing ``--data`` is refused here (before anything is written), except
    when only rendering what is stored: the stored study's path then identifies it."""
    if not spec.data or spec.data_sha256:
        return spec
    if render_only and not Path(spec.data).expanduser().exists():
        return spec
    return replace(spec, data_sha256=data_digest(spec.data))


def check_inputs(spec: StudySpec, hero) -> None:
    """Refuse, before anything is written or trained, inputs the study would fail on later: ``--tasks`` that do not
    read as items, ``--data`` too short for training, with no held-out item or no calibration block (``hero`` is
    a model on the study's backbone: its tokenizer cuts the text; None checks the tasks alone)."""
    if spec.tasks:
        if not Path(spec.tasks).is_file():
            raise StudyError(f"--tasks {spec.tasks!r} is not a file; give a JSONL of {{question, choices, answer}}")
        try:
            m.read_tasks(spec.tasks)
        except (ValueError, UnicodeDecodeError) as err:  # a line that is not JSON is a ValueError too
            raise StudyError(f"--tasks {spec.tasks!r}: {err}") from None
    if spec.data and hero is not None:
        from hero_core.data.corpus import load_corpus

        overrides = {"batch_size": spec.batch_size, "seq_len": spec.seq_len, **spec.train_overrides}
        load_corpus(spec.data, hero.tokenizer, overrides["seq_len"], min_blocks=overrides["batch_size"])  # training's
        m.held_out_texts(hero, spec)  # measuring's: held-out items, and a calibration block of the train split
        m.calibration(hero, spec)
