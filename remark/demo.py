"""``remark demo``: ReMaRk vs Rank-GRPO end to end on a laptop, in minutes, with nothing to download.

The pipeline (every stage written under ``--out``; files atomically):

1. data: the embedded synthetic multi-responder world (``data_prep.synthetic``: 600 requests, 48 items,
   Reddit-like responder counts, most union items named by one responder), or ProtoQA's scraped dev file
   (``--data protoqa``: a seeded 128 questions whose respondents are split into train / valid / test
   *respondents* of the same questions, as docs/experiments.md does), pooled into ``data/``
   (``remark prep``'s layout);
2. a byte-level BPE tokenizer and a ~1M-parameter Qwen2 model built locally (``remark.tiny``), trained
   on the catalog and the prompts, so nothing comes from the hub;
3. an SFT warm-up (TRL ``SFTTrainer`` on ``remark.sft.sft_examples``; union targets for the synthetic
   world, noisy ones for ProtoQA) that teaches the list format and the catalog;
4. ReMaRk (``reward_scheme: union``, ``sampling: uniform``) and Rank-GRPO (``reward_scheme: responder``,
   ``sampling: per_responder``) from the same warm-up, for the same number of steps and the same number
   of prompts per step (everything else equal too), validated every few steps on greedy *and* sampled
   lists (``remark.callbacks.ValidationCallback`` plus sampled lists: ``eval_log.jsonl``, per-request
   values, ``best/``). The two runs go side by side as two processes with one torch thread each
   (``--sequential``: one after the other);
5. the SFT start and each method's best checkpoint evaluated on the test split (``eval.run``): greedy
   lists *and* sampled lists, with bootstrap CIs over requests; paired differences
   (``eval.bootstrap.compare``); steps-to-reach and validation curves with CI bands (``eval.steps``);
6. ``report.md``, ``curves.png`` (sampled validation), ``curves_greedy.png`` and ``summary.json``.

Departures from the paper's setting, all for CPU scale, and said in the report:

- a ~1M-parameter model instead of a 0.5-35B LLM; K = 5 (synthetic) or 10 (ProtoQA) instead of 20;
  G = 8 with 4 prompts per step instead of 48; a 64-token completion cap; lr 2e-4 (synthetic) or 1e-4
  (ProtoQA, docs/experiments.md) constant instead of 1e-6; no KL (beta 0); 100 steps instead of 2000.
- Validation and best-checkpoint selection on per-responder recall@K of *sampled* lists (4 per request,
  T = 1, the same sampling seed at every validation): a tiny model's greedy lists repeat items
  (docs/experiments.md, pitfall 1), so greedy recall mostly measures its top items and RL first lowers it
  by sharpening them. Greedy values are logged, plotted and tested beside them. Per-responder recall is
  Rank-GRPO's headline metric, so the selection does not favour ReMaRk's own (union) reward.
- ProtoQA items are cluster names (year-less); held-out respondents of the *same* questions are the
  evaluation targets (the questions themselves are seen in training, as in docs/experiments.md).
- One seed and one warm-up: CIs resample requests, not seeds (``experiments/protoqa_cpu`` runs seeds).
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import platform
import subprocess
import sys
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np

from catalog.errors import InputError
from catalog.io import atomic_write

DataName = Literal["synthetic", "protoqa"]
DATA_CHOICES: tuple[str, ...] = ("synthetic", "protoqa")

#: The two methods, in report order: name -> (label, reward_scheme, sampling).
METHODS: dict[str, tuple[str, str, str]] = {
    "remark": ("ReMaRk", "union", "uniform"),
    "rank_grpo": ("Rank-GRPO", "responder", "per_responder"),
}
PROTOQA_FILE = "dev.scraped.jsonl"


@dataclass(frozen=True)
class DemoSettings:
    """Everything the demo does; :func:`default_settings` fills it for a data source and mode."""

    data: str = "synthetic"
    """``synthetic`` (embedded) or ``protoqa`` (needs ``data_dir``)."""
    data_dir: str | None = None
    """ProtoQA: the scraped dev file, a folder holding it, or a dataset prepared by ``remark prep``."""
    seed: int = 0
    """One seed for the world, the model init, SFT and both RL runs."""
    fast: bool = False
    """Tiny everything (tests): seconds, not minutes; numbers are meaningless."""
    # --- data ---
    n_requests: int = 600
    """Synthetic requests, split by ``split_fractions``."""
    n_items: int = 48
    """Synthetic catalog size (8 genres)."""
    split_fractions: tuple[float, float, float] = (0.7, 0.15, 0.15)
    """Synthetic train / valid / test shares (90 valid and 90 test requests of 600: tighter CIs)."""
    world: dict[str, Any] = field(default_factory=dict)
    """Other ``generate_world`` arguments."""
    n_questions: int = 128
    """ProtoQA: questions drawn (seeded) among those with at least ``min_clusters`` answer clusters."""
    min_clusters: int = 5
    """ProtoQA: the fewest answer clusters a question needs."""
    respondent_split: tuple[float, float, float] = (0.5, 0.25, 0.25)
    """ProtoQA: share of each question's respondents for train / valid / test."""
    # --- model ---
    vocab_size: int = 1024
    hidden_size: int = 128
    intermediate_size: int = 512
    num_hidden_layers: int = 2
    # --- SFT warm-up ---
    sft_targets: str = "union"
    """``union``, ``responder`` or ``noisy`` (remark.sft)."""
    sft_epochs: float = 12.0
    sft_lr: float = 3e-3
    sft_scheduler: str = "cosine"
    sft_batch: int = 16
    sft_copies: int = 2
    sft_hit_prob: float = 0.3
    # --- RL (both methods) ---
    k: int = 5
    """K: list length asked for and rewarded."""
    steps: int = 100
    """Optimizer steps per method."""
    prompts_per_step: int = 4
    num_generations: int = 8
    learning_rate: float = 2e-4
    max_completion_length: int = 64
    validation_every: int = 10
    validation_samples: int = 4
    """Sampled lists per validation request beside the greedy one (0 = greedy validation only)."""
    parallel: bool = True
    """Run the two methods side by side (two processes, one torch thread each)."""
    threads: int | None = None
    """Torch threads of the in-process stages (SFT, evaluation) and of sequential RL runs; None: all cores
    (at most 2) when the 1-minute load average leaves them idle, else 1 (measured on 2 shared cores: 2
    threads made SFT 1.5x faster at load 1.3 and a training step 6x slower at load 8). RL runs side by
    side always use one thread each."""
    # --- evaluation ---
    eval_samples: int = 4
    """Sampled lists per test request (temperature 1) beside the greedy one."""
    ci_resamples: int = 9999
    """Bootstrap resamples of every CI."""

    def spec_dict(self) -> dict[str, int]:
        return {
            "vocab_size": self.vocab_size,
            "hidden_size": self.hidden_size,
            "intermediate_size": self.intermediate_size,
            "num_hidden_layers": self.num_hidden_layers,
        }

    @property
    def greedy_metric(self) -> str:
        return f"eval/recall@{self.k}/per_responder"

    @property
    def metric(self) -> str:
        """Validation metric and best-checkpoint criterion: per-responder recall@K of sampled lists."""
        return sampled_key(self.greedy_metric) if self.validation_samples else self.greedy_metric


def default_settings(
    data: str = "synthetic",
    *,
    fast: bool = False,
    steps: int | None = None,
    seed: int = 0,
    data_dir: str | Path | None = None,
    parallel: bool | None = None,
) -> DemoSettings:
    """The demo's defaults for ``data`` (``fast``: the test-sized run); ``steps`` etc. override them."""
    if data not in DATA_CHOICES:
        raise InputError(f"unknown data {data!r}", field="--data", hint=f"one of {', '.join(DATA_CHOICES)}")
    s = DemoSettings(data=data, seed=seed, data_dir=str(data_dir) if data_dir is not None else None)
    if data == "protoqa":
        s = dataclasses.replace(
            s,
            k=10,
            vocab_size=4096,
            sft_targets="noisy",
            sft_hit_prob=0.3,
            sft_epochs=8.0,
            sft_lr=1e-3,
            sft_scheduler="constant",
            sft_batch=32,
            sft_copies=16,
            learning_rate=1e-4,
            steps=80,
        )
    if fast:
        s = dataclasses.replace(
            s,
            fast=True,
            n_requests=60,
            n_items=24,
            n_questions=12,
            vocab_size=512 if data == "synthetic" else 1024,
            hidden_size=32,
            intermediate_size=64,
            num_hidden_layers=1,
            sft_epochs=1.0,
            sft_copies=1,
            steps=2,
            prompts_per_step=2,
            num_generations=2,
            validation_every=1,
            eval_samples=2,
            ci_resamples=199,
        )
    if steps is not None:
        if steps < 1:
            raise InputError(f"--steps must be >= 1, got {steps}", field="--steps")
        s = dataclasses.replace(s, steps=steps, validation_every=max(1, min(s.validation_every, steps)))
    if parallel is not None:
        s = dataclasses.replace(s, parallel=parallel)
    if data == "protoqa" and not s.data_dir:
        raise InputError(
            "--data protoqa needs --data-dir",
            field="--data-dir",
            hint="pass ProtoQA's dev.scraped.jsonl (or the folder holding it, e.g. protoqa-data/data/dev), "
            "or a dataset written by `remark prep protoqa --items clusters`",
        )
    return s


# -- data ----------------------------------------------------------------------------------------------
def prepare_synthetic(out_dir: Path, s: DemoSettings):
    """The embedded world, pooled into ``out_dir`` (``remark prep synthetic``'s layout); ``(dataset, dir)``."""
    from data_prep.synthetic import build_dataset

    world = {"split_fractions": tuple(s.split_fractions), **s.world}
    ds = build_dataset(out_dir, n_requests=s.n_requests, n_items=s.n_items, seed=s.seed, **world)
    return ds, out_dir


def find_protoqa(path: str | Path) -> Path:
    """The ProtoQA input: a prepared dataset dir, the scraped dev file, or a folder holding that file."""
    p = Path(path)
    if not p.exists():
        raise InputError(
            "ProtoQA path not found",
            path=p,
            hint="download iesl/protoqa-data and pass data/dev/dev.scraped.jsonl (or its folder)",
        )
    if p.is_file():
        return p
    if (p / "requests.parquet").is_file():
        return p
    for candidate in (p / PROTOQA_FILE, p / "dev" / PROTOQA_FILE, p / "data" / "dev" / PROTOQA_FILE):
        if candidate.is_file():
            return candidate
    raise InputError(
        f"no {PROTOQA_FILE} or requests.parquet in this folder",
        path=p,
        hint="pass the scraped dev file itself, its folder, or a `remark prep protoqa --items clusters` output",
    )


def prepare_protoqa(source: str | Path, out_dir: Path, s: DemoSettings):
    """ProtoQA scraped dev -> a pooled dataset whose splits are respondents of the same questions.

    ``n_questions`` questions with at least ``min_clusters`` answer clusters are drawn (seeded) and pooled;
    each question's respondents are split by ``data_prep.holdout.holdout_responders`` (seeded) into a train
    half and a held-out half, and the held-out half again into valid and test halves
    (``respondent_split``, default 50/25/25): requests ``<qid>`` (train), ``<qid>#valid`` and ``<qid>#test``
    with the same prompt. A folder with ``requests.parquet`` (``remark prep``) is used as it is, with its
    own splits. Returns ``(dataset, its directory)``.
    """
    import polars as pl

    from catalog.match import Matcher
    from data_prep.dataset import load_dataset, write_dataset
    from data_prep.holdout import holdout_responders
    from data_prep.pool import pool_threads
    from data_prep.readers import read_protoqa
    from data_prep.schema import Threads

    path = find_protoqa(source)
    if path.is_dir():
        ds = load_dataset(path)
        missing = {"train", "valid", "test"} - set(ds.requests["split"].unique().to_list())
        if missing:
            raise InputError(
                f"the prepared dataset has no {sorted(missing)} split",
                path=path,
                hint="prepare it with train/valid/test fractions, or pass the scraped dev file",
            )
        return ds, path
    threads = read_protoqa(path, items="clusters")
    frame = threads.frame
    sizes = frame.group_by("request_id").agg(pl.col("title").n_unique().alias("n")).sort("request_id")
    eligible = sizes.filter(pl.col("n") >= s.min_clusters)["request_id"].to_list()
    if len(eligible) < 3:
        raise InputError(
            f"only {len(eligible)} questions with >= {s.min_clusters} answer clusters",
            path=path,
            hint="is this ProtoQA's scraped dev file?",
        )
    rng = np.random.default_rng(s.seed)
    chosen = sorted(rng.choice(eligible, size=min(s.n_questions, len(eligible)), replace=False).tolist())
    frame = frame.filter(pl.col("request_id").is_in(chosen))
    catalog = threads.catalog
    pooled = pool_threads(Threads(frame, catalog, dict(threads.meta)), Matcher(catalog, mode="normalized"))
    _, valid_f, test_f = s.respondent_split
    first = holdout_responders(pooled, fraction=valid_f + test_f, seed=s.seed)
    second = holdout_responders(first.heldout, fraction=test_f / (valid_f + test_f), seed=s.seed + 1)
    keep = set(second.train["request_id"].to_list())
    parts = [
        first.train.filter(pl.col("request_id").is_in(keep)).with_columns(split=pl.lit("train")),
        second.train.with_columns(split=pl.lit("valid"), request_id=pl.col("request_id") + "#valid"),
        second.heldout.with_columns(split=pl.lit("test"), request_id=pl.col("request_id") + "#test"),
    ]
    meta = {k: threads.meta[k] for k in ("source", "domain", "has_years", "instruction_included")}
    meta["demo"] = {
        "input": str(path),
        "items": "clusters",
        "questions": len(keep),
        "min_clusters": s.min_clusters,
        "respondent_split": list(s.respondent_split),
        "seed": s.seed,
    }
    return write_dataset(out_dir, pl.concat(parts), catalog, meta), out_dir


# -- model and warm-up ---------------------------------------------------------------------------------
def tokenizer_corpus(ds, k: int, *, seed: int = 0, repeats: int = 10) -> list[str]:
    """Text for the tokenizer: catalog lines (shuffled, ``repeats`` times), prompts, the instruction."""
    from remark.data import prompt_messages

    shown = [ds.catalog.display(x) for x in ds.catalog.df["item_id"].to_list()]
    rng = np.random.default_rng(seed)
    corpus = []
    for _ in range(repeats):
        order = rng.permutation(len(shown))
        corpus += ["\n".join(shown[i] for i in order[j : j + 50]) for j in range(0, len(order), 50)]
    prompts = ds.requests.unique("request_id")["prompt"].to_list()
    corpus += [m["content"] for p in prompts for m in prompt_messages(p, ds.meta, k)]
    return corpus


def build_model(ds, out_dir: Path, s: DemoSettings) -> Path:
    """Tokenizer + random-init tiny Qwen2 under ``out_dir`` (``remark.tiny``)."""
    from remark.tiny import TinySpec, build_tiny_model

    return build_tiny_model(
        out_dir, tokenizer_corpus(ds, s.k, seed=s.seed), spec=TinySpec(**s.spec_dict()), seed=s.seed
    )


def warm_up(ds, base_dir: Path, out_dir: Path, s: DemoSettings, on_step: Callable[[int, int], None]) -> dict:
    """SFT warm-up (TRL ``SFTTrainer`` on ``remark.sft.sft_examples``); returns loss and timing."""
    from datasets import Dataset
    from transformers import AutoTokenizer, TrainerCallback
    from transformers.trainer_callback import PrinterCallback
    from trl import SFTConfig, SFTTrainer

    from remark.checkpoint import SafeCheckpointMixin
    from remark.sft import SFTSettings, sft_examples

    settings = SFTSettings(
        targets=s.sft_targets, k=s.k, hit_prob=s.sft_hit_prob, copies=s.sft_copies, seed=s.seed
    )
    examples = sft_examples(ds, settings, split="train")

    class Progress(TrainerCallback):
        def on_step_end(self, args, state, control, **kwargs):
            on_step(state.global_step, state.max_steps)

    cfg = SFTConfig(
        output_dir=str(out_dir),
        learning_rate=s.sft_lr,
        lr_scheduler_type=s.sft_scheduler,
        warmup_steps=10,
        num_train_epochs=s.sft_epochs,
        per_device_train_batch_size=s.sft_batch,
        logging_steps=1,
        save_strategy="no",
        report_to="none",
        completion_only_loss=True,
        seed=s.seed,
        data_seed=s.seed,
        use_cpu=True,
        bf16=False,
        disable_tqdm=True,
    )

    class DemoSFTTrainer(SafeCheckpointMixin, SFTTrainer):
        """No pickle: training arguments and any checkpoint state as JSON / safetensors."""

    tokenizer = AutoTokenizer.from_pretrained(base_dir)
    trainer = DemoSFTTrainer(
        model=str(base_dir),
        args=cfg,
        train_dataset=Dataset.from_list(examples),
        processing_class=tokenizer,
        callbacks=[Progress()],
    )
    trainer.remove_callback(PrinterCallback)
    t0 = time.monotonic()
    trainer.train()
    trainer.save_model(str(out_dir))
    tokenizer.save_pretrained(str(out_dir))
    losses = [h["loss"] for h in trainer.state.log_history if "loss" in h]
    return {
        "examples": len(examples),
        "steps": trainer.state.global_step,
        "first_loss": losses[0] if losses else None,
        "final_loss": losses[-1] if losses else None,
        "wall_s": time.monotonic() - t0,
    }


# -- RL runs -------------------------------------------------------------------------------------------
def rl_fields(method: str, s: DemoSettings, data_dir: Path, model_dir: Path, run_dir: Path) -> dict[str, Any]:
    """``RemarkGRPOConfig`` fields of one method; the two differ only in reward scheme and sampling."""
    _, scheme, sampling = METHODS[method]
    return {
        "output_dir": str(run_dir),
        "data_dir": str(data_dir),
        "model_name_or_path": str(model_dir),
        "reward_scheme": scheme,
        "sampling": sampling,
        "advantage_scaling": "group",
        "scale_rewards": "group",
        "num_ranks": s.k,
        "match_mode": "fuzzy",
        "loss_type": "bnpo",
        "num_generations": s.num_generations,
        "per_device_train_batch_size": s.prompts_per_step * s.num_generations,
        "learning_rate": s.learning_rate,
        "lr_scheduler_type": "constant",
        "warmup_steps": 0,
        "beta": 0.0,
        "temperature": 1.0,
        "max_completion_length": s.max_completion_length,
        "max_steps": s.steps,
        "use_cpu": True,
        "bf16": False,
        "save_strategy": "no",
        "validation_steps": s.validation_every,
        "validation_metric": s.metric,
        "validation_batch_size": 64,
        "logging_steps": 1,
        "report_to": "none",
        "disable_tqdm": True,
        "seed": s.seed,
        "data_seed": s.seed,
    }


def sampled_key(key: str) -> str:
    """``eval/recall@5/union`` -> ``eval/sampled_recall@5/union`` (the same metric on sampled lists)."""
    return key.replace("eval/", "eval/sampled_", 1)


def _sampled_validation_class():
    from remark.callbacks import ValidationCallback

    class SampledValidation(ValidationCallback):
        """The trainer's greedy validation plus ``num_samples`` sampled lists per request (T = 1).

        Pitfall 1 of docs/experiments.md: a tiny model's greedy lists repeat items, so greedy recall
        mostly measures its top item. The sampled lists are scored by the same ``eval.views.score_lists``
        and logged beside the greedy values as ``eval/sampled_<metric>@<k>/<view>`` (the eval-log contract
        allows any metric name), so ``eval.steps`` reads their curves and the best checkpoint can be
        chosen on them. The sampling seed is the same at every validation (common random numbers).
        """

        def __init__(self, *args: Any, num_samples: int, seed: int, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self.num_samples = num_samples
            self.sample_gen = dataclasses.replace(
                self.gen, num_samples=max(1, num_samples), temperature=1.0, seed=seed
            )

        def measure(self, model: Any, tokenizer: Any):
            from eval.generate import render_prompts, transformers_runner
            from eval.run import parse_and_ground
            from eval.views import VIEWS, score_lists, weighted_means

            values, per_request = super().measure(model, tokenizer)
            n = self.num_samples
            if n < 1:
                return values, per_request
            texts = render_prompts(tokenizer, self.requests["prompt"].to_list(), self.meta, self.k)
            completions = transformers_runner(model, tokenizer, self.sample_gen)(texts, n, True)
            _, ids = parse_and_ground([c for cs in completions for c in cs], self.matcher)
            ks = tuple(sorted({k for k in (5, 10, 20) if k <= self.k} | {self.k}))
            scored = score_lists(
                self.requests,
                ids,
                list_request=np.repeat(np.arange(self.requests.height), n),
                ks=ks,
                metrics=("recall", "ndcg"),
                views=VIEWS,
            )
            rename = {key: sampled_key(key) for key in scored.keys}
            extra = scored.per_request.select("request_id", *scored.keys).rename(rename)
            per_request = per_request.join(extra, on="request_id", how="left", maintain_order="left")
            means = weighted_means(scored.per_request, scored.keys)
            values |= {rename[k]: v for k, v in means.items() if v == v}
            return values, per_request

    return SampledValidation


def rl_worker(config_path: str | Path) -> int:
    """Train one method from a JSON file of ``RemarkGRPOConfig`` fields (run in its own process).

    The same pieces as ``remark train`` (``remark.train.run_training``: ``training_dataset``,
    ``RemarkGRPOTrainer``, the validation callback), assembled here because ``run_training`` takes no extra
    callbacks and the demo needs two: sampled validation (``SampledValidation``) and a progress file
    (``progress.jsonl``, one line per step) that the parent turns into a progress bar. Also writes the
    trainer's log history (``log_history.json``) for the report, ``final/`` and ``train_summary.json``.
    """
    fields_ = json.loads(Path(config_path).read_text())
    threads = int(fields_.pop("_threads", 1))
    num_samples = int(fields_.pop("_validation_samples", 0))
    import torch

    torch.set_num_threads(threads)
    from transformers import AutoTokenizer, TrainerCallback

    from data_prep.dataset import load_dataset
    from remark.config import RemarkGRPOConfig
    from remark.data import training_dataset
    from remark.trainer import RemarkGRPOTrainer

    SampledValidation = _sampled_validation_class()
    cfg = RemarkGRPOConfig(**fields_)
    out = Path(cfg.output_dir)
    out.mkdir(parents=True, exist_ok=True)
    progress = out / "progress.jsonl"
    progress.write_text("")
    ds = load_dataset(cfg.data_dir)
    train = training_dataset(ds, split=cfg.train_split, sampling=cfg.sampling, k=cfg.num_ranks)
    tokenizer = AutoTokenizer.from_pretrained(cfg.model_name_or_path)
    t0 = time.monotonic()

    class Progress(TrainerCallback):
        def on_log(self, args, state, control, logs=None, **kwargs):
            if logs and "reward" in logs:
                rec = {"step": state.global_step, "max": state.max_steps, "wall_s": time.monotonic() - t0}
                rec |= {k: logs[k] for k in ("reward", "train/zero_signal_frac") if k in logs}
                with progress.open("a") as fh:
                    fh.write(json.dumps(rec) + "\n")

    validation = SampledValidation(
        ds,
        num_samples=num_samples,
        seed=int(cfg.seed),
        split=cfg.valid_split,
        k=cfg.num_ranks,
        every=cfg.validation_steps,
        metric=cfg.validation_metric,
        max_new_tokens=cfg.max_completion_length or 64,
        match_mode=cfg.match_mode,
        max_requests=cfg.validation_max_requests,
        batch_size=cfg.validation_batch_size,
        completions_per_step=cfg.per_device_train_batch_size,
    )
    trainer = RemarkGRPOTrainer(
        model=cfg.model_name_or_path,
        args=cfg,
        train_dataset=train,
        catalog=ds.catalog,
        processing_class=tokenizer,
        callbacks=[validation, Progress()],
    )
    trainer.train()
    trainer.save_model(str(out / "final"))
    tokenizer.save_pretrained(str(out / "final"))
    with atomic_write(out / "log_history.json") as tmp:
        tmp.write_text(json.dumps(trainer.state.log_history, indent=1) + "\n")
    with atomic_write(out / "train_summary.json") as tmp:
        tmp.write_text(
            json.dumps(
                {
                    "global_step": trainer.state.global_step,
                    "wall_s": time.monotonic() - t0,
                    "best": validation.best,
                },
                indent=2,
            )
            + "\n"
        )
    return 0


def _start_worker(
    fields_: dict[str, Any], run_dir: Path, threads: int, validation_samples: int
) -> subprocess.Popen:
    run_dir.mkdir(parents=True, exist_ok=True)
    cfg_path = run_dir / "demo_config.json"
    extra = {"_threads": threads, "_validation_samples": validation_samples}
    with atomic_write(cfg_path) as tmp:
        tmp.write_text(json.dumps({**fields_, **extra}, indent=2) + "\n")
    env = dict(os.environ)
    env |= {
        "OMP_NUM_THREADS": str(threads),
        "MKL_NUM_THREADS": str(threads),
        "TOKENIZERS_PARALLELISM": "false",
        "HF_HUB_OFFLINE": "1",
        "PYTHONUNBUFFERED": "1",
    }
    code = "import sys; from remark.demo import rl_worker; sys.exit(rl_worker(sys.argv[1]))"
    with (run_dir / "worker.log").open("w") as log:  # the child keeps its own copy of the descriptor
        return subprocess.Popen(
            [sys.executable, "-c", code, str(cfg_path)], stdout=log, stderr=subprocess.STDOUT, env=env
        )


def _last_progress(run_dir: Path) -> dict[str, Any] | None:
    path = run_dir / "progress.jsonl"
    if not path.is_file():
        return None
    lines = [x for x in path.read_text().splitlines() if x.strip()]
    try:
        return json.loads(lines[-1]) if lines else None
    except json.JSONDecodeError:  # a line being written
        return json.loads(lines[-2]) if len(lines) > 1 else None


def auto_threads(max_threads: int = 2) -> int:
    """All cores up to ``max_threads`` when the 1-minute load leaves them idle, else 1 (see ``threads``)."""
    cpus = os.cpu_count() or 1
    n = min(cpus, max_threads)
    return n if n > 1 and os.getloadavg()[0] < cpus - 0.5 else 1


def run_methods(
    s: DemoSettings,
    data_dir: Path,
    model_dir: Path,
    out: Path,
    on_progress: Callable[[str, dict[str, Any]], None],
    *,
    threads: int = 1,
) -> dict[str, dict[str, Any]]:
    """Both RL runs (side by side with one thread each, or one after the other with ``threads``);
    returns each run's wall time and summary."""
    batches = [list(METHODS)] if s.parallel else [[m] for m in METHODS]
    timing: dict[str, dict[str, Any]] = {}
    for batch in batches:
        procs = {}
        for m in batch:
            run_dir = out / m
            fields_ = rl_fields(m, s, data_dir, model_dir, run_dir)
            worker = _start_worker(fields_, run_dir, 1 if s.parallel else threads, s.validation_samples)
            procs[m] = (worker, time.monotonic())
        pending = dict(procs)
        while pending:
            time.sleep(0.5)
            for m in list(pending):
                proc, t0 = pending[m]
                rec = _last_progress(out / m)
                if rec is not None:
                    on_progress(m, rec)
                if proc.poll() is not None:
                    del pending[m]
                    timing[m] = {"wall_s": time.monotonic() - t0, "returncode": proc.returncode}
                    if proc.returncode != 0:
                        for other, (p, _) in pending.items():
                            p.terminate()
                            p.wait()
                            timing[other] = {"returncode": "terminated"}
                        tail = (out / m / "worker.log").read_text()[-3000:]
                        raise RuntimeError(
                            f"{METHODS[m][0]} training failed (exit {proc.returncode}):\n{tail}"
                        )
    for m in METHODS:
        timing[m]["summary"] = json.loads((out / m / "train_summary.json").read_text())
    return timing


# -- evaluation and report -----------------------------------------------------------------------------
def _ks(k: int) -> tuple[int, ...]:
    return tuple(sorted({min(5, k), k}))


def evaluate_models(
    s: DemoSettings, data_dir: Path, models: dict[str, Path], out: Path, on_done: Callable[[str], None]
) -> dict[str, dict[str, Any]]:
    """``eval.run.evaluate_model`` on the test split for each model: greedy + sampled lists, CIs."""
    from eval.bootstrap import BootstrapConfig
    from eval.generate import GenerationConfig
    from eval.run import evaluate_model

    gen = GenerationConfig(
        k=s.k,
        max_new_tokens=s.max_completion_length,
        batch_size=64,
        num_samples=s.eval_samples,
        temperature=1.0,
        seed=s.seed,
        engine="transformers",
    )
    ci = BootstrapConfig(n_resamples=s.ci_resamples, seed=s.seed)
    results = {}
    for name, model_dir in models.items():
        results[name] = evaluate_model(
            model_dir,
            data_dir,
            out / name,
            split="test",
            generation=gen,
            match="fuzzy",
            ks=_ks(s.k),
            metrics=("recall", "ndcg"),
            config=ci,
        )
        on_done(name)
    return results


def _by_view(flat: dict[str, dict[str, float]], n_requests: int) -> dict[str, Any]:
    """``{"eval/recall@5/union": cell}`` -> ``{"union": {"recall@5": cell}, "n_requests": n}``."""
    from eval.views import split_key

    out: dict[str, Any] = {"n_requests": n_requests}
    for key, cell in flat.items():
        metric, view = split_key(key)
        out.setdefault(view, {})[metric] = cell
    return out


def paired(eval_dir: Path, a: str, b: str, s: DemoSettings) -> dict[str, Any]:
    """Paired differences ``a - b`` on the same test requests, greedy and sampled (``eval.bootstrap.compare``)."""
    import polars as pl

    from eval.bootstrap import BootstrapConfig, compare

    ci = BootstrapConfig(n_resamples=s.ci_resamples, seed=s.seed)
    out = {}
    for lists, name in (("greedy", "per_request.parquet"), ("sampled", "per_request_sampled.parquet")):
        pa, pb = eval_dir / a / name, eval_dir / b / name
        if not (pa.is_file() and pb.is_file()):
            continue
        fa, fb = pl.read_parquet(pa), pl.read_parquet(pb)
        keys = [c for c in fa.columns if c.startswith("eval/")]
        out[lists] = _by_view(compare(fa, fb, keys, ci), fa.height)
    return out


def _train_diagnostics(run_dir: Path) -> dict[str, Any]:
    hist = json.loads((run_dir / "log_history.json").read_text())
    steps = [h for h in hist if "reward" in h]

    def mean(key: str) -> float | None:
        vals = [h[key] for h in steps if key in h and h[key] == h[key]]
        return float(np.mean(vals)) if vals else None

    head, tail = steps[:10], steps[-10:]
    return {
        "steps": len(steps),
        "reward_mean": mean("reward"),
        "reward_first": float(np.mean([h["reward"] for h in head])) if head else None,
        "reward_last": float(np.mean([h["reward"] for h in tail])) if tail else None,
        "zero_signal_frac_mean": mean("train/zero_signal_frac"),
    }


def _num(x: Any) -> float:
    """A summary number (None stands for NaN/inf in the JSON) as a float."""
    return float("nan") if x is None else float(x)


def _cell(cell: dict[str, Any] | None, scale: float = 1.0, digits: int = 3) -> str:
    if not cell or not math.isfinite(_num(cell.get("mean"))):
        return "n/a"
    m, lo, hi = (_num(cell[k]) * scale for k in ("mean", "ci_low", "ci_high"))
    ci = f" [{lo:.{digits}f}, {hi:.{digits}f}]" if math.isfinite(lo) and math.isfinite(hi) else ""
    return f"{m:.{digits}f}{ci}"


def _reach_sentence(a: str, b: str, reach: dict[str, Any], start: float) -> str:
    """One steps-to-reach result as a sentence; ``start`` is the shared step-0 value of both runs."""
    target = _num(reach["baseline_value"])
    what = f"{b}'s step-{reach['baseline_step']} value ({target:.3f})"
    if not reach.get("reached"):
        return f"{a} did not reach {what} within the run."
    f, lo, hi = _num(reach["fraction"]), _num(reach["ci_low"]), _num(reach["ci_high"])
    hi_s = "never, in some resamples" if not math.isfinite(hi) else f"{hi:.0%}"
    ci = f" (95% CI [{lo:.0%}, {hi_s}])" if math.isfinite(lo) else ""
    text = f"{a} reached {what} in {f:.0%} of the steps (step {_num(reach['step']):.1f}){ci}."
    if math.isfinite(start) and target <= start:
        text += f" The target is not above the shared start ({start:.3f}), so this says nothing about speed."
    return text


def _headline(summary: dict[str, Any]) -> list[str]:
    """The result in a few sentences, from the primary (first) validation metric and the test split."""
    if not summary["steps_to_reach"]:
        return []
    lists, reach = next(iter(summary["steps_to_reach"].items()))
    curves = summary["curves"][lists]
    k = summary["settings"]["k"]
    a, b = curves["remark"], curves["rank_grpo"]
    r1 = reach["remark_reaches_rank_grpo"]
    text = (
        f"**In short.** Validation per-responder recall@{k} of {lists} lists went {_num(a['mean'][0]):.3f} -> "
        f"{_num(a['mean'][-1]):.3f} with ReMaRk and {_num(b['mean'][0]):.3f} -> {_num(b['mean'][-1]):.3f} with "
        f"Rank-GRPO in {summary['settings']['steps']} steps; "
        + _reach_sentence("ReMaRk", "Rank-GRPO", r1, _num(a["mean"][0]))
    )
    cell = summary["paired"]["remark_vs_rank_grpo"].get(lists, {}).get("per_responder", {}).get(f"recall@{k}")
    if cell:
        text += (
            f" On the test split, ReMaRk - Rank-GRPO = {_points(cell)} ({lists} lists, best checkpoints): "
            f"{_verdict(cell, 'ReMaRk', 'Rank-GRPO')}."
        )
    return [text, ""]


def report_markdown(summary: dict[str, Any]) -> str:
    """The demo's ``report.md`` from its ``summary.json``."""
    s = summary["settings"]
    k = s["k"]
    names = {"sft": "SFT start", **{m: METHODS[m][0] for m in METHODS}}
    ev = summary["test"]
    views = ("per_responder", "union", "single_mention")
    lines = [
        f"# remark demo: ReMaRk vs Rank-GRPO on {summary['data']['description']}",
        "",
        f"Finished in {summary['timing']['total_s'] / 60:.1f} min on {summary['machine']['cpus']} CPU cores "
        f"(load average {summary['machine']['load_start']:.1f} at the start, "
        f"{summary['machine']['load_end']:.1f} at the end); seed {s['seed']}"
        + (" -- **fast mode: tiny settings, numbers are meaningless**" if s["fast"] else "")
        + ".",
        "",
        *_headline(summary),
        "## What ran",
        "",
        f"- Data: {summary['data']['description']}; {summary['data']['stats_line']}.",
        f"- Model: Qwen2, {summary['model']['parameters'] / 1e6:.2f}M parameters (hidden {s['hidden_size']}, "
        f"{s['num_hidden_layers']} layers, FFN {s['intermediate_size']}), byte-level BPE tokenizer "
        f"({summary['model']['vocab']} tokens), both built locally.",
        f"- SFT warm-up: `{s['sft_targets']}` targets, {summary['sft']['steps']} steps, lr {s['sft_lr']:g} cosine, "
        f"batch {s['sft_batch']}; loss {summary['sft']['first_loss']:.3f} -> {summary['sft']['final_loss']:.3f}.",
        f"- RL, both methods from that warm-up: {s['steps']} steps, {s['prompts_per_step']} prompts x "
        f"G = {s['num_generations']} lists per step, K = {k}, lr {s['learning_rate']:g} constant, beta 0, "
        f"loss bnpo, per-rank group scaling, cap {s['max_completion_length']} tokens. "
        "ReMaRk: union rewards, requests sampled uniformly; Rank-GRPO: one responder's items, "
        "(request, responder) rows sampled.",
        f"- Validation every {s['validation_every']} steps on the valid split (greedy lists"
        + (
            f" and {s['validation_samples']} sampled lists per request, T = 1"
            if s["validation_samples"]
            else ""
        )
        + "); best checkpoint by "
        f"`{summary['metric']}`; final numbers on the test split ({ev['sft']['greedy']['n_requests']} "
        f"requests), greedy and {s['eval_samples']} sampled lists per request (T = 1); 95% BCa bootstrap CIs "
        f"over requests ({s['ci_resamples']} resamples).",
        "",
        f"## Test split: recall@{k}",
        "",
        "| model | best step | lists | " + " | ".join(views) + " | distinct items / list |",
        "|---|---|---|" + "---|" * len(views) + "---|",
    ]
    for name in ("sft", *METHODS):
        for lists in ("greedy", "sampled"):
            res = ev[name].get(lists)
            if res is None:
                continue
            step = "-" if name == "sft" else str(summary["runs"][name]["best_step"])
            cells = [_cell(res.get(v, {}).get(f"recall@{k}")) for v in views]
            lines.append(
                f"| {names[name]} | {step} | {lists} | "
                + " | ".join(cells)
                + f" | {res['lists']['distinct_mean']:.2f} |"
            )
    lines += ["", "## Paired differences on the same test requests (points of recall, x100)", ""]
    lines += ["| comparison | lists | " + " | ".join(views) + " |", "|---|---|" + "---|" * len(views)]
    for label, key in (
        ("ReMaRk - Rank-GRPO", "remark_vs_rank_grpo"),
        ("ReMaRk - SFT start", "remark_vs_sft"),
        ("Rank-GRPO - SFT start", "rank_grpo_vs_sft"),
    ):
        for lists, diff in summary["paired"][key].items():
            cells = [_cell(diff.get(v, {}).get(f"recall@{k}"), 100.0, 2) for v in views]
            lines.append(f"| {label} | {lists} | " + " | ".join(cells) + " |")
    lines += ["", "## Steps to reach and validation curves", ""]
    lines += [
        "Steps-to-reach: the first validation step (interpolated) at which one method reaches the other's "
        "value at its last step, as a fraction of the run; percentile bootstrap over validation requests "
        "(the whole curve and the target resampled together). An open upper end means some resamples never "
        "reach the target.",
    ]
    for lists, reach in summary["steps_to_reach"].items():
        r1, r2 = reach["remark_reaches_rank_grpo"], reach["rank_grpo_reaches_remark"]
        curves = summary["curves"][lists]
        first = curves["remark"]
        start = _num(first["mean"][0]) if first["x"] and first["x"][0] == 0 else float("nan")
        lines += [
            "",
            f"### {lists.capitalize()} lists: `{reach['metric']}` ({r1.get('n_requests')} validation requests)",
            "",
            "- " + _reach_sentence("ReMaRk", "Rank-GRPO", r1, start),
            "- " + _reach_sentence("Rank-GRPO", "ReMaRk", r2, start),
            "",
            f"![validation curves, {lists} lists]({summary['files']['plots'][lists]})",
            "",
            "| step | " + " | ".join(names[m] for m in METHODS) + " |",
            "|---|" + "---|" * len(METHODS),
        ]
        for st in sorted({int(x) for m in METHODS for x in curves[m]["x"]}):
            row = []
            for m in METHODS:
                c = curves[m]
                if st not in c["x"]:
                    row.append("-")
                    continue
                i = c["x"].index(st)
                row.append(_cell({"mean": c["mean"][i], "ci_low": c["low"][i], "ci_high": c["high"][i]}))
            lines.append(f"| {st} | " + " | ".join(row) + " |")
    lines += [
        "",
        "## Training signal",
        "",
        "| method | training reward, first 10 steps -> last 10 steps | zero-signal groups |",
        "|---|---|---|",
    ]
    for m in METHODS:
        d = summary["runs"][m]["train"]
        zs = d["zero_signal_frac_mean"]
        lines.append(
            f"| {names[m]} | {_num(d['reward_first']):.2f} -> {_num(d['reward_last']):.2f} | "
            + (f"{zs:.0%} |" if zs is not None else "n/a |")
        )
    lines += [
        "",
        "The training reward is each method's own (the sum over ranks of its rank rewards: union hits for "
        "ReMaRk, the drawn responder's hits for Rank-GRPO), so it is comparable within a row, not across rows. "
        "A zero-signal group is one where all G lists got the same rank rewards: it teaches nothing. "
        "Rank-GRPO scores a list against one responder's few items, so more of its groups are flat (design.md).",
        "",
        "## Timing",
        "",
        "| stage | seconds |",
        "|---|---|",
    ]
    for stage, sec in summary["timing"]["stages"].items():
        lines.append(f"| {stage} | {sec:.0f} |")
    mach = summary["machine"]
    rl = (
        "side by side (two processes, one torch thread each)"
        if s["parallel"]
        else f"one after the other ({mach['threads_per_rl_run']} torch threads)"
    )
    lines.append(
        f"\nSFT and evaluation with {mach['threads_in_process']} torch thread(s); RL runs {rl}. On 2 cores, "
        "two runs side by side took 0.7x the time of the two one after the other with 2 threads each (measured "
        "for 30 steps at load ~1.3: 35 s vs 49 s)."
    )
    lines += ["", "## Reading this honestly", "", *summary["notes"], ""]
    return "\n".join(lines)


# -- orchestration -------------------------------------------------------------------------------------
MARKER = "demo_settings.json"
STAGE_DIRS = ("data", "base_model", "sft_model", "eval", *METHODS)


def _prepare_out(out: Path) -> None:
    """Refuse a non-empty folder the demo did not write; clear the demo's own stage folders."""
    import shutil

    if out.exists() and not out.is_dir():
        raise InputError("--out is a file", path=out, hint="pass a folder")
    if out.is_dir() and any(out.iterdir()) and not (out / MARKER).is_file():
        raise InputError(
            "--out is a non-empty folder that no demo wrote",
            path=out,
            hint="pass an empty or new folder (the demo replaces its own earlier outputs only)",
        )
    for name in STAGE_DIRS:
        if (out / name).exists():
            shutil.rmtree(out / name)
    out.mkdir(parents=True, exist_ok=True)


def _n_params(model_dir: Path) -> int:
    from safetensors import safe_open

    total = 0
    for path in model_dir.glob("*.safetensors"):
        with safe_open(str(path), framework="pt") as f:
            for name in f.keys():  # noqa: SIM118 (safe_open is not a dict)
                total += int(np.prod(f.get_slice(name).get_shape()))
    return total


def _data_description(s: DemoSettings, ds) -> tuple[str, str]:
    from data_prep.stats import dataset_stats

    st = dataset_stats(ds.requests)
    splits = ", ".join(f"{k} {v['requests']}" for k, v in sorted(st["by_split"].items()))
    line = (
        f"{st['requests']} requests ({splits}), "
        f"{len(ds.catalog)} catalog items, {st['n_responders']['mean']:.2f} responders per request "
        f"(max {st['n_responders']['max']}), {st['union_size']['mean']:.1f} union items per request, "
        f"{st['single_mention_item_share']:.0%} of union items named by one responder"
    )
    if s.data == "synthetic":
        offbeat = ds.meta.get("generator", {}).get("offbeat_prob")
        line += (
            "; each request names a genre and one or two seed movies; a responder names movies of that genre "
            f"(by popularity) or, with probability {offbeat}, an offbeat favourite from anywhere"
        )
        return "the embedded synthetic multi-responder world", line
    return "ProtoQA scraped dev (held-out respondents of the same questions)", line


def _verdict(cell: dict[str, Any], a: str, b: str) -> str:
    lo, hi = _num(cell["ci_low"]), _num(cell["ci_high"])
    if not (math.isfinite(lo) and math.isfinite(hi)):
        return "no interval (too few requests)"
    if lo > 0:
        return f"{a} is ahead (the 95% CI excludes 0)"
    if hi < 0:
        return f"{b} is ahead (the 95% CI excludes 0)"
    return "not resolved (the 95% CI contains 0)"


def _points(cell: dict[str, Any]) -> str:
    m, lo, hi = (_num(cell[x]) * 100 for x in ("mean", "ci_low", "ci_high"))
    return f"{m:+.2f} points [{lo:+.2f}, {hi:+.2f}]"


def _notes(summary: dict[str, Any]) -> list[str]:
    """Plain sentences for the end of the report, computed from the numbers (nothing hand-written)."""
    s = summary["settings"]
    key = f"recall@{s['k']}"
    notes = []
    for pair, a, b in (
        ("remark_vs_rank_grpo", "ReMaRk", "Rank-GRPO"),
        ("remark_vs_sft", "ReMaRk", "the SFT start"),
        ("rank_grpo_vs_sft", "Rank-GRPO", "the SFT start"),
    ):
        for lists in ("sampled", "greedy"):
            cell = summary["paired"][pair].get(lists, {}).get("per_responder", {}).get(key)
            if cell:
                notes.append(
                    f"- Test per-responder {key}, {lists} lists: {a} - {b} = {_points(cell)}: "
                    f"{_verdict(cell, a, b)}."
                )
    lists = next(iter(summary["curves"]), None)
    for m in METHODS if lists else ():
        c = summary["curves"][lists][m]
        means = [_num(v) for v in c["mean"]]
        best = int(np.nanargmax(means)) if means and not all(math.isnan(v) for v in means) else None
        if best is not None and means[best] - means[-1] > max(0.005, 0.1 * (means[best] - means[0])):
            notes.append(
                f"- {METHODS[m][0]}'s {lists} validation peaked at step {c['x'][best]} ({means[best]:.3f}) and "
                f"ended at {means[-1]:.3f}: the tested checkpoint is the best one, not the last (design.md: "
                "a run is judged at its best validation checkpoint)."
            )
    zs = {m: summary["runs"][m]["train"]["zero_signal_frac_mean"] for m in METHODS}
    if all(v is not None for v in zs.values()):
        notes.append(
            f"- Flat groups (all {s['num_generations']} lists scored the same, no learning signal): "
            f"{zs['rank_grpo']:.0%} of Rank-GRPO's, {zs['remark']:.0%} of ReMaRk's: the responder draw at work."
        )
    notes += [
        "- One seed and one warm-up with a ~1M-parameter model: this shows the pipeline and the direction of "
        "the effect at toy scale, not the paper's numbers. The CIs resample requests, not seeds, so seed-to-seed "
        "spread is not in them (experiments/protoqa_cpu runs several seeds).",
        "- Greedy lists of a tiny model repeat items (docs/experiments.md, pitfall 1; see the distinct-items "
        "column), so RL can lower greedy recall while it raises sampled recall: the sampled rows are the "
        "primary ones, chosen before running.",
        "- Each method's best checkpoint is chosen on the validation split by Rank-GRPO's headline metric "
        "(per-responder recall) and tested on a separate split.",
    ]
    return notes


def run_demo(
    s: DemoSettings, out: str | Path, *, console: Any = None, progress_disable: bool = False
) -> dict[str, Any]:
    """Run the whole demo into ``out``; returns the summary (also ``out/summary.json``)."""
    import torch
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
    from transformers.utils import logging as hf_logging

    from eval.report import plot_curves
    from eval.steps import CURVE_CI, REACH_CI, steps_to_reach, validation_curve

    out = Path(out)
    console = console or Console()
    _prepare_out(out)
    with atomic_write(out / MARKER) as tmp:
        tmp.write_text(json.dumps(dataclasses.asdict(s), indent=2) + "\n")
    threads = s.threads or auto_threads()
    torch.set_num_threads(threads)
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    # transformers' own deprecation notice about a field TRL sets; nothing the user can act on
    warnings.filterwarnings("ignore", message=".*gradient_checkpointing.*", category=FutureWarning)
    import datasets

    datasets.disable_progress_bars()
    load_start = os.getloadavg()[0]
    t_start = time.monotonic()
    stages: dict[str, float] = {}

    columns = (
        TextColumn("{task.description:<22}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TextColumn("{task.fields[info]}"),
    )
    with Progress(*columns, console=console, disable=progress_disable) as bar:
        t = time.monotonic()
        task = bar.add_task("data", total=1, info="")
        if s.data == "synthetic":
            ds, data_dir = prepare_synthetic(out / "data", s)
        else:
            ds, data_dir = prepare_protoqa(s.data_dir, out / "data", s)
        bar.update(task, completed=1, info=f"{ds.requests.height} requests, {len(ds.catalog)} items")
        stages["data"] = time.monotonic() - t

        t = time.monotonic()
        task = bar.add_task("tokenizer + model", total=1, info="")
        base = build_model(ds, out / "base_model", s)
        n_params = _n_params(base)
        bar.update(task, completed=1, info=f"{n_params / 1e6:.2f}M parameters")
        stages["tokenizer + model"] = time.monotonic() - t

        t = time.monotonic()
        task = bar.add_task("SFT warm-up", total=None, info="")

        def sft_step(step: int, total: int) -> None:
            bar.update(task, completed=step, total=total)

        sft = warm_up(ds, base, out / "sft_model", s, sft_step)
        bar.update(task, info=f"loss {sft['first_loss']:.2f} -> {sft['final_loss']:.2f}")
        stages["SFT warm-up"] = time.monotonic() - t

        t = time.monotonic()
        tasks = {m: bar.add_task(METHODS[m][0], total=s.steps, info="") for m in METHODS}

        def rl_step(m: str, rec: dict[str, Any]) -> None:
            info = f"reward {rec.get('reward', float('nan')):.2f}"
            if "train/zero_signal_frac" in rec:
                info += f", flat groups {rec['train/zero_signal_frac']:.0%}"
            bar.update(tasks[m], completed=rec["step"], info=info)

        runs = run_methods(s, data_dir, out / "sft_model", out, rl_step, threads=threads)
        for m in METHODS:
            bar.update(tasks[m], completed=s.steps)
        stages["RL (both methods)"] = time.monotonic() - t

        t = time.monotonic()
        models = {"sft": out / "sft_model"}
        for m in METHODS:
            best = out / m / "best"
            if not (best / "config.json").is_file():
                raise RuntimeError(f"{METHODS[m][0]} wrote no best checkpoint under {best}")
            models[m] = best
        task = bar.add_task("test evaluation + CIs", total=len(models) + 1, info="")
        results = evaluate_models(s, data_dir, models, out / "eval", lambda name: bar.advance(task))
        pairs = {
            "remark_vs_rank_grpo": paired(out / "eval", "remark", "rank_grpo", s),
            "remark_vs_sft": paired(out / "eval", "remark", "sft", s),
            "rank_grpo_vs_sft": paired(out / "eval", "rank_grpo", "sft", s),
        }
        reach_cfg = dataclasses.replace(REACH_CI, n_resamples=s.ci_resamples, seed=s.seed)
        curve_cfg = dataclasses.replace(
            CURVE_CI, n_resamples=min(CURVE_CI.n_resamples, s.ci_resamples), seed=s.seed
        )
        reach: dict[str, Any] = {}
        curves: dict[str, dict[str, Any]] = {}
        keys = {"sampled": sampled_key(s.greedy_metric)} if s.validation_samples else {}
        keys["greedy"] = s.greedy_metric
        plots = {lists: "curves.png" if i == 0 else f"curves_{lists}.png" for i, lists in enumerate(keys)}
        for lists, key in keys.items():
            reach[lists] = {
                "metric": key,
                "remark_reaches_rank_grpo": steps_to_reach(
                    out / "remark", out / "rank_grpo", key=key, config=reach_cfg
                ),
                "rank_grpo_reaches_remark": steps_to_reach(
                    out / "rank_grpo", out / "remark", key=key, config=reach_cfg
                ),
            }
            curves[lists] = {
                m: validation_curve(out / m, key, name=METHODS[m][0], config=curve_cfg) for m in METHODS
            }
            plot_curves(
                list(curves[lists].values()),
                out / plots[lists],
                reach=reach[lists]["remark_reaches_rank_grpo"],
                title=f"validation {key.removeprefix('eval/')}, 95% CI bands",
            )
        bar.advance(task)
        stages["evaluation + report"] = time.monotonic() - t

    def cells(res: dict[str, Any]) -> dict[str, Any]:
        keep = ("n_requests", "per_responder", "union", "single_mention", "lists", "ci")
        return {k: res[k] for k in keep if k in res}

    description, stats_line = _data_description(s, ds)
    summary: dict[str, Any] = {
        "settings": dataclasses.asdict(s),
        "metric": s.metric,
        "data": {"dir": str(data_dir), "description": description, "stats_line": stats_line},
        "model": {"parameters": n_params, "vocab": _vocab(base)},
        "sft": sft,
        "runs": {
            m: {
                "label": METHODS[m][0],
                "reward_scheme": METHODS[m][1],
                "sampling": METHODS[m][2],
                "best_step": runs[m]["summary"]["best"]["step"] if runs[m]["summary"]["best"] else None,
                "best_value": runs[m]["summary"]["best"]["value"] if runs[m]["summary"]["best"] else None,
                "wall_s": runs[m]["wall_s"],
                "train": _train_diagnostics(out / m),
            }
            for m in METHODS
        },
        "test": {
            name: {"greedy": cells(r), "sampled": cells(r["sampled"]) if "sampled" in r else None}
            for name, r in results.items()
        },
        "paired": pairs,
        "steps_to_reach": reach,
        "curves": {
            lists: {
                m: {
                    "name": c.name,
                    "key": c.key,
                    "x": [int(v) for v in c.x],
                    "mean": c.mean.tolist(),
                    "low": c.low.tolist(),
                    "high": c.high.tolist(),
                }
                for m, c in by_method.items()
            }
            for lists, by_method in curves.items()
        },
        "machine": {
            "cpus": os.cpu_count(),
            "load_start": load_start,
            "load_end": os.getloadavg()[0],
            "python": platform.python_version(),
            "torch": torch.__version__,
            "threads_in_process": threads,
            "threads_per_rl_run": 1 if s.parallel else threads,
        },
        "timing": {"stages": stages, "total_s": time.monotonic() - t_start},
        "files": {"report": "report.md", "plots": plots, "summary": "summary.json"},
    }
    summary["notes"] = _notes(summary)
    summary = _finite_or_none(summary)
    with atomic_write(out / "summary.json") as tmp:
        tmp.write_text(json.dumps(summary, indent=2, allow_nan=False) + "\n")
    with atomic_write(out / "report.md") as tmp:
        tmp.write_text(report_markdown(summary))
    return summary


def _vocab(model_dir: Path) -> int:
    from transformers import AutoTokenizer

    return len(AutoTokenizer.from_pretrained(model_dir))


def _finite_or_none(obj: Any) -> Any:
    """JSON without NaN/inf: non-finite floats become None (a bound that does not exist)."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: _finite_or_none(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_finite_or_none(v) for v in obj]
    if isinstance(obj, np.generic):
        return _finite_or_none(obj.item())
    return obj
