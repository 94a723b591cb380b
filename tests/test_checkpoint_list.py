"""The checkpoint picker a newcomer reads: the default first and named, groups in a fixed order, research runs
behind a switch, one line from each checkpoint's config, and the recipe codes explained."""

import sys
from pathlib import Path

from hero_core.method.checkpoint import bundled_names, seed_names
from hero_core.method.checkpoint_info import GROUPS, NAME_CODES, describe, group_of
from hero_core.method.model import DEFAULT_CHECKPOINT

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "app"))
from components.settings import (  # noqa: E402
    CUSTOM_CHECKPOINT,
    DEFAULT_CHOICE,
    ModelSpec,
    checkpoint_info,
    checkpoint_label,
    checkpoint_options,
)


def test_names_fall_into_their_groups():
    assert group_of(DEFAULT_CHECKPOINT, DEFAULT_CHECKPOINT) == GROUPS[0]
    assert group_of("local-10", DEFAULT_CHECKPOINT) == GROUPS[1]
    assert group_of("hero-40", DEFAULT_CHECKPOINT) == GROUPS[1]
    assert group_of("no_memread-10-r4", DEFAULT_CHECKPOINT) == GROUPS[2]
    for research in ("hero-10-s1", "hero-10-r2-s1", "hero-10-r3", "hero-13-r5", "seeds/local-10-s1-seed1",
                     "no_memread-10-r2-s1"):
        assert group_of(research, DEFAULT_CHECKPOINT) == GROUPS[3], research


def test_the_picker_lists_the_default_first_and_hides_research_runs_until_asked():
    full = checkpoint_options(False, research=True)
    short = checkpoint_options(False, research=False)
    assert full[0] == short[0] == DEFAULT_CHOICE and full[-1] == short[-1] == CUSTOM_CHECKPOINT
    assert set(full[1:-1]) == (set(bundled_names()) | set(seed_names())) - {DEFAULT_CHECKPOINT}
    assert all(group_of(n, DEFAULT_CHECKPOINT) != GROUPS[3] for n in short[1:-1])
    groups = [GROUPS.index(checkpoint_info(n).group) for n in full[1:-1]]
    assert groups == sorted(groups)  # grouped: as trained, ablations, research
    assert "hero-10-s1" in checkpoint_options(False, research=False, keep="hero-10-s1")  # a link's choice stays
    assert checkpoint_label(DEFAULT_CHOICE) == f"default — {DEFAULT_CHECKPOINT} (recommended)"


def test_every_bundled_checkpoint_has_a_line_from_its_config():
    for name in bundled_names():
        line = describe(name, DEFAULT_CHECKPOINT).line
        assert "param skip" in line and "training tokens" in line and "seed" in line, (name, line)
    assert "local router" in describe("local-10", DEFAULT_CHECKPOINT).line.lower() or \
        "no history" in describe("local-10", DEFAULT_CHECKPOINT).line.lower()


def test_the_default_by_name_is_the_same_model_as_default():
    assert ModelSpec(checkpoint=DEFAULT_CHECKPOINT).canonical() == ModelSpec(checkpoint=DEFAULT_CHOICE).canonical()
    assert ModelSpec(checkpoint="local-10").canonical() != ModelSpec().canonical()


def test_the_glossary_explains_every_recipe_code():
    codes = " ".join(code for code, _ in NAME_CODES)
    for code in ("-s1", "-rN", "-seedN", "no_memread", "no_aux", "no_pos"):
        assert code in codes
