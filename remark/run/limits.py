"""Limits ``remark train`` checks before the work: what the model can attend to, and what generation holds.

- **Positions**: a completion of ``max_completion_length`` tokens after the prompt must fit the model's
  positions (``max_position_embeddings``, or ``n_positions`` / ``max_sequence_length`` /
  ``seq_length``, from its ``config.json`` or an adapter's base's; ``build_tiny``'s model has
  ``TinySpec.max_position_embeddings``). :func:`check_completion_positions` runs before anything is built
  (``max_completion_length`` alone); :func:`check_prompt_positions` once the tokenizer is there (the
  longest prompt of the training split, measured on the :data:`LONGEST` longest by characters, with the
  chat template, plus ``max_completion_length``). Past the positions, generation either fails or runs
  for minutes producing what the model cannot represent.
- **Generation memory**: one generation step holds the KV cache and last logits of every completion this
  process generates at once (``generation_batch_size / world_size`` sequences of prompt + completion
  tokens, ``eval.generate.kv_cache_bytes``) beside the weights; :func:`check_generation_memory` refuses,
  naming ``per_device_train_batch_size``, what does not fit the CUDA device's free memory (90%) or, on CPU,
  the host limit (``catalog.io.memory``), as ``remark eval run`` does for its batches.

Every refusal is an ``InputError`` naming the field and what to lower (exit 2, one line).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from catalog.io.errors import InputError

#: config.json keys that give a model's positions, in the order they are read
POSITION_KEYS = ("max_position_embeddings", "n_positions", "max_sequence_length", "seq_length")
#: how many of the longest prompts (by characters) are tokenized to find the longest in tokens
LONGEST = 32


def _config_of(cfg: Any) -> tuple[dict[str, Any], str] | None:
    """(the policy's config.json, where it was read), or None when it is not a local folder."""
    from catalog.io.files import read_json
    from eval.adapters import adapter_base, is_adapter_dir

    path = cfg.model_name_or_path
    if path is None or not Path(path).is_dir():
        return None
    if is_adapter_dir(path) and not (Path(path) / "config.json").is_file():
        path = adapter_base(path, cfg.adapter_base_model)
        if not Path(path).is_dir():
            return None
    file = Path(path) / "config.json"
    return read_json(file, schema={}, what="model config"), str(file)


def model_positions(cfg: Any) -> tuple[int, str] | None:
    """(the policy's positions, where that was read), or None when unknown."""
    if cfg.build_tiny is not None and not (cfg.model_name_or_path and Path(cfg.model_name_or_path).is_dir()):
        from remark.run.tiny_model import TinySpec

        spec = {**TinySpec().__dict__, **(cfg.build_tiny.get("spec") or {})}
        return int(spec["max_position_embeddings"]), "build_tiny's model (spec.max_position_embeddings)"
    found = _config_of(cfg)
    if found is None:
        return None
    config, where = found
    text = config.get("text_config") if isinstance(config.get("text_config"), dict) else config
    for key in POSITION_KEYS:
        value = text.get(key)
        if isinstance(value, int) and 0 < value < 10**9:
            return value, f"{key} in {where}"
    return None


def check_completion_positions(cfg: Any) -> None:
    """Refuse a ``max_completion_length`` past the model's positions (before anything is built)."""
    found = model_positions(cfg)
    cap = cfg.max_completion_length
    if found is None or cap is None:
        return
    positions, where = found
    if cap >= positions:
        raise InputError(
            f"max_completion_length={cap} does not fit the model's {positions} positions ({where}), even "
            "before the prompt",
            field="max_completion_length",
            hint=f"lower max_completion_length below {positions} minus the longest prompt",
        )


def longest_prompt_tokens(messages: list[Any], tokenizer: Any) -> int:
    """Tokens of the longest of ``messages`` (each a chat) with the chat template and the generation prompt,
    measured on the :data:`LONGEST` longest by characters."""
    if not messages:
        return 0
    ranked = sorted(messages, key=lambda m: sum(len(str(x.get("content", ""))) for x in m), reverse=True)
    texts = [
        tokenizer.apply_chat_template(m, tokenize=False, add_generation_prompt=True) for m in ranked[:LONGEST]
    ]
    return max(len(tokenizer(t, add_special_tokens=False)["input_ids"]) for t in texts)


def check_prompt_positions(cfg: Any, prompt_tokens: int) -> None:
    """Refuse prompt + ``max_completion_length`` past the model's positions."""
    found = model_positions(cfg)
    cap = cfg.max_completion_length
    if found is None or cap is None:
        return
    positions, where = found
    if prompt_tokens + cap > positions:
        raise InputError(
            f"the longest training prompt ({prompt_tokens} tokens) + max_completion_length={cap} = "
            f"{prompt_tokens + cap} tokens does not fit the model's {positions} positions ({where})",
            field="max_completion_length",
            hint=f"lower max_completion_length to at most {max(positions - prompt_tokens, 0)}",
        )


def check_generation_memory(cfg: Any, prompt_tokens: int) -> None:
    """Refuse a generation step whose KV cache and logits (beside the weights) cannot be held (see the
    module docstring); nothing is checked when the model's sizes are unknown (a hub id)."""

    from catalog.io.memory import check_fits
    from eval.generate import generation_memory_cap, kv_cache_bytes

    found = _config_of(cfg)
    if found is None or cfg.max_completion_length is None:
        return
    config, _ = found
    rows = max(1, cfg.generation_batch_size // max(1, cfg.world_size))
    tokens = prompt_tokens + cfg.max_completion_length
    need = kv_cache_bytes(config, rows, tokens)
    weights = sum(p.stat().st_size for p in Path(cfg.model_name_or_path).glob("*.safetensors"))
    cap, source = generation_memory_cap("cpu" if cfg.use_cpu else "cuda", weights)
    check_fits(
        need,
        what=f"one generation step of {rows} completions (generation_batch_size {cfg.generation_batch_size} over "
        f"{cfg.world_size} process(es)) x {tokens} tokens (prompt + max_completion_length; KV cache and logits)",
        field="per_device_train_batch_size",
        hint="lower per_device_train_batch_size (or steps_per_generation), num_generations or "
        "max_completion_length",
        limit=(max(cap, 0), source),
    )
