"""Config files: a flat YAML mapping of ``RemarkGRPOConfig`` fields, read and checked before validation.

``read_config_values`` reads the mapping (errors name the file and line), ``check_field_names`` rejects
keys that are not fields (with the closest field as a suggestion), ``load_config`` layers a base (a
recipe's fields), the file and overrides and builds the validated config. Recipes are composed on top
by ``remark.config.compose``.
"""

from __future__ import annotations

import difflib
from dataclasses import fields
from pathlib import Path
from typing import Any

from catalog.errors import InputError
from remark.config.fields import RemarkGRPOConfig


def check_field_names(keys: Any, path: str | Path | None = None) -> None:
    """Raise ``InputError`` for the first key that is not a ``RemarkGRPOConfig`` field, with a suggestion."""
    known = set(config_field_names())
    for key in keys:
        if key not in known:
            close = difflib.get_close_matches(key, sorted(known), n=1)
            raise InputError(
                f"unknown config field {key!r}",
                path=path,
                field=key,
                hint=f"did you mean {close[0]!r}?"
                if close
                else "see `remark train --help` and docs/recipes.md",
            )


def config_field_names() -> list[str]:
    return [f.name for f in fields(RemarkGRPOConfig)]


def read_config_values(path: str | Path) -> dict[str, Any]:
    """The mapping of fields in a flat YAML config file (not yet validated); errors name the file and line."""
    import yaml

    path = Path(path)
    if not path.is_file():
        raise InputError("config file not found", path=path)
    try:
        loaded = yaml.safe_load(path.read_text())
    except yaml.YAMLError as err:
        line = getattr(getattr(err, "problem_mark", None), "line", None)
        raise InputError(f"not valid YAML: {err}", path=path, row=None if line is None else line + 1) from err
    if loaded is None:
        loaded = {}
    if not isinstance(loaded, dict):
        raise InputError("expected a mapping of config fields at the top level", path=path)
    return loaded


def load_config(
    path: str | Path | None = None,
    overrides: dict[str, Any] | None = None,
    *,
    base: dict[str, Any] | None = None,
) -> RemarkGRPOConfig:
    """Read a flat YAML file of ``RemarkGRPOConfig`` fields (plus ``overrides``) and validate it.

    ``base`` (a recipe's fields, ``remark.recipes``) comes first, the file on top, ``overrides`` last.
    Unknown keys are an error naming the file and suggesting the closest field.
    """
    values: dict[str, Any] = dict(base or {})
    if path is not None:
        path = Path(path)
        values.update(read_config_values(path))
    values.update(overrides or {})
    check_field_names(values, path)
    try:
        return RemarkGRPOConfig(**values)
    except InputError as err:
        if path is not None and err.path is None:
            raise InputError(str(err), path=path) from err
        raise
    except (TypeError, ValueError) as err:
        raise InputError(str(err), path=path) from err
