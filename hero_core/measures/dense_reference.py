"""The dense model's log-probabilities of the last few inputs run on one backbone, computed once and shared.

Every routed run with ``quality=True`` is scored against the dense model on the same tokens. Compare routes one
prompt under up to six routers of one backbone: without this each run paid its own dense pass. The dense pass
depends only on the backbone (its weights and precision) and the input, so it is cached on the backbone by the
input's token ids and mask. It holds no per-call state: a hit returns the same tensor a miss would have computed
(read-only by its users), and a lock guards the table when app sessions share the backbone.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable

import torch

CAPACITY = 2  # entries of (T, V) fp32: 512 tokens x 49k vocabulary is ~100 MB each


class DenseReference:
    """A small LRU of dense log-probabilities keyed by the exact input; :attr:`computed` counts real passes."""

    def __init__(self, capacity: int = CAPACITY) -> None:
        self.capacity = capacity
        self._table: OrderedDict[tuple, torch.Tensor] = OrderedDict()
        self._lock = threading.Lock()
        self.computed = 0

    @staticmethod
    def key(input_ids: torch.Tensor, attention_mask: torch.Tensor | None) -> tuple:
        mask = b"" if attention_mask is None else attention_mask.cpu().numpy().tobytes()
        return tuple(input_ids.shape), input_ids.cpu().numpy().tobytes(), mask

    def log_probs(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None,
                  compute: Callable[[], torch.Tensor]) -> torch.Tensor:
        """The dense log-probabilities (B, T, V) of this input: cached, or ``compute()``d and kept."""
        key = self.key(input_ids, attention_mask)
        with self._lock:
            if key in self._table:
                self._table.move_to_end(key)
                return self._table[key]
        value = compute()  # outside the lock: another session's different prompt need not wait for this one
        with self._lock:
            self.computed += 1
            self._table[key] = value
            while len(self._table) > self.capacity:
                self._table.popitem(last=False)
        return value
