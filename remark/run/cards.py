"""Model cards: the ``README.md`` of a run's ``best/`` and ``final/`` (Hugging Face's model-card format).

The YAML header holds ``base_model``, ``datasets``, ``library_name`` (``peft`` for a LoRA adapter, else
``transformers``), ``license``, ``tags`` and ``pipeline_tag``; the body the method (reward scheme, recipe,
loss, K, G, learning rate, KL, LoRA or full fine-tuning, grounding), the training data's pooled statistics
(the dataset's ``stats.json``), the validation metrics of the folder's step with 95% bootstrap CIs over
requests (``eval.bootstrap.intervals`` on ``eval/step_XXXXXX.parquet``, the values the validation wrote),
the test metrics with CIs once known, and the exact command.

What a card is built from is kept beside it as ``card.json``, so ``remark card DIR --test EVAL_DIR``
re-renders it with the test metrics of a ``remark eval run`` output (its ``metrics.json``). Each card is
written into the temporary folder that becomes ``best/`` or ``final/`` (``catalog.io.outputs.atomic_dir``), so
neither folder ever exists without its card; ``best/``'s says "step S of N" with N the planned
``max_steps``, corrected at the run's end when it stopped elsewhere (:func:`set_card_total`).

Pushing to the Hub is TRL's (``push_to_hub: true``, ``hub_model_id``, ``hub_private_repo``,
``hub_strategy``): the Trainer uploads ``output_dir`` itself; these cards are the README it finds.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from catalog.io.outputs import atomic_write
from data_prep.card import card_header
from remark.algos.registry import offered

CARD_JSON = "card.json"
#: the metric keys a card shows (others stay in the eval tables)
CARD_VIEWS = ("per_responder", "union")


def validation_intervals(
    per_request_path: str | Path, *, n_resamples: int = 9999
) -> dict[str, dict[str, float]]:
    """``{key: {"mean", "ci_low", "ci_high"}}`` for the recall/NDCG keys of a validation step's parquet."""

    from catalog.io.files import read_table
    from eval.bootstrap import BootstrapConfig, intervals
    from eval.views import split_key

    table = read_table(per_request_path, format="parquet")
    keys = []
    for key in table.columns:
        try:
            metric, view = split_key(key)
        except ValueError:
            continue
        if view in CARD_VIEWS and metric.split("@")[0] in ("recall", "ndcg"):
            keys.append(key)
    if not keys:
        return {}
    return intervals(table, keys, BootstrapConfig(n_resamples=n_resamples))


def card_context(cfg: Any, *, base_model: str, command: str | None, adapter: bool) -> dict[str, Any]:
    """What a run's cards say about the method and the data (JSON-ready; saved as ``card.json``)."""
    from data_prep.dataset import read_meta, read_stats

    data = Path(cfg.data_dir)
    stats = read_stats(data) or {}
    meta = read_meta(data) if (data / "meta.json").is_file() else {}
    method = {
        "reward_scheme": cfg.reward_scheme,
        "recipe": cfg.recipe,
        "loss_type": cfg.loss_type,
        "num_ranks": cfg.num_ranks,
        "num_generations": cfg.num_generations,
        "learning_rate": cfg.learning_rate,
        "beta": cfg.beta,
        "advantage_scaling": cfg.advantage_scaling,
        "sampling": cfg.sampling,
        "max_completion_length": cfg.max_completion_length,
    }
    lora = None
    if adapter:
        lora = {
            "r": cfg.lora_r,
            "alpha": cfg.lora_alpha,
            "dropout": cfg.lora_dropout,
            "target_modules": cfg.lora_target_modules or "all-linear",
        }
    return {
        "base_model": base_model,
        "dataset": {"path": str(data), "name": data.name, "source": meta.get("source"), "stats": stats},
        "grounding": cfg.grounding().to_dict(),
        "method": method,
        "lora": lora,
        "license": getattr(cfg, "model_card_license", None) or "unknown",
        "command": command,
    }


def _table(rows: dict[str, dict[str, float]]) -> list[str]:
    out = ["| metric | value | 95% CI |", "|---|---|---|"]
    for key, v in rows.items():
        out.append(f"| `{key}` | {v['mean']:.4f} | [{v['ci_low']:.4f}, {v['ci_high']:.4f}] |")
    return out


def model_card(context: dict[str, Any], *, kind: str, step: int | None, total_steps: int) -> str:
    """The card text of ``best/`` or ``final/`` (``kind``) from :func:`card_context` plus what is known."""
    method, lora, data = context["method"], context["lora"], context["dataset"]
    scheme = method["reward_scheme"]
    tags = ["remark", "trl", "grpo", "rank-level-rl", "recommendation", f"reward-{scheme}"]
    tags += ["lora"] if lora else []
    header = card_header(
        {
            "base_model": context["base_model"],
            "datasets": [data["name"]],
            "library_name": "peft" if lora else "transformers",
            "license": context["license"],
            "tags": tags,
            "pipeline_tag": "text-generation",
        }
    )
    helps = {d.name: d.help for d in offered("reward")}  # the registry's one-line help of each scheme
    lines = [
        f"# {kind}: step {step if step is not None else 'n/a'} of {total_steps}",
        "",
        f"A ranked-list recommender fine-tuned with remark's rank-level GRPO, "
        f"reward scheme `{scheme}`"
        + (f" ({helps[scheme]})" if scheme in helps else "")
        + f", from `{context['base_model']}`"
        + (
            " as a LoRA adapter: load it on that base (`remark eval run --model` this folder)."
            if lora
            else "."
        ),
        "",
        "## Method",
        "",
        "| setting | value |",
        "|---|---|",
        *(f"| {k} | {v} |" for k, v in method.items() if v is not None),
    ]
    if lora:
        lines += [
            f"| LoRA | r {lora['r']}, alpha {lora['alpha']}, dropout {lora['dropout']}, "
            f"targets {lora['target_modules']} |"
        ]
    else:
        lines += ["| fine-tuning | every weight |"]
    rule = ", ".join(f"{k} {v}" for k, v in context["grounding"].items())
    lines += [f"| grounding | {rule} |", ""]
    stats = data.get("stats") or {}
    lines += ["## Training data", "", f"`{data['path']}` (source: {data.get('source') or 'n/a'})."]
    if stats.get("requests"):
        splits = ", ".join(f"{k} {v['requests']}" for k, v in stats.get("by_split", {}).items())
        share = stats.get("single_mention_item_share")
        lines += [
            "",
            f"{stats['requests']} requests ({splits}); responders per request: mean "
            f"{stats['n_responders']['mean']:.2f}; union size: mean {stats['union_size']['mean']:.2f}; "
            f"union items named by one responder: {'n/a' if share is None else f'{100 * share:.1f}%'}.",
        ]
    lines.append("")
    validation = context.get("validation")
    if validation:
        lines += [
            "## Validation",
            "",
            f"Validation lists at step {validation['step']} (`eval/...`: greedy, `sampled/...`: sampled); the "
            f"best step by `{validation.get('best_metric')}` is {validation.get('best_step')}. 95% BCa "
            "bootstrap CIs over requests.",
            "",
            *_table(validation["metrics"]),
            "",
        ]
    test = context.get("test")
    if test:
        lines += [
            "## Test",
            "",
            f"`remark eval run` on `{test['data']}` split `{test['split']}` ({test['n_requests']} requests, "
            f"{test['lists']} lists); 95% CIs over requests.",
            "",
            *_table(test["metrics"]),
            "",
        ]
    else:
        lines += [
            "## Test",
            "",
            "Not measured yet: `remark card` this folder `--test` an eval run's output.",
            "",
        ]
    if context.get("command"):
        lines += ["## How it was made", "", "```bash", context["command"], "```", ""]
    return header + "\n" + "\n".join(lines)


def write_model_card(
    folder: str | Path, context: dict[str, Any], *, kind: str, step: int | None, total_steps: int
) -> Path:
    """Write ``README.md`` and ``card.json`` into ``folder`` (each atomically); returns the card's path."""
    folder = Path(folder)
    doc = {**context, "kind": kind, "step": step, "total_steps": total_steps}
    with atomic_write(folder / CARD_JSON) as tmp:
        tmp.write_text(json.dumps(doc, indent=2) + "\n")
    with atomic_write(folder / "README.md") as tmp:
        tmp.write_text(model_card(context, kind=kind, step=step, total_steps=total_steps), encoding="utf-8")
    return folder / "README.md"


def eval_run_metrics(eval_dir: str | Path) -> dict[str, Any]:
    """The card's test section from a ``remark eval run`` output folder (its ``metrics.json``)."""
    from catalog.io.errors import InputError

    path = Path(eval_dir) / "metrics.json"
    if not path.is_file():
        raise InputError(
            "no metrics.json here",
            path=eval_dir,
            field="--test",
            hint="pass a `remark eval run --out` folder",
        )
    from eval.run import read_metrics

    result = read_metrics(eval_dir)
    rows = {}
    for view in CARD_VIEWS:
        for metric, v in (result.get(view) or {}).items():
            if metric.split("@")[0] in ("recall", "ndcg") and isinstance(v, dict) and "mean" in v:
                rows[f"eval/{metric}/{view}"] = {k: v[k] for k in ("mean", "ci_low", "ci_high")}
    settings = result.get("settings", {})
    return {
        "data": settings.get("data"),
        "split": settings.get("split"),
        "n_requests": result.get("n_requests"),
        "lists": settings.get("lists", "greedy"),
        "metrics": rows,
    }


def _check_test_belongs(folder: Path, card: dict[str, Any], eval_dir: Path) -> None:
    """``eval_dir`` evaluated this model (its ``settings.model`` is ``folder``) on this model's dataset (the
    sha256 of the dataset files it recorded equals that of the card's dataset), or ``InputError``."""
    from catalog.io.errors import InputError
    from data_prep.dataset import dataset_identity, load_dataset
    from eval.run import read_metrics

    settings = read_metrics(eval_dir).get("settings", {})
    model = settings.get("model")
    if model is None or Path(model).resolve() != folder.resolve():
        raise InputError(
            f"this evaluation is of another model ({model}), not of {folder}",
            path=eval_dir,
            field="--test",
            hint=f"evaluate this model: remark eval run --model {folder} --data DATASET --out DIR, then pass DIR",
        )
    data = (card.get("dataset") or {}).get("path")
    recorded = (settings.get("dataset") or {}).get("sha256")
    if data and Path(data, "requests.parquet").is_file() and recorded:
        ours = dataset_identity(load_dataset(data))["sha256"]
        if ours != recorded:
            raise InputError(
                f"this evaluation was scored on another dataset ({settings.get('data')}) than the one {folder} "
                f"was trained on ({data}): the card's test section would describe another data set",
                path=eval_dir,
                field="--test",
                hint=f"evaluate on the training dataset: remark eval run --model {folder} --data {data} --split test",
            )


#: what a model card's data file must hold to be rendered again
CARD_SCHEMA = {"kind": str, "step": (int, None), "total_steps": int}


def read_card_json(folder: str | Path) -> dict[str, Any]:
    """``folder/card.json`` (``CARD_SCHEMA``): a damaged one is an ``InputError`` naming the field."""
    from catalog.io.files import read_json

    return read_json(
        Path(folder) / CARD_JSON,
        schema=CARD_SCHEMA,
        what=CARD_JSON,
        hint="the card's data is damaged; the model itself is unaffected",
    )


def add_test_metrics(folder: str | Path, eval_dir: str | Path) -> Path:
    """Re-render the card of ``folder`` (from its ``card.json``) with the test metrics of ``eval_dir``."""
    from catalog.io.errors import InputError

    folder = Path(folder)
    if not (folder / CARD_JSON).is_file():
        raise InputError(
            "no card.json: this folder's card was not written by remark train", path=folder, field="model"
        )
    doc = read_card_json(folder)
    test = eval_run_metrics(eval_dir)  # a damaged metrics.json is named first
    _check_test_belongs(folder, doc, Path(eval_dir))
    kind, step, total = doc.pop("kind"), doc.pop("step"), doc.pop("total_steps")
    doc["test"] = test
    return write_model_card(folder, doc, kind=kind, step=step, total_steps=total)


def step_validation(out: Path, step: int, n_resamples: int = 9999) -> dict[str, dict[str, float]]:
    """Greedy (``eval/...``) and sampled (``sampled/...``) validation intervals of ``step``, when validated."""
    rows: dict[str, dict[str, float]] = {}
    greedy = out / "eval" / f"step_{step:06d}.parquet"
    sampled = out / "sampled" / "eval" / f"step_{step:06d}.parquet"
    if greedy.is_file():
        rows.update(validation_intervals(greedy, n_resamples=n_resamples))
    if sampled.is_file():
        for key, v in validation_intervals(sampled, n_resamples=n_resamples).items():
            rows["sampled/" + key.removeprefix("eval/")] = v
    return rows


def write_folder_card(
    folder: str | Path,
    out: str | Path,
    cfg: Any,
    *,
    kind: str,
    step: int | None,
    total_steps: int,
    best: dict[str, Any] | None,
    command: str | None,
    n_resamples: int = 9999,
) -> Path:
    """The card of a run's ``best/`` or ``final/`` (``kind``), written into ``folder``: the model folder, or
    the temporary one that becomes it; validation intervals are read from the run's ``out`` (its eval tables)."""
    from eval.adapters import adapter_base, is_adapter_dir

    folder = Path(folder)
    adapter = is_adapter_dir(folder)
    base = adapter_base(folder) if adapter else str(cfg.model_name_or_path)
    context = card_context(cfg, base_model=base, command=command, adapter=adapter)
    metrics = step_validation(Path(out), step, n_resamples) if step is not None else {}
    if metrics:
        context["validation"] = {
            "step": step,
            "best_step": None if best is None else f"step {best['step']} ({best['value']:.4f})",
            "best_metric": None if best is None else best["metric"],
            "metrics": metrics,
        }
    return write_model_card(folder, context, kind=kind, step=step, total_steps=total_steps)


def set_card_total(folder: str | Path, total_steps: int) -> bool:
    """Re-render ``folder``'s card (from its ``card.json``) with ``total_steps`` when it says another total;
    True when it did (``README.md`` and ``card.json`` are each replaced atomically)."""
    folder = Path(folder)
    path = folder / CARD_JSON
    if not path.is_file():
        return False
    doc = read_card_json(folder)
    if doc.get("total_steps") == total_steps:
        return False
    kind, step = doc.pop("kind"), doc.pop("step")
    doc.pop("total_steps", None)
    write_model_card(folder, doc, kind=kind, step=step, total_steps=total_steps)
    return True
