"""Chat messages for the policy: Rank-GRPO's instruction, adapted to the domain, then the request.

Rank-GRPO's processed rows hold one user message: an instruction ("pretend you are a movie
recommender ... give 20 recommendations, one per line, as Title (Year), no extra words") followed by
the conversation (docs/references.md#rank-grpo). ``build_messages`` does the same for every source, so training
(``remark``) and evaluation (``eval``) prompt identically:

- one user message = the instruction, a blank line, then the request;
- a multi-turn request (ReDial) is rendered as ``User: ...`` / ``Assistant: ...`` lines inside that one
  user message (the model answers as the recommender, once); system messages are kept in front;
- ``with_year=False`` asks for bare titles (year-less catalogs: ProtoQA answers);
- ``instruction_included=True`` (Rank-GRPO's rows already carry it) returns the messages unchanged.

Departure: the domain ``answer`` (ProtoQA) asks for the answers most people would give, most common
first, which is what the pooled counts reward; the recommender wording would not fit a survey question.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from data_prep.schema import DOMAINS

#: domain -> (what the model pretends to be, the plural noun of the items)
_ROLES = {
    "movie": ("a movie recommender system", "movies"),
    "book": ("a book recommender system", "books"),
    "music": ("a music recommender system", "music recommendations (songs, albums or artists)"),
}
_SPEAKER = {"user": "User", "assistant": "Assistant"}


def instruction(*, k: int, domain: str, with_year: bool) -> str:
    """The instruction text alone (see :func:`build_messages`).

    >>> instruction(k=3, domain="answer", with_year=False)[:60]
    'Answer the question below with exactly 3 different answers, '
    """
    if domain not in DOMAINS:
        raise ValueError(f"unknown domain {domain!r}; valid: {list(DOMAINS)}")
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ValueError(f"k must be a positive integer, got {k!r}")
    if domain == "answer":
        return (
            f"Answer the question below with exactly {k} different answers, the answers most people would "
            "give first. Write one answer per line, with no numbering and no extra words."
        )
    role, noun = _ROLES[domain]
    fmt = "Title (Year)" if with_year else "Title"
    return (
        f"Pretend you are {role}. Based on the conversation below, recommend exactly {k} {noun} that the "
        f"user has not mentioned. Write one per line in the format {fmt}, with no numbering and no extra words."
    )


def build_messages(
    prompt: str | Sequence[Mapping[str, str]],
    *,
    k: int,
    domain: str,
    with_year: bool,
    instruction_included: bool = False,
) -> list[dict[str, str]]:
    """The chat messages the policy sees for one request.

    ``prompt`` is a pooled row's list of ``{role, content}`` messages (a plain string counts as one user
    message). Returns new dicts; the input is never modified.

    >>> build_messages("Sci-fi like Arrival?", k=2, domain="movie", with_year=True)[0]["content"].splitlines()[-1]
    'Sci-fi like Arrival?'
    """
    messages = [{"role": "user", "content": prompt}] if isinstance(prompt, str) else [dict(m) for m in prompt]
    for i, m in enumerate(messages):
        if m.get("role") not in ("system", "user", "assistant") or not isinstance(m.get("content"), str):
            raise ValueError(f"message {i} needs a role in system/user/assistant and a string content: {m!r}")
    if not messages:
        raise ValueError("a prompt needs at least one message")
    if instruction_included:
        return [{"role": m["role"], "content": m["content"]} for m in messages]
    text = instruction(k=k, domain=domain, with_year=with_year)
    system = [{"role": "system", "content": m["content"]} for m in messages if m["role"] == "system"]
    turns = [m for m in messages if m["role"] != "system"]
    if len(turns) == 1 and turns[0]["role"] == "user":
        request = turns[0]["content"]
    else:
        request = "\n".join(f"{_SPEAKER[m['role']]}: {m['content']}" for m in turns)
    return [*system, {"role": "user", "content": f"{text}\n\n{request}"}]
