"""ReDial (ReDialData/website): one seeker and one recommender per conversation.

Movies are marked ``@movieId`` in the message text and named in ``movieMentions`` ({id: "Title (Year)"}).
Each conversation becomes one request with a single responder (the recommender), the case where ReMaRk
must reduce to Rank-GRPO:

- a movie belongs to whoever mentioned it *first*: the recommender's first mentions are the items, the
  seeker's are ``seen`` (this agrees with the questionnaires' ``suggested`` flag for 95% of the mentions
  in the test split, and needs no questionnaire, which is missing in some conversations);
- the prompt is the dialogue before the recommender's first movie mention (seeker turns as ``user``,
  recommender turns as ``assistant``, consecutive turns of one speaker joined, ``@id`` replaced by the
  title), so it never contains an answer.

Conversations where the recommender names no new movie, or where the first recommendation comes before
the seeker says anything, hold no request to learn from: they are left out and counted in
``meta["dropped"]`` (not errors). The catalog is ``movies_with_mentions.csv`` beside the input when it
exists (movieId = item id), otherwise the names in the conversations' ``movieMentions``.
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path
from typing import Any

import polars as pl

from catalog.io.errors import InputError
from catalog.normalize import split_title_year
from catalog.table import Catalog, load_catalog
from data_prep.readers._io import iter_json_lines
from data_prep.schema import MESSAGES, Report, Threads, validate_threads

MENTION = re.compile(r"@(\d+)")
CATALOG_FILE = "movies_with_mentions.csv"


def read_redial(path: str | Path, *, report: Report | None = None) -> Threads:
    """Read ReDial conversations (JSON lines) into a single-responder threads frame and its catalog."""
    report = report or Report()
    path = Path(path)
    rows: dict[str, list] = {
        k: [] for k in ("request_id", "prompt", "responder_id", "title", "year", "seen", "row")
    }
    names: dict[str, str] = {}
    dropped: Counter = Counter()
    for line_no, obj in iter_json_lines(path, report):
        conv = _conversation(obj, path, line_no, report)
        if conv is None:
            continue
        if isinstance(conv, str):
            dropped[conv] += 1
            continue
        cid, responder, prompt, items, seen, mentions = conv
        names.update(mentions)
        for title, year in items:
            rows["request_id"].append(cid)
            rows["prompt"].append(prompt)
            rows["responder_id"].append(responder)
            rows["title"].append(title)
            rows["year"].append(year)
            rows["seen"].append(seen)
            rows["row"].append(line_no)
    schema = {
        "request_id": pl.String,
        "prompt": MESSAGES,
        "responder_id": pl.String,
        "title": pl.String,
        "year": pl.Int32,
        "seen": pl.List(pl.String),
        "row": pl.UInt32,
    }
    frame = pl.DataFrame(rows, schema=schema).with_columns(
        pl.lit(None, pl.String).alias("split"), pl.lit(str(path)).alias("file")
    )
    frame = validate_threads(frame, str(path), report)
    beside = path.parent / CATALOG_FILE
    if beside.is_file():
        cat = load_catalog(beside, format="redial")
    else:
        cat = Catalog.from_frame(
            pl.DataFrame({"item_id": list(names), "title": list(names.values())}), on_duplicate="keep"
        )
    meta = {
        "source": "redial",
        "domain": "movie",
        "has_years": True,
        "instruction_included": False,
        "dropped": dict(sorted(dropped.items())),
    }
    return Threads(frame, cat, meta)


def _conversation(obj: dict[str, Any], path: Path, line_no: int, report: Report):
    """One conversation -> (id, responder, prompt, items, seen, names), a drop reason, or None."""
    cid = obj.get("conversationId")
    seeker, recommender = obj.get("initiatorWorkerId"), obj.get("respondentWorkerId")
    messages = obj.get("messages")
    for value, field in (
        (cid, "conversationId"),
        (seeker, "initiatorWorkerId"),
        (recommender, "respondentWorkerId"),
    ):
        if value is None or str(value).strip() == "":
            report.bad(
                InputError("missing field", path=path, row=line_no, field=field), reason="missing_field"
            )
            return None
    if not isinstance(messages, list) or not all(
        isinstance(m, dict) and isinstance(m.get("text"), str) for m in messages
    ):
        report.bad(
            InputError(
                "messages must be a list of {text, senderWorkerId}", path=path, row=line_no, field="messages"
            ),
            reason="missing_field",
        )
        return None
    mentions = {str(k): str(v) for k, v in (obj.get("movieMentions") or {}).items() if v}

    def name(match: re.Match) -> str:
        return " ".join(mentions.get(match.group(1), match.group(0)).split())

    first_by: dict[str, Any] = {}
    cut = None
    for i, m in enumerate(messages):
        for movie in MENTION.findall(m["text"]):
            first_by.setdefault(movie, m.get("senderWorkerId"))
            if cut is None and m.get("senderWorkerId") == recommender:
                cut = i
    items = [movie for movie, who in first_by.items() if who == recommender]
    if not items:
        return "no_recommendation"
    turns: list[dict[str, str]] = []
    for m in messages[:cut]:
        role = "user" if m.get("senderWorkerId") == seeker else "assistant"
        text = MENTION.sub(name, m["text"]).strip()
        if not text:
            continue
        if turns and turns[-1]["role"] == role:
            turns[-1]["content"] += "\n" + text
        else:
            turns.append({"role": role, "content": text})
    if not any(t["role"] == "user" for t in turns):
        return "no_request_before_recommendation"
    seen = [
        " ".join(mentions.get(movie, "@" + movie).split()) for movie, who in first_by.items() if who == seeker
    ]
    split = [split_title_year(mentions.get(movie, "@" + movie)) for movie in items]
    return str(cid), str(recommender), turns, split, seen, mentions
