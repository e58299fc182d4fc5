"""The demo's stages before RL: data (synthetic or ProtoQA), tokenizer + tiny model, SFT warm-up.

- data: ProtoQA's scraped dev file (shipped in the package, or ``--data-dir``) with each question's
  *respondents* split into train / valid / test (``data_prep.holdout``), pooled in
  ``remark prep``'s layout; or ``data_prep.synthetic.build_dataset`` (the embedded world);
- a byte-level BPE tokenizer and a tiny Qwen2 trained / initialised locally (``remark.run.tiny_model``);
- the SFT warm-up: ``remark.run.sft.run_sft`` (TRL ``SFTTrainer``, no pickle) with a progress callback.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

from catalog.shared.errors import InputError
from remark.demo.settings import DemoSettings

PROTOQA_FILE = "dev.scraped.jsonl"


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


def protoqa_source(s: DemoSettings) -> Path:
    """The ProtoQA input of ``s``: ``data_dir`` (:func:`find_protoqa`), or the scraped dev file shipped in
    the package when it is None (``data_prep.shipped``; no download, no data folder)."""
    if s.data_dir is not None:
        return find_protoqa(s.data_dir)
    from data_prep.shipped import protoqa_file

    return protoqa_file("scraped")


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

    from catalog.match import GroundingSettings, Matcher
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
    pooled = pool_threads(
        Threads(frame, catalog, dict(threads.meta)),
        Matcher(catalog, GroundingSettings(match_mode="normalized")),
    )
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
    # answers (cluster strings) pool with normalized matching; generated lists are grounded fuzzy, so the
    # dataset records the default (fuzzy) settings that the demo's reward, validation and evaluation use
    return write_dataset(out_dir, pl.concat(parts), catalog, meta, grounding=GroundingSettings()), out_dir


# -- model and warm-up ---------------------------------------------------------------------------------
def tokenizer_corpus(ds, k: int, *, seed: int = 0, repeats: int = 10) -> list[str]:
    """Text for the tokenizer: catalog lines (shuffled, ``repeats`` times), prompts, the instruction."""
    from remark.run.sampling import prompt_messages

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
    """Tokenizer + random-init tiny Qwen2 under ``out_dir`` (``remark.run.tiny_model``)."""
    from remark.config.tiny import TinySpec
    from remark.run.tiny_model import build_tiny_model

    return build_tiny_model(
        out_dir, tokenizer_corpus(ds, s.k, seed=s.seed), spec=TinySpec(**s.spec_dict()), seed=s.seed
    )


def warm_up(
    ds,
    base_dir: Path,
    out_dir: Path,
    s: DemoSettings,
    on_step: Callable[[int, int], None],
    *,
    console: Any = None,
) -> dict[str, Any]:
    """SFT warm-up (``remark.run.sft.run_sft`` on its ``sft_examples``); returns examples, steps, losses, time.

    The trainer's log lines (transformers' ``PrinterCallback``, which ``run_sft`` keeps) go to
    ``out_dir/sft_log.txt``, not to the console, where the progress bars are.
    """
    from transformers import TrainerCallback

    from remark.run.sft import SFTSettings, run_sft

    class Watch(TrainerCallback):
        """Steps to ``on_step``; the example count, steps and log history kept for the summary."""

        def __init__(self) -> None:
            self.examples, self.steps, self.history = 0, 0, []

        def on_train_begin(self, args, state, control, train_dataloader=None, **kwargs):
            self.examples = len(train_dataloader.dataset)

        def on_step_end(self, args, state, control, **kwargs):
            on_step(state.global_step, state.max_steps)

        def on_train_end(self, args, state, control, **kwargs):
            self.steps, self.history = state.global_step, state.log_history

    settings = SFTSettings(
        targets=s.sft_targets, k=s.k, hit_prob=s.sft_hit_prob, copies=s.sft_copies, seed=s.seed
    )
    sft_args = {
        "learning_rate": s.sft_lr,
        "lr_scheduler_type": s.sft_scheduler,
        "warmup_steps": 10,
        "num_train_epochs": s.sft_epochs,
        "per_device_train_batch_size": s.sft_batch,
        "logging_steps": 1,
        "data_seed": s.seed,
        "dataset_num_proc": None,  # datasets' map in this process: no worker pool
        "dataloader_num_workers": 0,
        "use_cpu": True,
        "bf16": False,
        "disable_tqdm": True,
    }
    watch = Watch()
    out_dir.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    with _prints_to(out_dir / "sft_log.txt", console):
        run_sft(ds, base_dir, out_dir, settings, sft_args, callbacks=[watch])
    losses = [h["loss"] for h in watch.history if "loss" in h]
    return {
        "examples": watch.examples,
        "steps": watch.steps,
        "first_loss": losses[0] if losses else None,
        "final_loss": losses[-1] if losses else None,
        "wall_s": time.monotonic() - t0,
    }


@contextlib.contextmanager
def _prints_to(path: Path, console: Any = None) -> Iterator[None]:
    """``print`` output into ``path``; a rich ``console`` that follows ``sys.stdout`` keeps its stream."""
    stream = console.file if console is not None else None
    with path.open("w") as fh, contextlib.redirect_stdout(fh):
        follows = console is not None and console.file is fh
        if follows:
            console.file = stream
        try:
            yield
        finally:
            if follows:
                console.file = None  # follow sys.stdout again
