"""The README's ProtoQA session, run as written on the real files: prep, convert, score.

It must score all 52 crowdsourced dev questions (prep spreads them over train / valid / test), and the
figures the README quotes for it must be what the command prints.
"""

from __future__ import annotations

import json
import shlex

import pytest

from remark.cli.main import main
from tests.test_readme import REPO, readme_commands

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
    readme = (REPO / "README.md").read_text()
    for k in (1, 10):
        cell = result["per_responder"][f"recall@{k}"]
        quoted = f"recall@{k} = {cell['mean']:.4f} [{cell['ci_low']:.4f}, {cell['ci_high']:.4f}]"
        assert quoted in readme, quoted
    # without --split all the command refuses to report on the 3 test questions alone
    assert main([a for a in score if a not in ("--split", "all")]) == 2
    err = capsys.readouterr().err
    assert "49 of 52 predictions are for requests outside split 'test' (train: 42, valid: 7)" in err
