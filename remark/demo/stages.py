"""The demo's stages before RL: data (synthetic or ProtoQA), tokenizer + tiny model, SFT warm-up.

- data: ProtoQA's scraped dev file (shipped in the package, or ``--data-dir``) with its *questions* split
  into train / valid / test, and the crowdsourced dev questions as a second test set, pooled in
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

from catalog.io.errors import InputError
from remark.demo.settings import DemoSettings

PROTOQA_FILE = "dev.scraped.jsonl"
CROWDSOURCED_FILE = "dev.crowdsourced.jsonl"
#: The crowdsourced test set's dataset folder inside the demo's output.
CROWD_DIR = "data_crowd"


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


def crowdsourced_source(scraped: Path) -> Path | None:
    """The crowdsourced dev file beside ``scraped`` (``dev.crowdsourced.jsonl``), or None."""
    path = scraped.with_name(CROWDSOURCED_FILE)
    return path if path.is_file() else None


def prepare_protoqa(source: str | Path, out_dir: Path, s: DemoSettings, crowd_dir: Path | None = None):
    """ProtoQA dev -> a pooled dataset split by *question*, and the crowdsourced questions as a second test.

    - scraped questions with at least ``min_clusters`` answer clusters (``n_questions`` of them drawn,
      seeded, when set) are split train / valid / test by ``question_split``, near-duplicate prompts kept on
      one side (``data_prep.request_split.group_split``): no test question is a training question;
    - with ``crowdsourced`` and ``crowd_dir``, the crowdsourced dev file beside the scraped one is written to
      ``crowd_dir`` as a test-only dataset (ProtoQA's protocol: train on scraped, test on crowdsourced);
    - one grounding catalog for both: the items *training* respondents named (``data_prep.catalog_splits``),
      ``popularity`` their mentions there: nothing a model or a baseline learns from comes from a test
      question; held-out answers stay in the targets and ProtoQA's answer clusters (``answers.parquet``) let
      ``eval.protoqa_match`` credit each list line against its own question's clusters.

    A folder with ``requests.parquet`` (``remark prep``) is used as it is, with its own splits. Returns
    ``(dataset, its directory)``.
    """
    import polars as pl

    from catalog.match import GroundingSettings, Matcher
    from data_prep.catalog_splits import catalog_of_splits
    from data_prep.dataset import load_dataset, write_dataset
    from data_prep.pool import SplitSpec, pool_threads
    from data_prep.readers import combine, read_protoqa
    from data_prep.request_split import NEAR_DUPLICATE_THRESHOLD, group_split, prompt_texts

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
    crowd_path = crowdsourced_source(path) if (s.crowdsourced and crowd_dir is not None) else None
    parts = [read_protoqa(path, items="clusters")]
    if crowd_path is not None:
        parts.append(read_protoqa(crowd_path, items="clusters"))
    crowd_ids = set(parts[1].frame["request_id"].unique().to_list()) if crowd_path is not None else set()
    threads = combine(parts)  # one catalog, items merged by item_id
    matcher = Matcher(threads.catalog, GroundingSettings(match_mode="normalized"))
    pooled = pool_threads(threads, matcher, split=SplitSpec((("train", 1.0),), seed=0)).drop("split")
    scraped = pooled.filter(~pl.col("request_id").is_in(sorted(crowd_ids)))
    eligible = scraped.filter(pl.col("union").list.len() >= s.min_clusters)
    if eligible.height < 3:
        raise InputError(
            f"only {eligible.height} questions with >= {s.min_clusters} answer clusters",
            path=path,
            hint="is this ProtoQA's scraped dev file?",
        )
    if s.n_questions is not None and s.n_questions < eligible.height:
        ids = sorted(eligible["request_id"].to_list())
        rng = np.random.default_rng(s.seed)
        chosen = sorted(rng.choice(ids, size=s.n_questions, replace=False).tolist())
        eligible = eligible.filter(pl.col("request_id").is_in(chosen))
    eligible = eligible.sort("request_id")
    spec = SplitSpec(tuple(zip(("train", "valid", "test"), s.question_split, strict=True)), seed=s.seed)
    splits = group_split(eligible["request_id"].to_list(), prompt_texts(eligible), spec)
    requests = eligible.with_columns(split=pl.Series(splits, dtype=pl.String))
    missing = {"train", "valid", "test"} - set(splits)
    if missing:
        raise InputError(
            f"no question fell in the {sorted(missing)} split of {eligible.height} questions",
            path=path,
            hint="use more questions (n_questions) or larger split fractions",
        )
    # grounding catalog: the training questions' answers only (popularity = their training mentions); held-out
    # answers stay in the targets (pooled against every answer) and are credited per question by the ProtoQA
    # metric (eval.protoqa_match), so nothing a model is rewarded or grounded on comes from a test question
    catalog = catalog_of_splits(threads.catalog, requests, ["train"])
    meta = {k: threads.meta[k] for k in ("source", "domain", "has_years", "instruction_included")}
    meta["demo"] = {
        "input": str(path),
        "items": "clusters",
        "questions": requests.height,
        "min_clusters": s.min_clusters,
        "question_split": list(s.question_split),
        "near_duplicate_threshold": NEAR_DUPLICATE_THRESHOLD,
        "popularity": "mentions by training respondents",
        "catalog": "the items training respondents named",
        "seed": s.seed,
    }
    # answers (cluster strings) pool with normalized matching; generated lists are grounded fuzzy, so the
    # dataset records the default (fuzzy) settings that the demo's reward, validation and evaluation use
    ds = write_dataset(
        out_dir, requests, catalog, meta, grounding=GroundingSettings(), answers=threads.answers
    )
    if crowd_path is not None:
        crowd = pooled.filter(pl.col("request_id").is_in(sorted(crowd_ids))).sort("request_id")
        crowd_meta = {**meta, "demo": {**meta["demo"], "input": str(crowd_path), "questions": crowd.height}}
        crowd_meta["demo"]["role"] = "out-of-distribution test: crowdsourced questions, none trained on"
        write_dataset(
            crowd_dir,
            crowd.with_columns(split=pl.lit("test")),
            catalog,
            crowd_meta,
            grounding=GroundingSettings(),
            answers=threads.answers,
        )
    return ds, out_dir


# -- model and warm-up ---------------------------------------------------------------------------------
def tokenizer_corpus(
    ds, k: int, *, seed: int = 0, repeats: int = 10, train_items_only: bool = False
) -> list[str]:
    """Text for the tokenizer, from the training split only: catalog lines (shuffled, ``repeats`` times;
    with ``train_items_only`` only the items training respondents named), training prompts, the instruction.

    ProtoQA's catalog is built from the answers, test questions' included, so its demo passes
    ``train_items_only``: nothing the model learns from, its vocabulary included, comes from a test question.
    """
    import polars as pl

    from remark.run.sampling import prompt_messages

    train = ds.requests.filter(pl.col("split") == "train")
    ids = ds.catalog.df["item_id"].to_list()
    if train_items_only:
        named = set(train["union"].explode().drop_nulls().to_list())
        ids = [x for x in ids if x in named]
    shown = [ds.catalog.display(x) for x in ids]
    rng = np.random.default_rng(seed)
    corpus = []
    for _ in range(repeats):
        order = rng.permutation(len(shown))
        corpus += ["\n".join(shown[i] for i in order[j : j + 50]) for j in range(0, len(order), 50)]
    prompts = train.unique("request_id", maintain_order=True)["prompt"].to_list()
    corpus += [m["content"] for p in prompts for m in prompt_messages(p, ds.meta, k)]
    return corpus


def build_model(ds, out_dir: Path, s: DemoSettings) -> Path:
    """Tokenizer + random-init tiny Qwen2 under ``out_dir`` (``remark.run.tiny_model``); with a
    ``base_model``, that folder (nothing is built)."""
    if s.base_model is not None:
        return Path(s.base_model)
    from remark.config.tiny import TinySpec
    from remark.run.tiny_model import build_tiny_model

    return build_tiny_model(
        out_dir,
        tokenizer_corpus(ds, s.k, seed=s.seed, train_items_only=s.data == "protoqa"),
        spec=TinySpec(**s.spec_dict()),
        seed=s.seed,
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
