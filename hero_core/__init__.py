"""HeRo Lens core: History-Aware Routing on a frozen Hugging Face causal LM, with full routing traces."""

from .backbones import BackboneError, load_backbone
from .checkpoint import CheckpointError
from .config import HeroConfig
from .model import HeroModel, PromptError, load_hero
from .trace import RoutingTrace, TraceFormatError

__all__ = ["BackboneError", "CheckpointError", "HeroConfig", "HeroModel", "PromptError", "RoutingTrace",
           "TraceFormatError", "load_backbone", "load_hero"]
__version__ = "0.1.0"
