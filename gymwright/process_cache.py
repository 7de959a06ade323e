"""What a process keeps of things that never change once made (a version's rubric table, a finished rollout's grade
facts, a blob's bytes), the most recently used first to stay: one bounded, thread-safe LRU for every such cache.

Bounded by a number of entries, by their total size (`size(value)`, bytes or characters), or both; a value larger than
`max_value` is not kept. Each process has its own: nothing here is shared between web or worker processes, so a
key must name content that cannot change (a hash, a finished row's id).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any


class Kept:
    def __init__(
        self,
        *,
        entries: int | None = None,
        max_size: int | None = None,
        max_value: int | None = None,
        size: Callable[[Any], int] = len,
    ):
        self.entries, self.max_size, self.max_value, self.size = entries, max_size, max_value, size
        self._items: OrderedDict[Hashable, tuple[Any, int]] = OrderedDict()
        self._total = 0
        self._lock = threading.Lock()

    def get(self, key: Hashable, default: Any = None) -> Any:
        with self._lock:
            item = self._items.get(key)
            if item is None:
                return default
            self._items.move_to_end(key)
            return item[0]

    def put(self, key: Hashable, value: Any) -> None:
        measured = self.size(value) if self.max_size is not None or self.max_value is not None else 0
        if self.max_value is not None and measured > self.max_value:
            return
        with self._lock:
            old = self._items.pop(key, None)
            if old is not None:
                self._total -= old[1]
            self._items[key] = (value, measured)
            self._total += measured
            while self._items and (
                (self.entries is not None and len(self._items) > self.entries)
                or (self.max_size is not None and self._total > self.max_size)
            ):
                _, (_, dropped) = self._items.popitem(last=False)
                self._total -= dropped

    def __contains__(self, key: Hashable) -> bool:
        return key in self._items

    def __iter__(self):
        with self._lock:
            return iter(list(self._items))

    def __len__(self) -> int:
        return len(self._items)

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
            self._total = 0
