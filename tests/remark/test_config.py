"""RemarkGRPOConfig validation: bad configs fail with clear errors before any model loads."""

from __future__ import annotations

import re

import pytest

from catalog.io.errors import InputError
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


def _field_helps() -> dict[str, str]:
    import dataclasses

    return {f.name: f.metadata.get("help", "") for f in dataclasses.fields(RemarkGRPOConfig)}


#: config field -> the registry kind whose names it takes, read from the field helps that the registry
#: builds ("... (registry kind 'reward'): 'marginal': ...")
KIND_FIELDS = {
    name: m.group(1)
    for name, text in _field_helps().items()
    if (m := re.search(r"\(registry kind '(\w+)'\): ", text))
}


def test_the_registry_builds_the_help_of_the_fields_that_name_a_function():
    assert KIND_FIELDS["reward_scheme"] == "reward" and KIND_FIELDS["segmentation"] == "segmentation"
    from remark.algos import registry

    assert set(KIND_FIELDS.values()) <= set(registry.kinds())


def _valid_with(kind: str, name: str) -> dict:
    """The fields besides ``KIND_FIELDS``' own that make registered ``name`` of ``kind`` a valid value:
    the TRL value a scaling equals, and a reward scheme the segmentation's slots define (its facts)."""
    from remark.algos import registry

    meta = registry.spec(kind, name).meta
    if kind == "scale":
        return {"scale_rewards": meta["trl"]}
    if kind == "segmentation" and meta["schemes"] != "all":
        return {"reward_scheme": meta["schemes"][0]}
    return {}


@pytest.mark.parametrize(("name", "kind"), KIND_FIELDS.items())
def test_a_field_help_lists_every_registered_name_of_its_kind_with_its_help(name, kind):
    from remark.algos import registry

    help_ = _field_helps()[name]
    assert f"(registry kind '{kind}'): " in help_
    for d in registry.describe(kind):
        assert f"'{d.name}': {d.help}" in help_
    for n in registry.names(kind):  # and each is a valid value
        make(**{name: n}, loss_type="dapo", **_valid_with(kind, n))


def test_reward_scheme_and_scale_rewards_help_texts():
    from remark.algos import registry

    helps = _field_helps()
    entries = "; ".join(f"'{d.name}': {d.help}" for d in registry.describe("reward"))
    assert helps["reward_scheme"] == f"Per-rank reward (registry kind 'reward'): {entries}."
    # the default scheme is documented as ReMaRk's, the published one as Rank-GRPO's
    assert "'union': ReMaRk: a slot earns 1 if any responder named its item" in helps["reward_scheme"]
    assert "'responder': Rank-GRPO (exp_inf)" in helps["reward_scheme"]
    trl = ", ".join(repr(registry.spec("scale", n).meta["trl"]) for n in registry.names("scale"))
    assert (
        helps["scale_rewards"]
        == f"Must equal advantage_scaling, TRL's value of the same name: {trl} (required)."
    )
    assert "'group'" in trl  # Rank-GRPO's scaling is one of them


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
