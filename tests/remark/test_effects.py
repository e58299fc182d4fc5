"""The table of settings that act only under others (``remark.config.effects``): every row, the one rule,
and every field of ``RemarkGRPOConfig`` either in the table or listed here as acting unconditionally.

A new field (remark's, or one a TRL or transformers upgrade brings) fails
``test_every_field_is_conditional_or_listed`` until it is put in the table or in one of the lists below.
"""

from __future__ import annotations

import copy
import dataclasses
import json

import pytest

from catalog.io.errors import InputError
from remark.config.effects import EFFECTS, Origin, _default, check_effects, conditional_fields
from remark.config.fields import RemarkGRPOConfig

#: remark's fields that act whatever else is set
UNCONDITIONAL_REMARK = {
    "train_split", "reward_scheme", "log_decay", "advantage_scaling", "num_ranks", "match_mode", "sampling",
    "zero_signal_filter", "pass_rate_drop", "overflow_penalty", "segmentation", "end_shaping", "recipe",
    "advantage_baseline", "loss_aggregation", "truncation", "refill_batch", "scoring_workers", "cpu_threads",
    "validation_steps", "group_size_profile", "use_peft", "model_card_license", "build_tiny",
}  # fmt: skip
#: TRL's GRPOConfig fields that act whatever else is set
UNCONDITIONAL_TRL = {
    "model_init_kwargs", "trust_remote_code", "disable_dropout", "cast_lm_head_to_fp32", "num_generations",
    "max_completion_length", "shuffle_dataset", "pad_to_multiple_of", "generation_batch_size",
    "steps_per_generation", "temperature", "top_p", "top_k", "min_p", "generation_kwargs", "chat_template_kwargs",
    "repetition_penalty", "use_vllm", "beta", "num_iterations", "importance_sampling_level", "scale_rewards",
    "loss_type", "mask_truncated_completions", "top_entropy_quantile", "entropy_coef", "use_adaptive_entropy",
    "log_completions", "use_transformers_continuous_batching", "use_transformers_paged",
}  # fmt: skip
#: transformers' TrainingArguments fields that act whatever else is set
UNCONDITIONAL_TRANSFORMERS = {
    "output_dir", "per_device_train_batch_size", "max_steps", "learning_rate", "lr_scheduler_type",
    "lr_scheduler_kwargs", "optim", "optim_args", "weight_decay", "optim_target_modules",
    "gradient_accumulation_steps", "average_tokens_across_devices", "max_grad_norm", "bf16", "fp16", "tf32",
    "activation_checkpointing", "gradient_checkpointing", "torch_compile", "torch_compile_backend",
    "torch_compile_mode", "use_liger_kernel", "use_cache", "neftune_noise_alpha", "torch_empty_cache_steps",
    "auto_find_batch_size", "logging_strategy", "logging_first_step", "logging_nan_inf_filter",
    "include_num_input_tokens_seen", "log_level", "disable_tqdm", "report_to", "run_name", "save_only_model",
    "save_strategy", "enable_jit_checkpoint", "push_to_hub", "ignore_data_skip",
    "restore_callback_states_from_checkpoint", "full_determinism", "seed", "data_seed", "use_cpu",
    "dataloader_drop_last", "dataloader_num_workers", "dataloader_pin_memory",
    "dataloader_multiprocessing_context", "dataloader_in_order", "remove_unused_columns",
    "skip_memory_metrics", "debug", "fsdp",
}  # fmt: skip
#: fields whose effect depends on what the config cannot see (the launcher, the hardware, the model's
#: architecture): DDP / DeepSpeed / multi-node settings, an MoE model's auxiliary loss
BEYOND_THE_CONFIG = {
    "ddp_find_unused_parameters", "ddp_bucket_cap_mb", "ddp_broadcast_buffers", "ddp_static_graph", "ddp_backend",
    "ddp_timeout", "deepspeed", "ds3_gather_for_generation", "local_rank", "log_on_each_node", "log_level_replica",
    "save_on_each_node", "accelerator_config", "parallelism_config", "router_aux_loss_coef",
}  # fmt: skip
LISTS = (UNCONDITIONAL_REMARK, UNCONDITIONAL_TRL, UNCONDITIONAL_TRANSFORMERS, BEYOND_THE_CONFIG)


#: fields that only some transformers releases have (5.20 renamed gradient_checkpointing*)
VERSIONED = {"activation_checkpointing", "activation_checkpointing_kwargs"}


def test_every_field_is_conditional_or_listed():
    fields = {f.name for f in dataclasses.fields(RemarkGRPOConfig)}
    absent = VERSIONED - fields
    conditional = conditional_fields() - absent
    listed = set().union(*LISTS) - absent
    assert conditional <= fields, sorted(conditional - fields)  # no row names a field that does not exist
    assert not conditional & listed, sorted(conditional & listed)
    assert sum(len(x - absent) for x in LISTS) == len(listed)  # each listed once
    assert fields == conditional | listed, (
        f"neither in remark.config.effects.EFFECTS nor listed as unconditional: {sorted(fields - conditional - listed)}; "
        f"listed but not a field: {sorted(listed - fields)}"
    )


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    """A valid config of defaults (the rows' states are set on copies: check_effects reads attributes)."""
    out = tmp_path_factory.mktemp("effects")
    adapter = out / "adapter"
    adapter.mkdir()
    (adapter / "adapter_config.json").write_text(json.dumps({"base_model_name_or_path": str(out)}))
    cfg = RemarkGRPOConfig(
        output_dir=str(out / "run"), loss_type="bnpo", scale_rewards="group", use_cpu=True, bf16=False
    )
    return cfg, str(adapter)


def _states(row, adapter):
    """(settings under which the row's fields act not, settings under which they act; None: never)."""
    key = row.fields[0]
    on_policy, off_policy = {"num_iterations": 1}, {"num_iterations": 2}
    table = {
        "model_name_or_path": ({"build_tiny": {}}, {"build_tiny": None}),
        "adapter_base_model": ({"model_name_or_path": "org/full-model"}, {"model_name_or_path": adapter}),
        "valid_split": ({"validation_steps": 0}, {"validation_steps": 10}),
        "validation_temperature": (
            {"validation_steps": 10, "validation_num_samples": 0},
            {"validation_steps": 10, "validation_num_samples": 2},
        ),
        "group_size_memory_budget_gb": ({"group_size_profile": None}, {"group_size_profile": "p.json"}),
        "divergence_kl": ({"beta": 0.0}, {"beta": 0.1}),
        "lora_r": ({"use_peft": False}, {"use_peft": True}),
        "vllm_mode": ({"use_vllm": False}, {"use_vllm": True}),
        "vllm_importance_sampling_mode": (
            {"vllm_importance_sampling_correction": False},
            {"vllm_importance_sampling_correction": True},
        ),
        "vllm_server_base_url": ({"vllm_mode": "colocate"}, {"vllm_mode": "server"}),
        "vllm_server_host": ({"vllm_server_base_url": "http://h:1"}, {"vllm_server_base_url": None}),
        "vllm_gpu_memory_utilization": ({"vllm_mode": "server"}, {"vllm_mode": "colocate"}),
        "cache_implementation": ({"use_vllm": True}, {"use_vllm": False}),
        "transformers_continuous_batching_config": (
            {"use_transformers_continuous_batching": False},
            {"use_transformers_continuous_batching": True},
        ),
        "advantage_eps": ({"advantage_scaling": "none"}, {"advantage_scaling": "group"}),
        "eos_complete_bonus": ({"end_shaping": "none"}, {"end_shaping": "remark"}),
        "filler_penalty": ({"segmentation": "newlines"}, {"segmentation": "lines"}),
        "refill_max_rounds": ({"refill_batch": False}, {"refill_batch": True}),
        "year_tolerance": ({"match_mode": "exact"}, {"match_mode": "fuzzy"}),
        "match_threshold": ({"match_mode": "normalized"}, {"match_mode": None}),
        "epsilon": ({"loss_type": "sapo"}, {"loss_type": "bnpo"})
        if row.needs == ("loss_type",)
        else (on_policy, off_policy),
        "epsilon_high": ({"loss_type": "sapo"}, {"loss_type": "cispo"}),
        "sapo_temperature_pos": ({"loss_type": "bnpo"}, {"loss_type": "sapo"}),
        "vespo_k_pos": ({"loss_type": "bnpo"}, {"loss_type": "vespo"}),
        "use_bias_correction_kl": ({"beta": 0.0}, {"beta": 0.1}),
        "ref_model_mixup_alpha": ({"sync_ref_model": False}, {"sync_ref_model": True}),
        "gmpo_level": (on_policy, off_policy),
        "eval_strategy": ({}, None),
        "label_smoothing_factor": ({}, None),
        "resume_from_checkpoint": ({}, None),
        "fsdp_config": ({"fsdp": ""}, {"fsdp": "full_shard"}),
        "liger_kernel_config": ({"use_liger_kernel": False}, {"use_liger_kernel": True}),
        "dataloader_prefetch_factor": ({"dataloader_num_workers": 0}, {"dataloader_num_workers": 2}),
        "project": ({"report_to": ["tensorboard"]}, {"report_to": ["trackio"]}),
        "num_train_epochs": ({"max_steps": 10}, {"max_steps": -1}),
        "warmup_steps": ({"lr_scheduler_type": "constant"}, {"lr_scheduler_type": "linear"}),
        "adam_beta1": ({"optim": "sgd"}, {"optim": "adamw_torch"}),
        "save_steps": ({"save_strategy": "no"}, {"save_strategy": "steps"}),
        "save_total_limit": ({"save_strategy": "no"}, {"save_strategy": "steps"}),
        "logging_steps": ({"logging_strategy": "epoch"}, {"logging_strategy": "steps"}),
        "gradient_checkpointing_kwargs": (
            {"gradient_checkpointing": False},
            {"gradient_checkpointing": True},
        ),
        "hub_model_id": ({"push_to_hub": False}, {"push_to_hub": True}),
        "num_completions_to_print": ({"log_completions": False}, {"log_completions": True}),
        "entropy_coef_min": ({"use_adaptive_entropy": False}, {"use_adaptive_entropy": True}),
    }
    return table[key]


def _changed_value(cfg, name):
    """A value of ``name`` that differs from its default (check_effects compares, nothing validates)."""
    default = _default(cfg, name)
    default = getattr(default, "value", default)
    if isinstance(default, bool):
        return not default
    if isinstance(default, int | float):
        return default + 1
    if isinstance(default, str):
        return default + "x"
    return ["x"] if name.endswith(("modules", "candidates", "kwargs")) else "x"


def _with(cfg, settings):
    out = copy.copy(cfg)
    for key, value in settings.items():
        setattr(out, key, value)
    return out


CASES = [(i, name) for i, row in enumerate(EFFECTS) for name in row.fields]


@pytest.mark.parametrize(("i", "name"), CASES, ids=[f"{EFFECTS[i].fields[0]}:{n}" for i, n in CASES])
def test_each_row_refuses_or_notes_its_fields_only_where_they_cannot_act(base, i, name):
    cfg, adapter = base
    row = EFFECTS[i]
    off, on = _states(row, adapter)
    value = _changed_value(cfg, name)
    given, origin = {name: value}, {name: Origin("config", "run.yaml", 7)}
    off_cfg = _with(cfg, {**off, name: value})
    assert not row.acts(off_cfg)
    if row.severity == "error":
        with pytest.raises(InputError) as err:
            check_effects(off_cfg, given, origin, rows=[row])
        assert err.value.field == name and f"{name}=" in err.value.message
        assert "has no effect" in err.value.message and row.why in err.value.message
        assert all(n in err.value.message for n in row.needs[:1])  # the condition's field is named
    else:
        (notice,) = check_effects(off_cfg, given, origin, rows=[row])
        assert notice.fields == (name,) and "(run.yaml line 7) has no effect" in str(notice)
    # a recipe's value is a notice, never an error
    (notice,) = check_effects(off_cfg, given, {name: Origin("recipe", "x/dapo.yaml")}, rows=[row])
    assert f"{name} (recipe 'dapo') has no effect" in str(notice)
    # the default, or a field nobody gave, is never reported
    default = _default(cfg, name)
    assert check_effects(_with(cfg, {**off, name: default}), {name: default}, origin, rows=[row]) == []
    assert check_effects(off_cfg, {}, {}, rows=[row]) == []
    if on is not None:
        on_cfg = _with(cfg, {**on, name: value})
        assert row.acts(on_cfg)
        assert check_effects(on_cfg, given, origin, rows=[row]) == []


def test_a_condition_switched_off_in_a_later_layer_is_a_notice(base):
    cfg, _ = base
    off = _with(cfg, {"use_vllm": False, "vllm_mode": "server"})
    given = {"use_vllm": False, "vllm_mode": "server"}
    later = {"use_vllm": Origin("--set"), "vllm_mode": Origin("config", "run.yaml", 3)}
    (notice,) = check_effects(off, given, later)
    assert str(notice).startswith("note: vllm_mode (run.yaml line 3) has no effect without use_vllm")
    assert "(use_vllm: --set)" in str(notice)
    same = {"use_vllm": Origin("config", "run.yaml", 2), "vllm_mode": Origin("config", "run.yaml", 3)}
    with pytest.raises(InputError, match="vllm_mode='server' has no effect without use_vllm"):
        check_effects(off, given, same)  # the file contradicts itself
    earlier = {"use_vllm": Origin("config", "run.yaml", 2), "vllm_mode": Origin("--set")}
    with pytest.raises(InputError, match=r"\(use_vllm: run.yaml line 2\)"):
        check_effects(off, given, earlier)  # --set asks for what the file switched off


def test_notices_of_one_row_and_origin_are_one_line_and_secrets_are_not_shown(base):
    cfg, _ = base
    off = _with(cfg, {"epsilon": 0.3, "epsilon_high": 0.4})
    origins = {n: Origin("recipe", "x/grpo.yaml") for n in ("epsilon", "epsilon_high")}
    notices = check_effects(off, {"epsilon": 0.3, "epsilon_high": 0.4}, origins)
    assert [str(n) for n in notices] == [
        "note: epsilon, epsilon_high (recipe 'grpo') have no effect with num_iterations=1 and one generation per "
        "optimizer step: every batch is used once, on-policy, so importance ratios are 1, clipping and masking "
        "never fire and a rank-level ratio leaves the gradient unchanged; raise num_iterations (or "
        "steps_per_generation) to see them act"
    ]
    with pytest.raises(InputError) as err:
        check_effects(
            _with(cfg, {"hub_token": "hf_secret"}), {"hub_token": "hf_secret"}, {"hub_token": Origin("--set")}
        )
    assert "hf_secret" not in str(err.value) and "hub_token=<hidden>" in str(err.value)


def test_the_colocated_engine_fields_follow_the_one_rule_through_load_config(tmp_path):
    """``vllm_kv_cache_gib`` and ``vllm_enforce_eager`` are conditional in this table alone: switched off by a
    later ``--set use_vllm=false`` they are notices like their siblings; switched off in their own file, an
    error naming the field."""
    from remark.config import load_config

    common = "output_dir: {out}\nloss_type: bnpo\nscale_rewards: group\nuse_cpu: true\nbf16: false\n"
    engine = "vllm_mode: colocate\nvllm_kv_cache_gib: 0.5\nvllm_enforce_eager: true\n"
    path = tmp_path / "run.yaml"
    path.write_text(common.format(out=tmp_path / "run") + "use_vllm: true\n" + engine)
    notes: list = []
    cfg = load_config(path, {"use_vllm": False}, notes=notes)
    assert cfg.use_vllm is False and cfg.vllm_kv_cache_gib == 0.5
    assert [n.fields for n in notes] == [
        ("vllm_kv_cache_gib",),
        ("vllm_enforce_eager",),
    ]  # vllm_mode: its default
    assert all("has no effect without use_vllm (use_vllm: --set)" in str(n) for n in notes)
    path.write_text(common.format(out=tmp_path / "run") + "use_vllm: false\n" + engine)
    with pytest.raises(InputError, match="has no effect without use_vllm") as err:
        load_config(path)
    assert err.value.field == "vllm_kv_cache_gib"
