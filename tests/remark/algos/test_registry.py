import subprocess
import sys
from typing import Protocol

import pytest
import torch

import remark.algos as algos
from remark.algos import registry
from tests.remark.registered import registered


def test_the_names_configs_recipes_and_docs_use_are_registered():
    """Subsets, not the full lists: registering a new entry needs no edit here."""
    assert {"marginal", "responder", "responder_rb", "union"} <= set(algos.names("reward"))
    assert {"batch", "group", "none"} <= set(algos.names("scale"))
    assert {"log_decay"} <= set(algos.names("modifier"))
    assert {"batch", "mean", "rloo"} <= set(algos.names("baseline"))
    assert {"rank"} <= set(algos.names("ratio")) and {"gmpo"} <= set(algos.names("objective"))
    assert {"prompt", "token"} <= set(algos.names("aggregation"))
    assert {"interrupt", "score"} <= set(algos.names("truncation"))
    assert {"lines", "newlines"} <= set(algos.names("segmentation"))
    assert algos.names("no-such-kind") == []


def test_schemes_declare_their_output_and_scales_their_trl_name():
    for name in algos.names("reward"):
        meta = algos.spec("reward", name).meta
        assert algos.per_responder(name) == (meta["output"] == "responder")
    assert algos.spec("reward", "responder_rb").meta["output"] == "responder"
    assert algos.spec("reward", "union").meta == {"output": "list", "draws": False}
    assert algos.spec("reward", "responder").meta == {"output": "list", "draws": True}
    for name in ("batch", "group", "none"):
        assert algos.spec("scale", name).meta["trl"] == name
    assert algos.spec("segmentation", "lines").meta == {
        "reward_slots": "lines",
        "schemes": "all",
        "filler": True,
    }
    assert algos.spec("segmentation", "newlines").meta == {
        "reward_slots": "rank_grpo",
        "schemes": ("responder",),
        "filler": False,
    }


def test_a_scheme_is_checked_against_the_segmentations_schemes_fact():
    assert registry.scheme_problem("union", "lines") is None
    assert registry.scheme_problem("responder", "newlines") is None
    why, hint = registry.scheme_problem("union", "newlines")
    assert why.startswith("reward_scheme 'union' is not defined on segmentation 'newlines'")
    assert registry.REWARD_SLOTS["rank_grpo"] in why
    assert hint == "set reward_scheme: responder, or segmentation: lines (where every scheme is defined)"
    for name in algos.names("segmentation"):  # every segmentation states a fact the check can read
        schemes = algos.spec("segmentation", name).meta["schemes"]
        assert schemes == "all" or set(schemes) <= set(algos.names("reward"))


def test_unknown_name_lists_valid_names():
    with pytest.raises(
        ValueError, match=f"unknown reward 'unoin'; valid reward names: {', '.join(algos.names('reward'))}"
    ):
        algos.get("reward", "unoin")
    with pytest.raises(ValueError, match=f"unknown kind 'rewards'; valid kinds: {', '.join(algos.kinds())}"):
        algos.get("rewards", "union")


class _Double(Protocol):
    def __call__(self, x: int) -> int: ...


def test_define_a_kind_register_and_duplicate_is_an_error():
    registry.define_kind("test_kind_x", _Double)

    @registry.register("test_kind_x", "double", help="twice x")
    def double(x):
        return 2 * x

    try:
        assert algos.get("test_kind_x", "double")(3) == 6
        assert algos.spec("test_kind_x", "double").help == "twice x"
        assert "test_kind_x" in algos.kinds()
        with pytest.raises(ValueError, match="already registered"):
            registry.register("test_kind_x", "double", help="x")(lambda x: x)
        with pytest.raises(ValueError, match="non-empty"):
            registry.register("", "x", help="x")
        with pytest.raises(ValueError, match="unknown kind 'test_kind_y'; define it first"):
            registry.register("test_kind_y", "x", help="x")
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
    meta = {"output": "list", "draws": False} if kind == "reward" else {}
    with pytest.raises(ValueError, match=why):
        registry.register(kind, "misfit", help="does not fit", **meta)(fn)
    assert "misfit" not in algos.names(kind)


def test_functions_with_extra_optional_parameters_fit():
    @registry.register("modifier", "test_halve", help="half of every reward")
    def halve(rewards_K, factor=0.5, **unused):
        return rewards_K * factor

    try:
        torch.testing.assert_close(algos.get("modifier", "test_halve")(torch.ones(2)), torch.full((2,), 0.5))
    finally:
        registry._REGISTRY["modifier"].pop("test_halve")


@pytest.mark.parametrize(
    ("meta", "match"),
    [
        ({}, r"missing meta \['draws', 'output'\]"),
        ({"draws": False}, r"missing meta \['output'\]"),
        ({"output": "grid", "draws": False}, r"output='grid' is not one of \('list', 'responder'\)"),
        ({"output": "list", "draws": "yes"}, r"draws='yes' is not one of \(True, False\)"),
        ({"output": "list", "draws": False, "colour": "red"}, r"unknown meta \['colour'\]"),
    ],
)
def test_a_reward_scheme_must_declare_a_valid_output(meta, match):
    with pytest.raises(ValueError, match=match):
        registry.register("reward", "test_scheme", help="a test scheme", **meta)(lambda enc: enc)
    assert "test_scheme" not in algos.names("reward")


@pytest.mark.parametrize("help_", ["", "   ", "two\nlines", " padded", "trailing newline\n", None, 3])
def test_help_must_be_one_non_empty_line(help_):
    with pytest.raises(ValueError, match=r"union_x': help must be one non-empty line .* got "):
        registry.register("reward", "union_x", output="list", draws=False, help=help_)(lambda enc: enc)
    with pytest.raises(TypeError, match="help"):
        registry.register("reward", "union_x", output="list", draws=False)  # help is required
    assert "union_x" not in algos.names("reward")


def test_every_entry_has_a_one_line_help():
    for kind in algos.kinds():
        for d in registry.describe(kind):
            assert d.help and "\n" not in d.help and d.help == d.help.strip(), (kind, d.name)
            assert d.help == algos.spec(kind, d.name).help and d.meta == algos.spec(kind, d.name).meta
    assert registry.describe("reward")[3] == (
        "union",
        "ReMaRk: a slot earns 1 if any responder named its item",
        {"output": "list", "draws": False},
    )
    assert registry.choices_help(registry.describe("scale")) == (
        "'batch': unbiased std of the rank over every list of the batch + eps; "
        "'group': unbiased std of the rank over the G lists + eps (Rank-GRPO); "
        "'none': no std division and no eps: s = 1 (Dr. GRPO)"
    )


@pytest.mark.parametrize("kind", algos.kinds())
def test_declared_entries_are_the_live_entries(kind):
    """What a command-line help lists without importing the registrants is what the registry holds."""
    assert registry.declared(kind) == registry.describe(kind)
    assert registry.offered(kind) == registry.describe(kind)


def test_declared_kinds_are_every_kind():
    assert {k for k in registry._declarations()} == set(algos.kinds())


def test_offered_adds_what_this_process_registered():
    with registered(
        "reward", "test_offered", lambda enc: enc.item_RK, output="list", draws=False, help="a test"
    ):
        got = {d.name: d for d in registry.offered("reward")}
        assert got["test_offered"] == ("test_offered", "a test", {"output": "list", "draws": False})
        assert set(got) == {*registry.names("reward")}
    assert "test_offered" not in {d.name for d in registry.offered("reward")}


def test_a_decorator_with_computed_arguments_is_refused_by_the_reader(tmp_path):
    src = tmp_path / "m.py"
    src.write_text(
        'import x\n\n\n@register("reward", "u", output="list", help="a" + "b")\ndef u(enc):\n    pass\n'
    )
    import ast

    call = ast.parse(src.read_text()).body[1].decorator_list[0]
    with pytest.raises(ValueError, match=r"m.py, line 4: write register\('kind', 'name', help='...'"):
        registry._declared_entry(call, src)


def test_the_registry_and_its_declarations_import_no_torch():
    """``remark.algos.registry`` and ``offered`` load no torch or numpy; the live view loads them."""
    code = (
        "import sys; from remark.algos import registry; "
        "d = registry.offered('reward'); print(len(d), 'torch' in sys.modules, 'numpy' in sys.modules); "
        "registry.names('reward'); print('torch' in sys.modules)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    assert out.stdout.split() == [str(len(algos.names("reward"))), "False", "False", "True"]
