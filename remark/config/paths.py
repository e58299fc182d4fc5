"""The paths a run reads, checked before anything loads (``remark.run.training.run_training`` calls this first).

Not part of the config's own ``__post_init__`` on purpose: a config may be built on one machine and run
on another (tests build configs naming paths that do not exist). What is checked:

- ``data_dir`` and ``validation_data_dir``: a dataset written by ``remark prep`` (``requests.parquet``);
- ``model_name_or_path``: an existing path must be a model directory (``config.json`` and tokenizer
  files, as ``save_pretrained`` writes) or a LoRA adapter folder whose base is there; anything else must look like a hub id (``org/name``), and
  with ``HF_HUB_OFFLINE=1`` (or ``TRANSFORMERS_OFFLINE=1``) it must already be in the local hub cache,
  since nothing will be downloaded. transformers' own errors for these cases are tracebacks several
  frames deep, after the dataset has loaded.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from catalog.io.errors import InputError

HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*(/[\w.-]+)?$")
#: one of these makes a directory loadable by AutoTokenizer
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "vocab.json", "tokenizer.model", "spiece.model")
MODEL_HINT = "pass a directory written by save_pretrained: config.json, weights and tokenizer files"


def offline() -> bool:
    return any(
        os.environ.get(k, "") not in ("", "0", "false") for k in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")
    )


def check_model_path(value: Any, field: str = "model_name_or_path", *, need_tokenizer: bool = True) -> None:
    """Raise ``InputError(field=field)`` unless ``value`` names a loadable model (see the module docstring)."""
    if value is None or str(value).strip() == "":
        raise InputError("no model given", field=field, hint=MODEL_HINT + ", or set build_tiny")
    path = Path(str(value)).expanduser()
    if path.exists():
        from eval.model_sizes import check_model_sizes

        if not path.is_dir():
            raise InputError("is a file, not a model directory", path=path, field=field, hint=MODEL_HINT)
        if (path / "adapter_config.json").is_file() and not (path / "config.json").is_file():
            from eval.adapters import adapter_base, check_safetensors

            adapter_base(path)  # a LoRA adapter: its recorded base must be loadable (InputError says why not)
            check_safetensors(path, field=field)
            check_model_sizes(path)  # its local base's config.json: possible sizes that describe its weights
            return
        if not (path / "config.json").is_file():
            raise InputError("not a model directory: no config.json", path=path, field=field, hint=MODEL_HINT)
        if need_tokenizer and not any((path / name).is_file() for name in TOKENIZER_FILES):
            raise InputError(
                "the model directory has no tokenizer files",
                path=path,
                field=field,
                hint="save the tokenizer there too (tokenizer.save_pretrained(dir))",
            )
        from eval.adapters import check_model_files, check_safetensors

        check_model_files(path, field=field)  # its JSON files and safetensors headers read back
        check_safetensors(path, field=field)  # weights as safetensors, never a pickle
        check_model_sizes(path)  # config.json's sizes: possible ones, and ones its weights can hold
        return
    text = str(value)
    if not HUB_ID.match(text) or text.startswith((".", "~")):
        raise InputError("model directory not found", path=path, field=field, hint=MODEL_HINT)
    if offline():
        from huggingface_hub import try_to_load_from_cache

        if not isinstance(try_to_load_from_cache(text, "config.json"), str):
            raise InputError(
                f"{text!r} is neither a local directory nor a model in the hub cache, and HF_HUB_OFFLINE=1 "
                "forbids downloading it",
                field=field,
                hint=MODEL_HINT + ", or download it once without HF_HUB_OFFLINE",
            )


def check_dataset_path(value: Any, field: str) -> None:
    path = Path(str(value)).expanduser()
    if not (path / "requests.parquet").is_file():
        what = "directory not found" if not path.exists() else "not a prepared dataset: no requests.parquet"
        raise InputError(
            what, path=path, field=field, hint="build one with `remark prep SOURCE --input PATH --out DIR`"
        )


def dataset_splits(path: Any) -> list[str]:
    """The splits present in a prepared dataset's ``requests.parquet`` (reads one column)."""
    import polars as pl

    file = Path(str(path)).expanduser() / "requests.parquet"
    try:
        splits = pl.scan_parquet(file).select(pl.col("split").unique()).collect()["split"].to_list()
    except (pl.exceptions.PolarsError, OSError) as err:
        first = (str(err).strip().splitlines() or [type(err).__name__])[0]
        raise InputError(f"cannot read parquet: {first}", path=file, hint="re-run remark prep") from None
    return sorted(s for s in splits if s is not None)


def check_split(path: Any, split: str, field: str) -> None:
    splits = dataset_splits(path)
    if split not in splits:
        raise InputError(
            f"the dataset {str(path)!r} has no requests in split {split!r}",
            field=field,
            hint=f"splits there: {', '.join(splits) or 'none'}",
        )


def validate_paths(cfg: Any, *, skip: Iterable[str] = ()) -> None:
    """Check the datasets (and the splits the run reads) and the model ``cfg`` names; fields in ``skip``
    are not checked.
    """
    skip = set(skip)
    for name in ("data_dir", "validation_data_dir"):
        value = getattr(cfg, name, None)
        if name not in skip and value is not None:
            check_dataset_path(value, name)
    if "data_dir" not in skip:
        if getattr(cfg, "data_dir", None) is None:
            raise InputError(
                "no dataset given",
                field="data_dir",
                hint="set data_dir (a `remark prep` output) or build_tiny",
            )
        check_split(cfg.data_dir, cfg.train_split, "train_split")
        valid_dir = getattr(cfg, "validation_data_dir", None) or cfg.data_dir
        if getattr(cfg, "validation_steps", 0):
            check_split(valid_dir, cfg.valid_split, "valid_split")
    if "model_name_or_path" not in skip:
        check_model_path(getattr(cfg, "model_name_or_path", None))
