"""The README's ProtoQA session, run as written on the real files: prep, convert, score.

It must score all 52 crowdsourced dev questions (prep spreads them over train / valid / test), and the
figures the README quotes for it must be what the command prints.
"""

from __future__ import annotations

import json
import shlex

import pytest

from remark.cli.main import main
from tests.test_readme import REPO, manual_text, readme_commands

pytestmark = pytest.mark.data


def session(data_dir, tmp_path) -> list[list[str]]:
    """The README's pq-crowd commands (prep, convert-protoqa, score), paths moved to the data and tmp_path."""
    wanted = ("remark prep protoqa", "remark eval convert-protoqa", "remark eval score --data data/pq-crowd")
    out = []
    for command in readme_commands():
        if command.startswith(wanted):
            command = command.replace("data/protoqa/", f"{data_dir / 'protoqa'}/")
            command = command.replace("data/pq-crowd", str(tmp_path / "pq-crowd"))
            out.append([str(tmp_path / a) if a == "human.jsonl" else a for a in shlex.split(command)[1:]])
    assert [a[:2] for a in out] == [["prep", "protoqa"], ["eval", "convert-protoqa"], ["eval", "score"]]
    return out


def test_readme_protoqa_example_scores_all_52_questions_and_its_figures(data_dir, tmp_path, capsys):
    prep, convert, score = session(data_dir, tmp_path)
    assert main(prep) == 0 and main(convert) == 0
    capsys.readouterr()
    assert main(score) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["n_requests"] == result["n_predictions"] == 52
    assert result["requests_by_split"] == {"test": 3, "train": 42, "valid": 7}
    assert result["warnings"] == {} and result["settings"]["split"] == "all"
    readme = manual_text()
    for k in (1, 10):
        cell = result["per_responder"][f"recall@{k}"]
        quoted = f"recall@{k} = {cell['mean']:.4f} [{cell['ci_low']:.4f}, {cell['ci_high']:.4f}]"
        assert quoted in readme, quoted
    # without --split all the command refuses to report on the 3 test questions alone
    assert main([a for a in score if a not in ("--split", "all")]) == 2
    err = capsys.readouterr().err
    assert "49 of 52 predictions are for requests outside split 'test' (train: 42, valid: 7)" in err


def test_readme_protoqa_group_size_plan_is_what_the_commands_print(data_dir, tmp_path, capsys):
    """diagnose -> pass rates -> plan-group-size on the shipped profile, as the README runs them."""
    wanted = ("remark prep protoqa", "remark diagnose data/pq-crowd", "remark plan-group-size")
    cmds = []
    for command in readme_commands():
        if command.startswith(wanted):
            command = command.replace("data/protoqa/", f"{data_dir / 'protoqa'}/")
            command = command.replace("data/pq-crowd", str(tmp_path / "pq-crowd"))
            command = command.replace("bench/profiles/", f"{REPO / 'bench' / 'profiles'}/")
            cmds.append(shlex.split(command)[1:])
    assert [c[0] for c in cmds] == ["prep", "diagnose", "plan-group-size"]
    for argv in cmds[:2]:
        assert main(argv) == 0
    capsys.readouterr()
    assert main([*cmds[2], "--json"]) == 0
    plan = json.loads(capsys.readouterr().out)
    chosen = next(c for c in plan["candidates"] if c["G"] == plan["recommended_G"])
    readme = " ".join(manual_text().split())  # line breaks as spaces
    quoted = (
        f"it recommends G = {plan['recommended_G']}, where a group carries signal with probability "
        f"q = {chosen['q']:.3f} (mean pass rate {plan['mean_pass_rate']:.3f})"
    )
    assert quoted in readme, quoted
