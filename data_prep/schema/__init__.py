"""Column schemas of the threads and pooled tables, and validation of a threads frame.

A *threads* frame has one row per responder mention (docs/architecture.md, "data_prep/"). Every reader produces
one, so pooling never sees a source format. Besides the schema columns a threads frame may carry the
provenance columns ``file`` (input path) and ``row`` (1-based line or row in that file), so errors found
while pooling still name the line they came from, and an optional ``timestamp`` (UTC; what time-based
splits read, ``data_prep.timesplit``).

The package's modules (import from here; the names below are its public API):

- ``tables``: the column schemas (``THREADS_SCHEMA``, ``REQUESTS_SCHEMA``, ``RESPONDER_ROWS_SCHEMA``, ...),
  splits, domains and year bounds, :class:`Threads` (what a reader returns), :class:`Report` and
  :func:`flag_rows` (raise on the first bad row, or skip and count with ``--skip-bad-rows``);
- ``columns``: vectorised readers of raw values (``parse_year`` / ``bad_year``, ``parse_timestamp`` /
  ``bad_timestamp``, ``normalize_split``);
- ``messages``: the ``prompt`` column as chat messages (``normalize_prompt``);
- ``checks``: ``check_column_types`` and ``validate_threads`` (every column checked and cast).
"""

from __future__ import annotations

from data_prep.schema.checks import check_column_types, validate_threads
from data_prep.schema.columns import (
    EPOCH_MAX_S,
    TIME_HINT,
    bad_timestamp,
    bad_year,
    normalize_split,
    parse_timestamp,
    parse_year,
)
from data_prep.schema.messages import ROLES, normalize_prompt
from data_prep.schema.tables import (
    ANSWERS_SCHEMA,
    IDS,
    MESSAGE,
    MESSAGES,
    OPTIONAL_SCHEMA,
    PROVENANCE_SCHEMA,
    REQUESTS_SCHEMA,
    RESPONDER_ROWS_SCHEMA,
    SPLIT_ALIASES,
    SPLITS,
    THREADS_SCHEMA,
    YEAR_MAX,
    YEAR_MIN,
    Report,
    Threads,
    flag_rows,
)
from data_prep.sources import DOMAINS

__all__ = [
    "ANSWERS_SCHEMA",
    "DOMAINS",
    "EPOCH_MAX_S",
    "IDS",
    "MESSAGE",
    "MESSAGES",
    "OPTIONAL_SCHEMA",
    "PROVENANCE_SCHEMA",
    "REQUESTS_SCHEMA",
    "RESPONDER_ROWS_SCHEMA",
    "ROLES",
    "SPLITS",
    "SPLIT_ALIASES",
    "THREADS_SCHEMA",
    "TIME_HINT",
    "YEAR_MAX",
    "YEAR_MIN",
    "Report",
    "Threads",
    "bad_timestamp",
    "bad_year",
    "check_column_types",
    "flag_rows",
    "normalize_prompt",
    "normalize_split",
    "parse_timestamp",
    "parse_year",
    "validate_threads",
]
