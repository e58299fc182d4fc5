"""``bench/scoring.py``'s equivalence check: the per-field digests its path processes compare, and one
whole run on a small made-up catalog (every path in its own process, the baseline commit included when
this checkout has it)."""

from __future__ import annotations

import copy
import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "bench"))

from scoring_worker import FIELDS, digest  # noqa: E402
from scoring_workloads import GROUP, K, Workload, build_tokenizer, pseudo_word  # noqa: E402

from catalog.lists import ParsedLists  # noqa: E402
from catalog.table import load_catalog  # noqa: E402
from remark.scoring.scorer import RankScorer  # noqa: E402


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    """A 150-title catalog where bench/scoring.py looks for Reddit-v2's, and the bench's tokenizer on it."""
    root = tmp_path_factory.mktemp("data")
    rng = np.random.default_rng(3)
    titles = {" ".join(pseudo_word(rng) for _ in range(int(rng.integers(1, 4)))) for _ in range(150)}
    path = root / "reddit-v2-catalog" / "gt_catalog.csv"
    path.parent.mkdir()
    rows = [f"{t},{int(rng.integers(1950, 2024))}" for t in sorted(titles)]
    path.write_text("title,year\n" + "\n".join(rows) + "\n")
    catalog = load_catalog(path)
    return root, catalog, build_tokenizer(catalog, vocab_size=2000)


def test_the_digest_changes_with_each_field_and_only_that_field(small):
    _, catalog, tokenizer = small
    batch = Workload("blurb", catalog, tokenizer).batch(0)
    scored = RankScorer(catalog, tokenizer, k=K, scheme="union").score(
        batch.rows, batch.columns, group_size=GROUP, step=0
    )
    base = digest(scored)
    assert set(base) == set(FIELDS) and digest(copy.deepcopy(scored)) == base

    def retitle(s):  # line 2 of row 3 read as another title
        rows = [list(row) for row in s.lines]
        rows[3][2] = dataclasses.replace(rows[3][2], title="another title")
        s.lines = ParsedLists.from_rows(rows)

    changes = {
        "texts": lambda s: s.texts.__setitem__(5, s.texts[5] + " "),
        "lines": retitle,
        "slot_ids": lambda s: s.slot_ids[7].__setitem__(0, "not-an-id"),
        "rewards": lambda s: s.rewards_RNK.__setitem__((0, 0, 0), s.rewards_RNK[0, 0, 0] + 1),
        "rank_RT": lambda s: s.rank_RT.__setitem__((1, 0), s.rank_RT[1, 0] + 1),
        "end_R": lambda s: s.end_R.__setitem__(2, s.end_R[2] + 1),
    }
    for field, change in changes.items():
        other = copy.deepcopy(scored)
        change(other)
        got = digest(other)
        assert [f for f in FIELDS if got[f] != base[f]] == [field]


@pytest.mark.slow
def test_a_whole_run_finds_every_path_identical(small, tmp_path):
    root, _, _ = small
    out = tmp_path / "out.json"
    proc = subprocess.run(
        [
            sys.executable,
            str(REPO / "bench" / "scoring.py"),
            *("--steps", "2", "--warm-steps", "1", "--workloads", "blurb,random", "--pool-workers", "1"),
            *("--data", str(root), "--json", str(out)),
        ],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"},
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    doc = json.loads(out.read_text())
    paths = {"new"} | ({"baseline"} if doc["baseline_tree"] else set())
    has_history = (
        subprocess.run(
            ["git", "-C", str(REPO), "cat-file", "-e", "c9c2260^{commit}"], capture_output=True
        ).returncode
        == 0
    )
    assert ("baseline" in paths) == has_history, proc.stdout
    for kind in ("blurb", "random"):
        w = doc["workloads"][kind]
        assert w["identical"] is True
        for cache in (w, w["cold"]):
            assert all(len(cache["raw"][f"{p}_ms"]) == 2 for p in paths)
            assert ("ratio" in cache) == ("baseline" in paths)
            assert cache.get("ratio", 1.0) > 0
        assert len(w["raw"]["wait_ms"]) == 2
