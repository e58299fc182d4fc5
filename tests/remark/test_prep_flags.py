"""``remark prep``: every flag's value is used or refused. ``--split-fractions`` is checked (known split
names, each finite and in [0, 1], summing to 1) for every source, and the synthetic world draws its
splits with it; a flag a source ignores is refused naming it."""

from __future__ import annotations

import json
import math

import polars as pl
import pytest

from remark.cli.main import main


def test_synthetic_draws_its_splits_with_the_fractions(tmp_path):
    assert main(["prep", "synthetic", "--out", str(tmp_path / "d"), "--n-requests", "60",
                 "--split-fractions", "train=1"]) == 0  # fmt: skip
    splits = pl.read_parquet(tmp_path / "d" / "requests.parquet")["split"].unique().to_list()
    assert splits == ["train"]
    meta = json.loads((tmp_path / "d" / "meta.json").read_text())
    assert meta["generator"]["split_fractions"] == [1.0, 0.0, 0.0]
    assert main(["prep", "synthetic", "--out", str(tmp_path / "e"), "--n-requests", "60",
                 "--split-fractions", "val=0.5,train=0.5"]) == 0  # fmt: skip
    meta = json.loads((tmp_path / "e" / "meta.json").read_text())
    assert meta["generator"]["split_fractions"] == [0.5, 0.5, 0.0]


def test_the_default_synthetic_world_is_unchanged(tmp_path):
    assert main(["prep", "synthetic", "--out", str(tmp_path / "d"), "--n-requests", "60"]) == 0
    meta = json.loads((tmp_path / "d" / "meta.json").read_text())
    assert meta["generator"]["split_fractions"] == [0.8, 0.1, 0.1] and meta["generator"]["seed"] == 0


@pytest.mark.parametrize(
    "text", ["train=nan,valid=0.5,test=0.5", "train=inf,test=-inf", "train=1.5,test=-0.5"]
)
def test_no_fraction_outside_0_1_reaches_a_dataset(text, tmp_path, capsys):
    assert main(["prep", "synthetic", "--out", str(tmp_path / "d"), "--split-fractions", text]) == 2
    err = capsys.readouterr().err
    assert "field '--split-fractions'" in err and "must be >= 0 and <= 1" in err and "Traceback" not in err
    assert not (tmp_path / "d").exists()


def test_split_spec_and_the_world_refuse_nan_themselves():
    from data_prep.pool import SplitSpec
    from data_prep.synthetic import generate_world

    for fractions in ((("train", math.nan), ("test", 1.0)), (("train", 1.5), ("test", -0.5))):
        with pytest.raises(ValueError, match=r"in \[0, 1\] and sum to 1"):
            SplitSpec(fractions)
    with pytest.raises(ValueError, match=r"in \[0, 1\] and sum to 1"):
        generate_world(n_requests=5, split_fractions=(math.nan, 0.5, 0.5))


def test_the_cli_split_names_are_the_schemas():
    from data_prep.schema import SPLIT_ALIASES, SPLITS
    from remark.cli import prep

    assert prep.SPLITS == SPLITS and prep.SPLIT_ALIASES == SPLIT_ALIASES
    assert set(prep.DEFAULTS) == {"n_requests", "n_items", "seed", "split_fractions", "split_seed"}
