"""Named GRPO-family recipes: one YAML per variant in ``configs/recipes``, composed under a run config.

A recipe sets the *loss family* only (loss type, ratio level, clipping, aggregation, baseline and
scaling, filters, KL, importance-sampling corrections: :data:`LOSS_FAMILY_FIELDS`); the reward scheme,
sampling, model, data and batch come from the run config, so every recipe runs with ReMaRk's union
rewards or Rank-GRPO's responder rewards alike. A recipe file::

    description: one line for `remark recipes`
    source: the paper (and code) it follows
    fields:            # RemarkGRPOConfig fields, family fields only
      loss_type: dapo
      ...

``remark train --recipe NAME --config FILE --set k=v`` layers them: recipe fields first, the config file
on top, ``--set`` last (:func:`compose_config`); every recipe field the file or ``--set`` changes is
reported (:class:`Override`), so a user sees when a config undoes a recipe. ``NAME`` is a shipped recipe
or a path to a recipe file. Validation (``remark.config``) runs on the composed fields, before any model
loads. What each recipe sets and why: ``docs/recipes.md``.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from catalog.errors import InputError

RECIPE_DIR = Path(__file__).resolve().parent / "configs" / "recipes"

#: Fields a recipe may set: how the loss is built from the rank advantages, never what is trained on.
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
    }
)
#: Fields whose effect needs a changing policy between generation and update (importance ratios).
RATIO_FIELDS = ("importance_sampling_level", "rank_level_ratio", "gmpo_level", "epsilon", "epsilon_high")


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


@dataclass(frozen=True)
class Override:
    """A recipe field changed by the config file (``by="config"``) or ``--set`` (``by="--set"``)."""

    field: str
    recipe_value: Any
    value: Any
    by: str

    def __str__(self) -> str:
        return f"{self.field}: {self.recipe_value!r} -> {self.value!r} (by {self.by})"


@dataclass
class Composed:
    """A validated config built from a recipe, a config file and ``--set``, and what changed on the way."""

    config: Any  # RemarkGRPOConfig (imported lazily: trl is heavy)
    recipe: Recipe | None
    overridden: list[Override] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def report(self) -> list[str]:
        """Lines to show the user before training: the recipe, what overrode it, notes."""
        if self.recipe is None:
            return list(self.notes)
        lines = [f"recipe {self.recipe.name!r}: {self.recipe.description}"]
        if self.overridden:
            lines.append(f"recipe {self.recipe.name!r}: {len(self.overridden)} field(s) overridden:")
            lines += [f"  {o}" for o in self.overridden]
        return lines + list(self.notes)


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
    import yaml

    from remark.config import check_field_names

    path = _resolve(name_or_path)
    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as err:
        raise InputError(f"not valid YAML: {err}", path=path) from err
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
    check_field_names(fields_, path)
    for key in fields_:
        if key not in LOSS_FAMILY_FIELDS:
            raise InputError(
                f"a recipe sets loss-family fields only; {key!r} belongs in the run config",
                path=path,
                field=key,
                hint=f"loss-family fields: {', '.join(sorted(LOSS_FAMILY_FIELDS))}",
            )
    return Recipe(
        name=path.stem,
        description=data["description"].strip(),
        source=data["source"].strip(),
        fields=dict(fields_),
        path=path,
    )


def compose_config(
    recipe: str | Path | None,
    config_path: str | Path | None = None,
    overrides: dict[str, Any] | None = None,
) -> Composed:
    """Recipe fields, then the config file, then ``overrides``; validated (``remark.config.load_config``).

    ``recipe`` None uses the config file's own ``recipe:`` key if it has one. A config file naming a
    different recipe than ``recipe`` is an error. Raises ``InputError`` before any model loads.
    """
    from remark.config import load_config, read_config_values

    overrides = dict(overrides or {})
    file_values = read_config_values(config_path) if config_path is not None else {}
    named = overrides.get("recipe", file_values.get("recipe"))
    if recipe is None:
        recipe = named
    elif named is not None and str(named) != Path(str(recipe)).stem:
        raise InputError(
            f"--recipe {str(recipe)!r} contradicts recipe: {named!r} in the config",
            path=config_path,
            field="recipe",
            hint="drop one of them",
        )
    rec = load_recipe(recipe) if recipe is not None else None
    base = dict(rec.fields) if rec is not None else {}
    if rec is not None:
        overrides["recipe"] = rec.name if rec.path.parent == RECIPE_DIR else str(rec.path)
    overridden = []
    for key, recipe_value in base.items():
        value, by = recipe_value, None
        if key in file_values and file_values[key] != value:
            value, by = file_values[key], "config"
        if key in overrides and overrides[key] != value:
            value, by = overrides[key], "--set"
        if by is not None:
            overridden.append(Override(key, recipe_value, value, by))
    cfg = load_config(config_path, overrides, base=base)
    return Composed(cfg, rec, overridden, _notes(cfg, rec))


def _notes(cfg: Any, rec: Recipe | None) -> list[str]:
    """Things a user should know about how the composed recipe behaves on this run."""
    notes = []
    asked = set(rec.fields) if rec is not None else set()
    if (
        cfg.vllm_importance_sampling_correction
        and not cfg.use_vllm
        and "vllm_importance_sampling_correction" in asked
    ):
        notes.append(
            f"note: truncated importance sampling (vllm_importance_sampling_mode={cfg.vllm_importance_sampling_mode}, "
            f"clip_max={cfg.vllm_importance_sampling_clip_max}) corrects vLLM's sampling log-probs; with use_vllm=false "
            "the policy samples its own completions and the correction is a no-op"
        )
    reused = cfg.num_iterations > 1 or cfg.gradient_accumulation_steps % cfg.steps_per_generation != 0
    token_or_rank = cfg.importance_sampling_level == "token" and cfg.gmpo_level != "sequence"
    if not reused and not cfg.use_vllm and token_or_rank and asked & set(RATIO_FIELDS):
        # a sequence-level ratio still mixes the ranks' advantages on-policy; token and rank levels do not
        notes.append(
            "note: num_iterations=1 and one generation per optimizer step: every batch is used once, on-policy, "
            "so importance ratios are 1, clipping never fires and token- or rank-level ratio settings leave the "
            "gradient unchanged; raise num_iterations (or steps_per_generation) to see them act"
        )
    return notes
