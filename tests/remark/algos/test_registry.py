from typing import Protocol

import pytest
import torch

import remark.algos as algos
from remark.algos import registry


def test_builtin_names():
    assert algos.names("reward") == ["marginal", "responder", "responder_rb", "union"]
    assert algos.names("scale") == ["batch", "group", "none"]
    assert algos.names("modifier") == ["log_decay"]
    assert algos.names("baseline") == ["batch", "mean", "rloo"]
    assert algos.names("ratio") == ["rank"]
    assert algos.names("objective") == ["gmpo"]
    assert algos.names("aggregation") == ["prompt", "token"]
    assert algos.names("truncation") == ["interrupt", "score"]
    assert algos.names("segmentation") == ["lines", "newlines"]
    assert algos.names("no-such-kind") == []


def test_schemes_declare_their_output_and_scales_their_trl_name():
    outputs = {name: algos.spec("reward", name).meta["output"] for name in algos.names("reward")}
    assert outputs == {"marginal": "list", "responder": "list", "responder_rb": "responder", "union": "list"}
    assert [algos.per_responder(n) for n in ("union", "responder_rb")] == [False, True]
    assert {n: algos.spec("scale", n).meta["trl"] for n in algos.names("scale")} == {
        "batch": "batch",
        "group": "group",
        "none": "none",
    }
    slots = {n: algos.spec("segmentation", n).meta["reward_slots"] for n in algos.names("segmentation")}
    assert slots == {"lines": "lines", "newlines": "rank_grpo"}


def test_unknown_name_lists_valid_names():
    with pytest.raises(
        ValueError,
        match=r"unknown reward 'unoin'; valid reward names: marginal, responder, responder_rb, union",
    ):
        algos.get("reward", "unoin")
    with pytest.raises(
        ValueError,
        match=r"unknown kind 'rewards'; valid kinds: aggregation, baseline, modifier, objective, ratio, reward, "
        r"scale, segmentation, truncation",
    ):
        algos.get("rewards", "union")


class _Double(Protocol):
    def __call__(self, x: int) -> int: ...


def test_define_a_kind_register_and_duplicate_is_an_error():
    registry.define_kind("test_kind_x", _Double)

    @registry.register("test_kind_x", "double")
    def double(x):
        return 2 * x

    try:
        assert algos.get("test_kind_x", "double")(3) == 6
        assert "test_kind_x" in algos.kinds()
        with pytest.raises(ValueError, match="already registered"):
            registry.register("test_kind_x", "double")(lambda x: x)
        with pytest.raises(ValueError, match="non-empty"):
            registry.register("", "x")
        with pytest.raises(ValueError, match="unknown kind 'test_kind_y'; define it first"):
            registry.register("test_kind_y", "x")
        with pytest.raises(ValueError, match="already defined"):
            registry.define_kind("test_kind_x", _Double)
    finally:
        registry._REGISTRY.pop("test_kind_x")
        registry._KINDS.pop("test_kind_x")


@pytest.mark.parametrize(
    ("kind", "fn", "why"),
    [
        ("reward", lambda enc, extra: enc, "needs 2 positional arguments, the kind passes 1"),
        ("ratio", lambda logps, old, rank: logps, "takes 3 positional arguments, the kind passes 4"),
        ("scale", lambda rewards_BGK, *, mask_B=None: 1.0, "does not accept the keyword 'eps'"),
        ("aggregation", lambda tokens_R, *, group_size, weight: tokens_R, "requires the keyword 'weight'"),
    ],
)
def test_a_function_that_does_not_fit_its_kind_is_refused_at_registration(kind, fn, why):
    meta = {"output": "list"} if kind == "reward" else {}
    with pytest.raises(ValueError, match=why):
        registry.register(kind, "misfit", **meta)(fn)
    assert "misfit" not in algos.names(kind)


def test_functions_with_extra_optional_parameters_fit():
    @registry.register("modifier", "test_halve")
    def halve(rewards_K, factor=0.5, **unused):
        return rewards_K * factor

    try:
        torch.testing.assert_close(algos.get("modifier", "test_halve")(torch.ones(2)), torch.full((2,), 0.5))
    finally:
        registry._REGISTRY["modifier"].pop("test_halve")


@pytest.mark.parametrize(
    ("meta", "match"),
    [
        ({}, r"missing meta \['output'\]"),
        ({"output": "grid"}, r"output='grid' is not one of \('list', 'responder'\)"),
        ({"output": "list", "colour": "red"}, r"unknown meta \['colour'\]"),
    ],
)
def test_a_reward_scheme_must_declare_a_valid_output(meta, match):
    with pytest.raises(ValueError, match=match):
        registry.register("reward", "test_scheme", **meta)(lambda enc: enc)
    assert "test_scheme" not in algos.names("reward")
