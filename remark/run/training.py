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

An ``output_dir`` that is another command's output (a dataset, a model) or an input, or that holds a
``README.md`` the run did not write, is refused; a used one is refused or cleared (``overwrite``,
``remark.run.run_files``); and ``resume`` picks the newest complete checkpoint: all before anything loads
(``remark.run.output_dir``). ``best/`` and ``final/`` are written whole, model card included, and swapped
in (``catalog.io.outputs.atomic_dir``).
``build_tiny`` first builds a synthetic dataset and an SFT-warmed tiny model under
``output_dir/assets`` (``remark.run.build_tiny``).

This module holds the orchestration: :func:`run_training`, :func:`policy_model` (the model, adapter
and tokenizer the trainer gets) and the final save.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from catalog.io.errors import InputError
from catalog.io.outputs import atomic_dir, atomic_write
from catalog.io.versions import package_versions
from remark.config import RemarkGRPOConfig
from remark.config.effects import colocated_vllm
from remark.run.build_tiny import build_tiny_assets
from remark.run.cards import set_card_total, write_folder_card
from remark.run.output_dir import (
    _valid_group_sizes,
    check_run_dir,
    finished_run,
    resume_checkpoint,
    resume_group_size,
    resume_message,
)
from remark.run.run_files import FINAL_KIND, prepare_output_dir, write_run_card

__all__ = ["FINAL_KIND", "policy_model", "run_training", "validation_engine"]


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
        # a local model by its absolute path: what a new adapter's adapter_config.json records as its base
        return (os.path.abspath(path) if Path(path).is_dir() else path), peft_config(cfg), tokenizer
    import torch

    dtype = (cfg.model_init_kwargs or {}).get("dtype", "float32")  # TRL's default for a path, too
    dtype = getattr(torch, dtype) if dtype in ("bfloat16", "float16", "float32") else dtype
    return load_causal_lm(path, base=base, trainable=True, dtype=dtype), None, tokenizer


def validation_engine(cfg: RemarkGRPOConfig) -> str:
    """What generates the validation lists: ``validation_engine``, with ``auto`` the colocated vLLM engine
    when training generates with one, else transformers."""
    if cfg.validation_engine != "auto":
        return cfg.validation_engine
    return "vllm" if colocated_vllm(cfg) else "transformers"


def run_training(
    cfg: RemarkGRPOConfig,
    *,
    resume: str | bool | None = None,
    callbacks: Sequence[Any] = (),
    overwrite: bool = False,
    command: str | None = None,
    notes: Sequence[str] = (),
) -> dict[str, Any]:
    """Train with ``cfg``; ``resume`` is a checkpoint path, True (the newest complete one in output_dir)
    or None; ``overwrite`` clears a previous run's files from output_dir first (see the module docstring).

    ``callbacks`` are extra ``transformers.TrainerCallback``s (progress bars, custom logging), added after
    the ones the config asks for (validation, divergence guard, group-size advisor). ``command`` (the command
    line, ``remark train`` passes its own) goes into the model cards of ``best/`` and ``final/``
    (``remark.run.cards``). ``notes`` (the config's notices, ``remark.config.effects``: settings given where
    they have no effect) are recorded in ``train_summary.json["notes"]``.

    The run holds torch's CPU threads at ``cpu_threads`` when that is set (``remark.run.cpu_threads``; restored after).
    """
    from catalog.io.locks import output_lock
    from remark.run.cpu_threads import torch_threads

    # one writer per output_dir (catalog.io.locks); torchrun's other processes write under the first's
    writer = output_lock(cfg.output_dir, field="output_dir", command=command)
    with (
        writer if int(os.environ.get("RANK", "0")) == 0 else contextlib.nullcontext(),
        torch_threads(cfg.cpu_threads),
    ):
        return _run_training(
            cfg, resume=resume, callbacks=callbacks, overwrite=overwrite, command=command, notes=notes
        )


def _run_training(
    cfg: RemarkGRPOConfig,
    *,
    resume: str | bool | None = None,
    callbacks: Sequence[Any] = (),
    overwrite: bool = False,
    command: str | None = None,
    notes: Sequence[str] = (),
) -> dict[str, Any]:
    """:func:`run_training` under the thread setting it chose."""
    from data_prep.dataset import choose_grounding, load_dataset
    from remark.config import validate_paths
    from remark.run.callbacks import DivergenceGuard, ValidationCallback, read_best, read_stopped
    from remark.run.sampling import training_dataset
    from remark.step.trainer import RemarkGRPOTrainer

    validate_paths(cfg, skip=("data_dir", "model_name_or_path") if cfg.build_tiny is not None else ())
    inputs = (
        cfg.data_dir,
        cfg.model_name_or_path,
        cfg.adapter_base_model,
        cfg.validation_data_dir,
        cfg.baseline_run,
    )
    check_run_dir(cfg.output_dir, inputs)
    removed = prepare_output_dir(cfg.output_dir, resume=bool(resume), overwrite=overwrite)
    main = int(os.environ.get("RANK", "0")) == 0
    if removed and main:
        print(
            f"overwrite: removed the previous run's {', '.join(p.name for p in removed)} from {cfg.output_dir}"
        )
    done = finished_run(cfg.output_dir, cfg.max_steps) if resume else None
    ckpt = resume_checkpoint(cfg.output_dir, resume) if done is None else None
    note = resume_message(cfg.output_dir, cfg.max_steps, ckpt) if ckpt is not None else None
    if note and main:
        print(note)
    from remark.run.limits import (
        check_completion_positions,
        check_generation_memory,
        check_prompt_positions,
        longest_prompt_tokens,
    )

    check_completion_positions(cfg)  # before anything is built (build_tiny's SFT included)
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
    if done is not None:  # resume means continue: a run that reached max_steps is left as it is
        from remark.run.resume_check import check_resume

        check_resume(json.loads(cfg.to_json_string()), cfg.output_dir, Path(cfg.output_dir) / "final")
        if main:
            print(
                f"resume: the run in {cfg.output_dir} already reached max_steps={cfg.max_steps if cfg.max_steps > 0 else done['global_step']} "
                f"(step {done['global_step']}, final/ written): nothing to train, nothing rewritten; raise "
                f"max_steps to continue it (--set max_steps=N)"
            )
        return {**done, "resumed": "already finished"}
    resumes = None
    if ckpt is not None:  # the saved run, not another one: a changed method is refused before the model loads
        from remark.run.resume_check import check_resume, resume_record

        allowed = check_resume(json.loads(cfg.to_json_string()), cfg.output_dir, ckpt)
        resumes = resume_record(cfg.output_dir, ckpt, allowed, command)
    train = training_dataset(ds, split=cfg.train_split, sampling=cfg.sampling, k=cfg.num_ranks)
    policy, peft_config, tokenizer = policy_model(cfg)
    prompt_tokens = longest_prompt_tokens(train["prompt"], tokenizer)
    check_prompt_positions(cfg, prompt_tokens)  # the prompt and the completion fit the model's positions
    check_generation_memory(cfg, prompt_tokens)  # one generation step's KV cache, before the trainer starts
    extra, callbacks = list(callbacks), []
    grounding_notes = grounding.notes() + published_notes(cfg.segmentation, grounding.used)
    if cfg.validation_steps:
        per_step = cfg.per_device_train_batch_size * cfg.world_size * cfg.gradient_accumulation_steps
        valid_ds = load_dataset(cfg.validation_data_dir) if cfg.validation_data_dir else ds
        if valid_ds is not ds and valid_ds.grounding != grounding.used:
            grounding_notes.append(
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
                engine=validation_engine(cfg),
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
    for line in grounding_notes:
        print(line)
    trainer = RemarkGRPOTrainer(
        model=policy,
        args=cfg,
        train_dataset=train,
        catalog=ds.catalog,
        processing_class=tokenizer,
        callbacks=callbacks + extra,
        peft_config=peft_config,
        card_writer=write_run_card,
    )
    out = Path(cfg.output_dir)
    command = command or "run_training (Python API)"
    for callback in trainer.callback_handler.callbacks:  # validation values go to report_to's loggers too
        if isinstance(callback, ValidationCallback):
            callback.attach(trainer)
            callback.card_writer = functools.partial(_best_card, out=out, cfg=cfg, command=command)
    out.mkdir(parents=True, exist_ok=True)
    if trainer.accelerator.is_main_process:
        with atomic_write(out / "remark_config.json") as tmp:  # what runs, and each resume's changes
            record = cfg.to_json_string()
            if resumes is not None:
                record = (
                    json.dumps({**json.loads(record), "resumes": resumes}, indent=2, sort_keys=True) + "\n"
                )
            tmp.write_text(record)
    trainer.train(resume_from_checkpoint=None if ckpt is None else str(ckpt))
    best = out / "best" / "best.json"
    best_record = read_best(best) if best.is_file() else None
    step = trainer.state.global_step
    card = functools.partial(
        write_folder_card, out=out, cfg=cfg, kind="final", step=step, total_steps=step, best=best_record
    )
    _save_final(trainer, tokenizer, out / "final", card=functools.partial(card, command=command))
    summary = {
        "output_dir": str(out),
        "global_step": trainer.state.global_step,
        "max_steps": trainer.state.max_steps,
        "final": str(out / "final"),
        "best": None,
        "stopped": None,
        "grounding": {**grounding.to_dict(), "notes": grounding_notes},
        "notes": list(notes),
        "train_runtime_s": next(
            (h["train_runtime"] for h in trainer.state.log_history if "train_runtime" in h), None
        ),
        "versions": package_versions(),
    }
    if best_record is not None:
        summary["best"] = {"path": str(out / "best"), **best_record}
    if (out / "stopped.json").is_file():
        summary["stopped"] = read_stopped(out / "stopped.json")
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
    writing = (
        atomic_dir(dest, FINAL_KIND, force=True, field="output_dir")
        if acc.is_main_process
        else contextlib.nullcontext()
    )
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


def published_notes(segmentation: str, used: Any) -> list[str]:
    """What grounding means for the reward under Rank-GRPO's published reward slots (``reward_slots:
    rank_grpo``): the slots are matched by Rank-GRPO's verbatim test whatever ``match_mode`` says."""
    from remark.algos import spec

    if spec("segmentation", segmentation).meta["reward_slots"] != "rank_grpo":
        return []
    out = [
        f"note: segmentation {segmentation!r} matches reward slots as Rank-GRPO does (its parser, the catalog's "
        f"(title, year) verbatim, year +-{used.year_tolerance}), whatever match_mode; match_mode "
        f"({used.match_mode!r}) is how the dataset's responders and seen items were grounded and how the "
        "validation grounds its lists"
    ]
    if used.match_mode != "exact":
        out.append(
            "note: Rank-GRPO's ground truth is its dataset's (title, year) pairs as written: prepare the data with "
            '--match-mode exact to score against those (docs/method.md, "Rank-GRPO as published")'
        )
    return out
