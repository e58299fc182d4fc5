import pytest

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
    assert algos.names("no-such-kind") == []


def test_unknown_name_lists_valid_names():
    with pytest.raises(
        ValueError,
        match=r"unknown reward 'unoin'; valid reward names: marginal, responder, responder_rb, union",
    ):
        algos.get("reward", "unoin")
    with pytest.raises(
        ValueError,
        match=r"unknown kind 'rewards'; valid kinds: aggregation, baseline, modifier, objective, ratio, reward, "
        r"scale, truncation",
    ):
        algos.get("rewards", "union")


def test_register_new_kind_and_duplicate_is_an_error():
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
    finally:
        registry._REGISTRY.pop("test_kind_x")
