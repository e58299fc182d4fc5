"""The pre-change serial scoring path, kept for equivalence tests and benches (issue 13). Not for training.

``ReferenceScorer(scorer).score(...)`` computes what ``RankScorer.score`` computed before issue 13's
speed-ups (main at c9c2260, after the rank_step refactor), with that code, stage by stage:

- decode and offsets: ``ReferenceOffsetMapper``, the old ``TokenOffsetMapper`` (transformers'
  ``batch_decode`` for every text and piece, a Python loop per row);
- parse: ``reference_parse_list``, the old driver and line cleaner (no per-line cache, no first-character
  checks before the regexes);
- ground: ``reference_ground_lines``, the old ``Matcher.ground_lines`` (every line through
  ``Matcher.ground_many``, the explaining path: rules, then ``process.cdist`` with no score cutoff and no
  length bound), on a copy of the scorer's matcher with its own cache;
- the end tokens by ``remark.algos.end_token_index`` (a Python loop over every token).

Shared with the new path, because issue 13 did not change them: the parser's title/year rules
(``catalog.parse._title_year``), the matcher's rules and index, ``normalize_title`` (its accent strip is
now a table lookup, checked equal on every code point by tests/catalog/test_fast_paths.py),
``encode_rows``, ``rewards_RNK``, the segmentation's token ranks (``token_rank_index`` or
``newline_rank_index``), ``hashed_responder_index``.

tests/remark/test_scoring_equivalence.py asserts that the new path gives identical texts, lines, slot
ids, rewards, token ranks and end indices; bench/scoring.py times the two side by side.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

import numpy as np

from catalog.match import Matcher
from catalog.parse import _EMPHASIS, _HEADING, _MARKERS, _OPENER, ParsedLine, _Line, _title_year
from remark.algos import TokenOffsets, encode_rows, end_token_index, rewards_RNK
from remark.algos.tokens import _common_prefix_len
from remark.scoring import RankScorer, ScoredRows, _Clock, hashed_responder_index

__all__ = ["ReferenceOffsetMapper", "ReferenceScorer", "reference_ground_lines", "reference_parse_list"]


class ReferenceOffsetMapper:
    """The pre-change ``TokenOffsetMapper``: per-token character offsets, one Python loop per row."""

    def __init__(self, tokenizer: Any) -> None:
        self.tokenizer = tokenizer
        self._alone: dict[int, str] = {}
        self._after: dict[int, str | None] = {}
        self._anchor, self._anchor_text = self._pick_anchor()

    def _decode(self, seqs: list[list[int]]) -> list[str]:
        return self.tokenizer.batch_decode(seqs, skip_special_tokens=True)

    def _pick_anchor(self) -> tuple[int, str]:
        for text in ("a", "A", "x", "0", "The"):
            ids = self.tokenizer.encode(text, add_special_tokens=False)
            if len(ids) == 1:
                decoded = self._decode([ids])[0]
                if decoded:
                    return ids[0], decoded
        raise ValueError("could not find a single-token anchor in this tokenizer's vocabulary")

    def _fill(self, ids: Any, first: Any) -> None:
        new_after = sorted({i for i in ids if i not in self._after})
        if new_after:
            decoded = self._decode([[self._anchor, i] for i in new_after])
            n = len(self._anchor_text)
            for i, s in zip(new_after, decoded):
                self._after[i] = s[n:] if s.startswith(self._anchor_text) else None
        new_alone = sorted({i for i in first if i not in self._alone})
        if new_alone:
            self._alone.update(zip(new_alone, self._decode([[i] for i in new_alone])))

    def __call__(self, completion_ids: Sequence[Sequence[int]]) -> TokenOffsets:
        rows = [list(map(int, row)) for row in completion_ids]
        width = max((len(r) for r in rows), default=0)
        texts = self._decode(rows)
        self._fill((i for row in rows for i in row[1:]), (row[0] for row in rows if row))
        start = np.zeros((len(rows), width), dtype=np.int64)
        end = np.zeros((len(rows), width), dtype=np.int64)
        n_fallback = 0
        for r, (row, text) in enumerate(zip(rows, texts)):
            start[r, :] = end[r, :] = len(text)
            if not row:
                continue
            pieces = [self._alone[row[0]], *(self._after[i] for i in row[1:])]
            ok = None not in pieces and "".join(pieces) == text
            lens = np.fromiter(
                (len(p) if p is not None else -1 for p in pieces), dtype=np.int64, count=len(row)
            )
            if ok:
                ends = np.cumsum(lens)
            else:
                n_fallback += 1
                ends = self._fallback_ends(row, text, pieces)
            end[r, : len(row)] = ends
            start[r, 0] = 0
            start[r, 1 : len(row)] = ends[:-1]
        return TokenOffsets(texts=texts, start_RT=start, end_RT=end, n_fallback=n_fallback)

    def _fallback_ends(self, row: list[int], text: str, pieces: list[str | None]) -> np.ndarray:
        n = len(row)
        ends = np.zeros(n, dtype=np.int64)
        pos = 0
        i = 0
        while i < n:
            piece = pieces[i]
            if piece is not None and text.startswith(piece, pos):
                pos += len(piece)
                ends[i] = pos
                i += 1
                continue
            unit_end = self._matching_run(row, i, text, pos)
            if unit_end is None:
                prefixes = self._decode([row[: t + 1] for t in range(i, n)])
                for t, dec in zip(range(i, n), prefixes):
                    ends[t] = _common_prefix_len(dec, text)
                break
            j, pos = unit_end
            ends[i:j] = ends[i - 1] if i else 0
            ends[j] = pos
            i = j + 1
        ends = np.maximum.accumulate(ends)
        ends[-1] = len(text)
        return ends

    def _matching_run(self, row: list[int], i: int, text: str, pos: int) -> tuple[int, int] | None:
        for j in range(i + 1, min(i + 8, len(row))):
            if i == 0:
                unit = self._decode([row[: j + 1]])[0]
            else:
                unit = self._decode([[self._anchor, *row[i : j + 1]]])[0]
                if not unit.startswith(self._anchor_text):
                    continue
                unit = unit[len(self._anchor_text) :]
            if unit and "\ufffd" not in unit and text.startswith(unit, pos):
                return j, pos + len(unit)
        return None


def _clean(text: str) -> tuple[str, bool, bool]:
    heading = _HEADING.match(text) is not None
    body = _HEADING.sub("", text) if heading else text
    if "*" in body or "_" in body or "`" in body or "~" in body:
        body = _EMPHASIS.sub("", body)
    body = body.strip()
    marker = False
    for _ in range(3):
        m = _MARKERS.match(body)
        if m is None or m.end() == 0:
            break
        marker = True
        body = body[m.end() :].strip()
    return body, marker, heading


def _features(completion: str, start: int, end: int) -> _Line:
    text = completion[start:end]
    body, marker, heading = _clean(text)
    title, year = _title_year(body)
    colon = body.rstrip(" *_").endswith(":")
    if year is None and (colon or (heading and not marker)):
        title = None
    return _Line(start, end, text, body, title, year, marker, heading, colon)


def _is_preamble(line: _Line, nxt: _Line | None) -> bool:
    if line.marker:
        return False
    if line.colon or (line.heading and line.year is None):
        return True
    if _OPENER.match(line.body):
        return True
    return line.year is None and nxt is not None and nxt.marker


def reference_parse_list(completion: str) -> list[ParsedLine]:
    """The pre-change ``catalog.parse.parse_list`` (no ``max_items``)."""
    spans: list[tuple[int, int]] = []
    pos = 0
    for raw in completion.split("\n"):
        stripped = raw.strip()
        if stripped:
            start = pos + (len(raw) - len(raw.lstrip()))
            spans.append((start, start + len(stripped)))
        pos += len(raw) + 1
    out: list[ParsedLine] = []
    cache: dict[int, _Line] = {}

    def line_at(i: int) -> _Line | None:
        if i >= len(spans):
            return None
        if i not in cache:
            cache[i] = _features(completion, *spans[i])
        return cache[i]

    in_preamble = True
    for i in range(len(spans)):
        line = line_at(i)
        assert line is not None
        if in_preamble:
            if _is_preamble(line, line_at(i + 1)):
                continue
            in_preamble = False
        out.append(ParsedLine(len(out), line.start, line.end, line.text, line.title, line.year))
        cache.pop(i, None)
    return out


def reference_ground_lines(matcher: Matcher, rows: Sequence[Sequence[ParsedLine]]) -> list[list[str | None]]:
    """The pre-change ``Matcher.ground_lines``: one ``ground_many`` over every line of every row."""
    flat = [line for row in rows for line in row]
    matches = matcher.ground_many([ln.title for ln in flat], [ln.year for ln in flat])
    ids = [m.item_id if ln.title is not None else None for ln, m in zip(flat, matches, strict=True)]
    out, pos = [], 0
    for row in rows:
        out.append(ids[pos : pos + len(row)])
        pos += len(row)
    return out


class ReferenceScorer:
    """The pre-change ``RankScorer.score`` with the settings of ``scorer`` (its own matcher cache and pieces)."""

    def __init__(self, scorer: RankScorer) -> None:
        self.matcher = copy.copy(scorer.matcher)
        self.matcher._cache = {}
        self.matcher.clear_cache()
        self.offsets = ReferenceOffsetMapper(scorer.offsets.tokenizer)
        self.eos_ids = list(scorer.eos_ids)
        self.k, self.scheme, self.seed = scorer.k, scorer.scheme, scorer.seed
        self.per_responder = scorer.per_responder
        self.token_ranks, self.parsed_slots_only = scorer.token_ranks, scorer.parsed_slots_only
        self.last_timings: dict[str, float] = {}  # seconds per stage of the last call

    def score(
        self,
        completion_ids: Sequence[Sequence[int]],
        columns: dict[str, Sequence[Any]],
        *,
        group_size: int | None,
        step: int,
    ) -> ScoredRows:
        clock = _Clock()
        offsets = self.offsets([list(ids) for ids in completion_ids])
        clock.lap("decode_offsets")
        lines = [reference_parse_list(text) for text in offsets.texts]
        clock.lap("parse")
        slot_ids = reference_ground_lines(self.matcher, lines)
        if self.parsed_slots_only:
            slot_ids = [
                [i for ln, i in zip(row, ids, strict=True) if ln.title is not None]
                for row, ids in zip(lines, slot_ids, strict=True)
            ]
        clock.lap("ground")
        responders = columns["responders"]
        own = [int(i) for i in columns["responder_index"]]
        drawn = hashed_responder_index(
            columns["request_id"], [len(r) for r in responders], seed=self.seed, step=step
        )
        responder_index = [o if o >= 0 else d for o, d in zip(own, drawn, strict=True)]
        enc = encode_rows(
            slot_ids,
            k=self.k,
            union=columns["union"],
            counts=columns["counts"],
            responders=responders,
            seen=columns["seen"],
            responder_index=responder_index,
            group_size=group_size,
            request_ids=columns["request_id"],
        )
        rewards, mask_RN = rewards_RNK(enc, self.scheme)
        clock.lap("rewards")
        rank_RT = self.token_ranks(lines, offsets, k=self.k)
        end_R = end_token_index(completion_ids, self.eos_ids)
        clock.lap("token_ranks")
        self.last_timings = clock.laps
        return ScoredRows(
            request_ids=[str(x) for x in columns["request_id"]],
            texts=offsets.texts,
            lines=lines,
            slot_ids=slot_ids,
            rewards_RNK=rewards,
            mask_RN=mask_RN,
            per_responder=self.per_responder,
            rank_RT=rank_RT,
            end_R=end_R,
            n_lines_R=enc.n_lines_R,
            n_fallback=offsets.n_fallback,
        )
