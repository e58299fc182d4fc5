"""``TokenOffsetMapper`` (Rust decode, numpy offsets, the byte-level concatenation shortcut)
gives the texts and offsets of the per-token loop (``remark.oracles.token_loops.LoopOffsetMapper``)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from remark.algos import TokenOffsetMapper
from remark.algos.offsets import FlatRows, _byte_level_unplain_ids, _rust_decoder
from remark.oracles.token_loops import LoopOffsetMapper as ReferenceOffsetMapper
from remark.run.tiny_model import train_tokenizer
from tests.conftest import TINY_TITLES
from tests.remark.algos.test_tokens import TEXTS


@pytest.fixture(scope="module")
def bpe():
    corpus = ["\n".join(TINY_TITLES[i:] + TINY_TITLES[:i]) for i in range(len(TINY_TITLES))]
    tok = train_tokenizer([*corpus, "Here are some movies:\n1. Heat\n2. ???"], vocab_size=400)
    tok.add_tokens(["<plain-added>"])
    return tok


def _same(tok, rows):
    got, want = TokenOffsetMapper(tok)(rows), ReferenceOffsetMapper(tok)(rows)
    # per row: batch_decode([]) reads an empty batch as one empty sequence
    assert got.texts == want.texts == [tok.decode(r, skip_special_tokens=True) for r in rows]
    assert np.array_equal(got.start_RT, want.start_RT) and np.array_equal(got.end_RT, want.end_RT)
    assert got.n_fallback == want.n_fallback
    return got


@settings(max_examples=150, deadline=None)
@given(data=st.data())
def test_random_ids_give_the_reference_offsets(bpe, data):
    n = len(bpe)
    rows = data.draw(st.lists(st.lists(st.integers(0, n + 3), max_size=40), max_size=6))
    _same(bpe, rows)


@settings(max_examples=80, deadline=None)
@given(texts=st.lists(st.text(st.characters(codec="utf-8"), max_size=40), min_size=1, max_size=5))
def test_encoded_texts_give_the_reference_offsets(bpe, texts):
    rows = [[*bpe.encode(t, add_special_tokens=False), bpe.eos_token_id] for t in texts]
    _same(bpe, rows)


def test_warm_mapper_matches_on_new_rows(bpe):
    mapper, ref = TokenOffsetMapper(bpe), ReferenceOffsetMapper(bpe)
    for text in TEXTS * 2 + ["<plain-added> Heat", "\ufffd é"]:
        rows = [bpe.encode(text, add_special_tokens=False), [bpe.eos_token_id, *bpe.encode(text)]]
        got, want = mapper(rows), ref(rows)
        assert got.texts == want.texts
        assert np.array_equal(got.end_RT, want.end_RT) and np.array_equal(got.start_RT, want.start_RT)


def test_the_rust_decoder_is_used_only_when_it_is_transformers_own_decode(bpe):
    assert _rust_decoder(bpe) is bpe._tokenizer
    plain_added = bpe.convert_tokens_to_ids("<plain-added>")
    assert _byte_level_unplain_ids(bpe._tokenizer) == {plain_added}  # specials are skipped, not "unplain"

    class Custom(type(bpe)):
        def _decode(self, token_ids, **kwargs):
            return super()._decode(token_ids, **kwargs).upper()

    custom = Custom(tokenizer_object=bpe._tokenizer, eos_token="<|im_end|>", pad_token="<pad>")
    assert _rust_decoder(custom) is None
    rows = [bpe.encode("Arrival (2016)\nMoon (2009)")]
    out = TokenOffsetMapper(custom)(rows)
    assert out.texts == ["ARRIVAL (2016)\nMOON (2009)"] == custom.batch_decode(rows, skip_special_tokens=True)

    class NoBatch:  # not a transformers tokenizer at all: the public path
        pass

    assert _rust_decoder(NoBatch()) is None


def test_tensor_with_mask_and_arrays(bpe):
    rows = [[*bpe.encode(t), bpe.eos_token_id] for t in TEXTS[:3]]
    width = max(map(len, rows)) + 3
    ids = torch.tensor([r + [bpe.pad_token_id] * (width - len(r)) for r in rows])
    mask = torch.tensor([[1] * len(r) + [0] * (width - len(r)) for r in rows])
    want = ReferenceOffsetMapper(bpe)(rows)
    got = TokenOffsetMapper(bpe)(ids, mask)
    assert got.texts == want.texts and got.start_RT.shape == (3, width)
    assert np.array_equal(got.end_RT[:, : want.end_RT.shape[1]], want.end_RT)
    assert (got.start_RT[:, want.end_RT.shape[1] :] == np.array([len(t) for t in want.texts])[:, None]).all()
    arrays = TokenOffsetMapper(bpe)([np.asarray(r) for r in rows])
    assert arrays.texts == want.texts and np.array_equal(arrays.end_RT, want.end_RT)
    with pytest.raises(ValueError, match="token ids must be >= 0"):
        TokenOffsetMapper(bpe)([[1, -1]])


@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_flat_rows_give_the_offsets_of_the_row_lists(bpe, data):
    rows = data.draw(st.lists(st.lists(st.integers(0, len(bpe) - 1), max_size=30), max_size=6))
    lengths = np.array([len(r) for r in rows], dtype=np.int64)
    flat = np.array([i for r in rows for i in r], dtype=np.int64)
    want = TokenOffsetMapper(bpe)(rows)
    got = TokenOffsetMapper(bpe)(FlatRows(flat, lengths))
    assert got.texts == want.texts and got.n_fallback == want.n_fallback
    assert np.array_equal(got.start_RT, want.start_RT) and np.array_equal(got.end_RT, want.end_RT)
    assert np.array_equal(got.ids_flat, flat) and np.array_equal(got.lengths, lengths)


def test_flat_rows_refuse_lengths_that_do_not_add_up(bpe):
    with pytest.raises(ValueError, match="sum\\(lengths\\) = len\\(ids\\)"):
        FlatRows(np.array([1, 2, 3]), np.array([1, 1]))
    with pytest.raises(ValueError, match="no completion_mask"):
        TokenOffsetMapper(bpe)(FlatRows(np.array([1]), np.array([1])), torch.ones(1, 1))


def test_exact_pieces_is_the_per_piece_rule(bpe):
    mapper = TokenOffsetMapper(bpe)
    plain_added = bpe.convert_tokens_to_ids("<plain-added>")
    pieces = ["ab", "\ufffd", "x\ufffd", "", "\0\ufffd", "\0", "é", "c\ufffdd\ufffd", "zz"]
    ids = [5, 6, 7, 8, 9, 10, plain_added, 12, 13]
    want = [i != plain_added and "\ufffd" not in p for i, p in zip(ids, pieces)]
    assert mapper._exact_pieces(ids, pieces).tolist() == want
    assert mapper._exact_pieces([], []) is False
