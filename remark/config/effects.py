"""Settings that act only under others: one table, one rule, checked before anything loads.

A field given a value (not its default) that no other setting lets act would be silently ignored: a run
with ``build_tiny`` trains its own tiny model whatever ``model_name_or_path`` says, LoRA fields change
nothing without ``use_peft``, vLLM fields nothing without ``use_vllm``. :data:`EFFECTS` lists every such
field with the condition under which it acts (``Effect.acts``, read from the composed config) and what
the fields it reads are (``Effect.needs``), and :func:`check_effects` applies one rule to it:

- only values a user or a recipe gave count: the config file, ``--set``, or the recipe's fields, and
  only when they differ from the field's default (``load_config`` passes where each value came from);
- a value given where it cannot act is an **error** (``InputError`` naming the field, the condition's
  fields and where each was set), unless the row is a **notice** (harmless and expected: the on-policy
  ratio settings, a token-map value the segmentation does not use), the value came from a
  recipe (its author, not the user, chose it), or the condition was switched off in a later layer than
  the value was set (``--set use_vllm=false`` on a config file that sets ``vllm_mode``: the user turned
  the feature off on purpose). A notice is printed before training and recorded in
  ``train_summary.json["notes"]``.

Layers, lowest first: the field's default, the recipe, the config file, ``--set``. A field is
*conditional* when it has a row here; ``tests/remark/test_effects.py`` lists every other field of
``RemarkGRPOConfig`` as unconditional, so a new field must be put in one list or the other.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from catalog.io.errors import InputError

#: the layers a value can come from, lowest first (``load_config``'s origins)
LAYERS = ("default", "recipe", "config", "--set")
Severity = Literal["error", "notice"]


@dataclass(frozen=True)
class Effect:
    """``fields`` act only when ``acts(cfg)``; ``when`` says (with ``{name}`` of ``needs`` filled in) under
    what they do not, ``why`` what happens instead, ``hint`` what to do."""

    fields: tuple[str, ...]
    needs: tuple[str, ...]
    acts: Callable[[Any], bool]
    when: str
    why: str
    hint: str
    severity: Severity = "error"


@dataclass(frozen=True)
class Origin:
    """Where a value came from: ``layer`` (one of :data:`LAYERS`) and, for a file, its path and line."""

    layer: str
    path: str | None = None
    line: int | None = None

    def __str__(self) -> str:
        if self.layer == "default":
            return "the default"
        if self.layer == "--set":
            return "--set"
        if self.layer == "recipe":
            return "recipe " + (repr(Path(self.path).stem) if self.path else "fields")
        return f"{self.path or self.layer}" + (f" line {self.line}" if self.line else "")

    @property
    def rank(self) -> int:
        return LAYERS.index(self.layer)


@dataclass(frozen=True)
class Notice:
    """A setting given where it has no effect, printed and recorded (see the module docstring)."""

    fields: tuple[str, ...]
    text: str

    def __str__(self) -> str:
        return self.text


def _v(cfg: Any, name: str) -> Any:
    """A field's plain value (transformers turns some strings into enums)."""
    value = getattr(cfg, name, None)
    return getattr(value, "value", value)


def colocated_vllm(cfg: Any) -> bool:
    """Whether generation runs on a vLLM engine inside the training process (``use_vllm`` with
    ``vllm_mode: colocate``): the engine remark's ``vllm_*`` settings configure and validation can reuse.
    ``cfg`` is the config, or the trainer (which carries both fields)."""
    return bool(_v(cfg, "use_vllm")) and _v(cfg, "vllm_mode") == "colocate"


def _segmentation_fact(cfg: Any, fact: str) -> Any:
    """A fact the configured segmentation declares in the registry (``remark.algos.registry``), or None
    for a name the registry does not know (the validation reports it)."""
    from remark.algos.registry import declared

    entry = {d.name: d for d in declared("segmentation")}.get(_v(cfg, "segmentation"))
    return None if entry is None else entry.meta.get(fact)


def _on_policy(cfg: Any) -> bool:
    """Every batch is used once, by the policy that sampled it: importance ratios are 1.

    One update per generation (``num_iterations`` 1) and one generation per optimizer step
    (``gradient_accumulation_steps`` a multiple of ``steps_per_generation``); vLLM sampling is counted as
    possibly off-policy (its sampler is not the trainer's forward pass)."""
    steps = _v(cfg, "steps_per_generation") or _v(cfg, "gradient_accumulation_steps") or 1
    return (
        _v(cfg, "num_iterations") == 1
        and (_v(cfg, "gradient_accumulation_steps") or 1) % steps == 0
        and not _v(cfg, "use_vllm")
    )


def _reports_to(cfg: Any, name: str) -> bool:
    value = _v(cfg, "report_to")
    names = [value] if isinstance(value, str) else list(value or [])
    return name in names or "all" in names


def _adapter_model(cfg: Any) -> bool:
    from eval.adapters import is_adapter_dir

    model = _v(cfg, "model_name_or_path")
    return _v(cfg, "build_tiny") is None and bool(model) and is_adapter_dir(model)


CLIPPED = ("grpo", "bnpo", "dr_grpo", "dapo", "luspo")  # TRL's losses with the clip (1 - eps, 1 + eps_high)
VLLM = (
    "vllm_mode",
    "vllm_model_impl",
    "vllm_enable_sleep_mode",
    "vllm_structured_outputs_regex",
    "vllm_max_model_length",
    "vllm_importance_sampling_correction",
)
VLLM_SERVER = (
    "vllm_server_base_url",
    "vllm_server_host",
    "vllm_server_port",
    "vllm_server_timeout",
    "vllm_group_port",
)
VLLM_COLOCATE = (
    "vllm_gpu_memory_utilization",
    "vllm_tensor_parallel_size",
    "vllm_kv_cache_gib",
    "vllm_enforce_eager",
)
VLLM_IS = (
    "vllm_importance_sampling_mode",
    "vllm_importance_sampling_clip_max",
    "vllm_importance_sampling_clip_min",
    "vllm_importance_sampling_cap",
)
LORA = ("lora_r", "lora_alpha", "lora_dropout", "lora_target_modules")
VALIDATION = (
    "valid_split",
    "validation_metric",
    "validation_max_requests",
    "validation_batch_size",
    "validation_data_dir",
    "validation_num_samples",
    "validation_engine",
    "baseline_run",
)
ADVISOR = ("group_size_memory_budget_gb", "group_size_every", "group_size_candidates", "adapt_group_size")
#: transformers' and TRL's evaluation loop: remark train passes no evaluation dataset (validation_steps validates)
NO_TRL_EVAL = (
    "eval_strategy",
    "eval_steps",
    "eval_on_start",
    "eval_delay",
    "eval_accumulation_steps",
    "eval_do_concat_batches",
    "eval_use_gather_object",
    "per_device_eval_batch_size",
    "num_generations_eval",
    "bf16_full_eval",
    "fp16_full_eval",
    "prediction_loss_only",
    "include_for_metrics",
    "batch_eval_metrics",
    "load_best_model_at_end",
    "metric_for_best_model",
    "greater_is_better",
    "do_eval",
    "do_predict",
)
#: what GRPO replaces: TRL's RepeatSampler and loss, remark's rank advantages from the rank rewards
NOT_IN_GRPO = (
    "label_smoothing_factor",
    "label_names",
    "train_sampling_strategy",
    "length_column_name",
    "reward_weights",
    "multi_objective_aggregation",
    "max_tool_calling_iterations",
    "do_train",
)
HUB = ("hub_model_id", "hub_strategy", "hub_private_repo", "hub_revision", "hub_always_push", "hub_token")
TRACKIO = ("project", "trackio_space_id", "trackio_bucket_id", "trackio_static_space_id")
COMPLETION_LOGS = (
    "num_completions_to_print",
    "log_unique_prompts",
    "log_completions_hub_repo",
    "log_multimodal",
)
ADAPTIVE_ENTROPY = ("entropy_coef_min", "entropy_coef_max", "entropy_coef_delta", "entropy_target")
NOT_ADAM = ("sgd", "adafactor", "adagrad", "rmsprop", "lomo", "adalomo")

#: field -> the condition under which it acts (see the module docstring for the rule)
EFFECTS: tuple[Effect, ...] = (
    # --- what to train on ---------------------------------------------------------------------------
    Effect(
        ("model_name_or_path", "data_dir"),
        ("build_tiny",),
        lambda c: _v(c, "build_tiny") is None,
        "with build_tiny set",
        "the run builds and trains its own synthetic dataset and tiny model",
        "drop it, or remove build_tiny to train on your own model and data",
    ),
    Effect(
        ("adapter_base_model", "merge_adapter"),
        ("model_name_or_path", "build_tiny"),
        _adapter_model,
        "unless model_name_or_path is a LoRA adapter folder (adapter_config.json)",
        "only an adapter has a base model to find or merge into",
        "drop it, or point model_name_or_path at an adapter folder",
    ),
    # --- validation and the group-size advisor -------------------------------------------------------
    Effect(
        VALIDATION,
        ("validation_steps",),
        lambda c: bool(_v(c, "validation_steps")),
        "with validation_steps={validation_steps}",
        "nothing is validated",
        "set validation_steps (e.g. 100), or drop it",
    ),
    Effect(
        ("validation_temperature",),
        ("validation_steps", "validation_num_samples"),
        lambda c: bool(_v(c, "validation_steps")) and bool(_v(c, "validation_num_samples")),
        "with validation_steps={validation_steps}, validation_num_samples={validation_num_samples}",
        "only sampled validation lists are sampled at it",
        "set validation_num_samples (and validation_steps), or drop it",
    ),
    Effect(
        ADVISOR,
        ("group_size_profile",),
        lambda c: _v(c, "group_size_profile") is not None,
        "without group_size_profile",
        "the group-size advisor runs only with a cost profile",
        "set group_size_profile, or drop it",
    ),
    Effect(
        ("divergence_kl", "divergence_log_ratio"),
        ("beta",),
        lambda c: (_v(c, "beta") or 0) > 0,
        "with beta={beta}",
        "without a KL term there is no reference model, so neither value is ever logged and the guard "
        "never fires",
        "set beta > 0, or drop it",
    ),
    # --- LoRA and vLLM ------------------------------------------------------------------------------------
    Effect(
        LORA,
        ("use_peft",),
        lambda c: bool(_v(c, "use_peft")),
        "without use_peft",
        "every weight is trained, no adapter",
        "set use_peft: true to train a LoRA adapter, or drop it",
    ),
    Effect(
        VLLM + VLLM_SERVER + VLLM_COLOCATE + VLLM_IS,
        ("use_vllm",),
        lambda c: bool(_v(c, "use_vllm")),
        "without use_vllm",
        "transformers generates, and its sampling log-probs are the policy's own (an importance-sampling "
        "correction is a no-op)",
        "set use_vllm: true, or drop it",
    ),
    Effect(
        VLLM_IS,
        ("vllm_importance_sampling_correction",),
        lambda c: bool(_v(c, "vllm_importance_sampling_correction")),
        "with vllm_importance_sampling_correction=false",
        "no importance-sampling correction is applied",
        "set vllm_importance_sampling_correction: true, or drop it",
    ),
    Effect(
        VLLM_SERVER,
        ("vllm_mode",),
        lambda c: _v(c, "vllm_mode") == "server",
        "with vllm_mode={vllm_mode!r}",
        "only the server mode connects to a vLLM server",
        "set vllm_mode: server, or drop it",
    ),
    Effect(
        ("vllm_server_host", "vllm_server_port"),
        ("vllm_server_base_url",),
        lambda c: _v(c, "vllm_server_base_url") is None,
        "with vllm_server_base_url set",
        "TRL connects to the base URL and ignores host and port",
        "drop one of them",
    ),
    Effect(
        VLLM_COLOCATE,
        ("vllm_mode",),
        lambda c: _v(c, "vllm_mode") == "colocate",
        "with vllm_mode={vllm_mode!r}",
        "the server was started with its own memory and parallel settings",
        "set them where the vLLM server is started (trl vllm-serve), or drop them",
    ),
    Effect(
        ("cache_implementation",),
        ("use_vllm",),
        lambda c: not _v(c, "use_vllm"),
        "with use_vllm=true",
        "vLLM has its own cache",
        "drop it, or set use_vllm: false",
    ),
    Effect(
        ("transformers_continuous_batching_config",),
        ("use_transformers_continuous_batching",),
        lambda c: bool(_v(c, "use_transformers_continuous_batching")),
        "without use_transformers_continuous_batching",
        "generation does not batch continuously",
        "set use_transformers_continuous_batching: true, or drop it",
    ),
    # --- rank rewards and the token map ------------------------------------------------------------------
    Effect(
        ("advantage_eps",),
        ("advantage_scaling",),
        lambda c: _v(c, "advantage_scaling") != "none",
        "with advantage_scaling='none'",
        "eps is added to a std that is not divided by",
        "set advantage_scaling: group or batch, or drop it",
    ),
    Effect(
        ("eos_complete_bonus", "eos_early_penalty"),
        ("end_shaping",),
        lambda c: _v(c, "end_shaping") != "none",
        "with end_shaping='none'",
        "the end token gets advantage 0",
        "set end_shaping: remark or rank_grpo, or drop it",
    ),
    Effect(
        ("filler_penalty",),
        ("segmentation",),
        lambda c: bool(_segmentation_fact(c, "filler")),
        "with segmentation={segmentation!r}",
        "that segmentation gives every token a slot, so no token is filler",
        "drop it, or use a segmentation with filler tokens (segmentation: lines)",
        severity="notice",
    ),
    Effect(
        ("refill_max_rounds",),
        ("refill_batch",),
        lambda c: bool(_v(c, "refill_batch")),
        "without refill_batch",
        "no batch is refilled",
        "set refill_batch: true (with zero_signal_filter: true), or drop it",
    ),
    Effect(
        ("year_tolerance",),
        ("match_mode",),
        lambda c: _v(c, "match_mode") != "exact",
        "with match_mode='exact'",
        "the exact lookup matches (title, year) verbatim",
        "use match_mode: normalized or fuzzy, or drop it",
    ),
    Effect(
        ("match_threshold", "match_scorer"),
        ("match_mode",),
        lambda c: _v(c, "match_mode") in (None, "fuzzy"),
        "with match_mode={match_mode!r}",
        "only the fuzzy rule scores titles",
        "use match_mode: fuzzy, or drop it",
    ),
    # --- the loss ---------------------------------------------------------------------------------------------
    Effect(
        ("epsilon", "delta"),
        ("loss_type",),
        lambda c: _v(c, "loss_type") in CLIPPED,
        "with loss_type={loss_type!r}",
        "that loss has no (1 - epsilon, 1 + epsilon_high) clip",
        f"use a clipped loss_type ({', '.join(CLIPPED)}), or drop it",
    ),
    Effect(
        ("epsilon_high",),
        ("loss_type",),
        lambda c: _v(c, "loss_type") in (*CLIPPED, "cispo"),
        "with loss_type={loss_type!r}",
        "that loss has no clip",
        f"use a clipped loss_type ({', '.join(CLIPPED)}) or cispo, or drop it",
    ),
    Effect(
        ("sapo_temperature_pos", "sapo_temperature_neg"),
        ("loss_type",),
        lambda c: _v(c, "loss_type") == "sapo",
        "with loss_type={loss_type!r}",
        "only SAPO's soft gate has temperatures",
        "set loss_type: sapo, or drop it",
    ),
    Effect(
        ("vespo_k_pos", "vespo_lambda_pos", "vespo_k_neg", "vespo_lambda_neg"),
        ("loss_type",),
        lambda c: _v(c, "loss_type") == "vespo",
        "with loss_type={loss_type!r}",
        "only VESPO's sequence weight reads them",
        "set loss_type: vespo, or drop it",
    ),
    Effect(
        ("use_bias_correction_kl", "sync_ref_model", "ref_model_mixup_alpha", "ref_model_sync_steps"),
        ("beta",),
        lambda c: (_v(c, "beta") or 0) > 0,
        "with beta={beta}",
        "there is no KL term and no reference model",
        "set beta > 0, or drop it",
    ),
    Effect(
        ("ref_model_mixup_alpha", "ref_model_sync_steps"),
        ("sync_ref_model",),
        lambda c: bool(_v(c, "sync_ref_model")),
        "without sync_ref_model",
        "the reference model is never synchronised",
        "set sync_ref_model: true, or drop it",
    ),
    Effect(
        ("epsilon", "epsilon_high", "delta", "off_policy_mask_threshold", "rank_level_ratio"),
        ("num_iterations", "steps_per_generation", "gradient_accumulation_steps", "use_vllm"),
        lambda c: not _on_policy(c),
        "with num_iterations={num_iterations} and one generation per optimizer step",
        "every batch is used once, on-policy, so importance ratios are 1, clipping and masking never fire "
        "and a rank-level ratio leaves the gradient unchanged; raise num_iterations (or steps_per_generation) "
        "to see them act",
        "a notice only: the values are kept for off-policy runs",
        severity="notice",
    ),
    Effect(
        ("gmpo_level",),
        ("num_iterations", "steps_per_generation", "gradient_accumulation_steps", "use_vllm"),
        lambda c: not _on_policy(c) or _v(c, "gmpo_level") == "sequence",
        "with num_iterations={num_iterations} and one generation per optimizer step",
        "GMPO's rank-level ratio is 1 on-policy and its gradient equals the token-level one",
        "a notice only: the value is kept for off-policy runs",
        severity="notice",
    ),
    # --- transformers' training loop -------------------------------------------------------------------
    Effect(
        NO_TRL_EVAL,
        (),
        lambda c: False,
        "in remark train",
        "the trainer gets no evaluation dataset (transformers would refuse eval_strategy without one); "
        "remark validates with validation_steps",
        "use validation_steps and the validation_* fields, or drop it",
    ),
    Effect(
        NOT_IN_GRPO,
        (),
        lambda c: False,
        "in remark train",
        "TRL's GRPO trainer samples groups with its own sampler and computes its own loss (no labels, no "
        "tools), and the advantages come from the rank rewards alone (TRL's per-list reward is only logged)",
        "drop it",
    ),
    Effect(
        ("resume_from_checkpoint",),
        (),
        lambda c: False,
        "in remark train",
        "transformers leaves this field to scripts",
        "use remark train --resume [CHECKPOINT]",
    ),
    Effect(
        ("fsdp_config",),
        ("fsdp",),
        lambda c: bool(_v(c, "fsdp")),
        "without fsdp",
        "FSDP is off",
        "set fsdp (or launch with an FSDP accelerate config), or drop it",
    ),
    Effect(
        ("liger_kernel_config",),
        ("use_liger_kernel",),
        lambda c: bool(_v(c, "use_liger_kernel")),
        "without use_liger_kernel",
        "no Liger kernel is applied",
        "set use_liger_kernel: true, or drop it",
    ),
    Effect(
        ("dataloader_prefetch_factor", "dataloader_persistent_workers"),
        ("dataloader_num_workers",),
        lambda c: (_v(c, "dataloader_num_workers") or 0) > 0,
        "with dataloader_num_workers={dataloader_num_workers}",
        "the data loads in the main process, with no workers to prefetch or keep",
        "set dataloader_num_workers > 0, or drop it",
    ),
    Effect(
        TRACKIO,
        ("report_to",),
        lambda c: _reports_to(c, "trackio"),
        "with report_to={report_to!r}",
        "only the Trackio logger reads it",
        "add trackio to report_to, or drop it",
    ),
    Effect(
        ("num_train_epochs",),
        ("max_steps",),
        lambda c: (_v(c, "max_steps") or -1) <= 0,
        "with max_steps={max_steps}",
        "max_steps sets the run's length",
        "drop num_train_epochs, or set max_steps: -1 to train for epochs",
    ),
    Effect(
        ("warmup_steps",),
        ("lr_scheduler_type",),
        lambda c: _v(c, "lr_scheduler_type") != "constant",
        "with lr_scheduler_type='constant'",
        "the constant schedule has no warm-up",
        "use lr_scheduler_type: constant_with_warmup, or drop it",
    ),
    Effect(
        ("adam_beta1", "adam_beta2", "adam_epsilon"),
        ("optim",),
        lambda c: not str(_v(c, "optim")).startswith(NOT_ADAM),
        "with optim={optim!r}",
        "that optimizer has no Adam moments",
        "use an Adam optimizer, or drop it",
    ),
    Effect(
        ("save_steps",),
        ("save_strategy",),
        lambda c: _v(c, "save_strategy") == "steps",
        "with save_strategy={save_strategy!r}",
        "checkpoints are not saved every N steps",
        "set save_strategy: steps, or drop it",
    ),
    Effect(
        ("save_total_limit",),
        ("save_strategy",),
        lambda c: _v(c, "save_strategy") != "no",
        "with save_strategy='no'",
        "no checkpoint is saved",
        "set save_strategy: steps, or drop it",
    ),
    Effect(
        ("logging_steps",),
        ("logging_strategy",),
        lambda c: _v(c, "logging_strategy") == "steps",
        "with logging_strategy={logging_strategy!r}",
        "logs are not written every N steps",
        "set logging_strategy: steps, or drop it",
    ),
    Effect(
        ("gradient_checkpointing_kwargs", "activation_checkpointing_kwargs"),
        ("activation_checkpointing", "gradient_checkpointing"),
        # transformers >= 5.20 names it activation_checkpointing (gradient_checkpointing kept as an alias)
        lambda c: bool(_v(c, "activation_checkpointing") or _v(c, "gradient_checkpointing")),
        "without activation_checkpointing",
        "no activation is recomputed",
        "set gradient_checkpointing: true, or drop it",
    ),
    Effect(
        HUB,
        ("push_to_hub",),
        lambda c: bool(_v(c, "push_to_hub")),
        "without push_to_hub",
        "nothing is pushed",
        "set push_to_hub: true, or drop it",
    ),
    Effect(
        COMPLETION_LOGS,
        ("log_completions",),
        lambda c: bool(_v(c, "log_completions")),
        "without log_completions",
        "no completion is logged",
        "set log_completions: true, or drop it",
    ),
    Effect(
        ADAPTIVE_ENTROPY,
        ("use_adaptive_entropy",),
        lambda c: bool(_v(c, "use_adaptive_entropy")),
        "without use_adaptive_entropy",
        "the entropy coefficient stays entropy_coef",
        "set use_adaptive_entropy: true, or drop it",
    ),
)


#: fields whose value is never printed (a credential)
SECRET = ("hub_token",)


def _shown(cfg: Any, name: str) -> str:
    return "<hidden>" if name in SECRET else repr(_v(cfg, name))


def conditional_fields() -> set[str]:
    """Every field some row of :data:`EFFECTS` makes conditional."""
    return {name for row in EFFECTS for name in row.fields}


def _default(cfg: Any, name: str) -> Any:
    for f in dataclasses.fields(cfg):
        if f.name == name:
            if f.default is not dataclasses.MISSING:
                return f.default
            if f.default_factory is not dataclasses.MISSING:
                return f.default_factory()
    return dataclasses.MISSING


def _changed(cfg: Any, name: str, raw: Any) -> bool:
    """The config's value of ``name`` differs from its default (``raw``, the value as given, when the
    field's own value was rewritten by TRL's or transformers' ``__post_init__``)."""
    default = _default(cfg, name)
    default = getattr(default, "value", default)
    return _v(cfg, name) != default and raw != default


def check_effects(
    cfg: Any, given: Mapping[str, Any], origins: Mapping[str, Origin], *, rows: Sequence[Effect] = EFFECTS
) -> list[Notice]:
    """Apply the rule of the module docstring to ``cfg``: ``given`` maps each field a layer set to the value
    it gave, ``origins`` each such field to its :class:`Origin`. Raises ``InputError`` (field = the field
    with no effect) for the first error; returns the notices, one per (row, origin)."""
    notices: dict[tuple[int, str], list[str]] = {}
    texts: dict[tuple[int, str], str] = {}
    for i, row in enumerate(rows):
        if row.acts(cfg):
            continue
        values = {n: _v(cfg, n) for n in row.needs}
        when = row.when.format(**values)
        needs_from = [f"{n}: {origins[n]}" for n in row.needs if n in origins]
        latest = max((origins[n].rank for n in row.needs if n in origins), default=0)
        for name in row.fields:
            if name not in given or not _changed(cfg, name, given[name]):
                continue
            origin = origins[name]
            where = f" ({'; '.join(needs_from)})" if needs_from else ""
            if row.severity == "error" and origin.layer != "recipe" and latest <= origin.rank:
                # the error names the field's own origin through load_config (file and line, or --set)
                what = f"{name}={_shown(cfg, name)} has no effect {when}"
                raise InputError(f"{what}{where}: {row.why}", field=name, hint=row.hint)
            key = (i, str(origin))
            notices.setdefault(key, []).append(name)
            texts[key] = f"{when}{where}: {row.why}"
    out = []
    for key, names in notices.items():
        verb = "has" if len(names) == 1 else "have"
        out.append(Notice(tuple(names), f"note: {', '.join(names)} ({key[1]}) {verb} no effect {texts[key]}"))
    return out


def check_grounding_flags(asked: Mapping[str, Any], flags: Mapping[str, str]) -> None:
    """The grounding rows of :data:`EFFECTS` on command-line flags: ``asked`` maps the grounding fields a
    user gave (``--match-mode`` ...) to their values, ``flags`` each field to its flag; a flag the given
    ``--match-mode`` ignores is an ``InputError`` naming both."""
    from types import SimpleNamespace

    cfg = SimpleNamespace(**{**{n: None for n in flags}, **asked})
    for row in EFFECTS:
        if not set(row.fields) & set(flags) or row.acts(cfg):
            continue
        for name in row.fields:
            if name in asked:
                when = row.when.format(**{n: _v(cfg, n) for n in row.needs})
                for need in row.needs:
                    when = when.replace(need, flags.get(need, need)).replace("=", " ")
                raise InputError(
                    f"{flags[name]} {asked[name]} has no effect {when}: {row.why}",
                    field=flags[name],
                    hint=f"drop {flags[name]}, or change {', '.join(flags.get(n, n) for n in row.needs)}",
                )
