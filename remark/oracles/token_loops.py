"""Loop oracles for the token map: per-token decoding, token ranks and end tokens, one Python loop each.

Written from the rules in the docstrings of ``remark.algos.offsets.TokenOffsetMapper`` and
``remark.algos.tokens`` (``token_rank_index``, ``newline_rank_index``, ``end_token_index``), with no
shared code: the fast paths are checked against these on generated texts and token cuts. Tests only.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from remark.algos import FILLER, TokenOffsets

__all__ = ["LoopOffsetMapper", "loop_end_index", "loop_newline_ranks", "loop_token_ranks"]


def _common_prefix_len(a: str, b: str) -> int:
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


class LoopOffsetMapper:
    """Per-token character offsets by decoding each token after a one-token anchor, row by row.

    The text of a row is the tokenizer's own ``batch_decode`` (special tokens skipped). A token's piece
    is the decoded ``[anchor, token]`` with the anchor's text removed (the first token of a row is
    decoded alone). When the pieces do not add up to the text (byte tokens of one character, decoders
    that merge), runs of up to 8 tokens are decoded together, and failing that every prefix of the row:
    token t then ends where the decoded prefix ``ids[: t + 1]`` stops agreeing with the text (counted as
    ``n_fallback``).
    """

    def __init__(self, tokenizer: Any) -> None:
        self.tokenizer = tokenizer
        self._anchor, self._anchor_text = self._pick_anchor()

    def _decode(self, seqs: list[list[int]]) -> list[str]:
        return self.tokenizer.batch_decode(seqs, skip_special_tokens=True)

    def _pick_anchor(self) -> tuple[int, str]:
        for text in ("a", "A", "x", "0", "The"):
            ids = self.tokenizer.encode(text, add_special_tokens=False)
            if len(ids) == 1 and (decoded := self._decode([ids])[0]):
                return ids[0], decoded
        raise ValueError("could not find a single-token anchor in this tokenizer's vocabulary")

    def _piece(self, token: int, first: bool) -> str | None:
        return self._run_text([token], first)

    def _run_text(self, tokens: list[int], first: bool) -> str | None:
        """The text of ``tokens`` as a piece of the row: decoded alone at the row's start, else decoded
        after the anchor with the anchor's text removed (None when the decode does not begin with it)."""
        decoded = self._decode([tokens if first else [self._anchor, *tokens]])[0]
        if first:
            return decoded
        return decoded.removeprefix(self._anchor_text) if decoded.startswith(self._anchor_text) else None

    def __call__(self, completion_ids: Sequence[Sequence[int]]) -> TokenOffsets:
        rows = [[int(i) for i in row] for row in completion_ids]
        width = max((len(r) for r in rows), default=0)
        texts = self._decode(rows) if rows else []  # batch_decode([]) reads as one empty sequence
        start = np.zeros((len(rows), width), dtype=np.int64)
        end = np.zeros((len(rows), width), dtype=np.int64)
        n_fallback = 0
        for r, (row, text) in enumerate(zip(rows, texts, strict=True)):
            start[r, :] = end[r, :] = len(text)
            if not row:
                continue
            pieces = [self._piece(t, i == 0) for i, t in enumerate(row)]
            if None not in pieces and "".join(pieces) == text:
                ends, pos = [], 0
                for p in pieces:
                    pos += len(p)
                    ends.append(pos)
            else:
                n_fallback += 1
                ends = self._fallback_ends(row, text, pieces)
            for t in range(len(row)):
                start[r, t] = ends[t - 1] if t else 0
                end[r, t] = ends[t]
        return TokenOffsets(texts=texts, start_RT=start, end_RT=end, n_fallback=n_fallback)

    def _fallback_ends(self, row: list[int], text: str, pieces: list[str | None]) -> list[int]:
        """The class docstring's repair, token after token: a token whose piece is the text at the current
        position ends after it; else the matching run's tokens end where the token before them did and
        its last token after the run; with no run, each remaining token ends where its prefix's decode
        stops agreeing with the text. Ends never decrease, and the last is the text's length."""
        ends: list[int] = []
        pos = 0
        while len(ends) < len(row):
            i = len(ends)
            piece = pieces[i]
            if piece is not None and text[pos : pos + len(piece)] == piece:
                pos += len(piece)
                ends.append(pos)
            elif (run := self._matching_run(row, i, text, pos)) is not None:
                j, pos = run
                ends += [ends[-1] if ends else 0] * (j - i) + [pos]
            else:
                ends += [
                    _common_prefix_len(self._decode([row[: t + 1]])[0], text) for t in range(i, len(row))
                ]
        ends = list(itertools.accumulate(ends, max))
        ends[-1] = len(text)
        return ends

    def _matching_run(self, row: list[int], i: int, text: str, pos: int) -> tuple[int, int] | None:
        """The docstring's run rule: of the runs ``row[i..j]`` of 2 to 8 tokens (within the row), the
        shortest whose text as a piece is whole characters (non-empty, no U+FFFD) and is what ``text``
        holds at ``pos``; returned as (j, the position after it), or None."""
        last = min(i + 7, len(row) - 1)
        runs = {j: self._run_text(row[i : j + 1], first=i == 0) for j in range(i + 1, last + 1)}
        fits = [
            j
            for j, piece in runs.items()
            if piece and "\ufffd" not in piece and text[pos : pos + len(piece)] == piece
        ]
        if not fits:
            return None
        j = min(fits)
        return j, pos + len(runs[j])


def _line_stop(text: str, end: int) -> int:
    """One past the first newline at or after ``end`` (len(text) if none)."""
    nl = text.find("\n", end)
    return nl + 1 if nl >= 0 else len(text)


def loop_token_ranks(lines: Sequence[Sequence[Any]], offsets: TokenOffsets, *, k: int) -> torch.Tensor:
    """rank_RT of the ``lines`` segmentation, token by token.

    Segment of rank j: ``[start_j, stop_j)`` with stop_j one past the newline ending line j, except for
    rank K - 1, whose segment is its content ``[start, end)``. A token of positive length takes the rank
    of the first segment it overlaps; one that overlaps rank K - 1 and runs past its content gets -1. A
    token of no segment gets ``FILLER`` when all its characters are whitespace and it does not lie in the
    whitespace that ends line K (content end to one past its newline), else -1.
    """
    n_rows, width = offsets.start_RT.shape
    out = np.full((n_rows, width), -1, dtype=np.int64)
    for r in range(n_rows):
        text, row = offsets.texts[r], list(lines[r])
        segs = [
            (ln.start, ln.end if ln.rank == k - 1 else _line_stop(text, ln.end), ln.rank, ln.end)
            for ln in row
        ]
        last = [ln for ln in row if ln.rank == k - 1]
        ends_k = (last[0].end, _line_stop(text, last[0].end)) if last else None
        for t in range(width):
            a, b = int(offsets.start_RT[r, t]), int(offsets.end_RT[r, t])
            if b <= a:
                continue
            seg = next((s for s in segs if s[0] < b and a < s[1]), None)
            if seg is not None:
                out[r, t] = -1 if seg[2] == k - 1 and b > seg[3] else seg[2]
            elif text[a:b].isspace() and not (ends_k and ends_k[0] <= a and b <= ends_k[1]):
                out[r, t] = FILLER
    return torch.from_numpy(out)


def loop_newline_ranks(lines: Sequence[Sequence[Any]], offsets: TokenOffsets, *, k: int) -> torch.Tensor:
    """rank_RT of the ``newlines`` segmentation: each token's rank is the number of newlines before it."""
    n_rows, width = offsets.start_RT.shape
    out = np.zeros((n_rows, width), dtype=np.int64)
    for r in range(n_rows):
        for t in range(width):
            out[r, t] = offsets.texts[r][: int(offsets.start_RT[r, t])].count("\n")
    return torch.from_numpy(out)


def loop_end_index(completion_ids: Sequence[Sequence[int]], eos_token_ids: Sequence[int]) -> torch.Tensor:
    """end_R: the position of each row's first end token, -1 when it has none."""
    eos = set(eos_token_ids)
    return torch.tensor(
        [next((t for t, i in enumerate(row) if int(i) in eos), -1) for row in completion_ids],
        dtype=torch.int64,
    )
