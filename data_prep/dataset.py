"""A prepared dataset directory: write it atomically, load it back.

Layout (``remark prep --out DIR``)::

    requests.parquet        one row per request (docs/architecture.md's columns, REQUESTS_SCHEMA)
    responder_rows.parquet  one row per (request, responder): Rank-GRPO's view, expanded from the
                            same pooled table (RESPONDER_ROWS_SCHEMA)

Each parquet file holds exactly its schema's columns: one with other columns is refused, not trimmed.
    catalog.parquet         the catalog the ids refer to (catalog.Catalog's frame)
    meta.json               source, domain, has_years, instruction_included, grounding (+ how it was prepared)
    stats.json              data_prep.stats.dataset_stats, plus "prep": what was skipped or noted
    answers.parquet         optional (ProtoQA): each request's answer clusters and raw answers as its
                            source wrote them (ANSWERS_SCHEMA), for per-question matching
                            (eval.protoqa_match); a dataset without it loads with ``answers=None``

The directory is written with ``catalog.io.outputs.atomic_dir`` as a ``"prep"`` output (its marker,
``.remark-output.json``, says so): a killed run leaves the old directory or none, and an existing folder
that is not an earlier dataset, or that is or holds one of the inputs, is refused.

``meta.json["grounding"]`` is the dataset's grounding contract (``catalog.match.GroundingSettings``:
``match_mode``, ``year_tolerance``, ``match_threshold``, ``match_scorer``): the settings with which lists
for this dataset are grounded (``remark prep`` grounds the dataset's own mentions with them too). The
reward, the validation and ``remark eval`` ground generated lists with them unless a run asks for other
settings explicitly: :func:`choose_grounding` says which settings a command uses, where they came from,
and what differs from the dataset's (to print and to record in the command's outputs). A ``meta.json``
without the record is refused (``re-run remark prep``): guessing the settings would ground the dataset's
lists differently from how its own mentions were grounded.
"""

from __future__ import annotations

import hashlib
import json
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl

from catalog.io.errors import InputError
from catalog.io.outputs import atomic_dir
from catalog.match import GroundingSettings
from catalog.table import Catalog, load_catalog
from data_prep.card import dataset_card
from data_prep.pool import expand_responders
from data_prep.schema import ANSWERS_SCHEMA, REQUESTS_SCHEMA, RESPONDER_ROWS_SCHEMA, Report
from data_prep.stats import dataset_stats

#: the ``catalog.io.outputs.atomic_dir`` kind of a dataset directory.
DATASET_KIND = "prep"
FILES = ("requests.parquet", "responder_rows.parquet", "catalog.parquet", "meta.json", "stats.json")
#: the optional answers file (``ANSWERS_SCHEMA``): ProtoQA's clusters per request
ANSWERS_FILE = "answers.parquet"
META_KEYS = ("source", "domain", "has_years", "instruction_included")
#: what ``meta.json`` must hold (``catalog.io.files.check_fields``), and what it may
META_SCHEMA = {
    "source": str,
    "domain": str,
    "has_years": bool,
    "instruction_included": bool,
    "grounding": dict,
}
META_OPTIONAL = {"command": str}
#: what ``stats.json`` may hold that a command reads back (the rest is printed as written)
STATS_OPTIONAL = {"requests": int, "prep": (dict, None)}
PREP_OPTIONAL = {"skipped": (dict, None), "notes": (dict, None), "skip_bad_rows": bool}
REMAKE_HINT = "the dataset folder is damaged; re-run remark prep to rebuild it"


@dataclass
class PooledDataset:
    """A loaded dataset: ``requests``, ``responder_rows`` (polars), ``catalog`` and ``meta``; ``answers``:
    the requests' answer clusters (``ANSWERS_SCHEMA``, ProtoQA), None when the dataset has none."""

    requests: pl.DataFrame
    responder_rows: pl.DataFrame
    catalog: Catalog
    meta: dict[str, Any]
    path: Path | None = None
    answers: pl.DataFrame | None = None

    @property
    def grounding(self) -> GroundingSettings:
        """The dataset's grounding settings (``meta.json["grounding"]``)."""
        return dataset_grounding(self.meta, path=self._meta_path)

    @property
    def _meta_path(self) -> str | None:
        return None if self.path is None else str(self.path / "meta.json")


def write_dataset(
    out_dir: str | Path,
    pooled: pl.DataFrame,
    catalog: Catalog,
    meta: dict[str, Any],
    *,
    grounding: GroundingSettings,
    report: Report | None = None,
    inputs: Sequence[str | Path] = (),
    force: bool = False,
    command: str | None = None,
    answers: pl.DataFrame | None = None,
) -> PooledDataset:
    """Write the five files of a dataset directory atomically and return what was written.

    ``pooled`` is :func:`data_prep.pool.pool_threads`' output (``responder_ids`` is used for the
    responder rows and left out of ``requests.parquet``). ``grounding`` is the matcher's settings
    (``matcher.settings``), written as ``meta["grounding"]``.
    ``inputs`` (the files it was read from) are never replaced; ``force`` replaces a folder that is not an
    earlier dataset (``catalog.io.outputs.atomic_dir``).
    A dataset card (``README.md``, ``data_prep.card``) with the pooled statistics goes in the same folder;
    ``command`` (the command line that wrote it) is recorded in the card and in ``meta["command"]``.
    ``answers`` (``Threads.answers``, ProtoQA) is written as ``answers.parquet``, its rows kept to the
    pooled requests (first row per id).
    """
    missing = [k for k in META_KEYS if k not in meta]
    if missing:
        raise ValueError(f"meta lacks {missing}")
    if not isinstance(grounding, GroundingSettings):
        raise TypeError(f"grounding must be a GroundingSettings, got {type(grounding).__name__}")
    meta = {**meta, "grounding": grounding.to_dict()}
    if command is not None:
        meta["command"] = command
    requests = pooled.select(*REQUESTS_SCHEMA).cast(REQUESTS_SCHEMA)
    rows = expand_responders(pooled)
    if answers is not None:
        answers = (
            answers.select(*ANSWERS_SCHEMA)
            .cast(ANSWERS_SCHEMA)
            .unique("request_id", keep="first", maintain_order=True)
            .join(requests.select("request_id"), on="request_id", how="semi", maintain_order="left")
        )
    stats = dataset_stats(requests)
    if report is not None:
        stats["prep"] = report.to_dict()
    with atomic_dir(out_dir, DATASET_KIND, inputs=inputs, force=force) as tmp:
        requests.write_parquet(tmp / "requests.parquet")
        rows.write_parquet(tmp / "responder_rows.parquet")
        catalog.df.write_parquet(tmp / "catalog.parquet")
        if answers is not None:
            answers.write_parquet(tmp / ANSWERS_FILE)
        (tmp / "meta.json").write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n")
        (tmp / "stats.json").write_text(json.dumps(stats, indent=2) + "\n")
        card = dataset_card(meta, stats, name=Path(out_dir).name, command=command)
        (tmp / "README.md").write_text(card, encoding="utf-8")
    return PooledDataset(requests, rows, catalog, dict(meta), Path(out_dir), answers)


def _read(path: Path, schema: dict[str, pl.DataType]) -> pl.DataFrame:
    """The parquet file ``path``, holding exactly ``schema``'s columns with their types."""
    try:
        df = pl.read_parquet(path)
    except (pl.exceptions.PolarsError, OSError) as err:
        raise InputError(f"cannot read parquet: {err}", path=path) from err
    for name, dtype in schema.items():
        if name not in df.columns:
            raise InputError("missing column", path=path, field=name, hint="re-run remark prep")
        if df.schema[name] != dtype:
            raise InputError(f"column has type {df.schema[name]}, expected {dtype}", path=path, field=name)
    extra = [c for c in df.columns if c not in schema]
    if extra:
        raise InputError(
            f"unexpected column(s) {', '.join(extra)}; this file holds {', '.join(schema)}",
            path=path,
            field=extra[0],
            hint=REMAKE_HINT,
        )
    return df


def _load_own_catalog(path: Path) -> Catalog:
    """The catalog ``write_dataset`` wrote: duplicates were reported when it was prepared, so not again."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*share a \\(title, year\\)", category=UserWarning)
        return load_catalog(path, on_duplicate="keep")


def load_dataset(directory: str | Path) -> PooledDataset:
    """Load a directory written by :func:`write_dataset` (``remark prep``), checking its columns."""
    d = Path(directory)
    for name in FILES[:4]:
        if not (d / name).is_file():
            raise InputError(
                f"not a prepared dataset: {name} is missing",
                path=d,
                hint="build one with `remark prep SOURCE --input PATH --out DIR`",
            )
    meta = read_meta(d)
    dataset_grounding(meta, path=str(d / "meta.json"))  # a bad grounding record fails here, not mid-run
    return PooledDataset(
        requests=_read(d / "requests.parquet", REQUESTS_SCHEMA),
        responder_rows=_read(d / "responder_rows.parquet", RESPONDER_ROWS_SCHEMA),
        catalog=_load_own_catalog(d / "catalog.parquet"),
        meta=meta,
        path=d,
        answers=_read(d / ANSWERS_FILE, ANSWERS_SCHEMA) if (d / ANSWERS_FILE).is_file() else None,
    )


def read_meta(directory: str | Path) -> dict[str, Any]:
    """``meta.json`` of a dataset directory, checked (``META_SCHEMA``; ``domain`` one of ``DOMAINS``):
    every problem is an ``InputError`` naming the file and the field."""
    from catalog.io.files import read_json
    from data_prep.schema import DOMAINS

    path = Path(directory) / "meta.json"
    meta = read_json(path, schema=META_SCHEMA, optional=META_OPTIONAL, what="meta.json", hint=REMAKE_HINT)
    if meta["domain"] not in DOMAINS:
        raise InputError(
            f"unknown domain {meta['domain']!r}; valid: {', '.join(DOMAINS)}", path=path, field="domain"
        )
    return meta


def read_stats(directory: str | Path) -> dict[str, Any] | None:
    """``stats.json`` of a dataset directory (None when there is none), checked where commands read it
    (``STATS_OPTIONAL``, ``prep``'s ``PREP_OPTIONAL``): problems name the file and the field."""
    from catalog.io.files import check_fields, read_json

    path = Path(directory) / "stats.json"
    if not path.exists():
        return None
    stats = read_json(path, optional=STATS_OPTIONAL, what="stats.json", hint=REMAKE_HINT)
    if stats.get("prep") is not None:
        check_fields(stats["prep"], {}, optional=PREP_OPTIONAL, path=path, prefix="prep", hint=REMAKE_HINT)
    return stats


# -- the grounding contract ---------------------------------------------------------------------------
def dataset_identity(ds: PooledDataset) -> dict[str, str | None]:
    """What a score records of the dataset it was scored on: its folder and a sha256 over its request and
    catalog files (None for a dataset built in memory). Two scores compare only when the hashes agree, so
    a moved copy still compares and two datasets that share request ids do not."""
    if ds.path is None:
        return {"path": None, "sha256": None}
    digest = hashlib.sha256()
    for name in ("requests.parquet", "catalog.parquet"):
        with open(Path(ds.path) / name, "rb") as fh:
            digest.update(hashlib.file_digest(fh, "sha256").digest())
    return {"path": str(ds.path), "sha256": digest.hexdigest()}


def dataset_grounding(meta: Mapping[str, Any], *, path: str | None = None) -> GroundingSettings:
    """The dataset's grounding settings: ``meta["grounding"]``, checked (``InputError`` naming ``path``
    and the field when it is missing or holds a bad value)."""
    if "grounding" not in meta:
        raise InputError("missing", path=path, field="grounding", hint=REMAKE_HINT)
    return GroundingSettings.from_dict(meta["grounding"], path=path)


@dataclass(frozen=True)
class GroundingChoice:
    """The grounding one command uses, against the dataset's (see the module docstring).

    ``requested`` holds the fields set explicitly (flags or config fields that are not None) and ``by``
    says who set them; ``overridden`` the fields whose used value differs from the dataset's.
    """

    used: GroundingSettings
    dataset: GroundingSettings
    requested: dict[str, Any] = field(default_factory=dict)
    by: str = "explicit settings"
    data: str | None = None

    @property
    def overridden(self) -> dict[str, tuple[Any, Any]]:
        """``{field: (dataset's value, used value)}`` where the two differ."""
        return self.dataset.differences(self.used)

    def to_dict(self) -> dict[str, Any]:
        """What a command records in its outputs (``metrics.json``, ``train_summary.json``)."""
        return {
            "used": self.used.to_dict(),
            "dataset": self.dataset.to_dict(),
            "data": self.data,
            "requested": dict(self.requested),
            "requested_by": self.by if self.requested else None,
            "overridden": {k: {"dataset": a, "used": b} for k, (a, b) in self.overridden.items()},
        }

    def notes(self) -> list[str]:
        """Lines to print: every field that differs from the dataset's."""
        where = self.data or "the dataset"
        out = []
        if self.overridden:
            diff = ", ".join(f"{k}={b!r} (dataset: {a!r})" for k, (a, b) in self.overridden.items())
            out.append(
                f"note: grounding differs from {where}'s: {diff}, set by {self.by}; lists are grounded "
                "differently from runs that use the dataset's settings (recorded as grounding.overridden)"
            )
        return out


def choose_grounding(
    dataset: PooledDataset, requested: Mapping[str, Any] | None = None, *, by: str = "explicit settings"
) -> GroundingChoice:
    """The dataset's grounding with the fields of ``requested`` that are not None put over it."""
    meta_path = dataset._meta_path
    base = dataset_grounding(dataset.meta, path=meta_path)
    asked = {k: v for k, v in (requested or {}).items() if v is not None}
    return GroundingChoice(
        used=base.with_overrides(asked),
        dataset=base,
        requested=asked,
        by=by,
        data=None if dataset.path is None else str(dataset.path),
    )
