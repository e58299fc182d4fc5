"""The timed-step harness shared by ``bench/trainer_overhead.py`` and ``bench/gpu_check.py``.

A *world* (a synthetic pooled dataset, a tokenizer trained on its titles and prompts, a tiny Qwen2,
optionally SFT-warmed; cached under a work folder), trainer subclasses that only time TRL's and remark's
methods (``PlainTimed``, ``RemarkTimed``), and :func:`timed_run`: one run of a few steps with the per-step
breakdown (``gen``, ``reward``, ``score``, ``override``, ``loss``, ``rest``; see
``bench/trainer_overhead.py``).
"""

from __future__ import annotations

import contextlib
import gc
import json
import os
import statistics
import time
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import numpy as np
import torch
from transformers import AutoTokenizer, PrinterCallback, TrainerCallback
from trl import GRPOConfig, GRPOTrainer

from data_prep.dataset import PooledDataset, load_dataset
from remark.config import RemarkGRPOConfig
from remark.config.tiny import TinySpec
from remark.run.sampling import training_dataset, training_rows
from remark.run.tiny_model import build_tiny_model
from remark.step.trainer import RemarkGRPOTrainer

KINDS = ("remark", "plain")


# ----------------------------------------------------------------------------------------------------
# The world: a synthetic pooled dataset and a locally built model
# ----------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class World:
    ds: PooledDataset
    model_dir: Path
    info: dict[str, Any]


def pseudo_words(n: int, seed: int) -> list[str]:
    """``n`` pronounceable made-up words (1-4 syllables): filler text that gives BPE enough merges."""
    rng = np.random.default_rng(seed)
    syllables = [a + b for a in "bcdfghjklmnprstvwz" for b in "aeiou"]
    syllables += [a + b + c for a in "bcdfgklmnprst" for b in "aeiou" for c in "nrst"]
    table = np.array(syllables)
    lengths = rng.integers(1, 5, size=n)
    return ["".join(rng.choice(table, size=int(m))) for m in lengths]


def tokenizer_corpus(ds: PooledDataset, k: int, *, n_lists: int = 400, filler_words: int = 0, seed: int = 0):
    """Catalog lists (K display titles per line-separated list), the prompts, and optional filler words."""
    rng = np.random.default_rng(seed)
    display = [ds.catalog.display(i) for i in ds.catalog.df["item_id"].to_list()]
    corpus = [
        "\n".join(rng.choice(display, size=min(k, len(display)), replace=False)) for _ in range(n_lists)
    ]
    for split in ("train", "valid"):
        rows = training_rows(ds, split=split, sampling="uniform", k=k)
        corpus += [m["content"] for messages in rows["prompt"].to_list() for m in messages]
    if filler_words:
        words = pseudo_words(filler_words, seed)
        corpus += [" ".join(words[i : i + 40]) for i in range(0, len(words), 40)]
    return corpus


def build_world(
    work_dir: str | Path,
    *,
    k: int,
    spec: TinySpec,
    n_requests: int = 200,
    n_items: int = 240,
    sft_steps: int = 60,
    sft_batch: int = 16,
    filler_words: int = 0,
    seed: int = 0,
    sft_args: dict[str, Any] | None = None,
) -> World:
    """Synthetic data + a model built from ``spec`` (tokenizer trained on the catalog), optionally SFT-warmed.

    Reuses ``work_dir`` when it already holds a world built with the same settings (``world.json``).
    """
    from data_prep.synthetic import build_dataset

    work = Path(work_dir)
    info = {
        "k": k,
        "spec": asdict(spec),
        "n_requests": n_requests,
        "n_items": n_items,
        "sft_steps": sft_steps,
        "sft_batch": sft_batch,
        "filler_words": filler_words,
        "seed": seed,
    }
    stamp = work / "world.json"
    model_dir = work / ("sft" if sft_steps else "base")
    if stamp.is_file() and json.loads(stamp.read_text()).get("settings") == info:
        return World(load_dataset(work / "data"), model_dir, json.loads(stamp.read_text()))
    work.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    ds = build_dataset(work / "data", n_requests=n_requests, n_items=n_items, seed=seed)
    corpus = tokenizer_corpus(ds, k, filler_words=filler_words, seed=seed)
    base = build_tiny_model(work / "base", corpus, spec=spec, seed=seed)
    built = {"build_s": time.perf_counter() - t0}
    if sft_steps:
        from remark.run.sft import SFTSettings, run_sft

        t1 = time.perf_counter()
        args = {
            "max_steps": sft_steps,
            "per_device_train_batch_size": sft_batch,
            "learning_rate": 3e-3,
            "warmup_steps": max(1, sft_steps // 10),
            "logging_steps": max(1, sft_steps // 4),
            "disable_tqdm": True,
            "use_cpu": not torch.cuda.is_available(),
            "bf16": False,
        }
        run_sft(
            ds,
            base,
            model_dir,
            SFTSettings(targets="noisy", k=k, copies=4, seed=seed),
            {**args, **(sft_args or {})},
        )
        built["sft_s"] = time.perf_counter() - t1
    tok = AutoTokenizer.from_pretrained(model_dir)
    built["vocab"] = len(tok)
    doc = {"settings": info, **built}
    stamp.write_text(json.dumps(doc, indent=2))
    return World(ds, model_dir, doc)


# ----------------------------------------------------------------------------------------------------
# Timing: a clock per run, subclasses that only time, a step callback
# ----------------------------------------------------------------------------------------------------
class Clock:
    """Named durations per optimizer step. On CUDA every boundary synchronises, so times are wall times."""

    def __init__(self, cuda: bool = False) -> None:
        self.cuda = cuda
        self.steps: list[dict[str, float]] = []
        self.current: dict[str, float] | None = None
        self._t0 = 0.0

    def _sync(self) -> None:
        if self.cuda:
            torch.cuda.synchronize()

    def begin(self) -> None:
        self._sync()
        self.current = defaultdict(float)
        self._t0 = time.perf_counter()

    def end(self) -> None:
        self._sync()
        if self.current is None:
            return
        self.current["step_s"] = time.perf_counter() - self._t0
        self.steps.append(dict(self.current))
        self.current = None

    @contextlib.contextmanager
    def time(self, name: str) -> Iterator[None]:
        self._sync()
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self._sync()
            if self.current is not None:
                self.current[name] += time.perf_counter() - t0

    def add(self, name: str, value: float) -> None:
        if self.current is not None:
            self.current[name] += value


class _TRLTimed(GRPOTrainer):
    """Times TRL's own methods (sits right above ``GRPOTrainer`` in the MRO)."""

    clock: Clock

    def _generate(self, prompts):
        with self.clock.time("gen_s"):
            return super()._generate(prompts)

    def _calculate_rewards(self, *args, **kwargs):
        with self.clock.time("reward_s"):
            return super()._calculate_rewards(*args, **kwargs)

    def _generate_and_score_completions(self, inputs):
        with self.clock.time("trl_gas_s"):
            return super()._generate_and_score_completions(inputs)

    def _prepare_inputs(self, generation_batch):
        with self.clock.time("prepare_s"):
            return super()._prepare_inputs(generation_batch)

    def training_step(self, model, inputs, num_items_in_batch):
        with self.clock.time("train_step_s"):
            return super().training_step(model, inputs, num_items_in_batch)


class _OuterTimed:
    """Times the outermost ``_generate_and_score_completions`` (TRL's + remark's override) and counts tokens."""

    clock: Clock

    def _generate_and_score_completions(self, inputs):
        with self.clock.time("gas_s"):
            out = super()._generate_and_score_completions(inputs)
        mask = out["completion_mask"]
        self.clock.add("completion_tokens", float(mask.sum()))
        self.clock.add("rows", float(mask.shape[0]))
        self.clock.add("width", float(mask.shape[1]))
        self.clock.add("prompt_tokens", float(out["prompt_mask"].sum()))
        return out


class PlainTimed(_OuterTimed, _TRLTimed):
    pass


class RemarkTimed(_OuterTimed, RemarkGRPOTrainer, _TRLTimed):
    """Times the serial score call (``score_s``), the reward call TRL waits on (``score_wait_s``) and the
    scoring work wherever it ran (``score_work_s``: the serial call, or with ``scoring_workers`` the
    slowest pool worker's wall time per round); with ``use_vllm``, the weight sync into the engine
    (``sync_s``, part of ``gen_s``: TRL syncs inside its generation)."""

    def __init__(self, *args, clock: Clock, **kwargs) -> None:
        self.clock = clock
        super().__init__(*args, **kwargs)
        engine = getattr(self, "vllm_generation", None)
        if engine is not None:
            sync = engine.sync_weights

            def timed_sync():
                with self.clock.time("sync_s"):
                    return sync()

            engine.sync_weights = timed_sync
        reward, futures = self.rank_reward, []
        serial = reward.scorer.scorer if reward.scorer.overlaps else reward.scorer  # the RankScorer
        score = serial.score

        def timed_score(*a, **kw):
            with self.clock.time("score_s"):
                out = score(*a, **kw)
            return out

        serial.score = timed_score
        if reward.scorer.overlaps:  # the scoring pool
            submit = reward.scorer.submit

            def timed_submit(*a, **kw):
                futures.append(submit(*a, **kw))
                return futures[-1]

            reward.scorer.submit = timed_submit

        def timed_reward(*a, **kw):
            before = self.clock.current.get("score_s", 0.0) if self.clock.current is not None else 0.0
            with self.clock.time("score_wait_s"):
                out = reward(*a, **kw)
            if self.clock.current is not None:
                serial = self.clock.current.get("score_s", 0.0) - before
                pooled = max(futures[-1].worker_s, default=0.0) if futures and serial == 0.0 else 0.0
                self.clock.add("score_work_s", serial + pooled)
            futures.clear()
            return out

        timed_reward.__name__ = reward.__name__
        self.reward_funcs[0] = timed_reward


class StepClock(TrainerCallback):
    """Opens and closes the clock's step record; stops training (after the step) past ``deadline``."""

    def __init__(self, clock: Clock, deadline: float | None = None) -> None:
        self.clock = clock
        self.deadline = deadline

    def on_step_begin(self, args, state, control, **kwargs):
        self.clock.begin()

    def on_step_end(self, args, state, control, **kwargs):
        self.clock.end()
        if self.deadline is not None and time.monotonic() > self.deadline:
            control.should_training_stop = True
        return control


def plain_reward(completion_ids, **_):
    """A trivial scalar reward for the plain baseline: completion length in hundreds of tokens."""
    return [len(ids) / 100.0 for ids in completion_ids]


def common_args(
    out_dir: str | Path,
    *,
    prompts: int,
    group_size: int,
    max_completion_length: int,
    steps: int,
    seed: int,
    cuda: bool,
    extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """``GRPOConfig`` fields both trainers share: one micro-batch of prompts x G rows, generation every step."""
    args = dict(
        output_dir=str(out_dir),
        report_to="none",
        per_device_train_batch_size=prompts * group_size,
        gradient_accumulation_steps=1,
        num_generations=group_size,
        max_completion_length=max_completion_length,
        max_steps=steps,
        learning_rate=1e-6,
        lr_scheduler_type="constant",
        loss_type="bnpo",
        scale_rewards="group",
        beta=0.0,
        temperature=1.0,
        save_strategy="no",
        logging_steps=1,
        disable_tqdm=True,
        seed=seed,
        use_cpu=not cuda,
        bf16=cuda,
    )
    args.update(extra or {})
    return args


def remark_args(k: int, match_mode: str) -> dict[str, Any]:
    return dict(num_ranks=k, reward_scheme="union", sampling="uniform", match_mode=match_mode)


def timed_run(
    kind: str,
    world: World,
    args: dict[str, Any],
    *,
    k: int,
    match_mode: str = "fuzzy",
    deadline: float | None = None,
    remark_extra: dict[str, Any] | None = None,
) -> tuple[list[dict[str, float]], Any]:
    """Build one trainer of ``kind`` ("remark" or "plain") on ``world`` and train ``args["max_steps"]`` steps.

    Returns the per-step records (seconds and token counts; derived ``loss_s``, ``override_s``, ``rest_s``
    added) and the trainer's log history.
    """
    cuda = not args.get("use_cpu", False)
    clock = Clock(cuda=cuda)
    tok = AutoTokenizer.from_pretrained(world.model_dir)
    train = training_dataset(world.ds, split="train", sampling="uniform", k=k)
    callbacks = [StepClock(clock, deadline)]
    if kind == "remark":
        cfg = RemarkGRPOConfig(**args, **remark_args(k, match_mode), **(remark_extra or {}))
        trainer = RemarkTimed(
            model=str(world.model_dir),
            args=cfg,
            train_dataset=train,
            catalog=world.ds.catalog,
            processing_class=tok,
            callbacks=callbacks,
            clock=clock,
        )
    elif kind == "plain":
        cfg = GRPOConfig(**args)
        trainer = PlainTimed(
            model=str(world.model_dir),
            reward_funcs=[plain_reward],
            args=cfg,
            train_dataset=train,
            processing_class=tok,
            callbacks=callbacks,
        )
        trainer.clock = clock
    else:
        raise ValueError(f"unknown kind {kind!r}: one of {KINDS}")
    trainer.remove_callback(PrinterCallback)
    try:
        trainer.train()
        history = list(trainer.state.log_history)
    finally:
        pool = getattr(getattr(trainer, "rank_reward", None), "pool", None)
        if pool is not None:
            pool.close()
        del trainer
        gc.collect()
        if cuda:
            torch.cuda.empty_cache()
    return [derive(s) for s in clock.steps], history


def derive(step: dict[str, float]) -> dict[str, float]:
    """Add ``loss_s``, ``override_s`` and ``rest_s`` to one step record (``sync_s`` is 0 without vLLM)."""
    out = dict(step)
    for key in ("score_s", "score_wait_s", "score_work_s", "sync_s"):
        out.setdefault(key, 0.0)
    out["loss_s"] = out.get("train_step_s", 0.0) - out.get("prepare_s", 0.0)
    out["override_s"] = out.get("gas_s", 0.0) - out.get("trl_gas_s", 0.0)
    parts = ("gen_s", "reward_s", "override_s", "loss_s")
    out["rest_s"] = out["step_s"] - sum(out.get(p, 0.0) for p in parts)
    return out


def median_of(records: list[dict[str, float]], key: str) -> float:
    values = [r.get(key, 0.0) for r in records]
    return statistics.median(values) if values else float("nan")


# ----------------------------------------------------------------------------------------------------
# The CPU benchmark
# ----------------------------------------------------------------------------------------------------
