"""``remark train``: config -> (tiny assets) -> dataset rows -> RemarkGRPOTrainer -> best and final models.

Orchestration only: the config is validated (``remark.config``) before anything loads; the math lives
in ``remark.algos``; data in ``data_prep``; metrics in ``eval``. Outputs in ``output_dir``:

- ``checkpoint-N/`` (TRL/transformers layout, optimizer and RNG state as safetensors + JSON),
- ``eval_log.jsonl`` and ``eval/step_XXXXXX.parquet`` (validation), ``best/`` (the best validation step),
- ``final/`` (the last weights), ``remark_config.json``, ``train_summary.json``, the model cards
  (``README.md`` + ``card.json``) inside ``best/`` and ``final/``, ``runs/`` (``report_to: tensorboard``),
  ``merged_base/`` (an adapter given with ``merge_adapter``),
- ``stopped.json`` when the divergence guard stopped the run.

Grounding: the reward and the validation ground with the dataset's settings (``meta.json["grounding"]``,
``data_prep.dataset.choose_grounding``) unless the config sets a grounding field (``match_mode``,
``year_tolerance``, ``match_threshold``, ``match_scorer``); a field that differs from the dataset's is
printed, ``remark_config.json`` holds the settings used, ``train_summary.json["grounding"]`` what was used,
what the dataset says and what was overridden.

A new run refuses an ``output_dir`` that holds a previous run (its logs, eval tables, ``best/``,
``final/``, checkpoints or summary), which it would otherwise mix with its own; ``overwrite=True``
(``remark train --overwrite``) removes exactly those (:data:`RUN_OUTPUTS` and ``checkpoint-N/``; of
TensorBoard's ``runs/`` only its event-file folders, ``merged_base/`` only when its marker says remark
merged it) and nothing else (``assets/`` is kept: it is reused when its settings match). ``resume=True`` takes the
newest *complete* checkpoint (``remark.checkpoint``), printing the incomplete ones it skipped; an
explicit checkpoint that is incomplete, or no checkpoint at all, is an ``InputError``. ``best/`` and
``final/`` are written whole and swapped in (``catalog.io.atomic_dir``).

``build_tiny`` (``configs/tiny_cpu.yaml``) first writes a synthetic pooled dataset, trains a tokenizer
and a tiny Qwen2 model on its text, and SFT-warms it, under ``output_dir/assets``, so the run needs
nothing but this package.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from catalog.errors import InputError
from catalog.io import atomic_dir, atomic_write, output_kind
from remark.cards import set_card_total, write_folder_card
from remark.checkpoint import checkpoint_problem, find_checkpoints, select_checkpoint
from remark.config import RemarkGRPOConfig

#: what a run writes into ``output_dir`` besides ``checkpoint-N/`` (``overwrite`` removes exactly these).
RUN_OUTPUTS = (
    "eval_log.jsonl",
    "eval",
    "sampled",
    "best",
    "final",
    "train_summary.json",
    "stopped.json",
    "remark_config.json",
    "runs",
    "merged_base",
)
#: outputs a run writes before its first step: alone they are no previous run (``--overwrite`` still clears them).
SETUP_OUTPUTS = ("remark_config.json", "runs", "merged_base")
#: the ``catalog.io.atomic_dir`` kind of ``merged_base/`` (``eval.adapters.merge_adapter``).
MERGED_KIND = "merged-model"
#: the ``catalog.io.atomic_dir`` kind of ``final/`` (``best/`` is ``"train-best"``, remark.callbacks).
FINAL_KIND = "train-final"

TINY_DEFAULTS: dict[str, Any] = {
    "n_requests": 300,
    "n_items": 48,
    "relevant_size": [6, 10],
    "seed": 0,
    "sft_epochs": 8,
    "sft_lr": 3e-3,
    "sft_targets": "union",
    "spec": {"vocab_size": 1024, "hidden_size": 96, "intermediate_size": 384},
}


def build_tiny_assets(cfg: RemarkGRPOConfig) -> tuple[Path, Path]:
    """Synthetic dataset + tiny SFT-warmed model under ``output_dir/assets``; returns (data_dir, model_dir).

    Reuses assets already built with the same settings (``assets/build.json``), so a resumed run does
    not rebuild them.
    """
    from data_prep.synthetic import build_dataset
    from remark.sft import SFTSettings, run_sft
    from remark.tiny import TinySpec, build_tiny_model

    opts = {**TINY_DEFAULTS, **(cfg.build_tiny or {})}
    unknown = set(opts) - set(TINY_DEFAULTS)
    if unknown:
        raise InputError(
            f"unknown build_tiny keys {sorted(unknown)}",
            field="build_tiny",
            hint=f"valid: {sorted(TINY_DEFAULTS)}",
        )
    for key, default in TINY_DEFAULTS.items():  # each value has its default's type (checked before building)
        value = opts[key]
        if type(value) is not type(default) and not (type(default) is float and type(value) is int):
            raise InputError(
                f"build_tiny.{key} = {value!r} is not {type(default).__name__} like its default {default!r}",
                field="build_tiny",
            )
    root = Path(cfg.output_dir) / "assets"
    data_dir, base_dir, sft_dir = root / "data", root / "base_model", root / "sft_model"
    stamp = root / "build.json"
    if stamp.is_file() and json.loads(stamp.read_text()) == opts and (sft_dir / "config.json").is_file():
        return data_dir, sft_dir
    ds = build_dataset(
        data_dir,
        n_requests=opts["n_requests"],
        n_items=opts["n_items"],
        relevant_size=tuple(opts["relevant_size"]),
        seed=opts["seed"],
    )
    corpus = [
        "\n".join(ds.catalog.df["item_id"].to_list()[i : i + 20]) for i in range(0, len(ds.catalog), 20)
    ]
    corpus += [m["content"] for p in ds.requests["prompt"].to_list() for m in p]
    build_tiny_model(base_dir, corpus, spec=TinySpec(**opts["spec"]), seed=opts["seed"])
    settings = SFTSettings(targets=opts["sft_targets"], k=cfg.num_ranks, seed=opts["seed"])
    run_sft(
        ds,
        base_dir,
        sft_dir,
        settings,
        {
            "use_cpu": cfg.use_cpu,
            "bf16": False,
            "learning_rate": opts["sft_lr"],
            "lr_scheduler_type": "cosine",
            "num_train_epochs": opts["sft_epochs"],
            "per_device_train_batch_size": 16,
            "logging_steps": 50,
            "disable_tqdm": cfg.disable_tqdm,
        },
    )
    with atomic_write(stamp) as tmp:
        tmp.write_text(json.dumps(opts, indent=2))
    return data_dir, sft_dir


def _valid_group_sizes(cfg: RemarkGRPOConfig, limit: int = 64) -> list[int]:
    """G in 2..limit for which the same requests per step fill whole per-device batches (see resume)."""
    requests = cfg.generation_batch_size // cfg.num_generations
    per_step = cfg.world_size * cfg.steps_per_generation
    return [g for g in range(2, limit + 1) if (requests * g) % per_step == 0]


def tensorboard_logs(runs: Path) -> list[Path]:
    """The entries of ``runs/`` that are TensorBoard logs (transformers' ``runs/<time>_<host>/`` folders, or
    event files): every file in them is an ``events.out.tfevents.*`` file. Anything else there is not ours."""
    if not runs.is_dir() or runs.is_symlink():
        return []
    found = []
    for entry in sorted(runs.iterdir()):
        if entry.is_symlink():
            continue
        files = [entry] if entry.is_file() else [p for p in entry.rglob("*") if not p.is_dir()]
        if files and all(p.name.startswith("events.out.tfevents.") and not p.is_symlink() for p in files):
            found.append(entry)
    return found


def previous_run(output_dir: str | Path) -> list[Path]:
    """What an earlier run left in ``output_dir``: its :data:`RUN_OUTPUTS` and checkpoints (``runs/`` when
    it holds TensorBoard logs, ``merged_base/`` when it is a merged model remark wrote)."""
    root = Path(output_dir)
    found = []
    for name in RUN_OUTPUTS:
        path = root / name
        if not (path.exists() or path.is_symlink()):
            continue
        if name == "runs" and not tensorboard_logs(path):
            continue
        if name == "merged_base" and output_kind(path) != MERGED_KIND:
            continue
        found.append(path)
    return found + find_checkpoints(root)


def _remove_run_output(path: Path) -> None:
    """Remove one of :func:`previous_run`'s paths; of ``runs/`` only the TensorBoard logs (then the folder,
    when that leaves it empty)."""
    if path.name == "runs" and path.is_dir() and not path.is_symlink():
        for entry in tensorboard_logs(path):
            shutil.rmtree(entry) if entry.is_dir() else entry.unlink()
        if not any(path.iterdir()):
            path.rmdir()
    elif path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    else:
        path.unlink()


def prepare_output_dir(output_dir: str | Path, *, resume: bool, overwrite: bool) -> list[Path]:
    """Refuse (``InputError``) or clear a used ``output_dir`` before anything loads; returns what was removed.

    What a run writes before its first step (:data:`SETUP_OUTPUTS`: the config, TensorBoard's ``runs/``,
    a ``merged_base/``) is not a run: a run that crashed before its first step may be started again.
    """
    if resume and overwrite:
        raise InputError("--resume and --overwrite contradict each other", field="--overwrite")
    found = previous_run(output_dir)
    if resume or not [p for p in found if p.name not in SETUP_OUTPUTS]:
        return []
    names = ", ".join(p.name + ("/" if p.is_dir() else "") for p in found[:8])
    if not overwrite:
        raise InputError(
            f"output_dir holds a previous run ({names}{', ...' if len(found) > 8 else ''}); a new run "
            "would mix its logs, eval tables and best/ with that run's",
            path=output_dir,
            field="output_dir",
            hint="continue it with --resume, clear those files with --overwrite, or set another output_dir",
        )
    if int(os.environ.get("RANK", "0")) == 0:  # one process clears; torchrun's others find it done or empty
        for path in found:
            _remove_run_output(path)
    return found


def resume_checkpoint(output_dir: str | Path, resume: str | bool | None) -> Path | None:
    """The checkpoint to resume from: ``resume`` itself (a path, which must be complete) or, for True,
    the newest complete one in ``output_dir``, printing the incomplete ones it skipped."""
    if resume is None or resume is False:
        return None
    if resume is not True:
        problem = checkpoint_problem(resume)
        if problem is not None:
            newest, _ = select_checkpoint(Path(resume).parent)
            raise InputError(
                f"cannot resume from this checkpoint: {problem}",
                path=resume,
                field="--resume",
                hint=f"resume from {newest}, the newest complete one"
                if newest is not None
                else "pass --resume alone to take the newest complete checkpoint in output_dir",
            )
        return Path(resume)
    chosen, skipped = select_checkpoint(output_dir)
    main = int(os.environ.get("RANK", "0")) == 0
    for path, why in skipped:
        if main:
            print(f"resume: skipped {path.name}: {why}")
    if chosen is None:
        raise InputError(
            "no complete checkpoint to resume from"
            + (f" ({len(skipped)} incomplete, listed above)" if skipped else " (there is no checkpoint-N)"),
            path=output_dir,
            field="--resume",
            hint="start the run without --resume; checkpoints are written every save_steps",
        )
    if main:
        print(f"resume: from {chosen}")
    return chosen


def resume_group_size(cfg: RemarkGRPOConfig, checkpoint: Path) -> RemarkGRPOConfig:
    """Apply a checkpoint's group-size recommendation (``remark.planning.adaptive``) before training resumes.

    Requests per step stay fixed: the generation batch becomes requests x new G, spread over the same
    processes and generation steps. When G changes, the data sampler's saved position no longer means
    the same thing, so ``ignore_data_skip`` is set.
    """
    import dataclasses

    from remark.planning.adaptive import resolve_group_size

    group, note = resolve_group_size(cfg.num_generations, checkpoint, adapt=cfg.adapt_group_size)
    print(note)
    if group == cfg.num_generations:
        return cfg
    requests = cfg.generation_batch_size // cfg.num_generations
    per_step = cfg.world_size * cfg.steps_per_generation
    if (requests * group) % per_step:
        raise InputError(
            f"{requests} requests x G = {group} completions do not split over {cfg.world_size} process(es) x "
            f"{cfg.steps_per_generation} generation step(s)",
            field="adapt_group_size",
            hint="restrict group_size_candidates to such G, or set adapt_group_size: false",
        )
    return dataclasses.replace(
        cfg,
        num_generations=group,
        per_device_train_batch_size=requests * group // per_step,
        generation_batch_size=requests * group,
        steps_per_generation=None,
        ignore_data_skip=True,
    )


def policy_model(cfg: RemarkGRPOConfig) -> tuple[Any, Any, Any]:
    """(model for the trainer, TRL ``peft_config``, tokenizer) from the config (``remark.config.lora``).

    A full model folder goes to TRL as its path (TRL loads it). An adapter folder with ``merge_adapter``
    is merged into its base and saved as ``output_dir/merged_base`` (so a new adapter's
    ``adapter_config.json`` names a base that holds the first one); without it, it is loaded here as a
    trainable ``PeftModel`` that TRL keeps training. ``use_peft`` adds a new adapter (``peft_config``);
    its target module names are checked against the model first.
    """
    from eval.adapters import adapter_base, is_adapter_dir, load_causal_lm, load_tokenizer, merge_adapter
    from remark.config.lora import check_target_modules, peft_config

    path, base = cfg.model_name_or_path, cfg.adapter_base_model
    if is_adapter_dir(path) and cfg.merge_adapter:
        path, base = str(merge_adapter(path, Path(cfg.output_dir) / "merged_base", base=base)), None
    adapter = is_adapter_dir(path)
    check_target_modules(cfg, adapter_base(path, base) if adapter else path)
    tokenizer = load_tokenizer(path, base)
    if not adapter:
        return path, peft_config(cfg), tokenizer
    import torch

    dtype = (cfg.model_init_kwargs or {}).get("dtype", "float32")  # TRL's default for a path, too
    dtype = getattr(torch, dtype) if dtype in ("bfloat16", "float16", "float32") else dtype
    return load_causal_lm(path, base=base, trainable=True, dtype=dtype), None, tokenizer


def run_training(
    cfg: RemarkGRPOConfig,
    *,
    resume: str | bool | None = None,
    callbacks: Sequence[Any] = (),
    overwrite: bool = False,
    command: str | None = None,
) -> dict[str, Any]:
    """Train with ``cfg``; ``resume`` is a checkpoint path, True (the newest complete one in output_dir)
    or None; ``overwrite`` clears a previous run's files from output_dir first (see the module docstring).

    ``callbacks`` are extra ``transformers.TrainerCallback``s (progress bars, custom logging), added after
    the ones the config asks for (validation, divergence guard, group-size advisor). ``command`` (the command
    line, ``remark train`` passes its own) goes into the model cards of ``best/`` and ``final/``
    (``remark.cards``).
    """
    from data_prep.dataset import choose_grounding, load_dataset
    from remark.callbacks import DivergenceGuard, ValidationCallback
    from remark.config import validate_paths
    from remark.data import training_dataset
    from remark.trainer import RemarkGRPOTrainer

    validate_paths(cfg, skip=("data_dir", "model_name_or_path") if cfg.build_tiny is not None else ())
    removed = prepare_output_dir(cfg.output_dir, resume=bool(resume), overwrite=overwrite)
    if removed and int(os.environ.get("RANK", "0")) == 0:
        print(
            f"overwrite: removed the previous run's {', '.join(p.name for p in removed)} from {cfg.output_dir}"
        )
    ckpt = resume_checkpoint(cfg.output_dir, resume)
    if cfg.build_tiny is not None:
        data_dir, model_dir = build_tiny_assets(cfg)
        cfg.data_dir, cfg.model_name_or_path = str(data_dir), str(model_dir)
    if ckpt is not None and cfg.group_size_profile is not None:
        cfg = resume_group_size(cfg, ckpt)
    if not cfg.data_dir or not cfg.model_name_or_path:
        raise InputError(
            "data_dir and model_name_or_path are required", field="data_dir", hint="or use build_tiny"
        )
    ds = load_dataset(cfg.data_dir)
    grounding = choose_grounding(ds, cfg.grounding_requested(), by="the training config")
    for name, value in grounding.used.to_dict().items():  # the trainer's reward reads them from cfg
        setattr(cfg, name, value)
    train = training_dataset(ds, split=cfg.train_split, sampling=cfg.sampling, k=cfg.num_ranks)
    policy, peft_config, tokenizer = policy_model(cfg)
    extra, callbacks = list(callbacks), []
    notes = grounding.notes()
    if cfg.validation_steps:
        per_step = cfg.per_device_train_batch_size * cfg.world_size * cfg.gradient_accumulation_steps
        valid_ds = load_dataset(cfg.validation_data_dir) if cfg.validation_data_dir else ds
        if valid_ds is not ds and valid_ds.grounding != grounding.used:
            notes.append(
                f"note: the validation dataset {cfg.validation_data_dir} records grounding "
                f"{valid_ds.grounding.describe()}; validation grounds like the reward: {grounding.used.describe()}"
            )
        callbacks.append(
            ValidationCallback(
                valid_ds,
                split=cfg.valid_split,
                k=cfg.num_ranks,
                every=cfg.validation_steps,
                metric=cfg.validation_metric,
                max_new_tokens=cfg.max_completion_length or 256,
                grounding=grounding.used,
                max_requests=cfg.validation_max_requests,
                batch_size=cfg.validation_batch_size,
                completions_per_step=per_step,
                num_samples=cfg.validation_num_samples,
                temperature=cfg.validation_temperature,
                seed=cfg.seed,
                baseline_run=cfg.baseline_run,
            )
        )
    if cfg.group_size_profile is not None:
        from remark.planning.adaptive import GroupSizeAdvisor

        callbacks.append(
            GroupSizeAdvisor.from_profile(
                cfg.group_size_profile,
                memory_budget_gb=cfg.group_size_memory_budget_gb,
                candidates=cfg.group_size_candidates or _valid_group_sizes(cfg),
                every_n_steps=cfg.group_size_every,
                current_G=cfg.num_generations,
            )
        )
    if cfg.divergence_kl is not None or cfg.divergence_log_ratio is not None:
        callbacks.append(
            DivergenceGuard(max_kl=cfg.divergence_kl, max_abs_log_ratio=cfg.divergence_log_ratio)
        )
    for line in notes:
        print(line)
    trainer = RemarkGRPOTrainer(
        model=policy,
        args=cfg,
        train_dataset=train,
        catalog=ds.catalog,
        processing_class=tokenizer,
        callbacks=callbacks + extra,
        peft_config=peft_config,
    )
    out = Path(cfg.output_dir)
    command = command or "run_training (Python API)"
    for callback in trainer.callback_handler.callbacks:  # validation values go to report_to's loggers too
        if isinstance(callback, ValidationCallback):
            callback.attach(trainer)
            callback.card_writer = functools.partial(_best_card, out=out, cfg=cfg, command=command)
    out.mkdir(parents=True, exist_ok=True)
    if trainer.accelerator.is_main_process:
        with atomic_write(out / "remark_config.json") as tmp:
            tmp.write_text(cfg.to_json_string())
    trainer.train(resume_from_checkpoint=None if ckpt is None else str(ckpt))
    best = out / "best" / "best.json"
    best_record = json.loads(best.read_text()) if best.is_file() else None
    step = trainer.state.global_step
    card = functools.partial(
        write_folder_card, out=out, cfg=cfg, kind="final", step=step, total_steps=step, best=best_record
    )
    _save_final(trainer, tokenizer, out / "final", card=functools.partial(card, command=command))
    summary = {
        "output_dir": str(out),
        "global_step": trainer.state.global_step,
        "final": str(out / "final"),
        "best": None,
        "stopped": None,
        "grounding": {**grounding.to_dict(), "notes": notes},
        "train_runtime_s": next(
            (h["train_runtime"] for h in trainer.state.log_history if "train_runtime" in h), None
        ),
    }
    if best_record is not None:
        summary["best"] = {"path": str(out / "best"), **best_record}
    if (out / "stopped.json").is_file():
        summary["stopped"] = json.loads((out / "stopped.json").read_text())
    if trainer.accelerator.is_main_process:
        with atomic_write(out / "train_summary.json") as tmp:
            tmp.write_text(json.dumps(summary, indent=2) + "\n")
        set_card_total(out / "best", step)  # best/'s card said the planned max_steps
    return summary


def _best_card(
    folder: Path, best: dict[str, Any], planned: int, *, out: Path, cfg: Any, command: str
) -> None:
    """``best/``'s card, written by the validation into the temporary folder that becomes ``best/``."""
    write_folder_card(
        folder, out, cfg, kind="best", step=best["step"], total_steps=planned, best=best, command=command
    )


def _save_final(trainer: Any, tokenizer: Any, dest: Path, *, card: Any = None) -> None:
    """Model, tokenizer and model card (``card(folder)``, main process) into one temporary folder (the same
    on every process), swapped in as ``dest``."""
    acc = trainer.accelerator
    writing = atomic_dir(dest, FINAL_KIND, force=True) if acc.is_main_process else contextlib.nullcontext()
    with writing as tmp:
        target = [None if tmp is None else str(tmp)]
        if acc.num_processes > 1:
            from accelerate.utils import broadcast_object_list

            broadcast_object_list(target)
        trainer.save_model(target[0])
        if acc.is_main_process:
            tokenizer.save_pretrained(target[0])
            if card is not None:
                card(Path(target[0]))
        acc.wait_for_everyone()
