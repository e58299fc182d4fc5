"""A model folder's sizes (its ``config.json``) checked before any weight loads.

``config.json`` is a file a user can edit or receive: ``num_hidden_layers: 1000000``, ``vocab_size:
1000000000`` or ``hidden_size: 0`` reach transformers as they are, and fail minutes later, deep in a library
(huggingface_hub's config validation, a division by zero in the weight init) or as a kill by the kernel.
:func:`check_model_sizes` reads the sizes every decoder has and refuses, naming the file and the key:

- a size that is not a positive integer (a boolean is not an integer; ``head_dim`` may be null);
- a ``vocab_size`` past 32-bit token ids, and a ``layer_types`` list whose length is not
  ``num_hidden_layers`` (huggingface_hub's config validation raised it as a traceback); sizes that do not fit
  the weights (``num_attention_heads: 7`` for a hidden size of 64) are left to the loader, which names the
  folder (``eval.adapters``);
- a config that does not describe its weights: more parameters (:func:`parameter_count`, a lower bound:
  embeddings, attention, the MLP and the norms of a dense decoder) than the ``*.safetensors`` beside it can
  hold even at 2 bits each, naming the key that makes the model large. transformers would allocate the
  missing layers and initialise them at random (``num_hidden_layers: 1000000`` over a two-layer model's
  weights), so the memory a model needs is bounded by its weights on disk, which the generation checks
  count (``eval.generate.check_generation_memory``, ``remark.run.limits``).

Used by ``remark eval run``, ``remark sft`` and ``remark train`` (through
``remark.config.paths.check_model_path``) and by the demo's ``base_model``. A hub id (no local folder) is
not checked here: its config is not on disk before the download.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from catalog.io.errors import InputError

#: the sizes read from a decoder's config (``text_config`` for a multimodal one); ``head_dim`` may be null
SIZE_KEYS = (
    "vocab_size",
    "hidden_size",
    "intermediate_size",
    "num_hidden_layers",
    "num_attention_heads",
    "num_key_value_heads",
    "head_dim",
    "max_position_embeddings",
)
#: token ids are 32-bit in the tokenizers library and in vLLM
MAX_VOCAB = 2**31 - 1
#: the fewest bytes a stored parameter takes (2-bit quantisation): weights smaller than this per parameter
#: the config asks for cannot be the model it describes
MIN_BYTES_PER_PARAMETER = 0.25


def config_file(folder: str | Path, base: str | Path | None = None) -> Path | None:
    """The ``config.json`` that describes ``folder``'s model: its own, or (a LoRA adapter folder) its base
    model's when that is a local folder; None when there is none on disk (a hub id, a missing folder)."""
    folder = Path(folder)
    if (folder / "config.json").is_file():
        return folder / "config.json"
    from eval.adapters import adapter_base, is_adapter_dir

    if folder.is_dir() and is_adapter_dir(folder):
        try:
            found = Path(adapter_base(folder, base))
        except InputError:
            return None  # the adapter's own check says why its base cannot be found
        if (found / "config.json").is_file():
            return found / "config.json"
    return None


def text_config(config: dict[str, Any]) -> dict[str, Any]:
    """The decoder's part of a config: ``text_config`` when it has one (a multimodal model), else itself."""
    inner = config.get("text_config")
    return inner if isinstance(inner, dict) else config


def _int_or_none(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def parameter_count(config: dict[str, Any]) -> int:
    """A lower bound on the parameters of the dense decoder ``config`` describes: the embeddings (once when
    ``tie_word_embeddings`` is true or absent), per layer the attention projections (q, k, v, o), the gated
    MLP (three matrices of ``hidden_size x intermediate_size``) and two norms, and the final norm. Sizes
    that are missing or not positive integers count as 0."""
    text = text_config(config)
    size = {k: _int_or_none(text.get(k)) or 0 for k in SIZE_KEYS}
    hidden, heads = size["hidden_size"], size["num_attention_heads"]
    head_dim = size["head_dim"] or (hidden // heads if heads else 0)
    kv_heads = size["num_key_value_heads"] or heads
    q_width, kv_width = heads * head_dim, kv_heads * head_dim
    tied = text.get("tie_word_embeddings", config.get("tie_word_embeddings", True)) is not False
    embeddings = size["vocab_size"] * hidden * (1 if tied else 2)
    attention = 2 * hidden * q_width + 2 * hidden * kv_width
    mlp = 3 * hidden * size["intermediate_size"]
    return embeddings + size["num_hidden_layers"] * (attention + mlp + 2 * hidden) + hidden


def size_problem(config: dict[str, Any]) -> tuple[str, str, str] | None:
    """(key, what is wrong, what to do) for the first size of ``config`` that no model can have (not a
    positive integer, or past token ids), or None."""
    text = text_config(config)
    for key in SIZE_KEYS:
        if key not in text or (key == "head_dim" and text[key] is None):
            continue
        value = text[key]
        if _int_or_none(value) is None:
            kind = "a boolean" if isinstance(value, bool) else type(value).__name__
            return key, f"{key}={value!r} is {kind}, not an integer", f"set {key} to the model's size"
        if value < 1:
            return key, f"{key}={value} must be >= 1", f"set {key} to the model's size"
    vocab = text.get("vocab_size")
    if isinstance(vocab, int) and vocab > MAX_VOCAB:
        return "vocab_size", f"vocab_size={vocab} is past 32-bit token ids ({MAX_VOCAB})", "lower vocab_size"
    return None


def shape_problem(config: dict[str, Any]) -> tuple[str, str, str] | None:
    """(key, what is wrong, what to do) when two sizes of ``config`` (each a positive integer:
    :func:`size_problem`) contradict each other (``num_hidden_layers`` and ``layer_types``' length), or None."""
    text = text_config(config)
    layers, types = text.get("num_hidden_layers"), text.get("layer_types")
    if isinstance(layers, int) and isinstance(types, list) and len(types) != layers:
        return (
            "num_hidden_layers",
            f"num_hidden_layers={layers} but layer_types lists {len(types)} layer(s)",
            "the config contradicts itself: save the model again (save_pretrained)",
        )
    return None


def _largest(config: dict[str, Any]) -> str:
    """The key that makes the model large: ``vocab_size`` when the embeddings are most of it, else
    ``num_hidden_layers`` when there are more layers than the hidden size is wide, else ``hidden_size``."""
    text = text_config(config)
    total = parameter_count(config)
    hidden = _int_or_none(text.get("hidden_size")) or 0
    if (_int_or_none(text.get("vocab_size")) or 0) * hidden * 2 >= total:
        return "vocab_size"
    layers = _int_or_none(text.get("num_hidden_layers")) or 0
    return "num_hidden_layers" if layers > hidden else "hidden_size"


def weights_bytes(folder: str | Path) -> int:
    """Bytes of the ``*.safetensors`` files in ``folder`` (every shard), headers included."""
    return sum(p.stat().st_size for p in Path(folder).glob("*.safetensors"))


def check_model_sizes(folder: str | Path, *, base: str | Path | None = None) -> int | None:
    """Refuse (``InputError`` naming ``config.json`` and the key) the model of ``folder`` (or a LoRA adapter's
    local ``base``) when its config's sizes are impossible (:func:`size_problem`), ask for more parameters
    (:func:`parameter_count`, a lower bound) than the safetensors beside the config can hold at
    :data:`MIN_BYTES_PER_PARAMETER` each (such a config does not describe its weights, and transformers would
    allocate and randomly initialise the rest), or contradict each other (:func:`shape_problem`). Returns the
    parameter lower bound, or None when no config is on disk."""
    from catalog.io.files import read_json
    from catalog.io.memory import format_bytes

    path = config_file(folder, base)
    if path is None:
        return None
    config = read_json(path, schema={}, what="model config")
    problem = size_problem(config)
    if problem is not None:
        key, message, hint = problem
        raise InputError(message, path=path, field=key, hint=hint)
    params = parameter_count(config)
    weights = weights_bytes(path.parent)
    if (
        weights and params * MIN_BYTES_PER_PARAMETER > weights
    ):  # no weights at all: the loader's check says so
        key = _largest(config)
        value = text_config(config).get(key)
        raise InputError(
            f"{key}={value} asks for a model of at least {params:.3g} parameters, but the weights beside it "
            f"({format_bytes(weights)}) hold at most {weights / MIN_BYTES_PER_PARAMETER:.3g}, even at 2 bits each",
            path=path,
            field=key,
            hint=f"config.json does not describe these weights: is {key}={value} meant? save the model again "
            "(save_pretrained)",
        )
    problem = shape_problem(config)
    if problem is not None:
        key, message, hint = problem
        raise InputError(message, path=path, field=key, hint=hint)
    return params
