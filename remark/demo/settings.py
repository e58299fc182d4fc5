"""The demo's settings: one frozen dataclass (:class:`DemoSettings`) and the defaults per data source.

``default_settings`` fills it for ``synthetic`` or ``protoqa`` (and ``--fast``, the test-sized run);
everything else in ``remark.demo`` reads only these fields, so ``summary.json`` (which holds them) says
exactly what ran.
"""

from __future__ import annotations

import dataclasses
import functools
import typing
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


def resolve_settings(
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
) -> tuple[DemoSettings, dict[str, Any]]:
    """(the settings, where each value that is not a default came from: a ``remark.demo.settings_check.Origin``).

    The demo's defaults for ``data`` (``fast``: the test-sized run), then a ``settings_file``'s values, then
    ``steps`` etc., each overriding what came before; every value checked alone and the settings together
    (``remark.demo.settings_check``: type, range, list elements, the world's keys, combinations) before they
    are returned, so an error is one line naming the file, its line and the field, or the flag. What needs the
    runs' folders, the base model or the machine's memory is ``remark.demo.preflight``'s, with these origins."""
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
    # every value, from the file and the flags, is checked before anything is written
    # (remark.demo.settings_check); an error names the file, its line and the field, or the flag
    from remark.demo.settings_check import Origin, check_combinations, check_values, read_settings_file

    values: dict[str, Any] = {}
    origins: dict[str, Origin] = {}
    if data_dir is not None:
        origins["data_dir"] = Origin(flag="--data-dir")
    if settings_file is not None:
        doc, rows = read_settings_file(settings_file, file_setting_names(), NOT_IN_FILE)
        values |= doc
        origins |= {key: Origin(path=str(settings_file), row=rows.get(key)) for key in doc}
    flags = {
        "steps": ("--steps", steps),
        "rl_seeds": ("--seeds", rl_seeds),
        "lr_grid": ("--lr-grid", lr_grid),
        "threads": ("--threads", threads),
        "warmup_threads": ("--warmup-threads", warmup_threads),
        "jobs": ("--jobs", jobs),
    }
    for name, (flag, value) in flags.items():
        if value is not None:
            values[name] = list(value) if isinstance(value, list | tuple) else value
            origins[name] = Origin(flag=flag)
    values = check_values({**dataclasses.asdict(s), **values}, setting_types(), origins)
    if steps is not None or ("steps" in origins and "validation_every" not in origins):
        # validation every `steps` at most, as with --steps: fewer steps than the default interval otherwise
        # validate step 0 alone
        values["validation_every"] = max(1, min(values["validation_every"], values["steps"]))
    s = DemoSettings(**values)
    if data == "synthetic" and s.data_dir:
        raise InputError(
            "--data-dir is read by --data protoqa only (the synthetic world is embedded)",
            field="--data-dir",
            hint="drop --data-dir, or pass --data protoqa",
        )
    check_combinations(s, origins)
    return s, origins


def default_settings(data: str = "protoqa", **kwargs: Any) -> DemoSettings:
    """The settings of :func:`resolve_settings` (same arguments), checked as it checks them."""
    return resolve_settings(data, **kwargs)[0]


@functools.lru_cache(maxsize=1)
def setting_types() -> dict[str, Any]:
    """:class:`DemoSettings`' field annotations, resolved (what ``remark.demo.settings_check`` checks against)."""
    return typing.get_type_hints(DemoSettings)


def file_setting_names() -> list[str]:
    """The settings a ``--settings`` file may set (all but :data:`NOT_IN_FILE`)."""
    return [f.name for f in dataclasses.fields(DemoSettings) if f.name not in NOT_IN_FILE]


#: The tiny model's shape (:meth:`DemoSettings.spec_dict`): no effect with a ``base_model``.
SHAPE_FIELDS = ("vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers")

#: Fields a ``--settings`` file may not set: they name the run's mode and inputs, which have their own flags.
NOT_IN_FILE = ("data", "data_dir", "fast")


def settings_file_overrides(path: str | Path) -> dict[str, Any]:
    """A ``--settings`` YAML file: a mapping of :class:`DemoSettings` fields to values (lists for tuples),
    each value checked alone (``remark.demo.settings_check.check_values``: type, range, list elements, the
    world's keys). Errors are one line naming the file, the line and the field (``rl_seeds[1]``)."""
    from remark.demo.settings_check import Origin, check_values, read_settings_file

    doc, rows = read_settings_file(path, file_setting_names(), NOT_IN_FILE)
    return check_values(doc, setting_types(), {key: Origin(path=str(path), row=rows.get(key)) for key in doc})


def settings_from_dict(d: dict[str, Any]) -> DemoSettings:
    """``DemoSettings`` from ``dataclasses.asdict`` output read back from JSON (lists become tuples)."""
    fields = {f.name: f for f in dataclasses.fields(DemoSettings)}
    unknown = set(d) - set(fields)
    if unknown:
        raise ValueError(f"unknown demo settings {sorted(unknown)}")
    return DemoSettings(**{k: tuple(v) if isinstance(v, list) else v for k, v in d.items()})
