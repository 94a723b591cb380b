"""The method: config, depth memory, router and its fast paths, the hooks into a backbone, HeroModel, traces, the tau
search, and the checkpoints that store a trained router."""
