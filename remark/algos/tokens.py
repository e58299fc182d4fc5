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
newline ending rank 20 that rank's advantage; here segments come from the parser's spans. Since blank
lines then hold no rank, they would cost nothing where Rank-GRPO made them slots; with mostly flat
groups (Rank-GRPO's reward on one responder) a tiny policy drifted into lists of blank lines that run
into the cap (ProtoQA experiment, run 2: one seed of three), hence the filler penalty.

Character offsets match the text TRL scores, ``tokenizer.batch_decode(ids, skip_special_tokens=True)``.
Each token's piece is decoded once per tokenizer and cached (the first token of a row alone, later
tokens after a fixed anchor token, so SentencePiece's leading-space rule is respected); a row whose
concatenated pieces differ from its full decode (a multi-byte character split across byte tokens,
clean-up of spaces) is repaired locally: at each mismatch the shortest run of tokens that decodes to
the text there is found and its characters go to the token that completes them; if none does, the row
falls back to incremental prefix decoding, each token ending at the longest common prefix of its
prefix's decode and the full text.
"""

from __future__ import annotations

import itertools
import json
import operator
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
import torch

from remark.algos.registry import register

FILLER = -2  # rank_RT code of a whitespace-only token outside every segment (``token_rank_index``)

# every whitespace code point (str.isspace) is below U+3001
_WHITESPACE = np.array([i for i in range(0x3001) if chr(i).isspace()], dtype=np.uint32)
_SPACE_TABLE = np.zeros(0x3002, dtype=bool)  # code point -> str.isspace (the last entry stands for >= U+3001)
_SPACE_TABLE[_WHITESPACE] = True

__all__ = [
    "FILLER",
    "LineSpan",
    "TokenOffsetMapper",
    "TokenOffsets",
    "end_token_index",
    "newline_rank_index",
    "token_advantages",
    "token_rank_index",
]


class LineSpan(Protocol):
    """What token mapping needs from ``catalog.parse.ParsedLine``."""

    rank: int
    start: int
    end: int


@dataclass(frozen=True)
class TokenOffsets:
    """Per-token character spans: token t of row r covers ``texts[r][start_RT[r, t]:end_RT[r, t]]``.

    Padding positions (past a row's length) have ``start == end == len(texts[r])``. ``n_fallback`` counts
    rows that needed incremental decoding.
    """

    texts: list[str]
    start_RT: np.ndarray
    end_RT: np.ndarray
    n_fallback: int


def _rows(completion_ids: Any, completion_mask: Any | None) -> tuple[list[list[int]], int]:
    """Unpadded rows of ids and the padded width T."""
    if isinstance(completion_ids, torch.Tensor):
        if completion_ids.ndim != 2:
            raise ValueError(f"completion_ids must be (R, T), got shape {tuple(completion_ids.shape)}")
        ids = completion_ids.tolist()
        width = completion_ids.shape[1]
        if completion_mask is not None:
            if tuple(completion_mask.shape) != tuple(completion_ids.shape):
                raise ValueError(
                    f"completion_mask shape {tuple(completion_mask.shape)} != completion_ids shape {tuple(completion_ids.shape)}"
                )
            lengths = completion_mask.to(torch.int64).sum(1).tolist()
            ids = [row[:n] for row, n in zip(ids, lengths)]
        return ids, width
    if completion_mask is not None:
        raise ValueError(
            "completion_mask goes with a padded (R, T) tensor; lists of ids are already unpadded"
        )
    ids = [list(map(int, row)) for row in completion_ids]
    return ids, max((len(r) for r in ids), default=0)


def _rust_decoder(tokenizer: Any) -> Any | None:
    """The Rust ``tokenizers.Tokenizer`` when decoding through it gives ``batch_decode``'s text, else None.

    True for transformers' own ``TokenizersBackend`` (``PreTrainedTokenizerFast``) whose ``decode``,
    ``batch_decode`` and ``_decode`` are not overridden and whose ``clean_up_tokenization_spaces`` step
    does nothing (off, or skipped for a BPE model as transformers 5 does): ``_decode`` is then exactly
    ``self._tokenizer.decode(ids, skip_special_tokens=...)``.
    """
    try:
        from transformers.tokenization_utils_base import PreTrainedTokenizerBase
        from transformers.tokenization_utils_tokenizers import TokenizersBackend
    except ImportError:  # another transformers layout: keep the public path
        return None
    cls = type(tokenizer)
    if not isinstance(tokenizer, TokenizersBackend) or (
        getattr(cls, "_decode", None) is not TokenizersBackend._decode
        or getattr(cls, "decode", None) is not PreTrainedTokenizerBase.decode
        or getattr(cls, "batch_decode", None) is not PreTrainedTokenizerBase.batch_decode
    ):
        return None
    backend = getattr(tokenizer, "_tokenizer", None)
    if backend is None or not hasattr(backend, "decode_batch"):
        return None
    if getattr(tokenizer, "clean_up_tokenization_spaces", False):
        bpe = type(backend.model).__name__ == "BPE"
        if not bpe or getattr(
            tokenizer, "clean_up_tokenization_spaces_for_bpe_even_though_it_will_corrupt_output", False
        ):
            return None
    return backend


def _byte_level_unplain_ids(backend: Any | None) -> frozenset[int] | None:
    """Ids of added tokens that are not special (decoded with their raw content), when the decoder is
    exactly ``ByteLevel``; None otherwise (no concatenation shortcut)."""
    if backend is None:
        return None
    spec = json.loads(backend.to_str())
    if (spec.get("decoder") or {}).get("type") != "ByteLevel":
        return None
    return frozenset(int(t["id"]) for t in spec.get("added_tokens") or [] if not t.get("special"))


class TokenOffsetMapper:
    """Per-token character offsets for one HF tokenizer; caches each token id's decoded piece.

    >>> mapper = TokenOffsetMapper(tokenizer)          # doctest: +SKIP
    >>> offsets = mapper(completion_ids, completion_mask)  # doctest: +SKIP

    Speed (issue 13; the same texts and offsets as the pre-change loop kept in
    ``remark.scoring_reference.ReferenceOffsetMapper``): decoding goes straight to the Rust tokenizer
    when the tokenizer's ``batch_decode`` is transformers' own and its space clean-up is a no-op
    (``_rust_decoder``), which skips transformers' per-token ``to_py_obj`` checks; piece lengths,
    cumulative ends and padding are numpy over the whole batch. With a byte-level decoder (GPT-2, Qwen,
    Llama 3: each token becomes its bytes and the concatenation is UTF-8-decoded, invalid sequences
    replaced), a row whose tokens each decode to valid UTF-8 on their own (no U+FFFD in any piece) and
    are ordinary vocabulary or skipped special tokens decodes to the concatenation of its pieces, so that
    concatenation is its text and it is not decoded again; every other row is decoded and compared.
    """

    def __init__(self, tokenizer: Any) -> None:
        self.tokenizer = tokenizer
        self._backend = _rust_decoder(tokenizer)
        self._unplain = _byte_level_unplain_ids(self._backend)  # None: no concatenation shortcut
        self._alone: dict[int, str] = {}
        self._after: dict[int, str | None] = {}
        self._cap = 0  # ids the tables below hold
        self._table: list[str] = []  # id -> piece after the anchor, cap + id -> piece alone ("" if none)
        self._after_len = self._alone_len = np.zeros(0, dtype=np.int64)  # -1: unknown or None
        self._after_ok = self._alone_ok = np.zeros(0, dtype=bool)  # piece is its share of any decode
        self._grow(max(len(tokenizer) if hasattr(tokenizer, "__len__") else 0, 1) - 1)
        self._anchor, self._anchor_text = self._pick_anchor()

    def _decode(self, seqs: list[list[int]]) -> list[str]:
        if self._backend is not None:
            return self._backend.decode_batch(seqs, skip_special_tokens=True)
        return self.tokenizer.batch_decode(seqs, skip_special_tokens=True)

    def _pick_anchor(self) -> tuple[int, str]:
        for text in ("a", "A", "x", "0", "The"):
            ids = self.tokenizer.encode(text, add_special_tokens=False)
            if len(ids) == 1:
                decoded = self._decode([ids])[0]
                if decoded:
                    return ids[0], decoded
        raise ValueError(
            "could not find a single-token anchor ('a', 'A', 'x', '0', 'The') in this tokenizer's vocabulary"
        )

    def _grow(self, top: int) -> None:
        """Make the per-id tables hold id ``top`` (a model may emit ids past ``len(tokenizer)``)."""
        n = self._cap
        if top < n:
            return
        extra = max(top + 1, 2 * n) - n
        self._cap = n + extra
        self._table = self._table[:n] + [""] * extra + self._table[n:] + [""] * extra
        self._after_len = np.concatenate([self._after_len, np.full(extra, -1, dtype=np.int64)])
        self._alone_len = np.concatenate([self._alone_len, np.full(extra, -1, dtype=np.int64)])
        self._after_ok = np.concatenate([self._after_ok, np.zeros(extra, dtype=bool)])
        self._alone_ok = np.concatenate([self._alone_ok, np.zeros(extra, dtype=bool)])

    def _exact_piece(self, i: int, piece: str) -> bool:
        return self._unplain is not None and i not in self._unplain and "\ufffd" not in piece

    def _unseen(self, ids: np.ndarray, known: dict) -> list[int]:
        """Distinct ids of ``ids`` that are not keys of ``known``, ascending."""
        table = self._after_len if known is self._after else self._alone_len
        fresh = ids[table[ids] < 0]  # unknown, or known with no piece (rare): check the dict
        return [i for i in np.unique(fresh).tolist() if i not in known]

    def _fill(self, later: np.ndarray, first: np.ndarray) -> None:
        """Decode the pieces of ids not seen before (``later``: after the anchor; ``first``: alone)."""
        new_after = self._unseen(later, self._after)
        if new_after:
            decoded = self._decode([[self._anchor, i] for i in new_after])
            n = len(self._anchor_text)
            for i, s in zip(new_after, decoded):
                piece = s[n:] if s.startswith(self._anchor_text) else None
                self._after[i] = piece
                self._table[i] = piece or ""
                if piece is not None:
                    self._after_len[i] = len(piece)
                    self._after_ok[i] = self._exact_piece(i, piece)
        new_alone = self._unseen(first, self._alone)
        if new_alone:
            for i, s in zip(new_alone, self._decode([[i] for i in new_alone])):
                self._alone[i] = self._table[self._cap + i] = s
                self._alone_len[i] = len(s)
                self._alone_ok[i] = self._exact_piece(i, s)

    def __call__(self, completion_ids: Any, completion_mask: Any | None = None) -> TokenOffsets:
        """Offsets for (R, T) ids (tensor with optional mask, or R unpadded lists, as TRL decodes them)."""
        if isinstance(completion_ids, torch.Tensor):
            given, width = _rows(completion_ids, completion_mask)
        else:
            if completion_mask is not None:
                _rows(completion_ids, completion_mask)  # raises: a mask goes with a padded tensor
            given = [row.tolist() if hasattr(row, "tolist") else row for row in completion_ids]
            width = max(map(len, given), default=0)
        n_rows = len(given)
        lengths = np.fromiter(map(len, given), dtype=np.int64, count=n_rows)
        flat = np.fromiter(itertools.chain.from_iterable(given), dtype=np.int64, count=int(lengths.sum()))
        if flat.size and int(flat.min()) < 0:
            raise ValueError("token ids must be >= 0")
        row_start = np.cumsum(lengths) - lengths
        nonempty = lengths > 0
        first = np.zeros(flat.size, dtype=bool)
        first[row_start[nonempty]] = True
        self._grow(int(flat.max(initial=0)))
        self._fill(flat[~first], flat[first])

        # piece lengths (-1 = no piece) -> each token's end within its row, if the pieces are the text
        piece_len = np.where(first, self._alone_len[flat], self._after_len[flat])
        csum = np.concatenate([[0], np.cumsum(np.maximum(piece_len, 0))])
        row_of = np.repeat(np.arange(n_rows), lengths)
        ends_flat = csum[1:] - csum[row_start[row_of]]
        has_piece = (np.bincount(row_of, weights=piece_len < 0, minlength=n_rows) == 0) & nonempty
        exact = np.where(first, self._alone_ok[flat], self._after_ok[flat])
        exact_R = (np.bincount(row_of, weights=~exact, minlength=n_rows) == 0) & has_piece

        # every row's pieces in one join (the first token's piece alone), then one slice per row
        keys = (flat + first * self._cap).tolist()
        pieces = (
            operator.itemgetter(*keys)(self._table) if len(keys) > 1 else tuple(self._table[k] for k in keys)
        )
        big = "".join(pieces)
        text_bounds = np.stack([csum[row_start], csum[row_start + lengths]], 1).tolist()
        joined = [big[a:b] if ok else None for (a, b), ok in zip(text_bounds, has_piece.tolist())]
        texts = [j if ok else "" for j, ok in zip(joined, exact_R.tolist())]  # type: ignore[misc]
        decode_rows = np.flatnonzero(~exact_R & nonempty).tolist()
        rows = {r: flat[row_start[r] : row_start[r] + lengths[r]].tolist() for r in decode_rows}
        if decode_rows:
            for r, text in zip(decode_rows, self._decode([rows[r] for r in decode_rows])):
                texts[r] = text

        text_len = np.fromiter(map(len, texts), dtype=np.int64, count=n_rows)
        inside = np.arange(width) < lengths[:, None]
        end = np.repeat(text_len[:, None], width, axis=1)
        end[inside] = ends_flat
        n_fallback = 0
        for r in decode_rows:
            if joined[r] is not None and joined[r] == texts[r]:
                continue
            n_fallback += 1
            row = rows[r]
            row_pieces = [self._alone[row[0]], *(self._after[i] for i in row[1:])]
            end[r, : len(row)] = self._fallback_ends(row, texts[r], row_pieces)
        start = np.repeat(text_len[:, None], width, axis=1)
        start[inside] = 0
        start[:, 1:][inside[:, 1:]] = end[:, :-1][inside[:, 1:]]
        return TokenOffsets(texts=texts, start_RT=start, end_RT=end, n_fallback=n_fallback)

    def _fallback_ends(self, row: list[int], text: str, pieces: list[str | None]) -> np.ndarray:
        """Token end offsets for a row whose pieces do not concatenate to its text.

        Walk the pieces; at a mismatch, decode the smallest run of tokens ``i..j`` (j - i < 8, after the
        anchor) that matches the text there and give its characters to token j, the one completing
        them (a character split over byte tokens). If no run matches, decode every prefix from there
        on and end each token at the longest common prefix of its prefix's decode and the text.
        """
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
        """(j, new position) for the shortest run ``row[i..j]`` whose decode matches ``text`` at ``pos``."""
        for j in range(i + 1, min(i + 8, len(row))):
            if i == 0:  # the row's first token decodes alone (SentencePiece drops its leading space)
                unit = self._decode([row[: j + 1]])[0]
            else:
                unit = self._decode([[self._anchor, *row[i : j + 1]]])[0]
                if not unit.startswith(self._anchor_text):
                    continue
                unit = unit[len(self._anchor_text) :]
            if unit and "\ufffd" not in unit and text.startswith(unit, pos):
                return j, pos + len(unit)
        return None


def _common_prefix_len(a: str, b: str) -> int:
    n = min(len(a), len(b))
    if a[:n] == b[:n]:
        return n
    lo, hi = 0, n  # a[:lo] == b[:lo], a[:hi] != b[:hi]
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if a[:mid] == b[:mid]:
            lo = mid
        else:
            hi = mid
    return lo


@register("segmentation", "lines", reward_slots="lines")
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
    # the texts end to end, each padded to ``stride`` with "x" (no newline, no space), as code points
    padded = "".join(t + "x" * (stride - len(t)) for t in offsets.texts)
    code_points = np.frombuffer(padded.encode("utf-32-le"), dtype=np.uint32)
    newlines = np.flatnonzero(code_points == 10)

    def line_stop(rows: np.ndarray, ends: np.ndarray) -> np.ndarray:
        """One past the newline that ends each line whose content ends at ``ends`` (the text's length if
        none), for all lines at once: a search in the newline positions of the padded texts."""
        g = rows * stride + ends
        i = np.searchsorted(newlines, g, side="left")
        nl = newlines[np.minimum(i, len(newlines) - 1)] if len(newlines) else g
        inside = (i < len(newlines)) & (nl < rows * stride + text_len[rows])
        return np.where(inside, nl + 1 - rows * stride, text_len[rows])

    ext_end = np.where(seg_rank == k - 1, seg_end, line_stop(seg_row, seg_end))
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
    nonspace = np.concatenate([[0], np.cumsum(~_SPACE_TABLE[np.minimum(code_points, len(_SPACE_TABLE) - 1)])])
    blank = (t_end > t_start) & (nonspace[t_end] == nonspace[t_start])
    # the whitespace that ends line K is not filler (its newline gets 0, as the merged ")\n" does)
    last = seg_rank == k - 1
    lo = np.full(n_rows, -1, dtype=np.int64)
    hi = np.full(n_rows, -1, dtype=np.int64)
    lo[seg_row[last]] = seg_end[last]
    hi[seg_row[last]] = line_stop(seg_row[last], seg_end[last])
    ends_k = (offsets.start_RT >= lo[:, None]) & (offsets.end_RT <= hi[:, None])
    rank = np.where(blank & (rank == -1) & ~ends_k, FILLER, rank)
    return torch.from_numpy(np.ascontiguousarray(rank, dtype=np.int64))


@register("segmentation", "newlines", reward_slots="parsed")
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
