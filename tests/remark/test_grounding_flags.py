"""The grounding settings have one name per field and the same valid values in every CLI command that
grounds and in the training config (``catalog.match.GroundingSettings``)."""

from __future__ import annotations

import argparse

import pytest

from catalog import GroundingSettings, InputError
from catalog.match import MATCH_MODES, SCORERS

NAMES = GroundingSettings.names()


def _grounding_actions(parser: argparse.ArgumentParser) -> dict[str, argparse.Action]:
    return {a.dest: a for a in parser._actions if a.dest in NAMES}


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    out = {}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                out[name] = sub
                out.update({f"{name} {k}": v for k, v in _subparsers(sub).items()})
    return out


def test_every_grounding_command_has_the_same_four_flags_and_values():
    from remark.cli.main import build_parser

    parsers = _subparsers(build_parser())
    commands = ["prep", "ground", "diagnose", "eval score", "eval run", "eval compare"]
    for command in commands:
        actions = _grounding_actions(parsers[command])
        assert set(actions) == set(NAMES), command
        flags = {name: a.option_strings for name, a in actions.items()}
        assert flags == {n: ["--" + n.replace("_", "-")] for n in NAMES}, command
        assert list(actions["match_mode"].choices) == list(MATCH_MODES), command
        assert list(actions["match_scorer"].choices) == list(SCORERS), command
        assert all(a.default is None for a in actions.values()), command
    # no other spelling of the same settings survives anywhere in the CLI
    old = {"--match", "--mode", "--threshold", "--scorer"}
    for command, parser in parsers.items():
        assert not old & {s for a in parser._actions for s in a.option_strings}, command


def test_the_cli_spelling_of_the_settings_agrees_with_catalog_match():
    from remark.cli import grounding_flags as grounding

    assert grounding.NAMES == NAMES
    assert grounding.MATCH_MODES == MATCH_MODES and tuple(SCORERS) == grounding.SCORERS
    assert GroundingSettings().to_dict() == grounding.DEFAULTS


def test_config_fields_have_the_same_names_values_and_default_to_the_dataset():
    from remark.config import RemarkGRPOConfig

    base = dict(
        output_dir="/tmp/remark-grounding-config",
        use_cpu=True,
        report_to="none",
        loss_type="bnpo",
        scale_rewards="group",
        num_generations=4,
        per_device_train_batch_size=8,
        max_completion_length=64,
        num_ranks=5,
    )
    cfg = RemarkGRPOConfig(**base)
    assert all(getattr(cfg, n) is None for n in NAMES) and cfg.grounding_requested() == {}
    for mode in MATCH_MODES:  # normalized included
        assert RemarkGRPOConfig(**base, match_mode=mode).grounding().match_mode == mode
    cfg = RemarkGRPOConfig(**base, year_tolerance=0, match_scorer="WRatio")
    assert cfg.grounding_requested() == {"year_tolerance": 0, "match_scorer": "WRatio"}
    assert cfg.grounding() == GroundingSettings(year_tolerance=0, match_scorer="WRatio")
    for bad, field in (
        ({"match_mode": "loose"}, "match_mode"),
        ({"year_tolerance": -1}, "year_tolerance"),
        ({"match_threshold": 120.0}, "match_threshold"),
        ({"match_scorer": "nope"}, "match_scorer"),
    ):
        with pytest.raises(InputError) as err:
            RemarkGRPOConfig(**base, **bad)
        assert err.value.field == field
