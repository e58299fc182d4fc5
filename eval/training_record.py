"""What a trained model's run recorded about its grounding, compared with the grounding of an evaluation.

``remark train`` grounds its reward and its validation with settings (``catalog.match.GroundingSettings``)
that it records in the run folder: ``train_summary.json["grounding"]["used"]`` (written when the run
ends) and ``remark_config.json`` (written when it starts, with the four fields filled in by
``run_training``). Each record must hold all four fields: one that lacks any is refused (``InputError``
naming the file and the field), since comparing on part of the settings could call two different
groundings alike. ``remark eval run --model runs/x/best`` (or ``final/``, ``checkpoint-N/``) grounds with
the dataset's settings unless flags ask for others; when these differ from the training's, the model's
lists are scored under another grounding than the one it was rewarded for. That is allowed (the dataset's
grounding is the contract for comparing runs) but never silent: :func:`training_comparison` says what
differs, and ``eval.run.evaluate_model`` prints it and records it in ``metrics.json`` (``settings.grounding
.training``, ``warnings.grounding_differs_from_training``).

A model folder whose parent holds neither file (a base model, a ``remark sft`` output, a copied folder)
has no training record; the comparison is then ``None`` and nothing is said.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from catalog.io.errors import InputError
from catalog.match import GroundingSettings

#: the run files that record a run's grounding, in the order they are read (the first one found wins)
RECORDS = ("train_summary.json", "remark_config.json")
#: the eval flag of each grounding field
FLAGS = {name: "--" + name.replace("_", "-") for name in GroundingSettings.names()}


#: what each record must hold where it is read (``catalog.io.files.check_fields``)
RECORD_SCHEMAS = {
    "train_summary.json": {"grounding": {"used": dict}},
    "remark_config.json": {},
}
HINT = "the training run's record is damaged; re-run the training, or pass the grounding flags explicitly"


def _read(path: Path) -> dict[str, Any]:
    """The record at ``path``: UTF-8 JSON, an object holding what :data:`RECORD_SCHEMAS` asks of it."""
    from catalog.io.files import read_json

    return read_json(path, schema=RECORD_SCHEMAS[path.name], hint=HINT)


def training_grounding(model_dir: str | Path) -> tuple[dict[str, Any], str] | None:
    """(the grounding fields the model was trained with, the file they come from), or None.

    ``model_dir`` is a run's ``best/``, ``final/`` or ``checkpoint-N/``: its parent is the run folder.
    From ``train_summary.json`` the fields of ``grounding.used``; from ``remark_config.json`` its four
    grounding fields. Values are checked like any grounding setting (errors name the file and the field).
    """
    run = Path(model_dir).resolve().parent
    for name in RECORDS:
        path = run / name
        if not path.is_file():
            continue
        data = _read(path)
        if name == "train_summary.json":
            fields, prefix = data["grounding"]["used"], "grounding.used"
        else:
            fields, prefix = {k: data.get(k) for k in GroundingSettings.names() if k in data}, "grounding"
        try:
            settings = GroundingSettings.from_dict(fields, path=str(path), prefix=prefix)
        except InputError as err:  # remark_config.json holds the fields at its top level
            field = err.field if name == "train_summary.json" else err.field.removeprefix("grounding.")
            raise InputError(err.message, path=path, field=field, hint=HINT) from None
        return settings.to_dict(), str(path)
    return None


def training_comparison(model_dir: str | Path, used: GroundingSettings) -> dict[str, Any] | None:
    """``{"source", "used", "differs": {field: {"training", "eval"}}, "note"}`` for a model with a training
    record (None without one); ``note`` is None when the evaluation grounds as the training did."""
    found = training_grounding(model_dir)
    if found is None:
        return None
    fields, source = found
    ours = used.to_dict()
    differs = {k: {"training": v, "eval": ours[k]} for k, v in fields.items() if v != ours[k]}
    note = None
    if differs:
        diff = ", ".join(f"{k}={d['eval']!r} (training: {d['training']!r})" for k, d in differs.items())
        flags = " ".join(f"{FLAGS[k]} {d['training']}" for k, d in differs.items())
        note = (
            f"note: this evaluation grounds differently from the model's training ({source}): {diff}; "
            "its lists are scored under another grounding than its reward and validation used (recorded "
            f"as grounding.training); pass {flags} to evaluate it as it was trained"
        )
    return {"source": source, "used": fields, "differs": differs, "note": note}
