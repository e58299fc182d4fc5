"""LoRA / PEFT fields of ``RemarkGRPOConfig``: validation before any model loads, and the ``peft_config``.

The fields mirror TRL's ``ModelConfig`` names (``use_peft``, ``lora_r``, ``lora_alpha``, ``lora_dropout``,
``lora_target_modules``), so a TRL user's YAML reads the same. ``lora_target_modules: null`` means PEFT's
``"all-linear"`` (every linear layer except the output head). The adapter goes to TRL's trainer as its
``peft_config``: TRL wraps the model (``get_peft_model``) and, with ``beta > 0``, computes the reference
log-probs with the adapter disabled (the base model), so no second model copy is held.

Checked here, before anything loads: peft is installed when an adapter is asked for (``use_peft``, or
``model_name_or_path`` being an adapter folder) and an adapter model is not given a second adapter unless
it is merged first (TRL refuses a ``PeftModel`` with a ``peft_config``); the numbers' ranges are rows of
``remark.config.ranges``, the fields' effect without ``use_peft`` a row of ``remark.config.effects``.
:func:`check_target_modules` then checks each target name against the model's own module names, built on
the meta device (no weights read), so a typo fails in a second with the names that exist.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from catalog.io.errors import InputError

ALL_LINEAR = "all-linear"


def target_modules(cfg: Any) -> str | list[str]:
    """The configured targets: a list of module-name suffixes, or ``"all-linear"``."""
    value = cfg.lora_target_modules
    if value is None or value == ALL_LINEAR or value == [ALL_LINEAR]:
        return ALL_LINEAR
    return [value] if isinstance(value, str) else list(value)


def validate_lora(cfg: Any) -> None:
    """Check the LoRA fields and the adapter-model combinations; raise ``InputError`` saying what to change."""
    from eval.adapters import is_adapter_dir, require_peft

    model = getattr(cfg, "model_name_or_path", None)
    adapter_model = bool(model) and is_adapter_dir(model)
    if cfg.use_peft:
        require_peft(field="use_peft")
    if adapter_model:
        require_peft(field="model_name_or_path")
    if cfg.adapter_base_model is not None and model and Path(model).is_dir() and not adapter_model:
        raise InputError(
            "adapter_base_model is set but model_name_or_path is a full model, not an adapter folder",
            field="adapter_base_model",
            hint="remove adapter_base_model, or point model_name_or_path at an adapter (adapter_config.json)",
        )
    if cfg.merge_adapter and model and Path(model).is_dir() and not adapter_model:
        raise InputError(
            "merge_adapter is set but model_name_or_path has no adapter_config.json",
            field="merge_adapter",
            hint="set merge_adapter: false for a full model",
        )
    if adapter_model and cfg.use_peft and not cfg.merge_adapter:
        raise InputError(
            "model_name_or_path is an adapter and use_peft asks for a new one on top of it",
            field="use_peft",
            hint="set merge_adapter: true (the new adapter goes on the merged model), or use_peft: false to keep "
            "training the adapter you gave",
        )
    if not cfg.use_peft:
        return
    # lora_r, lora_alpha and lora_dropout are rows of the ranges table (remark.config.ranges), checked by
    # the config's __post_init__ and by remark sft's flags
    targets = target_modules(cfg)
    if targets != ALL_LINEAR and (not targets or not all(isinstance(t, str) and t.strip() for t in targets)):
        raise InputError(
            f"lora_target_modules must be a list of module names, got {cfg.lora_target_modules!r}",
            field="lora_target_modules",
            hint="e.g. [q_proj, k_proj, v_proj, o_proj], or null for all linear layers",
        )


def peft_config(cfg: Any) -> Any:
    """``peft.LoraConfig`` of the fields (None without ``use_peft``), for TRL's ``peft_config``."""
    if not cfg.use_peft:
        return None
    from peft import LoraConfig

    return LoraConfig(
        r=cfg.lora_r,
        lora_alpha=cfg.lora_alpha,
        lora_dropout=cfg.lora_dropout,
        target_modules=target_modules(cfg),
        bias="none",
        task_type="CAUSAL_LM",
    )


def module_suffixes(model_path: str | Path) -> dict[str, set[str]]:
    """Leaf module name -> module class names, for the model at ``model_path`` (built on the meta device)."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    config = AutoConfig.from_pretrained(model_path, trust_remote_code=False)
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config)
    out: dict[str, set[str]] = {}
    for name, module in model.named_modules():
        if name and not list(module.children()):
            out.setdefault(name, set()).add(type(module).__name__)
    return out


def check_target_modules(cfg: Any, model_path: str | Path) -> None:
    """Every name in ``lora_target_modules`` must be a module of the model (a full name or a suffix after
    a dot, PEFT's rule for a list); else an ``InputError`` listing the model's linear layers."""
    targets = target_modules(cfg)
    if not cfg.use_peft or targets == ALL_LINEAR:
        return
    names = module_suffixes(model_path)
    missing = [t for t in targets if not any(n == t or n.endswith("." + t) for n in names)]
    if missing:
        linear = sorted({n.rsplit(".", 1)[-1] for n, kinds in names.items() if "Linear" in kinds})
        raise InputError(
            f"lora_target_modules {missing} match no module of {model_path}",
            field="lora_target_modules",
            hint=f"its linear layers: {', '.join(linear)} (or null for all of them)",
        )
