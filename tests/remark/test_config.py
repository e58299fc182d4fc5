"""RemarkGRPOConfig validation: bad configs fail with clear errors before any model loads."""

from __future__ import annotations

import pytest

from catalog.shared.errors import InputError
from remark.config import RemarkGRPOConfig, load_config

BASE = dict(
    output_dir="/tmp/remark-config-test",
    use_cpu=True,
    report_to="none",
    loss_type="bnpo",
    scale_rewards="group",
    num_generations=4,
    per_device_train_batch_size=8,
    max_completion_length=64,
    num_ranks=5,
)


def make(**overrides):
    return RemarkGRPOConfig(**{**BASE, **overrides})


def test_valid_config_and_defaults():
    cfg = make()
    assert cfg.reward_scheme == "union"
    assert cfg.sampling == "uniform"
    assert cfg.advantage_scaling == "group"


@pytest.mark.parametrize(
    ("overrides", "field", "words"),
    [
        ({"reward_scheme": "unoin"}, "reward_scheme", "did you mean 'union'"),
        ({"reward_scheme": "bogus"}, "reward_scheme", "valid:"),
        ({"sampling": "per-responder"}, "sampling", "per_responder"),
        ({"loss_type": None}, "loss_type", "set explicitly"),
        ({"scale_rewards": None}, "scale_rewards", "set scale_rewards: group"),
        ({"scale_rewards": "batch"}, "scale_rewards", "disagrees"),
        ({"max_completion_length": 16}, "max_completion_length", "cannot hold num_ranks=5"),
        ({"num_generations": 1}, "num_generations", ">= 2"),
        (
            {"rank_level_ratio": True, "importance_sampling_level": "sequence"},
            "rank_level_ratio",
            "contradicts",
        ),
        ({"validation_metric": "recall@20"}, "validation_metric", "eval/<metric>@<k>/<view>"),
        (
            {"validation_metric": "sampled/recall@5/union", "validation_steps": 5},
            "validation_metric",
            "set validation_num_samples",
        ),
        (
            {"validation_metric": "eval/recall@20/per_mention", "validation_steps": 5},
            "validation_metric",
            "would never be logged",
        ),
        (  # K = 5 here: validation logs @5 only
            {"validation_metric": "eval/recall@10/union", "validation_steps": 5},
            "validation_metric",
            "did you mean 'eval/recall@5/union'",
        ),
        (
            {"validation_metric": "eval/mrr@5/union", "validation_steps": 5},
            "validation_metric",
            "recall and ndcg at k in [5]",
        ),
        ({"pass_rate_drop": 1.5}, "pass_rate_drop", "(0, 1]"),
        ({"use_vllm": True}, "use_vllm", "pip install 'remark[vllm]'"),
    ],
)
def test_bad_fields_name_the_field_and_the_fix(overrides, field, words):
    with pytest.raises(InputError) as err:
        make(**overrides)
    assert err.value.field == field
    assert words in str(err.value)


#: config field -> the registry kind whose names it takes
KIND_FIELDS = {
    "reward_scheme": "reward",
    "advantage_scaling": "scale",
    "segmentation": "segmentation",
    "advantage_baseline": "baseline",
    "loss_aggregation": "aggregation",
    "truncation": "truncation",
}


@pytest.mark.parametrize(("name", "kind"), KIND_FIELDS.items())
def test_a_field_help_lists_every_registered_name_of_its_kind_with_its_help(name, kind):
    import dataclasses

    from remark.algos import registry

    help_ = {f.name: f.metadata["help"] for f in dataclasses.fields(RemarkGRPOConfig)}[name]
    assert f"(registry kind '{kind}'): " in help_
    for d in registry.describe(kind):
        assert f"'{d.name}': {d.help}" in help_
    for n in registry.names(kind):  # and each is a valid value (the published slots define responder only)
        extra = {"reward_scheme": "responder"} if (kind, n) == ("segmentation", "newlines") else {}
        make(**{name: n, "scale_rewards": n} if kind == "scale" else {name: n}, loss_type="dapo", **extra)


def test_reward_scheme_and_scale_rewards_help_texts():
    import dataclasses

    helps = {f.name: f.metadata["help"] for f in dataclasses.fields(RemarkGRPOConfig)}
    assert helps["reward_scheme"] == (
        "Per-rank reward (registry kind 'reward'): "
        "'marginal': a slot earns c_i / n_x, the share of responders who named its item (responder's reward "
        "averaged over the draw); "
        "'responder': Rank-GRPO (exp_inf): a slot earns 1 if the responder drawn for its group named its item; "
        "'responder_rb': Rank-GRPO's responder reward for every responder, scaled per responder and averaged "
        "(its update, Rao-Blackwellised); "
        "'union': ReMaRk: a slot earns 1 if any responder named its item."
    )
    assert helps["scale_rewards"] == (
        "Must equal advantage_scaling, TRL's value of the same name: 'batch', 'group', 'none' (required)."
    )


def test_batch_not_divisible_by_group_size_fails_before_any_model_loads():
    with pytest.raises((InputError, ValueError), match="divisible by num_generations"):
        make(per_device_train_batch_size=6, num_generations=4)


def test_yaml_unknown_key_and_bad_value_name_the_file(tmp_path):
    path = tmp_path / "run.yaml"
    path.write_text("loss_type: bnpo\nscale_rewards: group\nreward_schem: union\n")
    with pytest.raises(InputError, match=r"run.yaml.*reward_schem.*did you mean 'reward_scheme'"):
        load_config(path)
    path.write_text("loss_type: bnpo\nscale_rewards: group\nreward_scheme: [oops\n")
    with pytest.raises(InputError, match="not valid YAML"):
        load_config(path)
    with pytest.raises(InputError, match="config file not found"):
        load_config(tmp_path / "absent.yaml")


@pytest.mark.parametrize("name", ["remark.yaml", "rank_grpo.yaml", "tiny_cpu.yaml"])
def test_shipped_configs_load(name):
    from pathlib import Path

    import remark

    path = Path(remark.__file__).parent / "configs" / name
    # GPU recipes ask for vLLM and bf16; check them as a CPU user would override them.
    cfg = load_config(
        path, {"use_vllm": False, "bf16": False, "use_cpu": True, "gradient_checkpointing": False}
    )
    assert cfg.loss_type == "bnpo"
    assert cfg.scale_rewards == cfg.advantage_scaling == "group"
