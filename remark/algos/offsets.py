"""Per-token character offsets of decoded completions: ``TokenOffsetMapper`` -> ``TokenOffsets``.

The token map (``remark.algos.tokens``) needs, for every token of every completion row, the span of
characters it covers in the row's text; rewards are computed on the parser's lines of that same text,
so the two cannot disagree.

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
import re
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

__all__ = ["FlatRows", "TokenOffsetMapper", "TokenOffsets"]


@dataclass(frozen=True)
class TokenOffsets:
    """Per-token character spans: token t of row r covers ``texts[r][start_RT[r, t]:end_RT[r, t]]``.

    Padding positions (past a row's length) have ``start == end == len(texts[r])``. ``n_fallback`` counts
    rows that needed incremental decoding. ``ids_flat`` / ``lengths``: the rows' token ids end to end
    (int64) and each row's length, as the mapper read them (None when built by hand).
    """

    texts: list[str]
    start_RT: np.ndarray
    end_RT: np.ndarray
    n_fallback: int
    ids_flat: np.ndarray | None = None
    lengths: np.ndarray | None = None


@dataclass(frozen=True)
class FlatRows:
    """R rows of token ids end to end: ``ids`` (int64, L) and ``lengths`` (int64, R; sum = L)."""

    ids: np.ndarray
    lengths: np.ndarray

    def __post_init__(self) -> None:
        ids = np.asarray(self.ids, dtype=np.int64)
        lengths = np.asarray(self.lengths, dtype=np.int64)
        if ids.ndim != 1 or lengths.ndim != 1 or (lengths < 0).any() or int(lengths.sum()) != ids.size:
            raise ValueError(
                f"FlatRows: ids must be 1-D with sum(lengths) = len(ids) and lengths >= 0, got {ids.size} ids "
                f"and lengths summing to {int(lengths.sum())}"
            )
        object.__setattr__(self, "ids", ids)
        object.__setattr__(self, "lengths", lengths)

    def __len__(self) -> int:
        return len(self.lengths)


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


_REPLACEMENT = re.compile("\ufffd")


def _all_per_row(flags: np.ndarray, heads: np.ndarray, nonempty: np.ndarray) -> np.ndarray:
    """bool per row: every token's flag is set (False for an empty row). ``heads``: where each non-empty
    row starts in the flat tokens (strictly increasing), so one ``logical_and.reduceat`` covers them."""
    out = np.zeros(len(nonempty), dtype=bool)
    if len(heads):
        out[nonempty] = np.logical_and.reduceat(flags, heads)
    return out


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

    Speed (the same texts and offsets as the per-token loop ``remark.oracles.token_loops.LoopOffsetMapper``,
    checked by tests/remark/algos/test_offsets_fast.py): decoding goes straight to the Rust tokenizer
    when the tokenizer's ``batch_decode`` is transformers' own and its space clean-up is a no-op
    (``_rust_decoder``), which skips transformers' per-token ``to_py_obj`` checks; piece lengths,
    cumulative ends and padding are numpy over the whole batch. With a byte-level decoder (GPT-2, Qwen,
    Llama 3: each token becomes its bytes and the concatenation is UTF-8-decoded, invalid sequences
    replaced), a row whose tokens each decode to valid UTF-8 on their own (no U+FFFD in any piece) and
    are ordinary vocabulary or skipped special tokens decodes to the concatenation of its pieces, so that
    concatenation is its text and it is not decoded again; every other row is decoded and compared.

    The rows' texts are gathered from one array of the pieces' code points (one ``numpy`` gather, no
    per-token string join).
    """

    def __init__(self, tokenizer: Any) -> None:
        self.tokenizer = tokenizer
        self._backend = _rust_decoder(tokenizer)
        self._unplain = _byte_level_unplain_ids(self._backend)  # None: no concatenation shortcut
        self._alone: dict[int, str] = {}
        self._after: dict[int, str | None] = {}
        self._cap = 0  # ids the tables below hold
        # every piece's code points end to end (UTF-32), and where each starts: id -> piece after the
        # anchor, cap + id -> piece alone (-1: not decoded yet); a row's text is one gather from them
        self._cp_parts: list[np.ndarray] = []
        self._cp = np.zeros(0, dtype=np.uint32)
        self._cp_size = 0
        self._cp_at = np.zeros(0, dtype=np.int64)
        self._after_len = self._alone_len = np.zeros(0, dtype=np.int64)  # -1: unknown, -2: no piece
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
        gap = np.full(extra, -1, dtype=np.int64)
        self._cp_at = np.concatenate([self._cp_at[:n], gap, self._cp_at[n:], gap])
        self._after_len = np.concatenate([self._after_len, np.full(extra, -1, dtype=np.int64)])
        self._alone_len = np.concatenate([self._alone_len, np.full(extra, -1, dtype=np.int64)])
        self._after_ok = np.concatenate([self._after_ok, np.zeros(extra, dtype=bool)])
        self._alone_ok = np.concatenate([self._alone_ok, np.zeros(extra, dtype=bool)])

    def _exact_pieces(self, ids: list[int], pieces: list[str]) -> np.ndarray | bool:
        """Per piece: it is its share of any decode (a byte-level decoder, not an added plain token, no
        U+FFFD in it); the U+FFFD test is one search in the pieces joined by NUL."""
        if self._unplain is None or not ids:
            return False
        joined = "\0".join(pieces)
        bad = np.zeros(len(pieces), dtype=bool)
        if "\ufffd" in joined:
            starts = np.cumsum([0, *(len(p) + 1 for p in pieces[:-1])])
            at = [m.start() for m in _REPLACEMENT.finditer(joined)]
            bad[np.searchsorted(starts, at, side="right") - 1] = True
        if self._unplain:
            bad |= np.isin(np.asarray(ids, dtype=np.int64), np.fromiter(self._unplain, np.int64))
        return ~bad

    def _unseen(self, ids: np.ndarray, known: dict) -> list[int]:
        """Distinct ids of ``ids`` that are not keys of ``known``, ascending (a mark per vocabulary id,
        not a sort: a cold batch has ~100k of them)."""
        table = self._after_len if known is self._after else self._alone_len
        if not ids.size:
            return []
        marked = np.zeros(self._cap, dtype=bool)
        marked[ids] = True
        return np.flatnonzero(marked & (table == -1)).tolist()

    def _fill(self, later: np.ndarray, first: np.ndarray) -> None:
        """Decode the pieces of ids not seen before (``later``: after the anchor; ``first``: alone)."""
        new_after = self._unseen(later, self._after)
        if new_after:
            decoded = self._decode([[self._anchor, i] for i in new_after])
            n = len(self._anchor_text)
            pieces = [s[n:] if s.startswith(self._anchor_text) else None for s in decoded]
            self._after.update(zip(new_after, pieces, strict=True))
            kept = [(i, p) for i, p in zip(new_after, pieces, strict=True) if p is not None]
            self._store_many([i for i, _ in kept], [p for _, p in kept])
            self._after_len[new_after] = [-2 if p is None else len(p) for p in pieces]
            self._after_ok[[i for i, _ in kept]] = self._exact_pieces(
                [i for i, _ in kept], [p for _, p in kept]
            )
        new_alone = self._unseen(first, self._alone)
        if new_alone:
            pieces = self._decode([[i] for i in new_alone])
            self._alone.update(zip(new_alone, pieces, strict=True))
            self._store_many([self._cap + i for i in new_alone], pieces)
            self._alone_len[new_alone] = [len(p) for p in pieces]
            self._alone_ok[new_alone] = self._exact_pieces(new_alone, pieces)

    def _store_many(self, keys: list[int], pieces: list[str]) -> None:
        """Append the pieces' code points to the store, one encode for all (``keys``: id, or cap + id for
        a piece alone); ``_cp_at[key]`` is where its piece starts."""
        if not keys:
            return
        lengths = np.fromiter(map(len, pieces), dtype=np.int64, count=len(pieces))
        self._cp_at[keys] = self._cp_size + np.cumsum(lengths) - lengths
        joined = "".join(pieces)
        if joined:
            self._cp_parts.append(np.frombuffer(joined.encode("utf-32-le", "surrogatepass"), dtype=np.uint32))
            self._cp_size += len(joined)

    def _code_points(self) -> np.ndarray:
        if self._cp_parts:
            self._cp = np.concatenate([self._cp, *self._cp_parts])
            self._cp_parts = []
        return self._cp

    def __call__(self, completion_ids: Any, completion_mask: Any | None = None) -> TokenOffsets:
        """Offsets for (R, T) ids: a tensor with optional mask, R unpadded lists (as TRL hands them to a
        reward function), or :class:`FlatRows` (the rows end to end, as ``remark.scoring.pool`` ships them)."""
        if isinstance(completion_ids, FlatRows):
            if completion_mask is not None:
                raise ValueError("FlatRows carry their own lengths: pass no completion_mask")
            flat, lengths = completion_ids.ids, completion_ids.lengths
            width = int(lengths.max(initial=0))
        else:
            if isinstance(completion_ids, torch.Tensor):
                given, width = _rows(completion_ids, completion_mask)
            else:
                if completion_mask is not None:
                    _rows(completion_ids, completion_mask)  # raises: a mask goes with a padded tensor
                given = [row.tolist() if hasattr(row, "tolist") else row for row in completion_ids]
                width = max(map(len, given), default=0)
            lengths = np.fromiter(map(len, given), dtype=np.int64, count=len(given))
            flat = np.fromiter(itertools.chain.from_iterable(given), dtype=np.int64, count=int(lengths.sum()))
        n_rows = len(lengths)
        if flat.size and int(flat.min()) < 0:
            raise ValueError("token ids must be >= 0")
        row_start = np.cumsum(lengths) - lengths
        nonempty = lengths > 0
        first = np.zeros(flat.size, dtype=bool)
        first[row_start[nonempty]] = True
        self._grow(int(flat.max(initial=0)))
        # piece lengths (-1 = no piece) -> each token's end within its row, if the pieces are the text;
        # a first token's piece is its piece alone (one gather each, then the first tokens overwritten)
        heads = row_start[nonempty]
        piece_len = self._after_len[flat]
        piece_len[heads] = self._alone_len[flat[heads]]
        unknown = np.flatnonzero(piece_len == -1)  # ids never seen (in that position): decode them
        if unknown.size:
            at_head = first[unknown]
            self._fill(flat[unknown[~at_head]], flat[unknown[at_head]])
            ids = flat[unknown]
            piece_len[unknown] = np.where(at_head, self._alone_len[ids], self._after_len[ids])
        csum = np.concatenate([[0], np.cumsum(np.maximum(piece_len, 0))])
        row_of = np.repeat(np.arange(n_rows), lengths)
        ends_flat = csum[1:] - csum[row_start[row_of]]
        has_piece = _all_per_row(piece_len >= 0, heads, nonempty)
        exact = self._after_ok[flat]
        exact[heads] = self._alone_ok[flat[heads]]
        exact_R = _all_per_row(exact, heads, nonempty) & has_piece

        # every row's pieces end to end (the first token's piece alone) in one gather of code points,
        # then one slice per row
        n_chars = np.maximum(piece_len, 0)
        src = np.repeat(self._cp_at[flat + first * self._cap] - csum[:-1], n_chars)
        src += np.arange(len(src), dtype=np.int64)
        big = self._code_points()[src].tobytes().decode("utf-32-le", "surrogatepass")
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
        return TokenOffsets(
            texts=texts, start_RT=start, end_RT=end, n_fallback=n_fallback, ids_flat=flat, lengths=lengths
        )

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
