"""What a trained model's run recorded about its grounding, compared with the grounding of an evaluation.

``remark train`` grounds its reward and its validation with settings (``catalog.match.GroundingSettings``)
that it records in the run folder: ``train_summary.json["grounding"]["used"]`` (written when the run
ends) and ``remark_config.json`` (written when it starts, with the four fields filled in by
``run_training``). ``remark eval run --model runs/x/best`` (or ``final/``, ``checkpoint-N/``) grounds with
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

from catalog.match import GroundingSettings

#: the run files that record a run's grounding, in the order they are read (the first one found wins)
RECORDS = ("train_summary.json", "remark_config.json")
#: the eval flag of each grounding field
FLAGS = {name: "--" + name.replace("_", "-") for name in GroundingSettings.names()}


#: what each record must hold where it is read (``catalog.shared.files.check_fields``)
RECORD_SCHEMAS = {
    "train_summary.json": {"grounding": {"used": dict}},
    "remark_config.json": {},
}


def _read(path: Path) -> dict[str, Any]:
    """The record at ``path``: UTF-8 JSON, an object; ``train_summary.json``'s ``grounding.used`` an object
    when ``grounding`` is recorded (a summary without it, from before it was recorded, is passed over)."""
    from catalog.shared.files import check_fields, read_json

    hint = "the training run's record is damaged; re-run the training, or pass the grounding flags explicitly"
    data = read_json(path, schema={}, hint=hint)
    if path.name == "train_summary.json" and data.get("grounding") is not None:
        check_fields(data, RECORD_SCHEMAS[path.name], path=path, hint=hint)
    return data


def training_grounding(model_dir: str | Path) -> tuple[dict[str, Any], str] | None:
    """(the grounding fields the model was trained with, the file they come from), or None.

    ``model_dir`` is a run's ``best/``, ``final/`` or ``checkpoint-N/``: its parent is the run folder.
    From ``train_summary.json`` every field of ``grounding.used``; from ``remark_config.json`` the fields
    it holds that are not null. Values are checked like any grounding setting (errors name the file).
    """
    run = Path(model_dir).resolve().parent
    for name in RECORDS:
        path = run / name
        if not path.is_file():
            continue
        data = _read(path)
        if name == "train_summary.json":
            if data.get("grounding") is None:
                continue
            fields = data["grounding"]["used"]
        else:
            fields = {k: data[k] for k in GroundingSettings.names() if data.get(k) is not None}
            if not fields:
                continue
        GroundingSettings.from_dict(fields, path=str(path), prefix="grounding", partial=True)
        return dict(fields), str(path)
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
