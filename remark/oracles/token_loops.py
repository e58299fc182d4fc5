"""Loop oracles for the token map: per-token decoding, token ranks and end tokens, one Python loop each.

Written from the rules in the docstrings of ``remark.algos.offsets.TokenOffsetMapper`` and
``remark.algos.tokens`` (``token_rank_index``, ``newline_rank_index``, ``end_token_index``), with no
shared code: the fast paths are checked against these on generated texts and token cuts. Tests only.
"""

from __future__ import annotations

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
        if first:
            return self._decode([[token]])[0]
        s = self._decode([[self._anchor, token]])[0]
        return s[len(self._anchor_text) :] if s.startswith(self._anchor_text) else None

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
        n, ends, pos, i = len(row), [0] * len(row), 0, 0
        while i < n:
            piece = pieces[i]
            if piece is not None and text.startswith(piece, pos):
                pos += len(piece)
                ends[i] = pos
                i += 1
                continue
            run = self._matching_run(row, i, text, pos)
            if run is None:
                for t in range(i, n):
                    ends[t] = _common_prefix_len(self._decode([row[: t + 1]])[0], text)
                break
            j, pos = run
            for t in range(i, j):
                ends[t] = ends[i - 1] if i else 0
            ends[j] = pos
            i = j + 1
        for t in range(1, n):  # offsets never go backwards
            ends[t] = max(ends[t], ends[t - 1])
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
