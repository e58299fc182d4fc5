"""The sources ``remark prep`` reads (:func:`data_prep.readers.read_source`), with their domains.

Its own module, importing nothing, so that ``remark prep --help`` lists them without loading the readers
(polars, numpy).
"""

from __future__ import annotations

#: source name -> (domain, what it reads)
SOURCES: dict[str, tuple[str, str]] = {
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
