"""From ranks to tokens: per-token character offsets, per-token rank index, per-token advantages.

The same line split serves rewards and tokens: ranks come from ``catalog.parse.ParsedLine`` spans
(``rank``, ``[start, end)`` = the line's content in the completion text, surrounding whitespace and
newline excluded; blank and preamble lines are not ranks; unparsable lines are). A token belongs to
rank k when its characters overlap rank k's *segment*: the line's content plus what follows it up to
and including the newline that ends the line. Then
(docs/method.md#the-token-map, docs/experiments.md pitfalls 2-3):

- tokens of rank k < K get A_k; tokens of ranks >= K get ``overflow_penalty`` (Rank-GRPO: -0.1);
- tokens of no rank get 0 (preamble text, padding, special tokens), except *filler*: a token whose
  characters are all whitespace and outside every segment (blank lines, indentation, leading or trailing
  newlines) gets ``filler_penalty`` (default -0.1, like a line past K);
- the newline that ends line K (rank K - 1) gets 0, not A_K; so does a merged token that holds it
  together with the line's last characters (Qwen-style ``")\\n"``);
- the end token never inherits a line's advantage: it gets +``complete_bonus`` when the list has at
  least K ranks and ``early_stop_penalty`` otherwise (Rank-GRPO's +-0.1), or 0 with shaping off.

This is the ``lines`` segmentation. ``newline_rank_index`` (``segmentation: newlines``) is Rank-GRPO's
own rule, kept so that its published recipe can be reproduced (``end_shaping: rank_grpo``).

Departure from Rank-GRPO: it counted raw newlines (a blank line shifted every later rank) and gave the
newline ending rank 20 that rank's advantage; here segments come from the parser's spans. Blank lines
then hold no rank, so they would cost nothing where Rank-GRPO made them slots: a policy whose groups
carry little signal can pad its lists with blank lines up to the length cap at no cost. The filler
penalty prices such whitespace like a line past K (the collapse it prevents is recorded in
experiments/RESULTS.md, "Run 2").

Per-token character offsets (``TokenOffsetMapper``, ``TokenOffsets``) live in ``remark.algos.offsets``.

``token_rank_index`` works on the batch at once (the per-token loop ``remark.oracles.token_loops`` states
the same rules; tests/remark/algos/test_token_ranks_fast.py checks equality): line ends by one
``searchsorted`` over the newlines of the joined texts, ranks only for tokens with characters, and the
whitespace test only for tokens outside every segment (``str.isspace`` on a few, a cumulative count of
non-space code points on many).
"""

from __future__ import annotations

import itertools
import operator
from collections.abc import Sequence
from typing import Any, Protocol

import numpy as np
import torch

from catalog.lists import ParsedLists
from remark.algos.offsets import TokenOffsets, _rows
from remark.algos.registry import register

FILLER = -2  # rank_RT code of a whitespace-only token outside every segment (``token_rank_index``)

# every whitespace code point (str.isspace) is below U+3001
_WHITESPACE = np.array([i for i in range(0x3001) if chr(i).isspace()], dtype=np.uint32)
_SPACE_TABLE = np.zeros(0x3002, dtype=bool)  # code point -> str.isspace (the last entry stands for >= U+3001)
_SPACE_TABLE[_WHITESPACE] = True

__all__ = [
    "FILLER",
    "LineSpan",
    "end_token_index",
    "first_end_index",
    "newline_rank_index",
    "token_advantages",
    "token_rank_index",
]


class LineSpan(Protocol):
    """What token mapping needs from ``catalog.parse.ParsedLine``."""

    rank: int
    start: int
    end: int


@register(
    "segmentation",
    "lines",
    reward_slots="lines",
    schemes="all",
    filler=True,
    help="remark: the parser's line spans, one rule for reward slots and token ranks; blank lines hold no rank",
)
def token_rank_index(lines: Sequence[Sequence[LineSpan]], offsets: TokenOffsets, *, k: int) -> torch.Tensor:
    """rank_RT (int64): the rank whose segment token t of row r overlaps; -1 for none, ``FILLER`` (-2) for
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
    text_len = np.fromiter(map(len, offsets.texts), dtype=np.int64, count=n_rows)
    seg_row, seg_rank, seg_start, seg_end = _segments(lines, n_rows)
    n_seg = len(seg_row)
    if n_seg and (
        (seg_start < 0).any() or (seg_end < seg_start).any() or (seg_end > text_len[seg_row]).any()
    ):
        raise ValueError(
            "a line span lies outside its completion text: spans must come from parse_list(text)"
        )
    # the texts end to end, one NUL (neither a newline nor a space) between two, as code points; row r
    # starts at ``row_off[r]``
    row_off = np.cumsum(text_len + 1) - (text_len + 1)
    code_points = np.frombuffer("\0".join(offsets.texts).encode("utf-32-le"), dtype=np.uint32)
    newlines = np.flatnonzero(code_points == 10)

    def line_stop(rows: np.ndarray, ends: np.ndarray) -> np.ndarray:
        """One past the newline that ends each line whose content ends at ``ends`` (the text's length if
        none), for all lines at once: a search in the newline positions of the joined texts."""
        g = row_off[rows] + ends
        i = np.searchsorted(newlines, g, side="left")
        nl = newlines[np.minimum(i, len(newlines) - 1)] if len(newlines) else g
        inside = (i < len(newlines)) & (nl < row_off[rows] + text_len[rows])
        return np.where(inside, nl + 1 - row_off[rows], text_len[rows])

    last = seg_rank == k - 1
    ext_end = np.where(last, seg_end, line_stop(seg_row, seg_end))
    g_start = row_off[seg_row] + seg_start
    g_end = row_off[seg_row] + ext_end
    if n_seg > 1 and ((g_start[1:] < g_end[:-1]) & (seg_row[1:] == seg_row[:-1])).any():
        raise ValueError("line spans of a row overlap or are out of order: pass parse_list's lines in order")
    # only tokens with characters can get a rank or be filler (zero-length tokens and padding get -1)
    live = offsets.end_RT > offsets.start_RT
    t_row = np.repeat(np.arange(n_rows, dtype=np.int64), live.sum(1))
    t_start, t_end = offsets.start_RT[live], offsets.end_RT[live]
    gs, ge = row_off[t_row] + t_start, row_off[t_row] + t_end
    if n_seg:
        # j = the first segment ending after each token's start: np.searchsorted(g_end, gs, "right"),
        # computed from the other side (both are sorted): the tokens of segment j are those from the
        # first one starting at or after g_end[j - 1] to the first one starting at or after g_end[j]
        # (5k searches in 100k tokens and one repeat instead of 100k searches in 5k segments)
        if len(gs) > 1 and (gs[1:] < gs[:-1]).any():  # (a mapper's tokens tile their text in order)
            raise ValueError("token offsets of a row go backwards: pass a TokenOffsetMapper's offsets")
        bounds = np.concatenate([[0], np.searchsorted(gs, g_end, side="left"), [len(gs)]])
        j = np.minimum(np.repeat(np.arange(n_seg + 1), np.diff(bounds)), n_seg - 1)
        hit = (g_end[j] > gs) & (g_start[j] < ge)
        rank = np.where(hit, seg_rank[j], -1)
        # a token that overlaps rank K - 1 and runs past its content holds the newline ending line K
        rank[hit & last[j] & (ge > (row_off[seg_row] + seg_end)[j])] = -1
    else:
        rank = np.full(len(t_row), -1, dtype=np.int64)
    # filler: whitespace-only tokens of no rank (rare: only tokens without a rank are checked)
    blank = _whitespace_only(
        np.flatnonzero(rank == -1), t_row, t_start, t_end, offsets.texts, code_points, row_off
    )
    # the whitespace that ends line K is not filler (its newline gets 0, as the merged ")\n" does)
    lo = np.full(n_rows, -1, dtype=np.int64)
    hi = np.full(n_rows, -1, dtype=np.int64)
    lo[seg_row[last]] = seg_end[last]
    hi[seg_row[last]] = line_stop(seg_row[last], seg_end[last])
    ends_k = (t_start >= lo[t_row]) & (t_end <= hi[t_row])
    rank[blank & ~ends_k] = FILLER
    out = np.full((n_rows, width), -1, dtype=np.int64)
    out[live] = rank
    return torch.from_numpy(out)


_RANK, _START, _END = (operator.attrgetter(name) for name in ("rank", "start", "end"))


def _segments(
    lines: Sequence[Sequence[LineSpan]], n_rows: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(row, rank, start, end) of every line, flat (int64): from a ``catalog.lists.ParsedLists``'
    columns (a line's rank is its position in its row), else from each line's attributes."""
    if isinstance(lines, ParsedLists):
        count = np.array(lines.n_lines, dtype=np.int64)
        seg_row = np.repeat(np.arange(n_rows, dtype=np.int64), count)
        first = np.cumsum(count) - count
        seg_rank = np.arange(len(seg_row), dtype=np.int64) - first[seg_row]
        return seg_row, seg_rank, np.array(lines.starts, dtype=np.int64), np.array(lines.ends, dtype=np.int64)
    flat = list(itertools.chain.from_iterable(lines))
    n_seg = len(flat)
    seg_row = np.repeat(np.arange(n_rows, dtype=np.int64), np.fromiter(map(len, lines), np.int64, n_rows))
    seg_rank = np.fromiter(map(_RANK, flat), dtype=np.int64, count=n_seg)
    seg_start = np.fromiter(map(_START, flat), dtype=np.int64, count=n_seg)
    seg_end = np.fromiter(map(_END, flat), dtype=np.int64, count=n_seg)
    return seg_row, seg_rank, seg_start, seg_end


_PYTHON_CHECKS = 4096  # up to this many tokens are checked with str.isspace, more with numpy


def _whitespace_only(
    which: np.ndarray,
    t_row: np.ndarray,
    t_start: np.ndarray,
    t_end: np.ndarray,
    texts: Sequence[str],
    code_points: np.ndarray,
    row_off: np.ndarray,
) -> np.ndarray:
    """bool per token: token ``i`` is one of ``which`` and all its characters are whitespace
    (``str.isspace``). Few tokens (the usual case: only tokens outside every segment are asked about) are
    checked one by one with ``str.isspace``; many, by counting non-space code points with a cumulative sum
    over the joined texts (``_SPACE_TABLE`` is ``str.isspace`` per code point): the same answer."""
    out = np.zeros(len(t_row), dtype=bool)
    if len(which) <= _PYTHON_CHECKS:
        spans = zip(t_row[which].tolist(), t_start[which].tolist(), t_end[which].tolist(), strict=True)
        out[which] = [texts[r][a:b].isspace() for r, a, b in spans]
        return out
    nonspace = np.zeros(len(code_points) + 1, dtype=np.int64)
    np.cumsum(~_SPACE_TABLE[np.minimum(code_points, len(_SPACE_TABLE) - 1)], out=nonspace[1:])
    gs, ge = row_off[t_row[which]] + t_start[which], row_off[t_row[which]] + t_end[which]
    out[which] = nonspace[ge] == nonspace[gs]
    return out


@register(
    "segmentation",
    "newlines",
    reward_slots="rank_grpo",
    schemes=("responder",),
    filler=False,
    help="Rank-GRPO as published: a token's rank counts the newlines before it; its parser's slots and hits (scheme responder only)",
)
def newline_rank_index(lines: Sequence[Sequence[LineSpan]], offsets: TokenOffsets, *, k: int) -> torch.Tensor:
    """rank_RT (int64) by Rank-GRPO's rule: a counter of the newlines decoded so far.

    Token t of row r gets n_t, the number of newline characters in the tokens before it, whatever the
    lines hold (``lines`` is not read): a blank line is a slot, a preamble line is slot 0, ``"\\n\\n"``
    moves the counter by 2, the newline that ends a line belongs to that line, and every token of the row
    has a slot (the end token too: it gets the count after the last newline, as do padding positions,
    which the completion mask removes from every use). Rank-GRPO's ``_segment_items_from_tokens`` decodes each token alone
    and counts its newlines; a token's piece here is its span of the decoded text, which holds the same
    newlines (a newline is one whole character, never split across byte tokens). ``k`` is not used: ranks
    past K are kept as they are (overflow), as ``token_rank_index`` does.

    Its reward slots (``reward_slots="rank_grpo"``) are Rank-GRPO's too: the lines its parser keeps,
    renumbered (``catalog.published``). Token rank n is raw line n, reward rank n the n-th kept line, and
    the tokens of raw line n get A_n, as in Rank-GRPO's trainer.
    """
    n_rows = offsets.start_RT.shape[0]
    if len(lines) != n_rows:
        raise ValueError(f"lines has {len(lines)} rows but offsets has {n_rows}")
    text_len = np.array([len(t) for t in offsets.texts], dtype=np.int64)
    stride = int(text_len.max(initial=0)) + 1
    padded = "".join(t + " " * (stride - len(t)) for t in offsets.texts)
    code_points = np.frombuffer(padded.encode("utf-32-le"), dtype=np.uint32)
    newlines = np.concatenate([[0], np.cumsum(code_points == ord("\n"))])
    row_off = (np.arange(n_rows, dtype=np.int64) * stride)[:, None]
    counts = newlines[offsets.start_RT + row_off] - newlines[row_off]  # newlines before each token
    return torch.from_numpy(np.ascontiguousarray(counts, dtype=np.int64))


def end_token_index(
    completion_ids: Any, eos_token_ids: int | Sequence[int], completion_mask: Any | None = None
) -> torch.Tensor:
    """end_R (int64): position of the first end token of each row within its mask, -1 when the row
    has none (a truncated completion)."""
    rows, _ = _rows(completion_ids, completion_mask)
    eos = {int(eos_token_ids)} if isinstance(eos_token_ids, int) else {int(i) for i in eos_token_ids}
    out = [next((t for t, i in enumerate(row) if i in eos), -1) for row in rows]
    return torch.tensor(out, dtype=torch.int64)


def first_end_index(ids_flat: np.ndarray, lengths: np.ndarray, eos_token_ids: Sequence[int]) -> torch.Tensor:
    """end_R (int64): ``end_token_index`` for R rows given end to end (``ids_flat``, int64, rows of
    ``lengths``): the position of each row's first end token within the row, -1 when it has none."""
    n_rows = len(lengths)
    row_start = np.cumsum(lengths) - lengths
    out = np.full(n_rows, -1, dtype=np.int64)
    eos = [int(i) for i in eos_token_ids]
    if len(eos) <= 8:  # a compare per end token (np.isin's set-up costs more than two on 100k ids)
        hit = np.zeros(len(ids_flat), dtype=bool)
        for e in eos:
            hit |= ids_flat == e
    else:
        hit = np.isin(ids_flat, np.asarray(eos, dtype=np.int64))
    at = np.flatnonzero(hit)
    if at.size:
        row = np.searchsorted(row_start + lengths, at, side="right")  # the row each end token is in
        rows, first = np.unique(row, return_index=True)  # ``at`` ascends: its first per row
        out[rows] = at[first] - row_start[rows]
    return torch.from_numpy(out)


END_SHAPINGS = ("remark", "rank_grpo", "none")


def token_advantages(
    adv_RK: torch.Tensor,
    rank_RT: torch.Tensor,
    *,
    n_lines_R: torch.Tensor,
    end_R: torch.Tensor | None = None,
    mask_RT: torch.Tensor | None = None,
    overflow_penalty: float = -0.1,
    end_shaping: str | bool = "remark",
    complete_bonus: float = 0.1,
    early_stop_penalty: float = -0.1,
    filler_penalty: float = -0.1,
) -> torch.Tensor:
    """adv_RT: A[r, rank_RT[r, t]] for ranks < K; ``overflow_penalty`` for ranks >= K; ``filler_penalty``
    for ``FILLER`` (whitespace outside every line); 0 for -1. Positions where ``mask_RT`` is 0 get 0.

    The end token (``end_R``, -1 = none) never keeps its rank's advantage; ``end_shaping`` says what it gets:

    - ``"remark"`` (True): ``complete_bonus`` if ``n_lines_R >= K`` else ``early_stop_penalty``; and a row
      with no end token (cut by the length cap) and fewer than K lines is an early stop too: its last
      token gets ``early_stop_penalty``. Departure from Rank-GRPO, which shaped only the end token: without
      it a list of blank lines that runs into the cap escapes the penalty, and tiny policies learn exactly
      that (observed in the ProtoQA demo: cut-off lists went from 0% to 100%).
    - ``"rank_grpo"``: Rank-GRPO's rule on its own slots (``newline_rank_index``): n = 1 + the largest
      rank of the row's tokens (end token included); the end token gets ``overflow_penalty`` if its own
      rank is >= K, plus ``complete_bonus`` if n >= K and no token of the row is past K, or
      ``early_stop_penalty`` if n < K. Cut rows are not shaped. ``n_lines_R`` is not read.
    - ``"none"`` (False): the end token gets 0.
    """
    if adv_RK.ndim != 2 or rank_RT.ndim != 2 or adv_RK.shape[0] != rank_RT.shape[0]:
        raise ValueError(
            f"adv_RK {tuple(adv_RK.shape)} and rank_RT {tuple(rank_RT.shape)} must be (R, K) and (R, T)"
        )
    shaping = {True: "remark", False: "none"}.get(end_shaping, end_shaping)
    if shaping not in END_SHAPINGS:
        raise ValueError(f"unknown end_shaping {end_shaping!r}; valid: {', '.join(END_SHAPINGS)}")
    r, k = adv_RK.shape
    if tuple(n_lines_R.shape) != (r,):
        raise ValueError(f"n_lines_R must have shape ({r},), got {tuple(n_lines_R.shape)}")
    rank = rank_RT.to(adv_RK.device, torch.int64)
    adv = adv_RK.gather(1, rank.clamp(0, k - 1))
    adv = torch.where(rank >= k, torch.full_like(adv, overflow_penalty), adv)
    adv = torch.where(rank < 0, torch.zeros_like(adv), adv)
    adv = torch.where(rank == FILLER, torch.full_like(adv, filler_penalty), adv)
    if end_R is not None:
        if tuple(end_R.shape) != (r,):
            raise ValueError(f"end_R must have shape ({r},), got {tuple(end_R.shape)}")
        if (end_R >= rank.shape[1]).any():
            raise ValueError("end_R points past the token axis")
        ended = end_R >= 0
        rows = ended.nonzero().flatten()
        if shaping == "remark":
            complete = n_lines_R.to(adv.device) >= k
        elif shaping == "rank_grpo":
            valid = mask_RT.bool() if mask_RT is not None else torch.ones_like(rank, dtype=torch.bool)
            top = torch.where(valid, rank, torch.full_like(rank, -1)).amax(1)  # n - 1
            overflow = ((rank >= k) & valid).any(1)
            complete = (top + 1 >= k) & ~overflow
            early = top + 1 < k
        shaped = torch.zeros(r, dtype=adv.dtype, device=adv.device)
        if shaping == "remark":
            shaped = torch.where(complete, complete_bonus, early_stop_penalty).to(adv.dtype)
        elif shaping == "rank_grpo":
            own = rank.gather(1, end_R.clamp(min=0)[:, None])[:, 0] >= k
            shaped = (
                own.to(adv.dtype) * overflow_penalty
                + complete.to(adv.dtype) * complete_bonus
                + early.to(adv.dtype) * early_stop_penalty
            )
        adv[rows, end_R[rows]] = shaped[rows]
        if shaping == "remark":
            length_R = (mask_RT != 0).sum(1) if mask_RT is not None else torch.full_like(end_R, rank.shape[1])
            cut = (~ended & (n_lines_R.to(adv.device) < k) & (length_R > 0)).nonzero().flatten()
            adv[cut, length_R[cut] - 1] = early_stop_penalty
    if mask_RT is not None:
        adv = adv * mask_RT.to(adv.dtype)
    return adv
