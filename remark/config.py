"""``RemarkGRPOConfig``: TRL's ``GRPOConfig`` plus the rank-level fields, validated before any model loads.

Departures from TRL's defaults, on purpose:

- ``loss_type`` and ``scale_rewards`` have no default here: TRL changed both across versions (``bnpo`` was
  the default in trl 0.21, which Rank-GRPO used; ``dapo`` is the default in trl 1.x), so a run must say
  which it means. ``scale_rewards`` is kept equal to ``advantage_scaling`` (the per-rank scaling the
  trainer applies), so TRL's own logged scalar advantages use the same rule.
- Every rank-level option (reward scheme, K, matcher, sampling, filters, length shaping, rank-level
  ratio, validation, divergence guard) is a documented field, checked in ``__post_init__`` with an error
  that says what to change. ``load_config`` reads a flat YAML file whose keys are these fields.
- The GRPO-family options TRL lacks (``advantage_baseline``, ``gmpo_level``, ``loss_aggregation``,
  ``truncation``, ``refill_batch``; ``remark.algos.family``) are fields too, and combinations that
  contradict each other or TRL's own loss options (a sequence-level ratio with a rank-level one, ``luspo``
  without the sequence level, GMPO with a loss that has its own weight, ...) fail here, before any model
  loads. Named recipes (``remark.recipes``) are sets of these fields.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from trl import GRPOConfig

from catalog.errors import InputError

SAMPLING_MODES = ("uniform", "per_responder")
SCALING_MODES = ("group", "batch", "none")
MATCH_MODES = ("exact", "fuzzy")
LOSS_TYPES = ("grpo", "bnpo", "dr_grpo", "dapo", "cispo", "sapo", "luspo", "vespo")
#: TRL loss types built on the clipped surrogate min(r A, clip(r) A) (GMPO replaces r by its own ratio).
CLIPPED_LOSS_TYPES = ("grpo", "bnpo", "dr_grpo", "dapo")
#: TRL loss types that sum token losses and divide by the generation batch's token count.
TOKEN_SUM_LOSS_TYPES = ("dapo", "cispo")
GMPO_LEVELS = ("rank", "sequence")
#: The fewest completion tokens one "Title (Year)" line can take (a title token, the year, a newline).
MIN_TOKENS_PER_LINE = 4


@dataclass
class RemarkGRPOConfig(GRPOConfig):
    """GRPO with rank-level advantages. Fields below are remark's; the rest are TRL's ``GRPOConfig``."""

    # --- what to train on --------------------------------------------------------------------------
    model_name_or_path: str | None = field(
        default=None,
        metadata={"help": "Model directory or hub id (a local directory when HF_HUB_OFFLINE=1)."},
    )
    data_dir: str | None = field(
        default=None,
        metadata={"help": "A pooled dataset directory written by `remark prep` (requests.parquet ...)."},
    )
    train_split: str = field(default="train", metadata={"help": "Split of requests.parquet to train on."})
    valid_split: str = field(default="valid", metadata={"help": "Split used by validation during training."})

    # --- rank rewards and advantages --------------------------------------------------------------
    reward_scheme: str = field(
        default="union",
        metadata={
            "help": "Per-rank reward: 'union' (ReMaRk: hit if any responder named it), 'responder' (Rank-GRPO "
            "exp_inf: one responder's items), 'marginal' (c/n_x), 'responder_rb' (Rank-GRPO's advantages "
            "averaged over all responders)."
        },
    )
    log_decay: bool = field(
        default=False,
        metadata={"help": "Rank-GRPO's log_decay modifier: r_k = sum_{j>=k} hit_j / log2(j+1)."},
    )
    advantage_scaling: str = field(
        default="group",
        metadata={
            "help": "Per-rank scaling: 'group' (std over G + eps, Rank-GRPO), 'batch', 'none' (Dr. GRPO)."
        },
    )
    advantage_eps: float = field(default=1e-4, metadata={"help": "eps added to the std in 'group'/'batch'."})
    num_ranks: int = field(
        default=20, metadata={"help": "K: list length the policy is asked for and rewarded on."}
    )
    match_mode: str = field(
        default="fuzzy", metadata={"help": "Grounding of generated titles: 'exact' (Rank-GRPO) or 'fuzzy'."}
    )
    year_tolerance: int = field(
        default=2, metadata={"help": "Years a title may be off and still match (+-)."}
    )
    match_threshold: float | None = field(
        default=None, metadata={"help": "Fuzzy score threshold (0-100); None uses the matcher's default."}
    )
    sampling: str = field(
        default="uniform",
        metadata={
            "help": "'uniform': one row per request (ReMaRk); 'per_responder': one row per (request, responder), "
            "so a request with n responders is drawn n times as often (Rank-GRPO)."
        },
    )

    # --- filters and shaping ---------------------------------------------------------------------
    zero_signal_filter: bool = field(
        default=False,
        metadata={
            "help": "Drop groups whose G reward vectors are all equal from the loss (ScaleRL / Olmo 3)."
        },
    )
    pass_rate_drop: float | None = field(
        default=None,
        metadata={
            "help": "Drop requests for good once a group's pass rate reaches this (ScaleRL 0.9, Olmo 3 0.875)."
        },
    )
    overflow_penalty: float = field(
        default=-0.1, metadata={"help": "Advantage of every token of a line past K (Rank-GRPO: -0.1)."}
    )
    filler_penalty: float = field(
        default=-0.1,
        metadata={
            "help": "Advantage of every whitespace-only token outside the list's lines (blank lines, indentation). "
            "Rank-GRPO made blank lines slots; here they hold no rank, and at 0 a policy can drift into blank lines."
        },
    )
    eos_complete_bonus: float = field(
        default=0.1, metadata={"help": "End-token advantage when the list has K items (Rank-GRPO: +0.1)."}
    )
    eos_early_penalty: float = field(
        default=-0.1,
        metadata={"help": "End-token advantage when the list stops before K items (Rank-GRPO: -0.1)."},
    )
    rank_level_ratio: bool = field(
        default=False,
        metadata={
            "help": "Importance ratio per rank: exp(mean of the rank's token log-ratios), as Rank-GRPO. Only matters "
            "when num_iterations > 1 (with one update per generation the ratio is 1)."
        },
    )

    # --- the GRPO family (remark.algos.family; recipes in configs/recipes, docs/recipes.md) ----------
    recipe: str | None = field(
        default=None,
        metadata={
            "help": "Name of the recipe whose fields this run starts from (`remark train --recipe NAME`; a config "
            "file may name one too). Recorded in remark_config.json."
        },
    )
    advantage_baseline: str = field(
        default="mean",
        metadata={
            "help": "What is subtracted from rank rewards: 'mean' (group mean, GRPO), 'rloo' (mean of the other "
            "G - 1 lists, RLOO), 'batch' (mean of the rank over the batch, REINFORCE++)."
        },
    )
    gmpo_level: str | None = field(
        default=None,
        metadata={
            "help": "GMPO's geometric-mean objective: per-token log-ratios clipped in log space to [-epsilon, "
            "epsilon_high] in the advantage's direction, averaged over each 'rank' (or the whole 'sequence'), "
            "exponentiated, times the advantage; TRL's own clip is off. None = TRL's objective."
        },
    )
    loss_aggregation: str = field(
        default="token",
        metadata={
            "help": "'token': TRL's aggregation for loss_type; 'prompt': average over prompt groups of each "
            "group's token mean (ScaleRL; needs loss_type dapo or cispo)."
        },
    )
    truncation: str = field(
        default="score",
        metadata={
            "help": "A list cut at max_completion_length: 'score' (as parsed) or 'interrupt' (ScaleRL's forced "
            "interruption: ended at the cap, its cut last line earns 0). TRL's mask_truncated_completions "
            "(DAPO's overlong filtering) drops it from the loss instead."
        },
    )
    refill_batch: bool = field(
        default=False,
        metadata={
            "help": "DAPO's dynamic sampling / Olmo 3's active sampling: replace zero-signal groups (and groups of "
            "requests dropped by pass_rate_drop) by groups of further prompts until the batch is full. "
            "Needs zero_signal_filter."
        },
    )
    refill_max_rounds: int = field(
        default=8,
        metadata={
            "help": "Extra generation rounds per batch at most; groups still missing then stay in the batch, "
            "masked by the zero-signal filter."
        },
    )

    # --- validation and safety -------------------------------------------------------------------
    validation_steps: int = field(
        default=0,
        metadata={"help": "Validate (greedy lists on valid_split) every N steps and at step 0; 0 = off."},
    )
    validation_metric: str = field(
        default="eval/recall@20/union",
        metadata={
            "help": "Metric that picks the best checkpoint: eval/<metric>@<k>/<view> on greedy lists, or "
            "sampled/<metric>@<k>/<view> on sampled ones (needs validation_num_samples)."
        },
    )
    validation_max_requests: int | None = field(
        default=None, metadata={"help": "Validate on the first N requests of valid_split (None = all)."}
    )
    validation_batch_size: int = field(
        default=32, metadata={"help": "Prompts per generation batch in validation."}
    )
    validation_data_dir: str | None = field(
        default=None,
        metadata={
            "help": "Validate against another prepared dataset (e.g. held-out responders of the same requests, "
            "data_prep.holdout); default: data_dir."
        },
    )
    validation_num_samples: int = field(
        default=0,
        metadata={
            "help": "Also score N sampled lists per request at validation_temperature (small models' greedy lists "
            "repeat one item: docs/experiments pitfall 1); written under <output_dir>/sampled/ in the same format."
        },
    )
    validation_temperature: float = field(
        default=1.0, metadata={"help": "Temperature of sampled validation."}
    )
    divergence_kl: float | None = field(
        default=None, metadata={"help": "Stop (keeping the best checkpoint) when the logged KL exceeds this."}
    )
    divergence_log_ratio: float | None = field(
        default=None, metadata={"help": "Stop when the mean |log ratio| to the reference exceeds this."}
    )

    # --- online group-size adaptation (remark.planning.adaptive) -------------------------------
    group_size_profile: str | None = field(
        default=None,
        metadata={
            "help": "Cost profile JSON (bench/gpu_check.py): enables the group-size advisor, which re-plans G from "
            "live pass rates, logs plan/recommended_G and writes it into checkpoints (applied on resume)."
        },
    )
    group_size_memory_budget_gb: float | None = field(
        default=None, metadata={"help": "Memory budget (GB) for the group-size advisor."}
    )
    group_size_every: int = field(default=50, metadata={"help": "Steps between group-size recommendations."})
    group_size_candidates: list[int] | None = field(
        default=None,
        metadata={"help": "G values the advisor may recommend (default: divisors of the batch)."},
    )
    adapt_group_size: bool = field(
        default=True,
        metadata={"help": "On resume, use the checkpoint's recommended G (requests per step kept fixed)."},
    )

    # --- tiny CPU runs ---------------------------------------------------------------------------
    build_tiny: dict[str, Any] | None = field(
        default=None,
        metadata={
            "help": "Build synthetic data and a tiny model under output_dir before training (keys: n_requests, "
            "n_items, seed, sft_steps, spec); used by configs/tiny_cpu.yaml so it runs anywhere."
        },
    )

    # TRL changed these defaults across versions: a run must set them (see the module docstring).
    loss_type: str | None = field(
        default=None, metadata={"help": f"One of {', '.join(LOSS_TYPES)} (required)."}
    )
    scale_rewards: str | None = field(
        default=None,
        metadata={"help": "Must equal advantage_scaling: 'group', 'batch' or 'none' (required)."},
    )

    def __post_init__(self) -> None:
        validate_remark_fields(self)
        super().__post_init__()
        validate_remark_layout(self)


def _choice(name: str, value: Any, valid: tuple[str, ...] | list[str]) -> None:
    if value not in valid:
        close = difflib.get_close_matches(str(value), list(valid), n=1)
        hint = f"did you mean {close[0]!r}?" if close else f"valid: {', '.join(map(repr, valid))}"
        raise InputError(f"unknown {name} {value!r}", field=name, hint=hint)


def validate_remark_fields(cfg: RemarkGRPOConfig) -> None:
    """Check the rank-level fields and their combinations; raise ``InputError`` saying what to change."""
    import remark.algos  # noqa: F401  (registers the reward schemes)
    from remark.algos import registry

    _choice("reward_scheme", cfg.reward_scheme, registry.names("reward"))
    _choice("advantage_scaling", cfg.advantage_scaling, SCALING_MODES)
    _choice("sampling", cfg.sampling, SAMPLING_MODES)
    _choice("match_mode", cfg.match_mode, MATCH_MODES)
    if cfg.loss_type is None:
        raise InputError(
            "loss_type must be set explicitly (TRL's default changed from 'bnpo' to 'dapo' across versions)",
            field="loss_type",
            hint=f"one of {', '.join(LOSS_TYPES)}; Rank-GRPO used 'bnpo'",
        )
    _choice("loss_type", cfg.loss_type, LOSS_TYPES)
    if cfg.scale_rewards is None:
        raise InputError(
            "scale_rewards must be set explicitly and equal advantage_scaling",
            field="scale_rewards",
            hint=f"set scale_rewards: {cfg.advantage_scaling}",
        )
    if cfg.scale_rewards != cfg.advantage_scaling:
        raise InputError(
            f"scale_rewards={cfg.scale_rewards!r} disagrees with advantage_scaling={cfg.advantage_scaling!r}",
            field="scale_rewards",
            hint="the trainer scales rank rewards by advantage_scaling; set both to the same value",
        )
    if cfg.num_ranks < 1:
        raise InputError(f"num_ranks must be >= 1, got {cfg.num_ranks}", field="num_ranks")
    if cfg.num_generations is not None and cfg.num_generations < 2:
        raise InputError(
            f"num_generations must be >= 2 for group advantages, got {cfg.num_generations}",
            field="num_generations",
        )
    cap = cfg.max_completion_length
    if cap is not None and cap < cfg.num_ranks * MIN_TOKENS_PER_LINE:
        raise InputError(
            f"max_completion_length={cap} cannot hold num_ranks={cfg.num_ranks} lines "
            f"(needs >= {cfg.num_ranks * MIN_TOKENS_PER_LINE} tokens at >= {MIN_TOKENS_PER_LINE} tokens per line)",
            field="max_completion_length",
            hint="raise max_completion_length or lower num_ranks",
        )
    if cfg.use_vllm:
        import importlib.util

        if importlib.util.find_spec("vllm") is None:
            raise InputError(
                "use_vllm is true but vLLM is not installed",
                field="use_vllm",
                hint="pip install 'remark[vllm]' on a CUDA machine, or set use_vllm: false (transformers generation)",
            )
    if cfg.rank_level_ratio and cfg.importance_sampling_level == "sequence":
        raise InputError(
            "rank_level_ratio contradicts importance_sampling_level='sequence' (a rank-level ratio needs "
            "token log-ratios per rank)",
            field="rank_level_ratio",
            hint="set importance_sampling_level: token, or rank_level_ratio: false",
        )
    _validate_family(cfg)
    if cfg.pass_rate_drop is not None and not 0.0 < cfg.pass_rate_drop <= 1.0:
        raise InputError(
            f"pass_rate_drop must be in (0, 1], got {cfg.pass_rate_drop}", field="pass_rate_drop"
        )
    if cfg.validation_num_samples < 0 or (cfg.validation_num_samples and cfg.validation_temperature <= 0):
        raise InputError(
            "validation_num_samples must be >= 0, with validation_temperature > 0 when sampling",
            field="validation_num_samples",
        )
    if cfg.group_size_profile is not None:
        if cfg.group_size_memory_budget_gb is None or cfg.group_size_memory_budget_gb <= 0:
            raise InputError(
                "the group-size advisor needs a memory budget",
                field="group_size_memory_budget_gb",
                hint="set group_size_memory_budget_gb (GB), or remove group_size_profile",
            )
        if not Path(cfg.group_size_profile).is_file():
            raise InputError(
                "cost profile not found", path=cfg.group_size_profile, field="group_size_profile"
            )
        if cfg.group_size_every < 1:
            raise InputError("group_size_every must be >= 1", field="group_size_every")
    if cfg.validation_steps < 0:
        raise InputError("validation_steps must be >= 0", field="validation_steps")
    parts = cfg.validation_metric.split("/")
    if len(parts) != 3 or parts[0] not in ("eval", "sampled") or "@" not in parts[1]:
        raise InputError(
            f"validation_metric {cfg.validation_metric!r} is not of the form eval/<metric>@<k>/<view> "
            "(greedy lists) or sampled/<metric>@<k>/<view> (sampled lists)",
            field="validation_metric",
            hint="e.g. eval/recall@20/union or sampled/recall@20/per_responder",
        )
    if parts[0] == "sampled" and cfg.validation_steps and not cfg.validation_num_samples:
        raise InputError(
            f"validation_metric {cfg.validation_metric!r} needs sampled validation",
            field="validation_metric",
            hint="set validation_num_samples (e.g. 4), or choose an eval/... metric",
        )


def _contradiction(message: str, field: str, hint: str) -> InputError:
    return InputError(message, field=field, hint=hint)


def _validate_family(cfg: RemarkGRPOConfig) -> None:
    """Loss-family options: known names, and the combinations that contradict each other."""
    from remark.algos import registry

    _choice("advantage_baseline", cfg.advantage_baseline, registry.names("baseline"))
    _choice("loss_aggregation", cfg.loss_aggregation, registry.names("aggregation"))
    _choice("truncation", cfg.truncation, registry.names("truncation"))
    if cfg.gmpo_level is not None:
        _choice("gmpo_level", cfg.gmpo_level, GMPO_LEVELS)
    if cfg.recipe is not None and not (
        str(cfg.recipe).endswith((".yaml", ".yml")) and Path(cfg.recipe).is_file()
    ):
        from remark.recipes import recipe_names

        _choice("recipe", cfg.recipe, recipe_names())
    sequence = cfg.importance_sampling_level == "sequence"
    if cfg.loss_type == "luspo" and not sequence:
        raise _contradiction(
            "loss_type 'luspo' scales a sequence-level loss by length and needs importance_sampling_level "
            f"'sequence', got {cfg.importance_sampling_level!r}",
            "importance_sampling_level",
            "set importance_sampling_level: sequence (and rank_level_ratio: false), or pick another loss_type",
        )
    if cfg.rank_level_ratio and cfg.loss_type == "vespo":
        raise _contradiction(
            "rank_level_ratio has no effect with loss_type 'vespo' (it builds its own sequence weight from the "
            "summed token log-ratios, which rank means leave unchanged)",
            "rank_level_ratio",
            "set rank_level_ratio: false, or pick a clipped loss_type (grpo, bnpo, dr_grpo, dapo) or cispo/sapo",
        )
    if cfg.gmpo_level is not None:
        if cfg.loss_type not in CLIPPED_LOSS_TYPES:
            raise _contradiction(
                f"gmpo_level ({cfg.gmpo_level!r}) replaces the clipped surrogate's ratio, but loss_type "
                f"{cfg.loss_type!r} has its own importance weight",
                "gmpo_level",
                f"use loss_type one of {', '.join(CLIPPED_LOSS_TYPES)} (GMPO: grpo), or gmpo_level: null",
            )
        if sequence:
            raise _contradiction(
                "gmpo_level contradicts importance_sampling_level='sequence' (GMPO builds its own geometric-mean "
                "ratio from clipped token log-ratios)",
                "gmpo_level",
                "set importance_sampling_level: token; use gmpo_level: sequence for a response-level mean",
            )
        if cfg.rank_level_ratio:
            raise _contradiction(
                "gmpo_level and rank_level_ratio both replace the token ratio; GMPO at the rank level is "
                "gmpo_level: rank",
                "rank_level_ratio",
                "set rank_level_ratio: false",
            )
        if cfg.delta is not None:
            raise _contradiction(
                "delta (two-sided clip) is part of TRL's clipped surrogate, which gmpo_level switches off",
                "delta",
                "set delta: null",
            )
        if cfg.off_policy_mask_threshold is not None:
            raise _contradiction(
                "off_policy_mask_threshold would measure the KL on GMPO's clipped log-ratios, not the policy's",
                "off_policy_mask_threshold",
                "set off_policy_mask_threshold: null, or gmpo_level: null",
            )
    if cfg.loss_type == "cispo" and (cfg.epsilon_high is None or cfg.epsilon_high <= 1.0):
        raise _contradiction(
            "loss_type 'cispo' caps the importance weight at epsilon_high itself (an absolute bound, not 1 + eps), "
            f"so epsilon_high must be > 1, got {cfg.epsilon_high}",
            "epsilon_high",
            "set epsilon_high: 5.0 (ScaleRL's eps_max)",
        )
    if cfg.loss_aggregation == "prompt" and cfg.loss_type not in TOKEN_SUM_LOSS_TYPES:
        raise _contradiction(
            f"loss_aggregation 'prompt' weights token sums normalised by the batch's token count, but loss_type "
            f"{cfg.loss_type!r} normalises differently",
            "loss_aggregation",
            f"use loss_type one of {', '.join(TOKEN_SUM_LOSS_TYPES)}, or loss_aggregation: token",
        )
    if cfg.advantage_baseline == "batch" and cfg.reward_scheme == "responder_rb":
        raise _contradiction(
            "advantage_baseline 'batch' would average the padded responders of responder_rb into the batch mean",
            "advantage_baseline",
            "use advantage_baseline: mean or rloo with responder_rb",
        )
    if cfg.refill_batch and not cfg.zero_signal_filter:
        raise _contradiction(
            "refill_batch replaces zero-signal groups, so it needs zero_signal_filter: true",
            "refill_batch",
            "set zero_signal_filter: true (or refill_batch: false)",
        )
    if cfg.refill_max_rounds < 1:
        raise InputError(
            f"refill_max_rounds must be >= 1, got {cfg.refill_max_rounds}", field="refill_max_rounds"
        )
    if cfg.truncation == "interrupt" and cfg.mask_truncated_completions:
        raise _contradiction(
            "truncation 'interrupt' scores truncated lists, mask_truncated_completions drops them from the loss",
            "truncation",
            "pick one: truncation: interrupt (ScaleRL) or mask_truncated_completions: true (DAPO)",
        )
    if cfg.off_policy_mask_threshold is not None and cfg.off_policy_mask_threshold <= 0:
        raise InputError(
            f"off_policy_mask_threshold must be > 0, got {cfg.off_policy_mask_threshold}",
            field="off_policy_mask_threshold",
            hint="DeepSeek-V3.2's delta, e.g. 0.5; null turns the mask off",
        )


def validate_remark_layout(cfg: RemarkGRPOConfig) -> None:
    """Checks that need TRL's resolved batch layout (after ``GRPOConfig.__post_init__``)."""
    if not cfg.refill_batch or cfg.world_size == 1:
        return
    local = cfg.per_device_train_batch_size * cfg.steps_per_generation
    if local % cfg.num_generations:
        raise InputError(
            f"refill_batch on {cfg.world_size} processes needs each process's generation batch "
            f"({cfg.per_device_train_batch_size} x {cfg.steps_per_generation} steps_per_generation = {local}) "
            f"to hold whole groups of num_generations={cfg.num_generations}",
            field="per_device_train_batch_size",
            hint="make per_device_train_batch_size * steps_per_generation a multiple of num_generations",
        )


def check_field_names(keys: Any, path: str | Path | None = None) -> None:
    """Raise ``InputError`` for the first key that is not a ``RemarkGRPOConfig`` field, with a suggestion."""
    known = set(config_field_names())
    for key in keys:
        if key not in known:
            close = difflib.get_close_matches(key, sorted(known), n=1)
            raise InputError(
                f"unknown config field {key!r}",
                path=path,
                field=key,
                hint=f"did you mean {close[0]!r}?"
                if close
                else "see `remark train --help` and docs/recipes.md",
            )


def config_field_names() -> list[str]:
    return [f.name for f in fields(RemarkGRPOConfig)]


def read_config_values(path: str | Path) -> dict[str, Any]:
    """The mapping of fields in a flat YAML config file (not yet validated); errors name the file and line."""
    import yaml

    path = Path(path)
    if not path.is_file():
        raise InputError("config file not found", path=path)
    try:
        loaded = yaml.safe_load(path.read_text())
    except yaml.YAMLError as err:
        line = getattr(getattr(err, "problem_mark", None), "line", None)
        raise InputError(f"not valid YAML: {err}", path=path, row=None if line is None else line + 1) from err
    if loaded is None:
        loaded = {}
    if not isinstance(loaded, dict):
        raise InputError("expected a mapping of config fields at the top level", path=path)
    return loaded


def load_config(
    path: str | Path | None = None,
    overrides: dict[str, Any] | None = None,
    *,
    base: dict[str, Any] | None = None,
) -> RemarkGRPOConfig:
    """Read a flat YAML file of ``RemarkGRPOConfig`` fields (plus ``overrides``) and validate it.

    ``base`` (a recipe's fields, ``remark.recipes``) comes first, the file on top, ``overrides`` last.
    Unknown keys are an error naming the file and suggesting the closest field.
    """
    values: dict[str, Any] = dict(base or {})
    if path is not None:
        path = Path(path)
        values.update(read_config_values(path))
    values.update(overrides or {})
    check_field_names(values, path)
    try:
        return RemarkGRPOConfig(**values)
    except InputError as err:
        if path is not None and err.path is None:
            raise InputError(str(err), path=path) from err
        raise
    except (TypeError, ValueError) as err:
        raise InputError(str(err), path=path) from err
