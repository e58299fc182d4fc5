"""The bench scripts' shared command line (``bench/flags.py``): a bad flag or a bad input is one line and
exit 2, the output flags are the same everywhere, and ``gpu_check``'s order alternates the trainer that
goes first."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "bench"))

from flags import add_output_flags, bench_parser, check_json_output  # noqa: E402

SCRIPTS = sorted(
    p.name
    for p in (REPO / "bench").glob("*.py")
    if p.name not in ("flags.py", "timed_steps.py", "scoring_worker.py", "scoring_workloads.py")
)


def test_a_bad_flag_is_one_line_and_exit_2(capsys):
    ap = bench_parser("bench/demo.py", "Demo: one line.\n\nMore.")
    ap.add_argument("--reps", type=int, default=1)
    with pytest.raises(SystemExit) as exit_:
        ap.parse_args(["--reps", "two"])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert (
        err
        == "python bench/demo.py: error: argument --reps: invalid int value: 'two' (see python bench/demo.py --help)\n"
    )
    assert ap.description == "Demo: one line."


def test_the_output_flags_refuse_a_file_remark_did_not_write(tmp_path):
    from catalog.io.errors import InputError

    ap = bench_parser("bench/demo.py", "Demo.")
    add_output_flags(ap)
    mine = tmp_path / "mine.json"
    mine.write_text("{}")
    with pytest.raises(InputError) as err:
        check_json_output(ap.parse_args(["--json", str(mine)]), "bench-demo")
    assert err.value.field == "--json"
    check_json_output(ap.parse_args(["--json", str(mine), "--force"]), "bench-demo")
    check_json_output(ap.parse_args([]), "bench-demo")  # no --json: nothing to check


@pytest.mark.parametrize("script", SCRIPTS)
def test_every_script_uses_the_shared_parser_and_runner(script):
    text = (REPO / "bench" / script).read_text()
    assert "argparse.ArgumentParser(" not in text and "bench_parser(__file__, __doc__)" in text
    assert text.rstrip().endswith('if __name__ == "__main__":\n    run_script(main)')
    if "add_output_flags" in text:  # --json / --force come from the shared flags, never spelled again
        assert not re.search(r'add_argument\(\s*"--(json|force)"', text)


def test_a_script_with_a_bad_flag_prints_no_usage_block():
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.run(
        [sys.executable, str(REPO / "bench" / "planning.py"), "--seeds", "many"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and "usage:" not in proc.stderr
    assert "argument --seeds" in proc.stderr


def test_gpu_check_alternates_the_trainer_that_goes_first():
    from gpu_check import KINDS, pair_order

    firsts = [pair_order(KINDS, gi, rep)[0] for gi in range(3) for rep in range(2)]
    assert firsts == ["remark", "plain", "plain", "remark", "remark", "plain"]
    assert [pair_order(KINDS, gi, 0)[0] for gi in range(3)] == ["remark", "plain", "remark"]
    assert pair_order(("remark",), 1, 0) == ("remark",)
