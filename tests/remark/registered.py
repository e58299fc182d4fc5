"""``registered(kind, name, fn, **meta)``: a registry entry for the length of a ``with`` block (tests only)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

from remark.algos import registry


@contextlib.contextmanager
def registered(kind: str, name: str, fn: Callable, **meta: Any) -> Iterator[Callable]:
    """Register ``fn`` as ``(kind, name)`` (``meta`` holds ``help`` and the kind's facts), remove it after."""
    registry.names(kind)  # load the built-in entries first
    registry.register(kind, name, **meta)(fn)
    try:
        yield fn
    finally:
        registry._REGISTRY[kind].pop(name, None)
