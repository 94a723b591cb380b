"""HeRo Lens core: History-Aware Routing on a frozen Hugging Face causal LM, with full routing traces."""

from hero_core.backbones.loading import BackboneError, load_backbone
from hero_core.method.checkpoint import CheckpointError
from hero_core.method.config import HeroConfig
from hero_core.method.model import HeroModel, PromptError, load_hero, load_routers
from hero_core.method.trace import RoutingTrace, TraceFormatError

# ``from hero_core import plot`` imports the figures module (hero_core/plot.py) on demand: plotly stays out of a
# plain ``import hero_core``.

__all__ = ["BackboneError", "CheckpointError", "HeroConfig", "HeroModel", "PromptError", "RoutingTrace",
           "TraceFormatError", "load_backbone", "load_hero", "load_routers", "plot"]
__version__ = "0.1.0"
