"""The one table of numeric ranges (``remark.config.ranges.RANGES``): every numeric flag of every command
takes its type from it, every row refuses the values outside it (a flag: exit 2 and one line naming the
flag, the value and the range; a config field: an ``InputError`` naming the field), and the table agrees
with the other places that know a bound."""

from __future__ import annotations

import argparse
import dataclasses
import typing

import pytest

from catalog.io.errors import InputError
from remark.cli.main import build_parser, main
from remark.config.ranges import RANGES, Bound, check_build_tiny_ranges, flag_type


def numeric_actions() -> list[tuple[list[str], argparse.Action]]:
    """(subcommand words, action) for every flag of every command whose value is a number."""
    found = []

    def walk(parser: argparse.ArgumentParser, words: list[str]) -> None:
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    walk(sub, [*words, name])
            elif action.type in (int, float) or hasattr(action.type, "range_key"):
                found.append((words, action))

    walk(build_parser(), [])
    return found


ACTIONS = numeric_actions()


def test_every_numeric_flag_takes_its_range_from_the_table():
    assert len(ACTIONS) >= 60  # prep, diagnose, sft, eval (5 subcommands), curve, plan-group-size, demo
    for words, action in ACTIONS:
        where = f"remark {' '.join(words)} {action.option_strings}"
        assert action.type not in (int, float), f"{where}: a plain {action.type.__name__}, no range"
        key = action.type.range_key
        assert key in RANGES, where
        assert key.split()[-1] in action.option_strings, f"{where} uses the row {key!r}"


def _bad(bound: Bound) -> str:
    value = bound.outside()
    return str(int(value)) if bound.kind is int and value != "nan" else str(value)


@pytest.mark.parametrize(
    ("words", "action"),
    ACTIONS,
    ids=[f"{' '.join(w)} {a.option_strings[0]}" for w, a in ACTIONS],
)
def test_each_numeric_flag_refuses_a_value_outside_its_range(words, action, capsys):
    bound = RANGES[action.type.range_key]
    bad = _bad(bound)
    code = main([*words, f"{action.option_strings[0]}={bad}"])
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err
    last = err.strip().splitlines()[-1]
    flag = action.option_strings[0]
    problem = "is not a finite number" if bad == "nan" else f"is out of range: must be {bound.text()}"
    assert f"error: argument {flag}: {bad!r} {problem}" in last


@pytest.mark.parametrize("text", ["nan", "inf", "-inf"])
def test_no_float_flag_takes_nan_or_inf(text, capsys):
    code = main(["curve", "fit", "log.jsonl", f"--level={text}"])
    assert code == 2 and f"argument --level: {text!r} is not a finite number" in capsys.readouterr().err


def test_int_flags_refuse_fractions_and_words():
    parse = flag_type("--seed")
    for text in ("1.5", "ten", ""):
        with pytest.raises(argparse.ArgumentTypeError, match="is not an integer"):
            parse(text)
    assert parse("4294967295") == 2**32 - 1 and parse("0") == 0


CONFIG_ROWS = sorted(n for n in RANGES if not n.startswith("--") and " " not in n and "." not in n)


def test_config_rows_name_fields_and_their_kind_matches_the_annotation():
    from remark.config.fields import RemarkGRPOConfig
    from remark.config.fieldtypes import field_hints

    hints = field_hints(RemarkGRPOConfig)
    for name in CONFIG_ROWS:
        assert name in hints, name
        text = str(hints[name])
        assert (RANGES[name].kind is int) == ("int" in text and "float" not in text), (name, text)


@pytest.fixture(scope="module")
def valid():
    return dict(output_dir="unused", loss_type="bnpo", scale_rewards="group", use_cpu=True, bf16=False)


@pytest.mark.parametrize("name", CONFIG_ROWS)
def test_each_config_row_refuses_a_value_outside_it(name, valid):
    from remark.config.fields import RemarkGRPOConfig

    bound = RANGES[name]
    bad = bound.outside()
    bad = float("nan") if bad == "nan" else bad
    value = [bad] if name == "group_size_candidates" else bad
    with pytest.raises(InputError) as err:
        RemarkGRPOConfig(**valid, **{name: value})
    assert err.value.field == name and f"{name}={value!r} must be {bound.text()}" in err.value.message


def test_build_tiny_rows_refuse_values_outside_them():
    for name, bound in RANGES.items():
        if not name.startswith("build_tiny."):
            continue
        parts = name.split(".")[1:]
        bad = bound.outside()
        value = [bad, bad + 1] if parts[-1] == "relevant_size" else bad
        opts = {parts[0]: value} if len(parts) == 1 else {"spec": {parts[1]: value}}
        with pytest.raises(InputError, match=rf"{name}=.* must be {bound.text()}"):
            check_build_tiny_ranges(opts)
    with pytest.raises(InputError, match=r"relevant_size=\[8, 6\] must be \[min, max\] with min <= max"):
        check_build_tiny_ranges({"relevant_size": [8, 6]})


def test_the_table_agrees_with_the_other_bounds():
    from catalog.match import GroundingSettings
    from eval.metrics import MAX_K
    from remark.cli.eval import MAX_K as CLI_MAX_K

    assert RANGES["eval --k"].high == MAX_K == CLI_MAX_K
    for name in ("year_tolerance", "match_threshold"):
        for key in (name, "--" + name.replace("_", "-")):
            bound = RANGES[key]
            edge = bound.low if bound.low is not None else bound.high
            GroundingSettings().with_overrides({name: type(GroundingSettings().to_dict()[name])(edge)})
            with pytest.raises(InputError):
                GroundingSettings().with_overrides({name: bound.outside()})


def test_defaults_are_inside_their_rows():
    from remark.config.fields import RemarkGRPOConfig

    for f in dataclasses.fields(RemarkGRPOConfig):
        if f.name in RANGES and isinstance(f.default, int | float) and not isinstance(f.default, bool):
            assert RANGES[f.name].holds(f.default) or f.name == "max_steps", f.name
    for _, action in ACTIONS:
        default = action.default
        values = default if isinstance(default, list) else [default]
        for value in values:
            if isinstance(value, int | float):
                assert RANGES[action.type.range_key].holds(value), action.option_strings
    assert typing.get_type_hints(Bound)["kind"] is type
