"""HeRo Lens core: History-Aware Routing on a frozen Hugging Face causal LM, with full routing traces."""

from .core.backbones import BackboneError, load_backbone
from .core.checkpoint import CheckpointError
from .core.config import HeroConfig
from .core.model import HeroModel, PromptError, load_hero, load_routers
from .core.trace import RoutingTrace, TraceFormatError

# ``from hero_core import plot`` imports the figures module (hero_core/plot.py) on demand: plotly stays out of a
# plain ``import hero_core``.

__all__ = ["BackboneError", "CheckpointError", "HeroConfig", "HeroModel", "PromptError", "RoutingTrace",
           "TraceFormatError", "load_backbone", "load_hero", "load_routers", "plot"]
__version__ = "0.1.0"
