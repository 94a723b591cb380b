"""One loaded backbone per (model path, precision, device, quantisation) in a process, shared by every router put on
it. A router checkpoint is ~7 MB; the backbone is the rest (270 MB here, ~5.5 GB for an 8B model in 4-bit), so
the expensive thing is what this pool holds and the router is what callers swap (the shape of PEFT's multi-adapter
API and of LoRA serving). Routers never live here: the router a forward uses travels with its call
(:mod:`hero_core.method.call_state`), so concurrent sessions on one backbone do not see each other's router.

The pool holds immutable, frozen models and no per-call state; a lock makes a load happen once when two sessions
ask for the same backbone at the same moment.
"""

from __future__ import annotations

import logging
import os
import threading
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path

import torch

from hero_core.backbones.loading import Backbone, load_backbone, resolve_device
from hero_core.backbones.precision import resolve_dtype

log = logging.getLogger(__name__)
CAPACITY_ENV = "HERO_LENS_MAX_BACKBONES"
DEFAULT_CAPACITY = 3  # the embedded model in fp32, bf16 and NF4 at once


@dataclass(frozen=True)
class BackboneKey:
    """What makes two loaded backbones different."""

    path: str  # "embedded" or a resolved local directory
    quantization: str | None
    device: str
    dtype: str

    @classmethod
    def of(cls, path: str | os.PathLike | None, quantization: str | None, device: str, dtype: str) -> BackboneKey:
        where = "embedded" if path in (None, "", "embedded") else str(Path(path).expanduser().resolve())
        resolved = resolve_device(device)
        torch_dtype = resolve_dtype(dtype, resolved)
        return cls(where, quantization, str(resolved), str(torch_dtype).removeprefix("torch."))


class BackbonePool:
    """Loaded backbones, least recently used dropped first beyond ``capacity``; :attr:`loads` counts real loads."""

    def __init__(self, capacity: int | None = None) -> None:
        self.capacity = capacity or int(os.environ.get(CAPACITY_ENV, DEFAULT_CAPACITY))
        if self.capacity < 1:
            raise ValueError(f"{CAPACITY_ENV} must be a positive integer, got {self.capacity}")
        self._loaded: OrderedDict[BackboneKey, Backbone] = OrderedDict()
        self._lock = threading.Lock()
        self.loads = 0

    def get(self, path: str | os.PathLike | None = None, *, quantization: str | None = None, device: str = "auto",
            dtype: str = "fp32") -> Backbone:
        """The backbone for these settings, loaded on first use and shared afterwards."""
        key = BackboneKey.of(path, quantization, device, dtype)
        with self._lock:
            if key in self._loaded:
                self._loaded.move_to_end(key)
                return self._loaded[key]
            log.info("loading backbone %s (%s, %s, %s)", key.path, key.quantization or "full precision",
                     key.dtype, key.device)
            backbone = load_backbone(None if key.path == "embedded" else key.path, quantization=quantization,
                                     device=device, dtype=getattr(torch, key.dtype))
            self.loads += 1
            self._loaded[key] = backbone
            while len(self._loaded) > self.capacity:
                dropped, _ = self._loaded.popitem(last=False)
                log.info("backbone %s dropped from the pool (capacity %d)", dropped, self.capacity)
            return backbone

    def __len__(self) -> int:
        return len(self._loaded)


SHARED_BACKBONES = BackbonePool()  # the process's pool: the app, load_hero(shared=True) and load_routers use it
