"""Named GRPO-family recipes: one YAML per variant in ``configs/recipes``, composed under a run config.

A recipe sets the *loss family* only (loss type, ratio level, clipping, aggregation, baseline and
scaling, filters, KL, importance-sampling corrections, and the token map: segmentation, end shaping and
the token penalties; :data:`LOSS_FAMILY_FIELDS`); the reward scheme,
sampling, model, data and batch come from the run config, so every recipe runs with ReMaRk's union
rewards or Rank-GRPO's responder rewards alike. A recipe file::

    description: one line for `remark recipes`
    source: the paper (and code) it follows
    fields:            # RemarkGRPOConfig fields, family fields only
      loss_type: dapo
      ...

``remark train --recipe NAME --config FILE --set k=v`` layers them: recipe fields first, the config file
on top, ``--set`` last (``remark.config.compose_config``, which reports every recipe field the file or
``--set`` changes). ``NAME`` is a shipped recipe or a path to a recipe file. This module reads recipe
files only and imports nothing from ``remark.config`` (the config depends on it, not the reverse).
What each recipe sets and why: ``docs/recipes.md``.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from catalog.io.errors import InputError

RECIPE_DIR = Path(__file__).resolve().parent / "configs" / "recipes"

#: Fields a recipe may set: how the loss is built from the rank rewards, never what is trained on.
LOSS_FAMILY_FIELDS = frozenset(
    {
        "loss_type",
        "importance_sampling_level",
        "rank_level_ratio",
        "gmpo_level",
        "loss_aggregation",
        "advantage_baseline",
        "advantage_scaling",
        "scale_rewards",
        "advantage_eps",
        "epsilon",
        "epsilon_high",
        "delta",
        "sapo_temperature_pos",
        "sapo_temperature_neg",
        "vespo_k_pos",
        "vespo_lambda_pos",
        "vespo_k_neg",
        "vespo_lambda_neg",
        "beta",
        "use_bias_correction_kl",
        "off_policy_mask_threshold",
        "vllm_importance_sampling_correction",
        "vllm_importance_sampling_mode",
        "vllm_importance_sampling_clip_max",
        "vllm_importance_sampling_clip_min",
        "cast_lm_head_to_fp32",
        "zero_signal_filter",
        "pass_rate_drop",
        "refill_batch",
        "refill_max_rounds",
        "truncation",
        "mask_truncated_completions",
        "top_entropy_quantile",
        # the token map: how the rank advantages reach the tokens (remark.algos.tokens)
        "segmentation",
        "end_shaping",
        "overflow_penalty",
        "filler_penalty",
        "eos_complete_bonus",
        "eos_early_penalty",
    }
)


@dataclass(frozen=True)
class Recipe:
    """One recipe file: ``name`` (the file stem), a one-line ``description``, its ``source``, its ``fields``."""

    name: str
    description: str
    source: str
    fields: dict[str, Any]
    path: Path

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "description": self.description,
            "source": self.source,
            "fields": dict(self.fields),
            "path": str(self.path),
        }


def recipe_names() -> list[str]:
    """Names of the shipped recipes (``configs/recipes/*.yaml``), sorted."""
    return sorted(p.stem for p in RECIPE_DIR.glob("*.yaml"))


def list_recipes() -> list[Recipe]:
    """Every shipped recipe, loaded and checked, sorted by name."""
    return [load_recipe(name) for name in recipe_names()]


def _resolve(name_or_path: str | Path) -> Path:
    candidate = Path(name_or_path)
    if candidate.suffix in (".yaml", ".yml") and candidate.is_file():
        return candidate
    path = RECIPE_DIR / f"{name_or_path}.yaml"
    if path.is_file() and str(name_or_path) == path.stem:
        return path
    names = recipe_names()
    close = difflib.get_close_matches(str(name_or_path), names, n=1)
    hint = (f"did you mean {close[0]!r}? " if close else "") + f"valid recipes: {', '.join(names)}"
    raise InputError(f"unknown recipe {str(name_or_path)!r}", field="recipe", hint=hint)


def load_recipe(name_or_path: str | Path) -> Recipe:
    """A shipped recipe by name, or a recipe file by path; errors name the file and the bad key."""
    from catalog.io.files import read_text
    from catalog.io.yaml_files import load_yaml

    path = _resolve(name_or_path)
    data = load_yaml(read_text(path, what="recipe file"), path=path, what="recipe file")
    if not isinstance(data, dict):
        raise InputError("a recipe is a mapping with description, source and fields", path=path)
    unknown = set(data) - {"description", "source", "fields"}
    if unknown:
        raise InputError(
            f"unknown recipe keys {sorted(unknown)}",
            path=path,
            hint="a recipe has description, source, fields",
        )
    for key in ("description", "source"):
        if not isinstance(data.get(key), str) or not data[key].strip() or "\n" in data[key].strip():
            raise InputError(f"{key!r} must be one non-empty line", path=path, field=key)
    fields_ = data.get("fields")
    if not isinstance(fields_, dict) or not fields_:
        raise InputError("'fields' must be a non-empty mapping of config fields", path=path, field="fields")
    for key in fields_:
        if key not in LOSS_FAMILY_FIELDS:
            close = difflib.get_close_matches(str(key), sorted(LOSS_FAMILY_FIELDS), n=1)
            raise InputError(
                f"a recipe sets loss-family fields only; {key!r} belongs in the run config (or is misspelt)",
                path=path,
                field=key,
                hint=f"did you mean {close[0]!r}?"
                if close
                else f"loss-family fields: {', '.join(sorted(LOSS_FAMILY_FIELDS))}",
            )
    return Recipe(
        name=path.stem,
        description=data["description"].strip(),
        source=data["source"].strip(),
        fields=dict(fields_),
        path=path,
    )
