"""The sidebar's session-state keys, named once.

The sidebar draws its widgets under these keys; the link restore (``link_view``), the data set's "Open in Route
explorer" and the app's entry script write them too, so every writer names the same entry.
"""

BACKBONE_KIND = "sb_backbone_kind"
BACKBONE_PATH = "sb_backbone_path"
PRECISION = "sb_precision"
DEVICE = "sb_device"
RESEARCH = "sb_research"
CHECKPOINT = "sb_checkpoint"
CHECKPOINT_PATH = "sb_checkpoint_path"
VARIANT = "sb_variant"
TAU = "sb_tau"
# (backbone, checkpoint) whose trained tau and variant the sidebar last loaded: a new pair resets both
TAU_ORIGIN = "sb_tau_origin"
MAX_TOKENS = "sb_max_tokens"  # bound to the URL, so also the query parameter's name
SETTINGS = "sb_settings"  # this run's frozen Settings, built once from the widgets above
