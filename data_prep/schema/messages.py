"""The ``prompt`` column: text or chat messages -> a list of {role, content} messages.

A string holding a JSON list of objects (as JSON lines and CSV cells carry chat prompts) is a message
list; any other string is one user message. Malformed prompts are reported row by row.
"""

from __future__ import annotations

import json
from typing import Any

import polars as pl

from catalog.io.errors import InputError
from data_prep.schema.tables import MESSAGES, Report, flag_rows

ROLES = ("system", "user", "assistant")


def _messages_from_text(text: str) -> tuple[list[dict[str, str]] | None, str | None]:
    """One prompt value -> (messages, None) or (None, what is wrong).

    A string that holds a JSON list of objects (``[{"role": ..., "content": ...}, ...]``, as JSON lines
    and CSV cells carry chat prompts) is a message list; any other string is one user message.
    """
    stripped = text.strip()
    if not stripped:
        return None, "empty prompt"
    if not (stripped.startswith("[") and stripped[1:].lstrip().startswith("{")):
        return [{"role": "user", "content": text}], None
    try:
        value = json.loads(stripped)
    except json.JSONDecodeError as err:
        return None, f"looks like a JSON message list but does not parse ({err.msg})"
    return _check_messages(value)


def _check_messages(value: Any) -> tuple[list[dict[str, str]] | None, str | None]:
    if not isinstance(value, list) or not value:
        return None, "a chat prompt must be a non-empty list of {role, content} messages"
    out = []
    for i, m in enumerate(value, 1):
        if not isinstance(m, dict) or not isinstance(m.get("content"), str) or m.get("role") not in ROLES:
            return None, f"message {i} needs a role in {list(ROLES)} and a string content"
        out.append({"role": m["role"], "content": m["content"]})
    return out, None


def normalize_prompt(df: pl.DataFrame, report: Report, path: str | None = None) -> pl.DataFrame:
    """Bring column ``prompt`` to a list of {role, content} messages; report malformed prompts.

    Strings are parsed once per distinct prompt (a request's mentions share it), not once per row.
    """
    dtype = df.schema["prompt"]
    if isinstance(dtype, pl.List) and isinstance(dtype.inner, pl.Struct):
        names = {f.name for f in dtype.inner.fields}
        if not {"role", "content"} <= names:
            raise InputError(
                f"chat messages need fields role and content, found {sorted(names)}",
                path=path,
                field="prompt",
            )
        df = df.with_columns(
            pl.col("prompt").list.eval(pl.struct(pl.element().struct.field("role", "content")))
        )
        df = flag_rows(
            df,
            pl.col("prompt").is_null()
            | (pl.col("prompt").list.len() == 0)
            | pl.col("prompt")
            .list.eval(
                ~pl.element().struct.field("role").is_in(ROLES)
                | pl.element().struct.field("content").is_null()
            )
            .list.any(),
            report,
            reason="bad_prompt",
            field="prompt",
            message="a chat prompt must be a non-empty list of messages with a role in "
            + f"{list(ROLES)} and a content",
            path=path,
        )
        return df.with_columns(pl.col("prompt").cast(MESSAGES))
    df = df.with_columns(pl.col("prompt").cast(pl.String))
    uniq = df.select(pl.col("prompt").unique().drop_nulls())["prompt"].to_list()
    parsed = [_messages_from_text(t) for t in uniq]
    table = pl.DataFrame(
        {
            "prompt": uniq,
            "_messages": [m for m, _ in parsed],
            "_problem": [p for _, p in parsed],
        },
        schema={"prompt": pl.String, "_messages": MESSAGES, "_problem": pl.String},
    )
    df = df.join(table, on="prompt", how="left", maintain_order="left")
    df = flag_rows(
        df,
        pl.col("prompt").is_null(),
        report,
        reason="missing_prompt",
        field="prompt",
        message="missing prompt",
        path=path,
        hint="every row needs the request text or its chat messages",
    )
    df = flag_rows(
        df,
        pl.col("_problem").is_not_null(),
        report,
        reason="bad_prompt",
        field="prompt",
        message="{text}",
        path=path,
        show="_problem",
    )
    return df.with_columns(pl.col("_messages").alias("prompt")).drop("_messages", "_problem")
