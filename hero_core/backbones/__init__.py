"""Backbones, before any router: the families HeRo wraps, loading (embedded default, local directories, NF4),
precision, the shared pool."""
