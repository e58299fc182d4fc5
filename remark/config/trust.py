"""No code from a model folder: the config fields that would let ``from_pretrained`` run a folder's Python.

A model folder's ``config.json`` or ``tokenizer_config.json`` may carry an ``auto_map`` naming Python files in
the folder; transformers imports and runs them when ``trust_remote_code=True``. remark never needs that (every
architecture it trains is one transformers ships), and a shared YAML config plus a downloaded folder would be
enough to run someone else's code, so:

- ``trust_remote_code`` is refused unless false;
- ``model_init_kwargs`` (passed by TRL to ``from_pretrained``) may only hold the keys in
  :data:`MODEL_INIT_KEYS`, which remark owns and which load nothing but weights; any other key
  (``trust_remote_code``, ``code_revision``, ``use_safetensors``, ``revision``, ...) is refused naming it.

Every load remark itself makes passes ``trust_remote_code=False`` as well (``eval.adapters``).
"""

from __future__ import annotations

import json
from typing import Any

from catalog.io.errors import InputError

#: the ``model_init_kwargs`` keys remark passes through to ``from_pretrained``: how the weights are held.
MODEL_INIT_KEYS = ("dtype", "attn_implementation", "device_map")

WHY = (
    "remark never runs code from a model folder (an auto_map in config.json or tokenizer_config.json "
    "would be imported and run)"
)


def check_no_remote_code(cfg: Any) -> None:
    """Refuse (``InputError`` naming the field) ``trust_remote_code`` and ``model_init_kwargs`` keys outside
    :data:`MODEL_INIT_KEYS`."""
    if getattr(cfg, "trust_remote_code", False) not in (False, None):
        raise InputError(
            f"trust_remote_code={cfg.trust_remote_code!r} is refused: {WHY}",
            field="trust_remote_code",
            hint="remove trust_remote_code (every model remark trains loads without it)",
        )
    kwargs = getattr(cfg, "model_init_kwargs", None)
    if kwargs is None:
        return
    if isinstance(kwargs, str):  # TRL takes a JSON string too
        try:
            kwargs = json.loads(kwargs)
        except ValueError:
            kwargs = None
    if not isinstance(kwargs, dict):
        raise InputError(
            f"{cfg.model_init_kwargs!r} is not a mapping",
            field="model_init_kwargs",
            hint=f"a mapping of {', '.join(MODEL_INIT_KEYS)}",
        )
    foreign = [str(k) for k in kwargs if k not in MODEL_INIT_KEYS]
    if foreign:
        why = WHY if "trust_remote_code" in foreign else "remark does not own these loading options"
        raise InputError(
            f"model_init_kwargs key(s) {', '.join(map(repr, foreign))} refused: {why}",
            field="model_init_kwargs",
            hint=f"model_init_kwargs may hold only {', '.join(MODEL_INIT_KEYS)}",
        )
