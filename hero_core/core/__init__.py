"""The method and its runtime: config, depth memory, router, the hooks into a backbone, HeroModel, traces,
compute accounting, checkpoints, backbone loading, and the text data every other layer reads."""
