"""The words for what a router is read against, one table for every page, table, figure and legend.

The references are skip policies run on the adapters of the checkpoint their curve names (``adapters_of``), so only
the skip decisions differ: their keys are the curve names of the held-out frontier (``hero_core.eval.frontier.curves``)
and the prefixes of the answers suite's reference runs (``oracle@<checkpoint>``, ``random@<checkpoint>``). Dense
is the model every ratio is taken against; the paper's budgets are quoted, never measured here.
"""

from __future__ import annotations

from types import MappingProxyType

REFERENCE_LABELS = MappingProxyType({"static": "static pruning", "random": "random skipping",
                                     "expert_choice": "MoD top-k (not causal)", "oracle": "oracle (not deployable)"})
REFERENCE_NOTES = MappingProxyType({
    "static": "the same FFNs dropped for every token, least block influence first (ShortGPT), influence measured on "
              "training-split text",
    "random": "FFNs skipped at random at the target rate",
    "expert_choice": "each layer keeps the tokens with the highest gates across the whole text: it reads tokens "
                     "that have not been generated yet",
    "oracle": "skips where the adapter's error against the dense FFN output is smallest: it needs the dense FFN's "
              "output, which skipping is meant to avoid computing"})
DENSE_LABEL = "dense (the reference)"
PAPER_BUDGETS = (26.87, 38.82)  # the paper's two HeRo operating points (Llama-3.1-8B), param skip %
PAPER_BUDGETS_LABEL = "paper's budgets"


def reference_run_label(method: str) -> str | None:
    """The legend of a reference run named ``<reference>@<checkpoint>`` (e.g. ``oracle (not deployable) at
    hero-10``); None for a run that is not a reference."""
    name, at, checkpoint = method.partition("@")
    if not at or name not in REFERENCE_LABELS:
        return None
    return f"{REFERENCE_LABELS[name]} at {checkpoint}"
