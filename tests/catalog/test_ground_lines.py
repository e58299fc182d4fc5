"""Matcher.ground_lines: the one batched path from parsed lines to catalog ids (rewards and eval share it)."""

from __future__ import annotations

import polars as pl

from catalog import Catalog, GroundingSettings, Matcher, parse_list


def test_ground_lines_keeps_rows_ranks_and_unparsed_slots():
    cat = Catalog.from_frame(
        pl.DataFrame({"item_id": ["m", "a"], "title": ["The Matrix", "Arrival"], "year": [1999, 2016]})
    )
    rows = [
        parse_list("Here are two:\n1. Matrix, The (1999)\n2. Nothing Like It (1950)\n\n3. arrival (2017)"),
        parse_list(""),
        parse_list("Arrival (2016)"),
    ]
    assert [len(r) for r in rows] == [3, 0, 1]
    assert Matcher(cat).ground_lines(rows) == [["m", None, "a"], [], ["a"]]
    assert Matcher(cat, GroundingSettings(match_mode="exact")).ground_lines(rows) == [
        [None, None, None],
        [],
        ["a"],
    ]


def test_atomic_outputs_get_umask_permissions(tmp_path):
    import os

    from catalog.io.outputs import atomic_dir, atomic_write

    mask = os.umask(0o022)
    try:
        with atomic_write(tmp_path / "f.txt") as tmp:
            tmp.write_text("x")
        with atomic_dir(tmp_path / "d") as tmp:
            (tmp / "a").write_text("y")
    finally:
        os.umask(mask)
    assert (tmp_path / "f.txt").stat().st_mode & 0o777 == 0o644
    assert (tmp_path / "d").stat().st_mode & 0o777 == 0o755
