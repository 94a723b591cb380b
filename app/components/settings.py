"""The sidebar: which model, checkpoint, variant and threshold every page uses.

Settings live in widget state (the keys of :mod:`components.sidebar_keys`), rendered by ``main.py`` on every run so
they persist across pages. :func:`render_sidebar` builds the one frozen :class:`Settings` of the run from them;
pages read it with :func:`current` and hand it on, down to the cached model calls, which key on it.
"""

from __future__ import annotations

import functools
import json
import os
from dataclasses import dataclass, replace
from types import MappingProxyType

import streamlit as st

from hero_core.backbones.families import FAMILIES
from hero_core.method.checkpoint import CONFIG_FILE as CHECKPOINT_CONFIG
from hero_core.method.checkpoint import bundled_names, seed_names
from hero_core.method.checkpoint import resolve as resolve_checkpoint
from hero_core.method.checkpoint_info import GROUPS as CHECKPOINT_GROUPS
from hero_core.method.checkpoint_info import CheckpointInfo
from hero_core.method.checkpoint_info import describe as describe_checkpoint
from hero_core.method.config import INFERENCE_VARIANTS, VARIANTS
from hero_core.method.model import DEFAULT_CHECKPOINT as BUNDLED_DEFAULT

from . import sidebar_keys as keys

TINY_ENV = "HERO_LENS_TINY"
DEFAULT_CHOICE = "default"  # the checkpoint choice: the bundled DEFAULT_CHECKPOINT where it fits the backbone
CUSTOM_CHECKPOINT = "directory…"
PRECISIONS = MappingProxyType({"full": "full precision (fp32)", "bf16": "bfloat16", "nf4": "4-bit NF4"})
DEVICES = ("auto", "cpu", "cuda")
DEFAULT_TAU = 0.5
TAU_STEP = 0.01  # the sidebar slider's step (components.prefetch traces one step either side)
TAU_SLIDER = (0.01, 0.99)  # the sidebar slider's range
LEARN_TAU_SLIDER, LEARN_TAU_STEP = (0.05, 0.95), 0.05  # Learn's what-if τ: coarser, each step re-runs the model
APP_MAX_TOKENS = 512  # interactive prompt cap (the library cuts at model.DEFAULT_MAX_TOKENS), with a notice
FAMILY_NAMES = ", ".join(family.name for family in FAMILIES)
VARIANT_HELP = MappingProxyType({**{v: spec.description for v, spec in VARIANTS.items()},
                                 "dense": "every FFN runs, no router"})


@dataclass(frozen=True)
class ModelSpec:
    """What identifies one loaded model: one cached instance per :meth:`canonical` spec (frozen, so hashable)."""

    backbone: str = ""  # "" = the embedded SmolLM2-135M-Instruct; else a local HF directory
    precision: str = "full"  # "full" | "nf4"
    device: str = "auto"
    checkpoint: str = DEFAULT_CHOICE  # "default", a bundled name or a checkpoint directory
    tiny: bool = False  # HERO_LENS_TINY=1: a tiny random model for tests

    @property
    def quantization(self) -> str | None:
        return "nf4" if self.precision == "nf4" else None

    def describe(self) -> str:
        backbone = "tiny random Llama" if self.tiny else (self.backbone or "embedded SmolLM2-135M-Instruct")
        return f"{backbone} · {PRECISIONS[self.precision]} · {self.device} · checkpoint {self.checkpoint}"

    def canonical(self) -> ModelSpec:
        """The spec the model caches key on: the default chosen by its own name is the same model as "default"
        (one cache entry, one router)."""
        if self.checkpoint == BUNDLED_DEFAULT and not self.backbone and not self.tiny:
            return replace(self, checkpoint=DEFAULT_CHOICE)
        return self


@dataclass(frozen=True)
class Settings:
    """A run's settings as the sidebar chose them: built once per script run, handed to every page and, through
    :class:`components.runtime.RunSpec`, to every cached call, whose cache keys on it (frozen, so hashable)."""

    model: ModelSpec
    variant: str = "hero"
    tau: float = DEFAULT_TAU
    max_tokens: int = APP_MAX_TOKENS

    def with_model(self, **changes) -> Settings:
        return replace(self, model=replace(self.model, **changes))

    def canonical(self) -> Settings:
        """These settings as a cache key: the model's canonical spec (see :meth:`ModelSpec.canonical`)."""
        return replace(self, model=self.model.canonical())


def tiny_mode() -> bool:
    return os.environ.get(TINY_ENV) == "1"


def checkpoint_defaults(checkpoint: str, backbone: str, tiny: bool) -> tuple[float, str]:
    """The threshold and variant a checkpoint was trained with (its hero_config.json); (0.5, hero) when unknown."""
    if tiny or (checkpoint == DEFAULT_CHOICE and backbone):
        return DEFAULT_TAU, "hero"  # fresh routers: the paper's tau
    name = BUNDLED_DEFAULT if checkpoint == DEFAULT_CHOICE else checkpoint
    try:
        meta = json.loads((resolve_checkpoint(name) / CHECKPOINT_CONFIG).read_text(encoding="utf-8"))
        variant = str(meta["router"].get("variant", "hero"))
        return float(meta["router"]["tau"]), variant if variant in INFERENCE_VARIANTS else "hero"
    except (ValueError, OSError, KeyError, TypeError):
        return DEFAULT_TAU, "hero"


@functools.lru_cache(maxsize=128)
def checkpoint_info(name: str) -> CheckpointInfo:
    """A bundled checkpoint's group in the picker and its one-line description (from its config)."""
    return describe_checkpoint(BUNDLED_DEFAULT if name == DEFAULT_CHOICE else name, BUNDLED_DEFAULT)


def checkpoint_options(tiny: bool, *, research: bool = True, keep: str | None = None) -> list[str]:
    """The picker's choices: "default" first, then the bundled checkpoints grouped (as trained at 10 / 25 / 40 %,
    ablations, then training stages, research runs and the extra seeds: those only with ``research``, or when
    ``keep`` is one of them), then a directory of your own. Every bundled name stays loadable by link."""
    if tiny:
        return [DEFAULT_CHOICE]
    names = [n for n in bundled_names() + seed_names() if n != BUNDLED_DEFAULT]
    names.sort(key=lambda n: (CHECKPOINT_GROUPS.index(checkpoint_info(n).group), n))
    shown = [n for n in names if research or n == keep or checkpoint_info(n).group != CHECKPOINT_GROUPS[3]]
    return [DEFAULT_CHOICE, *shown, CUSTOM_CHECKPOINT]


@functools.lru_cache(maxsize=64)
def trained_tokens(name: str) -> int | None:
    """Training tokens a bundled checkpoint has seen (its hero_config.json), None when it does not say."""
    try:
        meta = json.loads((resolve_checkpoint(name) / CHECKPOINT_CONFIG).read_text(encoding="utf-8"))
        return int(meta["training"]["tokens_seen"])
    except (ValueError, OSError, KeyError, TypeError):
        return None


def model_dir_notes(backbone: str, checkpoint: str) -> tuple[str | None, str | None]:
    """What the typed model directory holds, and the library's refusal of the chosen checkpoint where it was trained
    for another backbone; read without loading the model, so the picker answers before anything loads."""
    from hero_core.backbones.loading import BackboneError
    from hero_core.method.checkpoint import check_backbone, read_checkpoint
    from hero_core.method.model_dirs import describe_model_dir

    try:
        info = describe_model_dir(backbone)
    except BackboneError:
        return None, None  # loading the backbone reports it, with what to do
    if checkpoint in (DEFAULT_CHOICE, ""):
        return info.describe(), None
    try:
        check_backbone(read_checkpoint(checkpoint), info.fingerprint, os.path.basename(backbone.rstrip("/")))
    except ValueError as err:
        return info.describe(), str(err)
    return info.describe(), None


GROUP_TAGS = MappingProxyType({CHECKPOINT_GROUPS[1]: "trained", CHECKPOINT_GROUPS[2]: "ablation",
                               CHECKPOINT_GROUPS[3]: "research"})


def checkpoint_label(choice: str, backbone: str = "", tiny: bool = False) -> str:
    """The picker's text: the default by its name, every other bundled one with its group and training tokens."""
    if choice == DEFAULT_CHOICE:
        if tiny:
            return "default — the tiny model's random router"
        return (f"default — {BUNDLED_DEFAULT} (recommended)" if not backbone else
                f"default — {BUNDLED_DEFAULT} if trained for this model, else untrained routers")
    if choice == CUSTOM_CHECKPOINT:
        return choice
    info = checkpoint_info(choice)
    if info.line.startswith("unreadable"):
        return choice  # a name that is not (or no longer) a readable checkpoint: the bare name, no error
    tokens = trained_tokens(choice)
    amount = "" if tokens is None else f" · {tokens / 1e6:.2f} M tokens"
    return f"{GROUP_TAGS.get(info.group, '')} · {choice}{amount}"


def render_sidebar() -> Settings:
    """Draw the shared settings in the sidebar; return them, and keep them for :func:`current`."""
    tiny = tiny_mode()
    sb = st.sidebar
    sb.subheader("Model")
    if tiny:
        sb.caption(f"Test mode ({TINY_ENV}=1): a tiny random 4-layer Llama; its text is gibberish.")
    kind = sb.radio("Backbone", ["embedded", "local directory"], key=keys.BACKBONE_KIND, horizontal=True,
                    help="Embedded: SmolLM2-135M-Instruct shipped with HeRo Lens. Or any local Hugging Face "
                         f"model directory with safetensors weights of a supported family ({FAMILY_NAMES}).",
                    disabled=tiny)
    backbone = ""
    if kind == "local directory" and not tiny:
        backbone = sb.text_input("Model directory", key=keys.BACKBONE_PATH, placeholder="/path/to/hf_model").strip()
    precision = sb.selectbox("Precision", list(PRECISIONS), format_func=PRECISIONS.get, key=keys.PRECISION,
                             help="The backbone's precision; router weights stay fp32. In bfloat16 a prompt's "
                                  "routing decisions run in bf16 autocast when the router was trained that way "
                                  "(every bundled one was), so a few decisions near τ differ from full precision.")
    device = sb.selectbox("Device", DEVICES, key=keys.DEVICE)
    research = sb.toggle("Show training stages and research runs", key=keys.RESEARCH, disabled=tiny,
                         help="Intermediate stages (-s1), recipe probes (-r2, -r3, -r5 …) and the extra training "
                              "seeds (seeds/…): what the results pages measure. The glossary explains the names.")
    choice = sb.selectbox("Checkpoint", checkpoint_options(tiny, research=research,
                                                           keep=st.session_state.get(keys.CHECKPOINT)),
                          key=keys.CHECKPOINT, format_func=lambda c: checkpoint_label(c, backbone, tiny),
                          help=f"Router checkpoint. 'default' is the bundled {BUNDLED_DEFAULT} when it fits the "
                               "backbone, else fresh untrained routers. Then the checkpoints as trained at 10 / 25 "
                               "/ 40 % param skip, the ablations, and (switch above) the research runs.")
    if not tiny and not backbone and choice != CUSTOM_CHECKPOINT:
        sb.caption(checkpoint_info(choice).line)
    checkpoint = choice
    if choice == CUSTOM_CHECKPOINT:
        # An empty path stays empty: loading it fails with a message instead of quietly using the default.
        checkpoint = sb.text_input("Checkpoint directory", key=keys.CHECKPOINT_PATH,
                                   placeholder="/path/to/checkpoint").strip()
    if backbone:
        caption, refusal = model_dir_notes(backbone, checkpoint)
        if caption:
            sb.caption(caption)
        if refusal:
            sb.error(refusal)
    sb.subheader("Routing")
    # A newly chosen checkpoint brings the variant it was trained as (local-* -> no_history) and its own tau.
    origin = (backbone, checkpoint)
    if st.session_state.get(keys.TAU_ORIGIN) != origin:
        st.session_state[keys.TAU_ORIGIN] = origin
        st.session_state[keys.TAU], st.session_state[keys.VARIANT] = checkpoint_defaults(checkpoint, backbone, tiny)
    variant = sb.selectbox("Variant", INFERENCE_VARIANTS, key=keys.VARIANT,
                           format_func=lambda v: f"{v} — {VARIANT_HELP[v]}")
    tau = sb.slider("τ (what-if threshold)", *TAU_SLIDER, step=TAU_STEP, key=keys.TAU,
                    help="An FFN runs when its gate g ≥ τ. The slider starts at the checkpoint's own τ (calibrated "
                         "to its budget); move it to see what a different threshold would do (every block is "
                         "re-run, so later gates change too).")
    with sb.expander("Advanced"):
        max_tokens = st.number_input("Max prompt tokens", 16, 2048, APP_MAX_TOKENS, 16, key=keys.MAX_TOKENS,
                                     bind="query-params", help="Longer prompts are truncated, with a notice.")
    settings = Settings(ModelSpec(backbone=backbone, precision=precision, device=device, checkpoint=checkpoint,
                                  tiny=tiny), variant=variant, tau=float(tau), max_tokens=int(max_tokens))
    st.session_state[keys.SETTINGS] = settings  # the run's one value: pages read it back through current()
    return settings


def current() -> Settings:
    """The settings chosen in the sidebar (defaults before the sidebar first ran)."""
    found = st.session_state.get(keys.SETTINGS)
    return found if isinstance(found, Settings) else Settings(ModelSpec(tiny=tiny_mode()))
