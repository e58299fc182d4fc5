"""ProtoQA's dev files ship inside the package, unchanged, with their license, and read like any input."""

from __future__ import annotations

import hashlib

import pytest

from data_prep.readers import read_source
from data_prep.shipped import PROTOQA_FILES, protoqa_file


@pytest.mark.parametrize("name", list(PROTOQA_FILES))
def test_the_shipped_files_are_the_published_ones(name):
    path = protoqa_file(name, verify=True)
    assert hashlib.sha256(path.read_bytes()).hexdigest() == PROTOQA_FILES[name][1]
    assert (path.parent / "LICENSE").read_text().startswith("Attribution 4.0 International")
    assert "CC-BY-4.0" in (path.parent / "ATTRIBUTION.md").read_text()


def test_the_shipped_files_read_through_the_protoqa_reader():
    crowd = read_source("protoqa", protoqa_file("crowdsourced"), items="clusters")
    scraped = read_source("protoqa", protoqa_file("scraped"), items="clusters")
    assert crowd.frame["request_id"].n_unique() == 52 and scraped.frame["request_id"].n_unique() == 980


def test_an_unknown_name_is_refused():
    with pytest.raises(ValueError, match="crowdsourced, scraped"):
        protoqa_file("train")
