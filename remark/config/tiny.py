"""``build_tiny``'s settings: the defaults, the tiny model's shape (``TinySpec``) and the check the config's
validation runs before anything is built (``remark.run.build_tiny`` builds the assets from them).
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

from catalog.io.errors import InputError
from remark.config.ranges import check_build_tiny_ranges


@dataclass(frozen=True)
class TinySpec:
    """Shape of the tiny model. Defaults: ~1M parameters, as in docs/experiments (CPU scale)."""

    vocab_size: int = 4096
    hidden_size: int = 128
    intermediate_size: int = 512
    num_hidden_layers: int = 2
    num_attention_heads: int = 4
    num_key_value_heads: int = 2
    max_position_embeddings: int = 1024
    tie_word_embeddings: bool = True


TINY_DEFAULTS: dict[str, Any] = {
    "n_requests": 300,
    "n_items": 48,
    "relevant_size": [6, 10],
    "seed": 0,
    "sft_epochs": 8,
    "sft_lr": 3e-3,
    "sft_targets": "union",
    "spec": {"vocab_size": 1024, "hidden_size": 96, "intermediate_size": 384},
}


def check_build_tiny(value: dict[str, Any]) -> dict[str, Any]:
    """``value`` over :data:`TINY_DEFAULTS`, checked (the config's validation calls this before anything
    runs): known keys (``spec``'s are ``TinySpec``'s fields), each of its default's type, each number in
    its ``build_tiny.KEY`` row of ``remark.config.ranges.RANGES``; else ``InputError(field="build_tiny")``."""
    opts = {**TINY_DEFAULTS, **value}
    spec_keys = [f.name for f in fields(TinySpec)]
    for found, valid, where in (
        (opts, TINY_DEFAULTS, "build_tiny"),
        (opts["spec"] if isinstance(opts["spec"], dict) else {}, spec_keys, "build_tiny.spec"),
    ):
        unknown = set(found) - set(valid)
        if unknown:
            raise InputError(
                f"unknown {where} keys {sorted(unknown)}", field="build_tiny", hint=f"valid: {sorted(valid)}"
            )
    for key, default in TINY_DEFAULTS.items():  # each value has its default's type (checked before building)
        value_ = opts[key]
        if type(value_) is not type(default) and not (type(default) is float and type(value_) is int):
            raise InputError(
                f"build_tiny.{key} = {value_!r} is not {type(default).__name__} like its default {default!r}",
                field="build_tiny",
            )
    for key, number in opts["spec"].items():
        kind = next(f.type for f in fields(TinySpec) if f.name == key)
        if isinstance(number, bool) != (kind in (bool, "bool")) or not isinstance(number, int):
            raise InputError(f"build_tiny.spec.{key} = {number!r} is not {kind}", field="build_tiny")
    check_build_tiny_ranges(opts)
    return opts
