"""The README's commands stay true, and those of the manual pages it links (:data:`PAGES`): every
`remark ...` line parses with the real CLI, make targets exist.

Commands are only parsed (argparse), not run: they name data a test machine does not have. Running the
demo and the tests is what `make demo` / `make test` (CI) do.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from remark.cli.main import build_parser

REPO = Path(__file__).resolve().parents[1]
#: the front page and the manual pages its sections moved to
PAGES = ("README.md", "docs/setup.md", "docs/usage.md", "docs/training.md", "docs/development.md")


def manual_text() -> str:
    """The README and its manual pages, one after the other."""
    return "\n\n".join((REPO / page).read_text() for page in PAGES)


def readme_commands() -> list[str]:
    text = manual_text()
    blocks = re.findall(r"```bash\n(.*?)```", text, flags=re.S)
    commands = []
    for block in blocks:
        joined = re.sub(r"\\\n\s*", " ", block)  # line continuations
        for line in joined.splitlines():
            line = line.split(" #", 1)[0].strip()
            if " -m remark.cli.main " in line:
                line = "remark " + line.split(" -m remark.cli.main ", 1)[1]
            line = line.rstrip("&").strip()
            if line.startswith("remark ") or line.startswith("make "):
                commands.append(line)
    return commands


def test_readme_has_commands():
    cmds = readme_commands()
    assert any(c.startswith("remark train") for c in cmds)
    assert "make demo" in cmds
    assert "make test" in cmds
    front = (REPO / "README.md").read_text()
    assert "make demo" in front and "make test" in front and "remark train --config" in front


def test_readme_is_a_front_page_that_links_its_manual():
    front = (REPO / "README.md").read_text()
    assert len(front.splitlines()) <= 250
    for page in PAGES[1:]:
        assert f"]({page})" in front, f"the README does not link {page}"
    assert "<!-- results:start -->" in front and "<!-- results:end -->" in front
    assert "'eval' is not a package" in front  # the shadowing caveat, with what to do


@pytest.mark.parametrize("command", [c for c in readme_commands() if c.startswith("remark ")])
def test_readme_remark_command_parses(command):
    argv = shlex.split(command)[1:]
    if argv == ["--help"]:
        return
    build_parser().parse_args(argv)  # argparse exits (SystemExit) on a flag the CLI does not have


def test_readme_make_targets_exist():
    makefile = (REPO / "Makefile").read_text()
    for cmd in (c for c in readme_commands() if c.startswith("make ")):
        target = next(t for t in shlex.split(cmd)[1:] if "=" not in t)
        assert re.search(rf"^{re.escape(target)}:", makefile, flags=re.M), target
