"""What each page parameter of a link accepts, and the check that says which values it cannot use.

Most page controls are Streamlit widgets bound to the URL (their key is the parameter's name). Streamlit drops a
value such a control cannot show, and clamps a number out of range, without a word; the Data set page reads its
run settings by hand and skipped bad ones as quietly. :func:`link_problems` checks every parameter of this table
first: each bad value is reported (parameter, value, what is accepted) and removed, so the page opens on its
default. The sidebar's own parameters (checkpoint, variant, tau, precision, the cell) and the prompt are checked
where they are restored (:mod:`components.link_view`, :mod:`components.link_prompt`).

A page's options written out here (Generate's decoding, Learn's example text, Why's method) are checked against the
controls the pages draw by tests/test_link_params.py.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import streamlit as st

from hero_core.analysis.attribution import BASELINES
from hero_core.eval.sweep.prompt_sets import BUNDLED_SETS
from hero_core.method.config import INFERENCE_VARIANTS
from hero_core.viz.memory_figures import MEMORY_MODE_LABELS

from . import sidebar_keys
from .compare import MAX_RUNS, PRESET_LABELS, comparable_checkpoints, custom_checkpoints
from .dataset import MAX_DATASET_RUNS, run_options
from .settings import LEARN_TAU_SLIDER, PRECISIONS, tiny_mode


@dataclass(frozen=True)
class OneOf:
    """A choice among ``options``; with ``most`` > 1 a list (a multiselect repeats the parameter,
    ``?compare_variants=hero&compare_variants=no_history``; ``separator`` joins one value instead)."""

    options: tuple[str, ...]
    most: int = 1
    separator: str | None = None

    def problem(self, name: str, values: list[str]) -> str | None:
        if self.separator is not None:
            values = [part for value in values for part in value.split(self.separator)]
        bad = [v for v in values if v not in self.options]
        if bad:
            return f"unknown {name} {', '.join(map(repr, bad))} (one of {', '.join(self.options)})"
        if len(values) > self.most:
            return f"{name} takes at most {self.most} values, got {len(values)}"
        return None


@dataclass(frozen=True)
class Number:
    """A number from ``low`` to ``high`` (no upper bound when None); ``whole``: an integer."""

    low: float
    high: float | None
    whole: bool = True

    def problem(self, name: str, values: list[str]) -> str | None:
        value = values[-1]
        try:
            number = int(value) if self.whole else float(value)
        except ValueError:
            number = None
        if number is not None and self.low <= number and (self.high is None or number <= self.high):
            return None
        kind, shown = ("a whole number", lambda x: str(int(x))) if self.whole else ("a number", lambda x: f"{x:g}")
        span = f"from {shown(self.low)}" + ("" if self.high is None else f" to {shown(self.high)}")
        return f"{name} must be {kind} {span}, got {value!r}"


FLAG = OneOf(("true", "false"))  # a bound toggle's value, as Streamlit writes it
ZERO_ONE = OneOf(("0", "1"))  # a switch the app writes by hand
# The controls' own options where they live in a page script (checked against the pages by the tests).
GENERATE_DECODING = ("greedy", "sampled")
LEARN_SOURCES = ("a short example", "the prompt from the other pages")
WHY_METHODS = ("token ablation", "auto (gradients if they pass)", "integrated gradients")


def accepted() -> dict[str, OneOf | Number]:
    """Every page parameter a link may carry, with what it accepts (read when a session opens: the bundled
    checkpoints are read from disk)."""
    checkpoints = tuple(comparable_checkpoints())
    custom = tuple(custom_checkpoints(tiny_mode()))
    table: dict[str, OneOf | Number] = {
        sidebar_keys.MAX_TOKENS: Number(16, 2048),
        "chat": ZERO_ONE,
        "compare_preset": OneOf(tuple(PRESET_LABELS.values())),
        "compare_variants": OneOf(INFERENCE_VARIANTS, most=MAX_RUNS),
        "compare_checkpoints": OneOf(checkpoints, most=MAX_RUNS),
        "compare_n_runs": Number(1, MAX_RUNS),
        "compare_match": FLAG,
        "memory_mode": OneOf(tuple(MEMORY_MODE_LABELS.values())),
        "why_method": OneOf(WHY_METHODS),
        "why_steps": Number(8, 128),
        "why_baseline": OneOf(BASELINES),
        "generate_max_new": Number(1, 256),
        "generate_decoding": OneOf(GENERATE_DECODING),
        "generate_temperature": Number(0.05, 2.0, whole=False),
        "generate_top_p": Number(0.05, 1.0, whole=False),
        "generate_seed": Number(0, 2**31 - 1),
        "generate_chat": FLAG,
        "generate_dense": FLAG,
        "learn_source": OneOf(LEARN_SOURCES),
        "learn_tau": Number(*LEARN_TAU_SLIDER, whole=False),
        "learn_depth": Number(1, None),  # its top is the model's routed blocks: Streamlit keeps it within them
        "learn_history": FLAG,
        "set": OneOf(BUNDLED_SETS),
        "n": Number(1, 500),
        "runs": OneOf(tuple(run_options()[0]), most=MAX_DATASET_RUNS, separator=","),
        "max_tokens": Number(16, 2048),
        "set_chat": ZERO_ONE,
        "match": ZERO_ONE,
    }
    for i in range(MAX_RUNS):  # Compare's custom runs, one row of pickers each
        table[f"compare_ckpt_{i}"] = OneOf(custom)
        table[f"compare_prec_{i}"] = OneOf(tuple(PRECISIONS))
        table[f"compare_var_{i}"] = OneOf(INFERENCE_VARIANTS)
    return table


def problems_in(params: Mapping[str, list[str]], table: Mapping[str, OneOf | Number]) -> dict[str, str]:
    """{parameter: what is wrong with it} for each parameter of ``params`` (name -> its values) that ``table``
    knows and whose value it does not accept; an empty value is a cleared control, which every control takes."""
    found = {}
    for name, values in params.items():
        given = [v for v in values if v != ""]
        check = table.get(name)
        if check is not None and given:
            problem = check.problem(name, given)
            if problem is not None:
                found[name] = problem
    return found


def link_problems() -> list[str]:
    """The link's page parameters that no control can use: reported, and removed from the address bar so the page
    opens on its default."""
    params = {name: st.query_params.get_all(name) for name in st.query_params}
    found = problems_in(params, accepted())
    for name in found:
        del st.query_params[name]
    return list(found.values())
