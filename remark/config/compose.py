"""Recipe < config file < ``--set``: the one way a run's config is composed (``remark train``).

A recipe (``remark.recipes``) sets loss-family fields only; the run config file sets what to train on;
``--set`` overrides both. Every recipe field the file or ``--set`` changes is reported (:class:`Override`),
so a user sees when a config undoes a recipe, and notes say when a setting cannot act on this run (an
on-policy batch makes importance ratios 1: ``remark.config.effects``). Validation runs on the composed fields
(``remark.config.validate``), before any model loads.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from catalog.io.errors import InputError
from remark.config.fields import RemarkGRPOConfig
from remark.config.files import load_config, read_config_values
from remark.recipes import RECIPE_DIR, Recipe, load_recipe


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

    config: RemarkGRPOConfig
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


def compose_config(
    recipe: str | Path | None,
    config_path: str | Path | None = None,
    overrides: dict[str, Any] | None = None,
    *,
    check_paths: bool = False,
) -> Composed:
    """Recipe fields, then the config file, then ``overrides``; validated (``remark.config.load_config``).

    ``recipe`` None uses the config file's own ``recipe:`` key if it has one. A config file naming a
    different recipe than ``recipe`` is an error. Raises ``InputError`` before any model loads;
    ``check_paths`` also checks that the dataset and model the config names exist (``remark.config.paths``).
    """
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
    origin = rec.path if rec is not None else None
    notes: list[Any] = []
    cfg = load_config(
        config_path, overrides, base=base, base_origin=origin, check_paths=check_paths, notes=notes
    )
    return Composed(cfg, rec, overridden, [str(n) for n in notes])
