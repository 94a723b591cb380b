"""The old home of the figure functions, kept so earlier notebooks still run: use ``from hero_core import plot``."""

import warnings

from .plot import *  # noqa: F403
from .plot import __all__  # noqa: F401
from .viz.figures import skip_heatmap  # noqa: F401  (the old name of plot.skip_map)

warnings.warn("hero_core.figures moved: use `from hero_core import plot` (plot.skip_map, plot.memory_map, …)",
              DeprecationWarning, stacklevel=2)
