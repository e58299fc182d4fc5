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
- token ranks of the ``lines`` segmentation: ``reference_token_rank_index`` (line ends by ``str.find`` per
  line, whitespace by ``np.isin``);
- end tokens: ``remark.algos.end_token_index`` (a Python loop over every token).

Shared with the new path (so the bench times them on both sides alike): the parser's title/year rules
(``catalog.parse._title_year``), the matcher's rules and index (the rules now skip the subtitle look-up
and the explanation strings where they cannot apply), ``normalize_title`` and ``subtitle_heads`` (the
accent strip is a table lookup, checked equal on every code point by tests/catalog/test_fast_paths.py;
the article / hyphen regexes run only where a comma / hyphen is, checked equal to the unguarded code by
tests/catalog/test_lists.py: these made the reference's ground stage faster too),
``encode_rows`` (made cheaper in place by issue 13, with the same tables:
tests/remark/algos/test_encode_requests.py), ``rewards_RNK``, ``newline_rank_index`` (Rank-GRPO's
segmentation), ``hashed_responder_index``.

tests/remark/scoring/test_scoring_equivalence.py asserts that the new path gives identical texts, lines, slot
ids, rewards, token ranks and end indices; bench/scoring.py times the two side by side, each in a
process of its own, and beside them the commit c9c2260 itself (``git archive``: the code as it was,
shared helpers included), which is what its ratios against the pre-change code are measured on.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from catalog.match import Matcher
from catalog.parse import _EMPHASIS, _HEADING, _MARKERS, _OPENER, ParsedLine, _title_year
from remark.algos import TokenOffsets, encode_rows, end_token_index, rewards_RNK, token_rank_index
from remark.algos.tokens import _WHITESPACE, FILLER, LineSpan, _common_prefix_len
from remark.scoring.scorer import RankScorer, ScoredRows, _Clock, hashed_responder_index

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


@dataclass(slots=True)
class _Line:
    start: int
    end: int
    text: str
    body: str
    title: str | None
    year: int | None
    marker: bool
    heading: bool
    colon: bool


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


def reference_token_rank_index(
    lines: Sequence[Sequence[LineSpan]], offsets: TokenOffsets, *, k: int
) -> torch.Tensor:
    """The pre-change ``remark.algos.token_rank_index`` (line ends by ``str.find`` per line, whitespace by
    ``np.isin``). rank_RT (int64): the rank whose segment token t of row r overlaps; -1 for none, ``FILLER`` (-2) for
    a token of no rank whose characters are all whitespace (a blank line, indentation, a leading or
    trailing newline), except the whitespace that ends line K (up to and including its newline).

    Segment of rank j != K - 1 = ``[start_j, n_j + 1)``, n_j the first newline at or after ``end_j``
    (the end of the text if none): content, trailing spaces and the ending newline. Segment of rank
    K - 1 = ``[start_j, end_j)``: its trailing spaces and newline get no rank. Indentation before a
    line's content and blank lines belong to no segment. A zero-length token has no rank; a token
    overlapping two segments takes the first; a token that overlaps rank K - 1 and runs past its content
    end (it holds the newline ending line K) gets -1.
    """
    n_rows, width = offsets.start_RT.shape
    if len(lines) != n_rows:
        raise ValueError(f"lines has {len(lines)} rows but offsets has {n_rows}")
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    text_len = np.array([len(t) for t in offsets.texts], dtype=np.int64)
    stride = int(text_len.max(initial=0)) + 2
    seg_row = np.fromiter((r for r, row in enumerate(lines) for _ in row), dtype=np.int64)
    seg_rank = np.fromiter((ln.rank for row in lines for ln in row), dtype=np.int64, count=len(seg_row))
    seg_start = np.fromiter((ln.start for row in lines for ln in row), dtype=np.int64, count=len(seg_row))
    seg_end = np.fromiter((ln.end for row in lines for ln in row), dtype=np.int64, count=len(seg_row))
    if len(seg_row) and (
        (seg_start < 0).any() or (seg_end < seg_start).any() or (seg_end > text_len[seg_row]).any()
    ):
        raise ValueError(
            "a line span lies outside its completion text: spans must come from parse_list(text)"
        )
    ext_end = np.fromiter(
        (
            ln.end if ln.rank == k - 1 else _line_stop(offsets.texts[r], ln.end)
            for r, row in enumerate(lines)
            for ln in row
        ),
        dtype=np.int64,
        count=len(seg_row),
    )
    g_start = seg_row * stride + seg_start
    g_end = seg_row * stride + ext_end
    if len(g_start) > 1 and ((g_start[1:] < g_end[:-1]) & (seg_row[1:] == seg_row[:-1])).any():
        raise ValueError("line spans of a row overlap or are out of order: pass parse_list's lines in order")
    row_off = (np.arange(n_rows, dtype=np.int64) * stride)[:, None]
    t_start = offsets.start_RT + row_off
    t_end = offsets.end_RT + row_off
    j = np.searchsorted(g_end, t_start, side="right")
    j_safe = np.minimum(j, max(len(g_end) - 1, 0))
    if len(g_end):
        hit = (j < len(g_end)) & (g_start[j_safe] < t_end) & (t_end > t_start)
        rank = np.where(hit, seg_rank[j_safe], -1)
        holds_last_newline = (
            hit & (seg_rank[j_safe] == k - 1) & (t_end > (seg_row * stride + seg_end)[j_safe])
        )
        rank = np.where(holds_last_newline, -1, rank)
    else:
        rank = np.full((n_rows, width), -1, dtype=np.int64)
    # filler: whitespace-only tokens of no rank (count non-space code points over the concatenated texts)
    padded = "".join(t + "x" * (stride - len(t)) for t in offsets.texts)
    code_points = np.frombuffer(padded.encode("utf-32-le"), dtype=np.uint32)
    nonspace = np.concatenate([[0], np.cumsum(~np.isin(code_points, _WHITESPACE))])
    blank = (t_end > t_start) & (nonspace[t_end] == nonspace[t_start])
    # the whitespace that ends line K is not filler (its newline gets 0, as the merged ")\n" does)
    last = seg_rank == k - 1
    lo = np.full(n_rows, -1, dtype=np.int64)
    hi = np.full(n_rows, -1, dtype=np.int64)
    lo[seg_row[last]] = seg_end[last]
    hi[seg_row[last]] = np.fromiter(
        (_line_stop(offsets.texts[r], e) for r, e in zip(seg_row[last], seg_end[last], strict=True)),
        dtype=np.int64,
        count=int(last.sum()),
    )
    ends_k = (offsets.start_RT >= lo[:, None]) & (offsets.end_RT <= hi[:, None])
    rank = np.where(blank & (rank == -1) & ~ends_k, FILLER, rank)
    return torch.from_numpy(np.ascontiguousarray(rank, dtype=np.int64))


def _line_stop(text: str, end: int) -> int:
    """One past the newline that ends the line whose content ends at ``end`` (len(text) if none)."""
    nl = text.find("\n", end)
    return nl + 1 if nl >= 0 else len(text)


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
        self.parsed_slots_only = scorer.parsed_slots_only
        self.token_ranks = scorer.token_ranks
        if scorer.token_ranks is token_rank_index:  # the 'lines' segmentation: its pre-change code
            self.token_ranks = reference_token_rank_index
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
