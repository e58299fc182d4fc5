"""Step time of ``RemarkGRPOTrainer`` (rank advantages) / TRL's plain ``GRPOTrainer`` on the same tiny model.

Run by hand (not a test; issue 5's goal is a ratio <= 1.10):

    python bench/trainer_overhead.py [--reps 5] [--steps 3] [--warmup 1] [--threads 2] \
        [--prompts 16] [--group-size 8] [--max-completion-length 128] [--k 10] [--sft-steps 60] \
        [--work-dir /tmp/remark_overhead] [--json results.json]

What is compared. Both trainers load the same saved model, get the same dataset rows (a synthetic pooled
dataset, ``data_prep.synthetic.build_dataset``), the same batch (``--prompts`` x ``--group-size``
completions, one micro-batch, generation every step), the same generation settings (transformers,
temperature 1, completion cap) and the same loss settings (``bnpo``, group scaling, beta 0, lr 1e-6),
and the same seed, so their first step samples identical completions (later steps differ only by the
tiny updates; the mean completion length of each is printed to show it). The plain trainer's reward is
a trivial scalar (completion length): what is timed is the cost of remark's rank machinery (decode,
parse, ground, encode, rank rewards, the gather, group scaling per rank, the token map, extra metrics)
over TRL's own step. Repetitions are interleaved (ABBA order), the first ``--warmup`` steps of every
run are dropped, and the ratio is taken per repetition (median step of each) so that machine load that
drifts between repetitions cancels; the median and range over repetitions are reported.

Breakdown per step (``time.perf_counter`` around the methods, on subclasses that only time):

- ``gen``: TRL's ``_generate`` (tokenize prompts, ``model.generate``, decode);
- ``reward``: TRL's ``_calculate_rewards``; for remark it contains ``score`` (``RankScorer.score``:
  offsets, parse, ground, encode, rank rewards, token ranks);
- ``override``: remark's ``_generate_and_score_completions`` after TRL's (gather, per-rank group
  scaling, token advantages, metrics);
- ``loss``: ``training_step`` minus input preparation (forward, loss, backward);
- ``rest``: everything else in the step (the rest of TRL's scoring, optimizer step, bookkeeping).

The model: a ~1M-parameter Qwen2 (``remark.run.tiny_model.TinySpec``) with a tokenizer trained on the catalog's
titles and the prompts, SFT-warmed for ``--sft-steps`` steps on ``noisy`` targets (``remark.run.sft``) so
that it writes list-shaped "Title (Year)" lines (most of which ground only fuzzily or not at all, as
early in RL); ``--sft-steps 0`` keeps random weights (garbage lines, completions run to the cap). The
built world is cached under ``--work-dir`` and reused.

The building blocks (world, timing subclasses, one timed run) are shared with ``bench/gpu_check.py``.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import os
import platform
import statistics
import sys
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
from remark.run.sampling import training_dataset, training_rows
from remark.run.tiny_model import TinySpec, build_tiny_model
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
    slowest pool worker's wall time per round)."""

    def __init__(self, *args, clock: Clock, **kwargs) -> None:
        self.clock = clock
        super().__init__(*args, **kwargs)
        score = self.scorer.score

        def timed_score(*a, **kw):
            with self.clock.time("score_s"):
                out = score(*a, **kw)
            return out

        self.scorer.score = timed_score
        reward, futures = self.rank_reward, []
        if reward.pool is not None:
            submit = reward.pool.submit

            def timed_submit(*a, **kw):
                futures.append(submit(*a, **kw))
                return futures[-1]

            reward.pool.submit = timed_submit

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
    """Add ``loss_s``, ``override_s`` and ``rest_s`` to one step record."""
    out = dict(step)
    for key in ("score_s", "score_wait_s", "score_work_s"):
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
def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=5, help="interleaved repetitions (each runs both trainers)")
    ap.add_argument("--steps", type=int, default=3, help="timed steps per run")
    ap.add_argument("--warmup", type=int, default=1, help="steps dropped at the start of every run")
    ap.add_argument(
        "--threads",
        type=int,
        default=1,
        help="torch intra-op threads (pinned; 1 is steadiest on a shared box)",
    )
    ap.add_argument("--prompts", type=int, default=16, help="prompts per step")
    ap.add_argument("--group-size", type=int, default=8)
    ap.add_argument("--max-completion-length", type=int, default=128)
    ap.add_argument("--k", type=int, default=10, help="ranks K (the instruction asks for K items)")
    ap.add_argument("--match-mode", default="fuzzy", choices=("exact", "fuzzy"))
    ap.add_argument("--sft-steps", type=int, default=60, help="SFT warm-up steps (0 = random weights)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--work-dir", default="/tmp/remark_overhead", help="world cache (data, model)")
    ap.add_argument("--json", default=None, help="write all step records and the summary here")
    ap.add_argument(
        "--profile-out",
        default=None,
        help="also time the remark trainer at each of --profile-group-sizes and write a cost profile here "
        "(bench/gpu_check.py's format, for remark plan-group-size --profile; --reps 0 skips the comparison)",
    )
    ap.add_argument("--profile-group-sizes", default="4,8,16", help="G of the profile (default %(default)s)")
    a = ap.parse_args(argv)

    torch.set_num_threads(a.threads)
    load_before = os.getloadavg()
    t_start = time.perf_counter()
    world = build_world(a.work_dir, k=a.k, spec=TinySpec(), sft_steps=a.sft_steps, seed=a.seed)
    print(f"world: {a.work_dir} ({json.dumps({k: v for k, v in world.info.items() if k != 'settings'})})")
    args = common_args(
        Path(a.work_dir) / "runs",
        prompts=a.prompts,
        group_size=a.group_size,
        max_completion_length=a.max_completion_length,
        steps=a.warmup + a.steps,
        seed=a.seed,
        cuda=False,
    )
    print(
        f"batch {a.prompts} prompts x G={a.group_size}, cap {a.max_completion_length}, K={a.k}, "
        f"match {a.match_mode}, torch threads {torch.get_num_threads()}, {a.reps} reps x "
        f"({a.warmup} warm-up + {a.steps} timed) steps per trainer, load {load_before[0]:.2f}"
    )
    runs: list[dict[str, Any]] = []
    for rep in range(a.reps):
        order = KINDS if rep % 2 == 0 else KINDS[::-1]
        for kind in order:
            steps, history = timed_run(kind, world, args, k=a.k, match_mode=a.match_mode)
            timed = steps[a.warmup :]
            logged = [h for h in history if "loss" in h][a.warmup :]
            lists = {}
            if kind == "remark" and logged:
                lists = {key: statistics.mean(h[f"train/{key}"] for h in logged) for key in LIST_STATS}
            runs.append(
                {"rep": rep, "kind": kind, "steps": timed, "lists": lists, "load": os.getloadavg()[0]}
            )
            print(
                f"rep {rep} {kind:<6} step {median_of(timed, 'step_s'):.3f} s "
                f"(gen {median_of(timed, 'gen_s'):.3f}, tokens {median_of(timed, 'completion_tokens'):.0f})",
                flush=True,
            )
    summary = summarize(runs, a.reps)
    summary.update(
        {
            "command": " ".join([Path(sys.argv[0]).name, *(argv if argv is not None else sys.argv[1:])]),
            "settings": vars(a),
            "world": world.info,
            "load_before": load_before,
            "load_after": os.getloadavg(),
            "wall_s": time.perf_counter() - t_start,
            "machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores",
            "torch": torch.__version__,
        }
    )
    if runs:
        print_summary(summary)
    if a.json:
        Path(a.json).write_text(json.dumps({"summary": summary, "runs": runs}, indent=2))
    if a.profile_out:
        summary["profile"] = write_cpu_profile(a, world)
    return summary


def write_cpu_profile(a: argparse.Namespace, world: World) -> dict[str, Any]:
    """``bench/gpu_check.py``'s runs and profile points on this CPU (G in increasing order: memory is the
    process's peak RSS, which never resets, so each point is the peak up to and including its run)."""
    from gpu_check import profile_points, run_one

    ns = argparse.Namespace(
        **{**vars(a), "no_gradient_checkpointing": True, "continuous_batching": False, "scoring_workers": 0}
    )
    groups = sorted({int(g) for g in a.profile_group_sizes.split(",") if g.strip()})
    runs = [run_one("remark", g, 0, world, ns, False, float("inf")) for g in groups]
    profile = {
        "device": f"CPU ({platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
        f"{torch.get_num_threads()} torch threads)",
        "model": f"remark.run.tiny_model.TinySpec() (vocab {world.info.get('vocab')}), SFT-warmed {a.sft_steps} steps",
        "points": profile_points(runs, a.warmup),
        "settings": {
            "prompts": a.prompts,
            "max_completion_length": a.max_completion_length,
            "k": a.k,
            "steps": a.steps,
            "warmup": a.warmup,
        },
        "memory_unit": "GiB (process peak RSS, never reset; G in increasing order)",
        "source": "bench/trainer_overhead.py --profile-out (RemarkGRPOTrainer runs)",
        "load": [os.getloadavg()[0]],
    }
    Path(a.profile_out).write_text(json.dumps(profile, indent=2) + "\n")
    for r in runs:
        if r["status"] != "ok":
            print(f"profile G={r['G']}: {r['status']}: {r.get('error')}")
    for pt in profile["points"]:
        print(f"profile G={pt['G']}: step {pt['step_s']:.3f} s, peak RSS {pt['peak_mem_gb']:.2f} GiB")
    print(f"wrote {a.profile_out} ({len(profile['points'])} of {len(groups)} G measured)")
    return profile


#: What the remark trainer logs about the sampled lists (TRL's plain trainer has none of these).
LIST_STATS = ("lines_per_list", "parsed_per_list", "grounded_per_list", "hits_per_list", "truncated_frac")
BREAKDOWN = ("step_s", "gen_s", "reward_s", "score_s", "override_s", "loss_s", "rest_s")


def summarize(runs: list[dict[str, Any]], reps: int) -> dict[str, Any]:
    """Ratio per repetition (median remark step / median plain step), pooled medians of the breakdown."""
    ratios = []
    for rep in range(reps):
        med = {r["kind"]: median_of(r["steps"], "step_s") for r in runs if r["rep"] == rep}
        if len(med) == 2:
            ratios.append(med["remark"] / med["plain"])
    pooled = {kind: [s for r in runs if r["kind"] == kind for s in r["steps"]] for kind in KINDS}
    breakdown = {kind: {key: median_of(steps, key) for key in BREAKDOWN} for kind, steps in pooled.items()}
    for kind, steps in pooled.items():
        breakdown[kind]["completion_tokens"] = median_of(steps, "completion_tokens")
        breakdown[kind]["mean_completion_tokens"] = float(
            np.mean([s["completion_tokens"] / s["rows"] for s in steps]) if steps else float("nan")
        )
    lists = [r["lists"] for r in runs if r["kind"] == "remark" and r["lists"]]
    workload = {key: statistics.mean(x[key] for x in lists) for key in LIST_STATS} if lists else {}
    machinery = [s["score_s"] + s["override_s"] for s in pooled["remark"]]
    plain_step = breakdown["plain"]["step_s"]
    return {
        "ratio_median": statistics.median(ratios) if ratios else float("nan"),
        "ratio_min": min(ratios, default=float("nan")),
        "ratio_max": max(ratios, default=float("nan")),
        "ratios": ratios,
        "pooled_ratio": breakdown["remark"]["step_s"] / plain_step,
        "machinery_s": statistics.median(machinery) if machinery else float("nan"),
        "machinery_frac_of_plain_step": (statistics.median(machinery) / plain_step)
        if machinery
        else float("nan"),
        "breakdown": breakdown,
        "lists": workload,
    }


def print_summary(s: dict[str, Any]) -> None:
    print()
    print(
        f"{'median ms/step':<15}"
        + "".join(f"{k.removesuffix('_s'):>9}" for k in BREAKDOWN)
        + f"{'tokens':>8}"
    )
    for kind in KINDS:
        b = s["breakdown"][kind]
        row = "".join(f"{1e3 * b[k]:>9.1f}" for k in BREAKDOWN)
        print(f"{kind:<15}{row}{b['mean_completion_tokens']:>8.1f}")
    print(
        f"\nratio remark/plain: median {s['ratio_median']:.3f} over {len(s['ratios'])} reps "
        f"(range {s['ratio_min']:.3f}-{s['ratio_max']:.3f}; pooled {s['pooled_ratio']:.3f}); "
        f"rank machinery (score + override) {1e3 * s['machinery_s']:.1f} ms = "
        f"{100 * s['machinery_frac_of_plain_step']:.1f}% of a plain step; goal <= 1.10"
    )
    if s["lists"]:
        print(
            "sampled lists (remark's logs, mean): " + ", ".join(f"{k} {v:.2f}" for k, v in s["lists"].items())
        )
    print(f"load {s['load_before'][0]:.2f} -> {s['load_after'][0]:.2f}, wall {s['wall_s']:.0f} s")


if __name__ == "__main__":
    main()
