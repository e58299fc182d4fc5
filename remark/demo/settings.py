"""The demo's settings: one frozen dataclass (:class:`DemoSettings`) and the defaults per data source.

``default_settings`` fills it for ``synthetic`` or ``protoqa`` (and ``--fast``, the test-sized run);
everything else in ``remark.demo`` reads only these fields, so ``summary.json`` (which holds them) says
exactly what ran.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from catalog.io.errors import InputError

DataName = Literal["synthetic", "protoqa"]
DATA_CHOICES: tuple[str, ...] = ("synthetic", "protoqa")

#: The two methods, in report order: name -> (label, reward_scheme, sampling).
METHODS: dict[str, tuple[str, str, str]] = {
    "remark": ("ReMaRk", "union", "uniform"),
    "rank_grpo": ("Rank-GRPO", "responder", "per_responder"),
}


@dataclass(frozen=True)
class DemoSettings:
    """Everything the demo does; :func:`default_settings` fills it for a data source and mode."""

    data: str = "synthetic"
    """``protoqa`` (:func:`default_settings`' default) or ``synthetic`` (the embedded world)."""
    data_dir: str | None = None
    """ProtoQA: the scraped dev file, a folder holding it, or a dataset prepared by ``remark prep``; None
    reads the copy shipped in the package (``data_prep.shipped``)."""
    seed: int = 0
    """Seed of the world, the tokenizer and model init, the SFT warm-up and the test evaluation's sampling."""
    rl_seeds: tuple[int, ...] = (0,)
    """RL seeds (RL's sampling, its request order and its validation samples), all from the one warm-up: the
    first runs the learning-rate grid, every further one a ReMaRk and a Rank-GRPO run at the chosen rates, so
    training variance is measured, not hidden."""
    fast: bool = False
    """Tiny everything (tests): seconds, not minutes; numbers are meaningless."""
    # --- data ---
    n_requests: int = 600
    """Synthetic requests, split by ``split_fractions``."""
    n_items: int = 96
    """Synthetic catalog size (8 genres)."""
    split_fractions: tuple[float, float, float] = (0.7, 0.15, 0.15)
    """Synthetic train / valid / test shares (90 valid and 90 test requests of 600: tighter CIs)."""
    world: dict[str, Any] = field(default_factory=dict)
    """Other ``generate_world`` arguments."""
    n_questions: int | None = None
    """ProtoQA: scraped questions drawn (seeded) among those with at least ``min_clusters`` answer clusters;
    None takes them all."""
    min_clusters: int = 5
    """ProtoQA: the fewest answer clusters a scraped question needs."""
    question_split: tuple[float, float, float] = (0.6, 0.2, 0.2)
    """ProtoQA: share of the scraped *questions* for train / valid / test. Questions, not respondents: a test
    question is never trained on, and near-duplicate prompts go to one side together
    (``data_prep.request_split.group_split``)."""
    crowdsourced: bool = True
    """ProtoQA: the 52 crowdsourced dev questions as a second, out-of-distribution test set (``data_crowd/``),
    as ProtoQA's own protocol evaluates: trained on scraped questions, tested on crowdsourced ones."""
    # --- model ---
    base_model: str | None = None
    """A pretrained causal LM's folder (safetensors, tokenizer, chat template; e.g. ``make fetch-model``'s
    SmolLM2-135M-Instruct), warmed up and trained instead of a tiny model built from scratch; a relative path
    is read from the current folder. The tokenizer and the shape settings below (:data:`SHAPE_FIELDS`) then
    have no effect, and a settings file that sets them is refused."""
    use_vllm: bool = False
    """vLLM generates the RL rollouts (colocated with the trainer), the validation lists (the trainer's
    engine) and the test lists (an engine per model): needs vLLM's CPU build (``.venv-vllm``)."""
    vllm_kv_cache_gib: float = 1.0
    """The KV cache of every vLLM engine, GiB (with ``use_vllm`` only; refused in a file without it)."""
    vocab_size: int = 1024
    hidden_size: int = 128
    intermediate_size: int = 512
    num_hidden_layers: int = 2
    # --- SFT warm-up ---
    sft_targets: str = "union"
    """``union``, ``responder`` or ``noisy`` (remark.run.sft)."""
    sft_epochs: float = 12.0
    sft_lr: float = 3e-3
    sft_scheduler: str = "cosine"
    sft_batch: int = 16
    sft_copies: int = 2
    """Draws per training request (two epochs' worth of ``union`` lists per epoch): with one, the
    calibrated world's warm-up ends with greedy lists of ~1 distinct item and half of its sampled lines
    ungrounded (seed 0); with two, 98% of lines ground and lists hold ~3.9 distinct items."""
    sft_hit_prob: float = 0.3
    # --- RL (both methods) ---
    k: int = 5
    """K: list length asked for and rewarded."""
    steps: int = 60
    """Optimizer steps per run."""
    prompts_per_step: int = 4
    num_generations: int = 8
    lr_grid: tuple[float, ...] = (1e-4, 3e-4, 1e-3)
    """Learning rates tried per method (constant schedule), each a full run on the first RL seed; each
    method's rate is the one with the best validation value of :attr:`metric`, chosen before the test split
    is read (``tuning`` in ``summary.json``). Further RL seeds train at the chosen rate."""
    max_completion_length: int = 64
    validation_every: int = 10
    validation_samples: int = 4
    """Sampled lists per validation request beside the greedy one (0 = greedy validation only)."""
    threads: int = 1
    """Torch / OpenMP / MKL / polars / rayon threads of every stage's process (``remark.demo.worker_env``).
    Fixed, never read from the machine's load: the thread count changes the numbers (summation order),
    so it is a setting like the seed, recorded in ``summary.json``."""
    warmup_threads: int = 1
    """Threads of the warm-up process (data, tokenizer, model, SFT), which runs alone: a setting like
    ``threads`` (it changes the numbers, the load does not)."""
    jobs: int = 2
    """Stage processes at once (RL runs, test evaluations): changes the wall time only, never a number."""
    # --- evaluation ---
    eval_samples: int = 4
    """Sampled lists per test request (temperature 1) beside the greedy one: the list draw is most of a
    request's variance, so more samples narrow the test intervals (ProtoQA: 4 -> 32 halved them)."""
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
        """Per-responder recall@K as the eval log names it (``eval/...``, in greedy and sampled logs alike)."""
        return f"eval/recall@{self.k}/per_responder"

    @property
    def metric(self) -> str:
        """Validation metric and best-checkpoint criterion (``validation_metric``): per-responder recall@K of
        sampled lists, ``sampled/recall@K/per_responder`` (greedy lists when ``validation_samples`` is 0)."""
        if not self.validation_samples:
            return self.greedy_metric
        return "sampled/" + self.greedy_metric.removeprefix("eval/")

    def validation_logs(self) -> dict[str, tuple[str, str]]:
        """Validation lists -> (sub-folder of a run holding their eval log, metric name): the primary first.

        ``ValidationCallback`` logs greedy lists in ``<run>/eval_log.jsonl`` and sampled ones in
        ``<run>/sampled/eval_log.jsonl``, both under ``eval/...`` keys.
        """
        logs = {"sampled": ("sampled", self.metric)} if self.validation_samples else {}
        return logs | {"greedy": ("", self.greedy_metric)}


def default_settings(
    data: str = "protoqa",
    *,
    fast: bool = False,
    steps: int | None = None,
    seed: int = 0,
    data_dir: str | Path | None = None,
    rl_seeds: tuple[int, ...] | None = None,
    lr_grid: tuple[float, ...] | None = None,
    settings_file: str | Path | None = None,
    threads: int | None = None,
    warmup_threads: int | None = None,
    jobs: int | None = None,
) -> DemoSettings:
    """The demo's defaults for ``data`` (``fast``: the test-sized run), then a ``settings_file``'s values
    (:func:`settings_file_overrides`), then ``steps`` etc., each overriding what came before."""
    if data not in DATA_CHOICES:
        raise InputError(f"unknown data {data!r}", field="--data", hint=f"one of {', '.join(DATA_CHOICES)}")
    s = DemoSettings(data=data, seed=seed, data_dir=str(data_dir) if data_dir is not None else None)
    if data == "protoqa":
        # the warm-up is plain supervised lists of the training questions' answers (no noise), then a
        # learning-rate grid per method chosen on the validation questions (docs/experiments.md)
        s = dataclasses.replace(
            s,
            k=10,
            vocab_size=4096,
            sft_targets="union",
            sft_epochs=6.0,
            sft_lr=1e-3,
            sft_scheduler="cosine",
            sft_batch=32,
            sft_copies=4,
            warmup_threads=2,
            steps=150,
            validation_every=25,
            eval_samples=32,
            rl_seeds=(0, 1, 2),
        )
    if fast:
        s = dataclasses.replace(
            s,
            fast=True,
            n_requests=60,
            n_items=24,
            n_questions=30,
            vocab_size=512 if data == "synthetic" else 1024,
            hidden_size=32,
            intermediate_size=64,
            num_hidden_layers=1,
            sft_epochs=1.0,
            sft_copies=1,
            steps=2,
            warmup_threads=1,
            prompts_per_step=2,
            num_generations=2,
            validation_every=1,
            eval_samples=2,
            ci_resamples=199,
            rl_seeds=(0, 1),
            lr_grid=(2e-4, 4e-4),
        )
    if settings_file is not None:
        overrides = settings_file_overrides(settings_file)
        _refuse_unused(overrides, base_model=overrides.get("base_model", s.base_model), path=settings_file)
        s = dataclasses.replace(s, **overrides)
    if steps is not None:
        if steps < 1:
            raise InputError(f"--steps must be >= 1, got {steps}", field="--steps")
        s = dataclasses.replace(s, steps=steps, validation_every=max(1, min(s.validation_every, steps)))
    if rl_seeds is not None:
        seeds = tuple(int(x) for x in rl_seeds)
        if not seeds or len(set(seeds)) != len(seeds):
            raise InputError(f"--seeds must be distinct seeds, got {list(seeds)}", field="--seeds")
        s = dataclasses.replace(s, rl_seeds=seeds)
    if lr_grid is not None:
        s = dataclasses.replace(s, lr_grid=tuple(float(x) for x in lr_grid))
    for name, value in (("threads", threads), ("warmup_threads", warmup_threads), ("jobs", jobs)):
        if value is not None:
            flag = "--" + name.replace("_", "-")
            if value < 1:
                raise InputError(f"{flag} must be >= 1, got {value}", field=flag)
            s = dataclasses.replace(s, **{name: int(value)})
    if any(not 0.0 < lr < 1.0 for lr in s.lr_grid) or len(set(s.lr_grid)) != len(s.lr_grid):
        raise InputError(
            f"the learning-rate grid must hold distinct rates in (0, 1), got {list(s.lr_grid)}",
            field="--lr-grid",
        )
    if data == "synthetic" and s.data_dir:
        raise InputError(
            "--data-dir is read by --data protoqa only (the synthetic world is embedded)",
            field="--data-dir",
            hint="drop --data-dir, or pass --data protoqa",
        )
    return s


#: The tiny model's shape (:meth:`DemoSettings.spec_dict`): no effect with a ``base_model``.
SHAPE_FIELDS = ("vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers")

#: Fields a ``--settings`` file may not set: they name the run's mode and inputs, which have their own flags.
NOT_IN_FILE = ("data", "data_dir", "fast")


def _refuse_unused(overrides: dict[str, Any], *, base_model: str | None, path: str | Path) -> None:
    """A settings file's fields that have no effect under its others: an error naming the field."""
    if base_model is not None:
        for key in SHAPE_FIELDS:
            if key in overrides:
                raise InputError(
                    f"{key} shapes the tiny model, which a base_model replaces",
                    path=path,
                    field=key,
                    hint="drop it, or drop base_model",
                )
    if "vllm_kv_cache_gib" in overrides and not overrides.get("use_vllm"):
        raise InputError(
            "vllm_kv_cache_gib sizes vLLM's engines, which run only with use_vllm: true",
            path=path,
            field="vllm_kv_cache_gib",
            hint="drop it, or set use_vllm: true",
        )
    if overrides.get("vllm_kv_cache_gib", 1.0) <= 0:
        raise InputError("vllm_kv_cache_gib must be > 0", path=path, field="vllm_kv_cache_gib")


def settings_file_overrides(path: str | Path) -> dict[str, Any]:
    """A ``--settings`` YAML file: a mapping of :class:`DemoSettings` fields to values (lists for tuples),
    each checked against the field's default type. Errors are one line naming the file and the field."""
    from catalog.io.files import read_text
    from catalog.io.yaml_files import load_yaml

    path = Path(path)
    doc = load_yaml(read_text(path), path=path, what="demo settings")
    if not isinstance(doc, dict):
        raise InputError("a demo settings file is a mapping of setting: value", path=path)
    fields = {f.name: f for f in dataclasses.fields(DemoSettings)}
    defaults = DemoSettings()
    out: dict[str, Any] = {}
    for key, value in doc.items():
        if key not in fields or key in NOT_IN_FILE:
            hint = (
                "use its flag"
                if key in NOT_IN_FILE
                else f"one of {', '.join(sorted(set(fields) - set(NOT_IN_FILE)))}"
            )
            raise InputError(f"{key!r} is not a setting a file may set", path=path, field=str(key), hint=hint)
        default = getattr(defaults, key)
        if isinstance(default, tuple):
            if not isinstance(value, list) or not value:
                raise InputError(f"{key} must be a non-empty list", path=path, field=key)
            value = tuple(value)
        elif isinstance(default, bool):
            if not isinstance(value, bool):
                raise InputError(f"{key} must be true or false", path=path, field=key)
        elif isinstance(default, int | float) and not isinstance(default, bool):
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise InputError(f"{key} must be a number", path=path, field=key)
            if isinstance(default, int) and not isinstance(value, int):
                raise InputError(f"{key} must be an integer", path=path, field=key)
        elif key == "base_model" and not isinstance(value, str):
            raise InputError("base_model must be a folder's path", path=path, field=key)
        out[key] = value
    return out


def settings_from_dict(d: dict[str, Any]) -> DemoSettings:
    """``DemoSettings`` from ``dataclasses.asdict`` output read back from JSON (lists become tuples)."""
    fields = {f.name: f for f in dataclasses.fields(DemoSettings)}
    unknown = set(d) - set(fields)
    if unknown:
        raise ValueError(f"unknown demo settings {sorted(unknown)}")
    return DemoSettings(**{k: tuple(v) if isinstance(v, list) else v for k, v in d.items()})
