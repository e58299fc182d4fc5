"""The sources ``remark prep`` reads (:func:`data_prep.readers.read_source`), with their domains, and the
domains a dataset may have.

Its own module, importing nothing, so that ``remark prep --help`` lists them without loading the readers
(polars, numpy).
"""

from __future__ import annotations

#: the domains of a dataset (``meta.json``'s ``domain``; each picks its prompt wording)
DOMAINS = ("movie", "book", "music", "answer")
#: source name -> (domain, what it reads); each has its reader in ``data_prep.readers.READERS``
DATA_SOURCES: dict[str, tuple[str, str]] = {
    "protoqa": ("answer", "ProtoQA answer files (crowdsourced or scraped), iesl/protoqa-data"),
    "reddit": ("movie", "Rank-GRPO's processed Reddit-v2 rows (JSON lines or parquet)"),
    "reddit-books": ("book", "Reddit-Books rows in Rank-GRPO's shape"),
    "reddit-music": ("music", "Reddit-Music rows in Rank-GRPO's shape"),
    "redial": ("movie", "ReDial conversations (test_data.jsonl)"),
    "threads": (
        "movie",
        "a generic threads file: request_id, prompt, responder_id, title, year[, seen, split]",
    ),
}
