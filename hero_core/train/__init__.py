"""Training: the loop, its data, losses, warm start, the bundled checkpoints' recipes and the ``train`` command."""
