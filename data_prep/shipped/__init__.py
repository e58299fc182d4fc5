"""Public data shipped inside the package, read in place (no download): ProtoQA's dev files (CC-BY-4.0,
attribution in ``protoqa/ATTRIBUTION.md``).

``protoqa_file("crowdsourced" | "scraped")`` is the path of one file; every reader takes it like any other
input file, so what it reads is what ``remark data fetch protoqa`` downloads.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

__all__ = ["PROTOQA_FILES", "protoqa_file"]

_HERE = Path(__file__).resolve().parent
#: name -> (file, sha256): the files as iesl/protoqa-data publishes them (data/dev/ at c6c5696)
PROTOQA_FILES = {
    "crowdsourced": (
        "dev.crowdsourced.jsonl",
        "cd3bec04e9ec9294ebf5b75eda6eb0d5abcffec926407eaf852be9c744c67ce5",
    ),
    "scraped": ("dev.scraped.jsonl", "ed2d094741de9e7eae0091eaeeca8a94104aa49792efdd75bed91d3ab6177576"),
}


def protoqa_file(name: str, *, verify: bool = False) -> Path:
    """The shipped ProtoQA dev file ``name`` (``verify`` checks its sha256)."""
    if name not in PROTOQA_FILES:
        raise ValueError(f"no shipped ProtoQA file {name!r}; choose one of {', '.join(PROTOQA_FILES)}")
    file, sha = PROTOQA_FILES[name]
    path = _HERE / "protoqa" / file
    if verify and hashlib.sha256(path.read_bytes()).hexdigest() != sha:
        raise ValueError(f"{path} is not the published file (sha256 differs): reinstall remark")
    return path
