"""Name -> function registry for the pure pieces of rank-level RL (rewards, scalings, baselines, ...).

Modelled on verl's ``core_algos`` (``@register_adv_est("grpo")``), made generic over *kinds* so that new
families (an RLOO leave-one-out baseline, a new reward scheme, another modifier) are added beside the
existing ones with one decorator and picked by name from a config, with one dispatch path only:

>>> from remark.algos.registry import register, get
>>> @register("scale", "unit_demo")
... def _unit(rewards_BGK, *, eps, mask_B=None):
...     return 1.0
>>> get("scale", "unit_demo") is _unit
True

Kinds used by ``remark.algos`` (the signature each kind's functions share is documented in the module
that calls them):

- ``reward``: ``fn(enc: EncodedRows) -> rewards_RK`` (or ``rewards_RNK`` for ``responder_rb``);
- ``modifier``: ``fn(rewards_...K) -> rewards_...K`` (``log_decay``);
- ``baseline``: ``fn(rewards_BGK) -> baseline_BGK`` (``mean``);
- ``scale``: ``fn(rewards_BGK, *, eps, mask_B=None) -> denominator`` broadcastable to ``(B, G, K)``.

A kind is created by its first registration; :func:`get` on an unknown kind or name raises a
``ValueError`` that lists what is valid.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

F = TypeVar("F", bound=Callable)

_REGISTRY: dict[str, dict[str, Callable]] = {}


def register(kind: str, name: str) -> Callable[[F], F]:
    """Decorator registering ``fn`` under ``(kind, name)``; registering a taken name raises ``ValueError``."""
    if not kind or not name:
        raise ValueError(
            f"register(kind, name) needs two non-empty strings, got kind={kind!r}, name={name!r}"
        )

    def deco(fn: F) -> F:
        table = _REGISTRY.setdefault(kind, {})
        if name in table and table[name] is not fn:
            raise ValueError(
                f"{kind} {name!r} is already registered (by {table[name].__module__}.{table[name].__qualname__}); "
                "pick another name"
            )
        table[name] = fn
        return fn

    return deco


def get(kind: str, name: str) -> Callable:
    """The function registered as ``(kind, name)``; an unknown kind or name raises ``ValueError`` listing the valid ones."""
    if kind not in _REGISTRY:
        raise ValueError(f"unknown kind {kind!r}; valid kinds: {', '.join(kinds())}")
    table = _REGISTRY[kind]
    if name not in table:
        raise ValueError(f"unknown {kind} {name!r}; valid {kind} names: {', '.join(names(kind))}")
    return table[name]


def names(kind: str) -> list[str]:
    """Registered names of ``kind``, sorted (empty for an unknown kind)."""
    return sorted(_REGISTRY.get(kind, {}))


def kinds() -> list[str]:
    """Kinds that have at least one registered function, sorted."""
    return sorted(_REGISTRY)
