"""Config files: a flat YAML mapping of ``RemarkGRPOConfig`` fields, read and checked before validation.

``read_config_values`` reads the mapping (errors name the file and line), ``check_field_names`` rejects
keys that are not fields (with the closest field as a suggestion), ``load_config`` layers a base (a
recipe's fields), the file and overrides and builds the validated config. Recipes are composed on top
by ``remark.config.compose``.
"""

from __future__ import annotations

import difflib
import re
import sys
import warnings
from dataclasses import fields
from pathlib import Path
from typing import Any

from catalog.io.errors import InputError
from remark.config.effects import Origin, check_effects
from remark.config.fields import RemarkGRPOConfig
from remark.config.paths import validate_paths


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
    return _read_config(path)[0]


def _read_config(path: str | Path) -> tuple[dict[str, Any], dict[str, int]]:
    """(the file's mapping, the 1-based line of each top-level key)."""
    from catalog.io.files import read_text
    from catalog.io.yaml_files import compose_yaml, load_yaml

    path = Path(path)
    text = read_text(path, what="config file")
    loaded = load_yaml(text, path=path, what="config file")  # aliases bounded (catalog.io.yaml_files)
    node = compose_yaml(text, path=path, what="config file")
    if loaded is None:
        loaded = {}
    if not isinstance(loaded, dict):
        raise InputError("expected a mapping of config fields at the top level", path=path)
    lines = {}
    for key, _ in getattr(node, "value", None) or []:
        if isinstance(getattr(key, "value", None), str):
            lines.setdefault(key.value, key.start_mark.line + 1)
    return loaded, lines


def load_config(
    path: str | Path | None = None,
    overrides: dict[str, Any] | None = None,
    *,
    base: dict[str, Any] | None = None,
    base_origin: str | Path | None = None,
    check_paths: bool = False,
    notes: list[Any] | None = None,
) -> RemarkGRPOConfig:
    """Read a flat YAML file of ``RemarkGRPOConfig`` fields (plus ``overrides``) and validate it.

    ``base`` (a recipe's fields, ``remark.recipes``; read from ``base_origin``) comes first, the file on
    top, ``overrides`` (``--set``) last. Unknown keys are an error naming the file (or ``--set``) and
    suggesting the closest field. Every error on a field says where its value came from: the file and
    line, ``--set``, or the recipe file. ``check_paths`` also checks the dataset and model paths
    (``remark.config.paths``; ``remark train`` does, before anything loads).

    A value given where no other setting lets it act is refused or noted (``remark.config.effects``);
    the notices (``Notice``) go into ``notes``, or are printed on stderr when ``notes`` is None.
    """
    values: dict[str, Any] = dict(base or {})
    file_values: dict[str, Any] = {}
    lines: dict[str, int] = {}
    overrides = dict(overrides or {})
    if path is not None:
        path = Path(path)
        file_values, lines = _read_config(path)
        check_field_names(file_values, path)
        values.update(file_values)
    check_field_names(overrides, "--set")
    check_field_names(base or {}, base_origin)
    values.update(overrides)

    def origin(name: str) -> tuple[str | None, int | None]:
        if name in overrides:
            return "--set", None
        if name in file_values:
            return str(path), lines.get(name)
        if name in (base or {}):
            return None if base_origin is None else str(base_origin), None
        return None, None

    user_keys = [k for k in values if k in overrides or k in file_values]
    out = values.get("output_dir", "unset")
    if out is None or (isinstance(out, str) and not out.strip()):  # TRL would take "trainer_output" or cwd
        empty = InputError(
            f"output_dir is empty ({out!r}): the run would write into transformers' default folder",
            field="output_dir",
            hint="set output_dir to the run's own folder, e.g. output_dir: runs/NAME",
        )
        raise _located(empty, origin, user_keys, path)
    origins = {}
    for name in values:
        where, line = origin(name)
        layer = "--set" if name in overrides else "config" if name in file_values else "recipe"
        origins[name] = Origin(layer, where, line)
    try:
        with warnings.catch_warnings():
            if not {"gradient_checkpointing", "gradient_checkpointing_kwargs"} & set(user_keys):
                # TRL's default gradient_checkpointing=True is transformers' deprecated alias: not the user's
                warnings.filterwarnings("ignore", message="`gradient_checkpointing", category=FutureWarning)
            cfg = RemarkGRPOConfig(**values)
        found = check_effects(cfg, values, origins)
        if notes is not None:
            notes.extend(found)
        else:
            for notice in found:
                print(notice, file=sys.stderr)
        if check_paths:
            skip = ("data_dir", "model_name_or_path") if cfg.build_tiny is not None else ()
            validate_paths(cfg, skip=skip)
        return cfg
    except InputError as err:
        raise _located(err, origin, user_keys, path) from err
    except (TypeError, ValueError) as err:  # TRL's and transformers' own checks
        raise _located(InputError(str(err)), origin, user_keys, path) from err


def _located(err: InputError, origin: Any, user_keys: list[str], path: Path | None) -> InputError:
    """``err`` naming where the value of its field came from (file and line, ``--set``, the recipe).

    Errors without a field (TRL's own checks) name the user-set fields their message mentions; an error
    on a field nobody set (a default) names the config file ``path``, where the fix goes.
    """
    if err.field is not None:
        where, line = origin(err.field)
        if where is None:
            return (
                err
                if path is None or err.path is not None
                else InputError(err.message, path=path, field=err.field, hint=err.hint)
            )
        # a path-valued field (data_dir, a profile): the error's path is the value; name it in the message
        message = err.message if err.path is None else f"{err.path}: {err.message}"
        return InputError(message, path=where, row=line, field=err.field, hint=err.hint)
    if err.path is not None:
        return err
    words = set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", err.message))
    named = [k for k in user_keys if k in words]
    if not named:
        return err if path is None else InputError(err.message, path=path, hint=err.hint)
    places = []
    for key in named:
        where, line = origin(key)
        places.append(f"{key} from {where}" + (f" line {line}" if line else ""))
    hint = "; ".join(places) if err.hint is None else f"{err.hint}; " + "; ".join(places)
    return InputError(err.message, hint=hint)
