"""Whatever the code, the configs and the docs cite exists in the repository.

Every tracked source, config and markdown file is read. A citation is ``docs/NAME.md``, optionally
followed by ``#anchor`` (a heading's GitHub slug), by a quoted section (``docs/NAME.md, "Title"`` or
``docs/NAME.md "Title"``: a heading or a bold run-in label of that file, or the part of one before
": " or " (") or by ``pitfall N`` /
``pitfalls N-M`` (items of the numbered list under the file's "Pitfalls" heading); relative links between
the docs (``[text](method.md#anchor)``) are checked the same way. The developers' background notes are
never cited: a bare ``design.md``, ``references.md``, ``experiments.md`` or ``style.md``, or any path into
``shared/docs``, is an error.
"""

from __future__ import annotations

import re
import subprocess
from functools import cache
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SUFFIXES = {".py", ".md", ".yaml", ".yml", ".toml", ".txt", ".cfg"}

CITE = re.compile(
    r"docs/(?P<name>[A-Za-z0-9_-]+)\.md"
    r"(?:#(?P<anchor>[A-Za-z0-9_-]+)"
    r"|,?[ \t]+\"(?P<section>[^\"\n]+)\""
    r"|,?[ \t]*\n?[ \t#]*(?P<pitfall>pitfalls?)[ \t]+(?P<first>\d+)(?:-(?P<last>\d+))?)?"
)
LINK = re.compile(r"\]\((?P<name>[A-Za-z0-9_-]+)\.md(?:#(?P<anchor>[A-Za-z0-9_-]+))?\)")
SELF_LINK = re.compile(r"\]\(#(?P<anchor>[A-Za-z0-9_-]+)\)")
BARE = re.compile(r"(?<![\w/.-])(?:design|references|experiments|style)\.md\b|shared/docs")


def tracked_files() -> list[Path]:
    out = subprocess.run(["git", "ls-files"], cwd=REPO, capture_output=True, text=True, check=True).stdout
    return [REPO / f for f in out.splitlines() if Path(f).suffix in SUFFIXES and (REPO / f).is_file()]


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[`*_]", "", heading.strip().lower())
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


@cache
def targets(name: str) -> dict | None:
    path = REPO / "docs" / f"{name}.md"
    if not path.is_file():
        return None
    text = path.read_text()
    headings = [m.group(1).strip() for m in re.finditer(r"^#{1,6}\s+(.+)$", text, flags=re.M)]
    labels = [m.group(1).strip() for m in re.finditer(r"^\*\*([^*\n]+)\*\*", text, flags=re.M)]
    pitfalls = 0
    section = re.search(r"^#{1,6}\s+Pitfalls\s*$(.*?)(?=^#{1,6}\s|\Z)", text, flags=re.M | re.S)
    if section:
        pitfalls = len(re.findall(r"^\d+\.\s", section.group(1), flags=re.M))
    return {
        "anchors": {slug(h) for h in headings},
        "sections": {h.lower() for h in headings + labels},
        "pitfalls": pitfalls,
    }


def problems_in(text: str, rel: Path) -> list[str]:
    """The broken citations of ``text`` (the file ``rel``, relative to the repository)."""
    found = []
    for m in BARE.finditer(text):
        if rel.parts[0] == "docs" and text[m.start() - 2 : m.start()] == "](":
            continue  # a relative link between the docs: checked below
        line = text.count("\n", 0, m.start()) + 1
        found.append(f"{rel}:{line}: {m.group(0)!r} is a developer note, not a file of the repository")
    cites = [(m, m.group("name")) for m in CITE.finditer(text)]
    if rel.parts[0] == "docs":
        cites += [(m, m.group("name")) for m in LINK.finditer(text)]
        cites += [(m, rel.stem) for m in SELF_LINK.finditer(text)]
    for m, name in cites:
        line = text.count("\n", 0, m.start()) + 1
        where = f"{rel}:{line}: {m.group(0).strip()!r}"
        got = targets(name)
        if got is None:
            found.append(f"{where}: docs/{name}.md does not exist")
            continue
        groups = m.groupdict()
        if groups.get("anchor") and groups["anchor"] not in got["anchors"]:
            found.append(f"{where}: no heading with anchor #{groups['anchor']} in docs/{name}.md")
        wanted = (groups.get("section") or "").strip().lower()
        if wanted and not any(
            h == wanted or h.startswith((wanted + ":", wanted + " (")) for h in got["sections"]
        ):
            found.append(f"{where}: no section {groups['section']!r} in docs/{name}.md")
        if groups.get("pitfall"):
            last = int(groups["last"] or groups["first"])
            if last > got["pitfalls"]:
                found.append(f"{where}: docs/{name}.md lists {got['pitfalls']} pitfalls")
    return found


def test_every_cited_doc_and_section_exists():
    problems = [
        p
        for path in tracked_files()
        if path != Path(__file__)
        for p in problems_in(path.read_text(errors="replace"), path.relative_to(REPO))
    ]
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize(
    ("text", "n_problems"),
    [
        ("see docs/method.md#the-token-map", 0),
        ('see docs/method.md, "Rank rewards"', 0),
        ("see docs/experiments.md, pitfall 4", 0),
        ("see docs/experiments.md pitfalls 2-3", 0),
        ("see docs/method.md#no-such-heading", 1),
        ('see docs/method.md, "No such section"', 1),
        ("see docs/experiments.md, pitfall 40", 1),
        ("see docs/absent.md", 1),
        ("see design.md, and references.md", 2),
        ("see ../shared/docs/design.md", 2),
    ],
)
def test_the_checker_finds_what_is_missing(text, n_problems):
    got = problems_in(f'"""{text}"""\n', Path("remark/probe.py"))
    assert len(got) == n_problems, got


def test_relative_links_between_docs_are_checked():
    assert problems_in("[m](method.md#the-token-map)", Path("docs/x.md")) == []
    assert len(problems_in("[m](method.md#nowhere) [n](nowhere.md)", Path("docs/x.md"))) == 2
    assert problems_in("[t](#the-token-map)", Path("docs/method.md")) == []
    assert len(problems_in("[t](#the-token-mat)", Path("docs/method.md"))) == 1
