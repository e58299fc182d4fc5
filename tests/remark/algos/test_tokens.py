"""Token offsets (byte-level BPE and SentencePiece-style tokenizers), token ranks, token advantages."""

import json
from typing import ClassVar

import numpy as np
import pytest
import torch

from catalog.parse import ParsedLine, parse_list
from remark.algos import (
    FILLER,
    TokenOffsetMapper,
    TokenOffsets,
    end_token_index,
    token_advantages,
    token_rank_index,
)
from remark.run.tiny_model import train_tokenizer
from tests.conftest import TINY_TITLES

TEXTS = [
    "Here are some movies:\n\n1. Arrival (2016)\n2. Moon (2009)  \n\n3. ???\n4. Heat\n5. Extra (2000)",
    "1. Amélie (2001)\n2. Moon 🎬\n3. 東京物語 (1953)",
    "Arrival (2016)\nContact (1997)\n",
    "",
]


@pytest.fixture(scope="module")
def bpe():
    corpus = ["\n".join(TINY_TITLES[i:] + TINY_TITLES[:i]) for i in range(len(TINY_TITLES))]
    return train_tokenizer([*corpus, "Here are some movies:\n1. Heat\n2. ???"], vocab_size=400)


@pytest.fixture(scope="module")
def spm():
    """Llama-2-style: Metaspace pre-tokenizer, BPE with byte fallback, Replace/ByteFallback/Fuse/Strip decoder."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE(unk_token="<unk>", byte_fallback=True))
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="first")
    tok.decoder = decoders.Sequence(
        [decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse(), decoders.Strip(" ", 1, 0)]
    )
    trainer = trainers.BpeTrainer(
        vocab_size=300, special_tokens=["<unk>", "<s>", "</s>"], show_progress=False
    )
    tok.train_from_iterator(
        ["\n".join(TINY_TITLES), "Here are some movies:\n- Contact (1997)"] * 4, trainer=trainer
    )
    spec = json.loads(tok.to_str())
    vocab = spec["model"]["vocab"]
    n = len(vocab)
    for i in range(256):  # byte-fallback tokens are ordinary vocabulary entries, not special tokens
        vocab.setdefault(f"<0x{i:02X}>", n + i)
    return PreTrainedTokenizerFast(
        tokenizer_object=Tokenizer.from_str(json.dumps(spec)),
        unk_token="<unk>",
        eos_token="</s>",
        bos_token="<s>",
    )


def _ids(tok, texts):
    return [[*tok.encode(t, add_special_tokens=False), tok.eos_token_id] for t in texts]


@pytest.mark.parametrize("which", ["bpe", "spm"])
def test_offsets_cover_the_text_trl_decodes(which, request):
    tok = request.getfixturevalue(which)
    ids = _ids(tok, TEXTS)
    out = TokenOffsetMapper(tok)(ids)
    assert out.texts == tok.batch_decode(ids, skip_special_tokens=True) == TEXTS
    for r, row in enumerate(ids):
        s, e = out.start_RT[r, : len(row)], out.end_RT[r, : len(row)]
        assert s[0] == 0 and e[-1] == len(TEXTS[r])
        assert (e >= s).all() and (s[1:] == e[:-1]).all()
        assert e[-1] == s[-1]  # the end token decodes to nothing
        assert (out.start_RT[r, len(row) :] == len(TEXTS[r])).all()


def test_ascii_offsets_match_the_tokenizers_own_offsets(bpe):
    text = TEXTS[0]
    enc = bpe(text, add_special_tokens=False, return_offsets_mapping=True)
    out = TokenOffsetMapper(bpe)([enc["input_ids"]])
    assert out.n_fallback == 0
    want = np.array(enc["offset_mapping"])
    assert (out.start_RT[0] == want[:, 0]).all() and (out.end_RT[0] == want[:, 1]).all()


@pytest.mark.parametrize("which", ["bpe", "spm"])
def test_multibyte_characters_go_to_the_token_that_completes_them(which, request):
    tok = request.getfixturevalue(which)
    ids = _ids(tok, TEXTS)
    out = TokenOffsetMapper(tok)(ids)
    assert out.n_fallback == 1  # only the row with é, 🎬 and 東京物語 split over byte tokens
    text = TEXTS[1]
    for ch in "é🎬東":
        pos = text.index(ch)
        t = int(np.nonzero((out.start_RT[1] <= pos) & (out.end_RT[1] > pos))[0][0])
        # decoding up to token t shows the character, decoding up to t - 1 does not
        assert tok.decode(ids[1][: t + 1]).startswith(text[: pos + 1])
        assert not tok.decode(ids[1][:t]).startswith(text[: pos + 1])


def test_padded_tensor_with_mask(bpe):
    ids = _ids(bpe, TEXTS[:3])
    width = max(map(len, ids)) + 2
    pad = bpe.pad_token_id
    ids_t = torch.tensor([row + [pad] * (width - len(row)) for row in ids])
    mask = torch.tensor([[1] * len(row) + [0] * (width - len(row)) for row in ids])
    mapper = TokenOffsetMapper(bpe)
    got = mapper(ids_t, mask)
    want = mapper(ids)
    assert got.texts == want.texts and got.start_RT.shape == (3, width)
    assert (got.end_RT[:, : want.end_RT.shape[1]] == want.end_RT).all()
    assert end_token_index(ids_t, bpe.eos_token_id, mask).tolist() == [len(r) - 1 for r in ids]
    assert end_token_index([[5, 6], [7, 2, 9]], [2, 3]).tolist() == [-1, 1]
    with pytest.raises(ValueError, match="completion_mask shape"):
        mapper(ids_t, mask[:, :-1])


def _char_ranks(text, lines, k):
    """Per-character rank written out from the rules: content + trailing spaces + newline, except the
    last in-list rank K - 1 whose trailing whitespace and newline get none."""
    ranks = [-1] * len(text)
    for ln in lines:
        stop = ln.end if ln.rank == k - 1 else (text.find("\n", ln.end) + 1 or len(text))
        for i in range(ln.start, stop):
            ranks[i] = ln.rank
    return ranks


@pytest.mark.parametrize("which", ["bpe", "spm"])
def test_token_ranks_follow_parse_list_spans(which, request):
    tok = request.getfixturevalue(which)
    k = 4
    ids = _ids(tok, TEXTS)
    offsets = TokenOffsetMapper(tok)(ids)
    lines = [parse_list(t) for t in offsets.texts]
    assert [ln.rank for ln in lines[0]] == [0, 1, 2, 3, 4] and lines[0][2].title is None
    rank = token_rank_index(lines, offsets, k=k)
    for r, text in enumerate(offsets.texts):
        chars = _char_ranks(text, lines[r], k)
        for t in range(len(ids[r])):
            s, e = offsets.start_RT[r, t], offsets.end_RT[r, t]
            inside = [c for c in chars[s:e] if c >= 0]
            want = inside[0] if inside else -1
            content_end = lines[r][k - 1].end if len(lines[r]) >= k else None
            if want == k - 1 and e > content_end:
                want = -1  # a merged token holding the newline that ends line K
            ends_k = content_end is not None and s >= content_end and e <= text.find("\n", content_end) + 1
            if want == -1 and e > s and text[s:e].isspace() and not ends_k:
                want = FILLER  # whitespace outside every line: blank lines, indentation
            assert rank[r, t] == want, (which, r, t, repr(text[s:e]))
    # the preamble's text carries no rank, its blank line is filler; line K's newline carries no rank
    text = offsets.texts[0]
    nl_after_k = text.index("\n", lines[0][3].end)
    t_nl = int(np.nonzero((offsets.start_RT[0] <= nl_after_k) & (offsets.end_RT[0] > nl_after_k))[0][0])
    assert rank[0, t_nl] == -1
    before = rank[0, : int(np.searchsorted(offsets.end_RT[0], lines[0][0].start, side="right"))]
    assert (before < 0).all() and (before == -1).any() and (before == FILLER).any()
    # the blank line after "Moon (2009)  " is filler
    blank = text.index("\n\n3.") + 1
    t_blank = np.nonzero((offsets.start_RT[0] <= blank) & (offsets.end_RT[0] > blank))[0]
    assert rank[0, t_blank[0]] in (FILLER, 1)  # 1 when the tokenizer merged it with line 2's newline


def _offsets(text, cuts):
    """TokenOffsets for one row cut at the given character positions."""
    bounds = [0, *cuts, len(text)]
    return TokenOffsets([text], np.array([bounds[:-1]]), np.array([bounds[1:]]), 0)


def test_token_rank_hand_built_spans_with_merged_tokens():
    text = "A (1)\nB (2)\nC"
    lines = [
        [
            ParsedLine(0, 0, 5, "A (1)", "A", 1),
            ParsedLine(1, 6, 11, "B (2)", "B", 2),
            ParsedLine(2, 12, 13, "C", "C", None),
        ]
    ]
    # tokens: "A (1" | ")\n" | "B (2" | ")\n" | "C"
    off = _offsets(text, [4, 6, 10, 12])
    assert token_rank_index(lines, off, k=3).tolist() == [[0, 0, 1, 1, 2]]
    # K = 2: the merged ")\n" that ends line K gets no rank; C is overflow (rank 2)
    assert token_rank_index(lines, off, k=2).tolist() == [[0, 0, 1, -1, 2]]
    # a token straddling two lines takes the first: "A (1)\nB"
    off = _offsets(text, [7, 12])
    assert token_rank_index(lines, off, k=3).tolist() == [[0, 1, 2]]


def test_whitespace_outside_lines_is_filler():
    text = "A\n\n  B\n\n"
    lines = [[ParsedLine(0, 0, 1, "A", "A", None), ParsedLine(1, 5, 6, "B", "B", None)]]
    off = _offsets(text, list(range(1, len(text))))  # one token per character
    F = FILLER
    # blank line, indentation and the trailing blank line are filler; each line's newline is its rank's
    assert token_rank_index(lines, off, k=3).tolist() == [[0, 0, F, F, F, 1, 1, F]]
    # K = 2: the newline that ends line K is nobody's (-1), the blank line after it is filler
    assert token_rank_index(lines, off, k=2).tolist() == [[0, 0, F, F, F, 1, -1, F]]
    # a completion of blank lines only (the collapse filler_penalty exists for) is filler throughout
    assert token_rank_index([[]], _offsets("\n\n\n", [1, 2]), k=2).tolist() == [[F, F, F]]
    # text tokens of no rank stay -1
    assert token_rank_index([[]], _offsets("Sure!", [2]), k=2).tolist() == [[-1, -1]]


def test_token_rank_rejects_bad_spans():
    off = _offsets("abc", [1])
    with pytest.raises(ValueError, match="outside its completion text"):
        token_rank_index([[ParsedLine(0, 0, 9, "", None, None)]], off, k=2)
    with pytest.raises(ValueError, match="overlap or are out of order"):
        token_rank_index(
            [[ParsedLine(0, 1, 3, "", None, None), ParsedLine(1, 0, 1, "", None, None)]], off, k=2
        )
    with pytest.raises(ValueError, match="lines has 2 rows"):
        token_rank_index([[], []], off, k=2)
    # tokens must tile the text in order (the segment search relies on it)
    back = TokenOffsets(["abcd"], np.array([[0, 2, 1]]), np.array([[2, 4, 3]]), 0)
    with pytest.raises(ValueError, match="go backwards"):
        token_rank_index([[ParsedLine(0, 0, 4, "abcd", None, None)]], back, k=2)


def test_token_advantages_hand_values():
    adv_RK = torch.tensor([[1.0, -2.0], [0.5, 0.25]])
    rank_RT = torch.tensor([[-1, 0, 0, -1, 1, 2, 2, -1, -1], [0, -1, -1, -1, -1, -1, -1, -1, -1]])
    end_R = torch.tensor([7, 1])
    n_lines = torch.tensor([3, 1])
    mask = torch.tensor([[1] * 8 + [0], [1, 1] + [0] * 7])
    out = token_advantages(adv_RK, rank_RT, n_lines_R=n_lines, end_R=end_R, mask_RT=mask)
    want = torch.tensor([[0, 1, 1, 0, -2, -0.1, -0.1, 0.1, 0], [0.5, -0.1, 0, 0, 0, 0, 0, 0, 0]])
    torch.testing.assert_close(out, want)
    out = token_advantages(
        adv_RK, rank_RT, n_lines_R=n_lines, end_R=end_R, end_shaping=False, overflow_penalty=0.0, mask_RT=mask
    )
    torch.testing.assert_close(
        out, torch.tensor([[0, 1, 1, 0, -2, 0, 0, 0, 0], [0.5, 0, 0, 0, 0, 0, 0, 0, 0]])
    )
    custom = token_advantages(
        adv_RK,
        rank_RT,
        n_lines_R=n_lines,
        end_R=torch.tensor([-1, 1]),
        complete_bonus=0.3,
        early_stop_penalty=-0.2,
    )
    assert custom[0, 7] == 0 and custom[1, 1] == pytest.approx(-0.2)
    # filler tokens (whitespace outside every line) get filler_penalty; 0 switches it off
    filler_RT = torch.tensor([[0, FILLER, 1, FILLER, -1]])
    adv2 = torch.tensor([[0.5, -1.0]])
    out = token_advantages(adv2, filler_RT, n_lines_R=torch.tensor([2]))
    torch.testing.assert_close(out, torch.tensor([[0.5, -0.1, -1.0, -0.1, 0.0]]))
    out = token_advantages(adv2, filler_RT, n_lines_R=torch.tensor([2]), filler_penalty=0.0)
    torch.testing.assert_close(out, torch.tensor([[0.5, 0.0, -1.0, 0.0, 0.0]]))
    with pytest.raises(ValueError, match="n_lines_R must have shape"):
        token_advantages(adv_RK, rank_RT, n_lines_R=torch.tensor([1]))
    with pytest.raises(ValueError, match="end_R points past"):
        token_advantages(adv_RK, rank_RT, n_lines_R=n_lines, end_R=torch.tensor([9, 0]))


@pytest.mark.parametrize("which", ["bpe", "spm"])
def test_end_to_end_end_token_never_inherits_a_hit(which, request):
    """Pitfall 2: a hit on the last line must not leak into the end token (lists would collapse)."""
    tok = request.getfixturevalue(which)
    texts = ["1. Arrival (2016)\n2. Moon (2009)", "1. Heat\n2. Moon (2009)\n3. Contact (1997)"]
    ids = _ids(tok, texts)
    offsets = TokenOffsetMapper(tok)(ids)
    lines = [parse_list(t) for t in offsets.texts]
    k = 3
    rank = token_rank_index(lines, offsets, k=k)
    adv_RK = torch.tensor([[0.0, 5.0, 0.0], [0.0, 0.0, 7.0]])
    end_R = end_token_index(ids, tok.eos_token_id)
    out = token_advantages(adv_RK, rank, n_lines_R=torch.tensor([len(x) for x in lines]), end_R=end_R)
    assert out[0, end_R[0]] == pytest.approx(-0.1)  # 2 lines < K: early stop
    assert out[1, end_R[1]] == pytest.approx(0.1)  # complete list
    assert (out[0, : end_R[0]][rank[0, : end_R[0]] == 1] == 5.0).all()
    assert (out[1, : end_R[1]][rank[1, : end_R[1]] == 2] == 7.0).all()
    assert set(out[0, : end_R[0]].tolist()) <= {0.0, 5.0}


def _prefix_reference(tok, row, text):
    """End of token i = longest common prefix of decode(row[:i + 1]) and the text (running max)."""
    ends = []
    for i in range(len(row)):
        d = tok.decode(row[: i + 1], skip_special_tokens=True)
        n = 0
        while n < min(len(d), len(text)) and d[n] == text[n]:
            n += 1
        ends.append(max(n, ends[-1] if ends else 0))
    return ends


@pytest.mark.parametrize("which", ["bpe", "spm"])
def test_local_repair_equals_prefix_decoding(which, request):
    tok = request.getfixturevalue(which)
    texts = ["1. Amélie (2001)\n2. Moon 🎬\n3. 東京物語 (1953)", "é", "🎬🎬 x"]
    ids = _ids(tok, texts)
    out = TokenOffsetMapper(tok)(ids)
    assert out.n_fallback == 3
    for r, row in enumerate(ids):
        assert out.end_RT[r, : len(row)].tolist() == _prefix_reference(tok, row, texts[r])


class _QuirkyTokenizer:
    """A decoder that rewrites the anchor when something follows it, so no anchored piece is usable and
    the mapper must fall back to prefix decoding."""

    vocab: ClassVar[dict[int, str]] = {0: "a", 1: "Hel", 2: "lo", 3: "\n", 4: "x", 5: "</s>"}

    def encode(self, text, add_special_tokens=False):
        return [0] if text == "a" else [1]

    def batch_decode(self, seqs, skip_special_tokens=True):
        out = []
        for s in seqs:
            text = "".join(self.vocab[i] for i in s if i != 5)
            out.append("A" + text[1:] if len(s) > 1 and s[0] == 0 else text)
        return out


def test_prefix_decoding_fallback_when_no_piece_matches():
    out = TokenOffsetMapper(_QuirkyTokenizer())([[1, 2, 3, 4, 5], [4]])
    assert out.texts == ["Hello\nx", "x"] and out.n_fallback == 1
    assert out.end_RT[0].tolist() == [3, 5, 6, 7, 7] and out.start_RT[0].tolist() == [0, 3, 5, 6, 7]
    assert out.end_RT[1].tolist()[:1] == [1]


def test_cut_off_list_with_fewer_than_k_lines_is_an_early_stop():
    # Row 0: 2 lines, cut by the cap (no end token): its last token gets the early-stop penalty.
    # Row 1: 3 lines (= K), cut by the cap: complete, nothing shaped. Row 2: blank lines only, cut: penalty.
    adv_RK = torch.tensor([[1.0, 2.0, 3.0]] * 3)
    rank_RT = torch.tensor([[0, 0, 1, 1, -1], [0, 1, 2, 2, 0], [-1, -1, -1, -1, -1]])
    mask_RT = torch.tensor([[1, 1, 1, 1, 0], [1, 1, 1, 1, 1], [1, 1, 1, 1, 1]])
    out = token_advantages(
        adv_RK,
        rank_RT,
        n_lines_R=torch.tensor([2, 3, 0]),
        end_R=torch.tensor([-1, -1, -1]),
        mask_RT=mask_RT,
    )
    torch.testing.assert_close(out[0], torch.tensor([1.0, 1.0, 2.0, -0.1, 0.0]))
    torch.testing.assert_close(out[1], torch.tensor([1.0, 2.0, 3.0, 3.0, 1.0]))
    torch.testing.assert_close(out[2], torch.tensor([0.0, 0.0, 0.0, 0.0, -0.1]))
    off = token_advantages(
        adv_RK,
        rank_RT,
        n_lines_R=torch.tensor([2, 3, 0]),
        end_R=torch.tensor([-1, -1, -1]),
        end_shaping=False,
    )
    assert float(off[2].abs().sum()) == 0.0
