"""``RankScorer`` gives exactly what ``remark.oracles.scorer.OracleScorer`` gives (every stage by a slow,
independent path): texts, parsed lines, slot ids, rewards, token ranks, end indices.

Inputs are generated (hypothesis): list lines in many shapes (numbered, bulleted, bold, headings,
preambles, blurbs), typos, repeats, unknown titles, accents, U+FFFD and other odd characters, blank
lines, lists longer than K, empty rows, rows cut before an end token, and rows of random token ids.
Two tokenizers: a byte-level BPE (the shortcut that skips decoding applies) and a SentencePiece-style
one with byte fallback (it never applies). Scorers are shared across examples, so warm caches (token
pieces, parsed lines, grounded ids) are exercised as well as cold ones.
"""

from __future__ import annotations

import json

import polars as pl
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from catalog.match import GroundingSettings
from catalog.table import Catalog
from remark.algos import names
from remark.oracles.scorer import OracleScorer
from remark.run.tiny_model import train_tokenizer
from remark.scoring.scorer import RankScorer, ScoredRows

ITEMS = [
    ("The Matrix", 1999),
    ("The Matrix Reloaded", 2003),
    ("Alien", 1979),
    ("Aliens", 1986),
    ("Toy Story", 1995),
    ("Toy Story 2", 1999),
    ("Mission: Impossible - Fallout", 2018),
    ("Birdman", 2014),
    ("Amélie", 2001),
    ("Spider-Man: Into the Spider-Verse", 2018),
    ("2001: A Space Odyssey", 1968),
    ("Blade Runner 2049", 2017),
    ("Arrival", 2016),
    ("Heat", 1995),
    ("The Witch", 2015),
    ("Fast & Furious", 2009),
    ("Léon: The Professional", 1994),
    ("(500) Days of Summer", 2009),
    ("東京物語", 1953),
    ("Untitled", None),
    ("Alien", 1981),  # a second Alien two years on: Rank-GRPO's year rule can credit one with the other
    ("Heat", 1996),  # and a second Heat one year on (an even count: the pool tests make groups of ITEMS)
]
K = 5
G = 2


@pytest.fixture(scope="module")
def catalog() -> Catalog:
    return Catalog.from_frame(
        pl.DataFrame(
            {
                "item_id": [f"i{n}" for n in range(len(ITEMS))],
                "title": [t for t, _ in ITEMS],
                "year": [y for _, y in ITEMS],
            },
            schema_overrides={"year": pl.Int32},
        )
    )


def _spm():
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE(unk_token="<unk>", byte_fallback=True))
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="first")
    tok.decoder = decoders.Sequence(
        [decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse(), decoders.Strip(" ", 1, 0)]
    )
    trainer = trainers.BpeTrainer(
        vocab_size=400, special_tokens=["<unk>", "<s>", "</s>"], show_progress=False
    )
    tok.train_from_iterator(
        ["\n".join(f"{i}. {t} ({y})" for i, (t, y) in enumerate(ITEMS))] * 4, trainer=trainer
    )
    spec = json.loads(tok.to_str())
    vocab = spec["model"]["vocab"]
    n = len(vocab)
    for i in range(256):
        vocab.setdefault(f"<0x{i:02X}>", n + i)
    return PreTrainedTokenizerFast(
        tokenizer_object=Tokenizer.from_str(json.dumps(spec)),
        unk_token="<unk>",
        eos_token="</s>",
        bos_token="<s>",
    )


def _bpe():
    corpus = ["\n".join(f"{i + 1}. {t} ({y}) - a film" for i, (t, y) in enumerate(ITEMS))] * 3
    tok = train_tokenizer([*corpus, "Here are some movies:\n- **Heat** (1995)\n# Sci-fi"], vocab_size=600)
    tok.add_tokens(["<extra>"])  # an added token that is not special (decoded with its content)
    return tok


TOKENIZERS = {"bpe": _bpe, "spm": _spm}
_SCORERS: dict[tuple, tuple[RankScorer, OracleScorer]] = {}


def scorers(
    catalog: Catalog, which: str, scheme: str, grounding: GroundingSettings, segmentation: str
) -> tuple:
    """One (scorer, oracle) pair per setting, kept across examples: caches warm up as examples go."""
    key = (which, scheme, grounding, segmentation)
    if key not in _SCORERS:
        tok = TOKENIZERS[which]()
        settings = dict(k=K, scheme=scheme, grounding=grounding, segmentation=segmentation)
        _SCORERS[key] = (RankScorer(catalog, tok, **settings), OracleScorer(catalog, tok, **settings))
    return _SCORERS[key]


def assert_same(new: ScoredRows, ref: ScoredRows) -> None:
    assert new.texts == ref.texts
    assert new.lines == ref.lines
    assert new.slot_ids == ref.slot_ids
    assert torch.equal(new.rewards_RNK, ref.rewards_RNK) and torch.equal(new.mask_RN, ref.mask_RN)
    assert torch.equal(new.rank_RT, ref.rank_RT)
    assert torch.equal(new.end_R, ref.end_R)
    assert torch.equal(new.n_lines_R, ref.n_lines_R)
    assert new.n_fallback == ref.n_fallback and new.request_ids == ref.request_ids


# ---- generated completions ------------------------------------------------------------------------------
_letters = st.characters(codec="utf-8", categories=["L", "N", "P", "S", "Zs", "M"])
_odd = st.sampled_from(
    ["\ufffd", "\ufffd\ufffd", "é", "\u0301", "🎬", "\t", "  ", "**", "__", "`", "~~", "\r"]
)


@st.composite
def title(draw) -> str:
    t, y = draw(st.sampled_from(ITEMS))
    kind = draw(st.sampled_from(["exact", "exact", "typo", "unknown", "case", "article", "subtitle", "odd"]))
    if kind == "typo" and len(t) > 3:
        i = draw(st.integers(0, len(t) - 2))
        t = t[:i] + t[i + 1 :]
    elif kind == "unknown":
        t = draw(st.text(_letters, min_size=1, max_size=30))
    elif kind == "case":
        t = t.upper()
    elif kind == "article" and t.startswith("The "):
        t = t[4:] + ", The"
    elif kind == "subtitle":
        t = t.split(":")[0]
    elif kind == "odd":
        t = draw(_odd) + t + draw(_odd)
    year = draw(st.sampled_from([y, None, (y or 2000) + 1, (y or 2000) + 2, (y or 2000) + 3]))
    if year is None:
        return t
    # the year forms Rank-GRPO's parser drops or keeps (remark's parser reads most of them)
    form = draw(
        st.sampled_from(["{} ({})", "{} ({})", "{} ({})", "{} [{}]", "{}, {}", "{}({})", "{} ({}-2020)"])
    )
    return form.format(t, year)


@st.composite
def line(draw, previous: list[str]) -> str:
    if previous and draw(st.integers(0, 9)) == 0:
        return draw(st.sampled_from(previous))  # a repeat
    body = draw(title())
    blurb = draw(
        st.sampled_from(["", "", " - a heist goes wrong", ": slow, quiet", " – 東京 \ufffd", " (dir. X)"])
    )
    marker = draw(
        st.sampled_from(
            [
                "",
                "",
                "{n}. ",
                "{n}) ",
                "- ",
                "* ",
                "• ",
                "**{n}.** ",
                "#{n} ",
                "{n}.  ",
                "1234. ",
                "{n}.",
                "{n}、",
            ]
        )
    )
    wrap = draw(st.sampled_from(["{}", "{}", "**{}**", '"{}"', "# {}", "{}:", "  {}  "]))
    n = draw(st.integers(1, 30))
    return marker.replace("{n}", str(n)) + wrap.format(body + blurb)


@st.composite
def completion(draw) -> str:
    n = draw(st.integers(0, 2 * K + 2))  # lists longer than K too
    lines: list[str] = []
    if draw(st.booleans()):
        lines.append(
            draw(st.sampled_from(["Here are some movies:", "Sure! Based on that", "### Picks", "Recs"]))
        )
    for _ in range(n):
        lines.append(draw(line(lines)))
        if draw(st.integers(0, 5)) == 0:
            lines.append(draw(st.sampled_from(["", "   ", "\ufffd", "??"])))
    return draw(st.sampled_from(["\n", "\n\n", "\r\n"])).join(lines) + draw(st.sampled_from(["", "\n", " "]))


@st.composite
def batch(draw, vocab_size: int, eos: int):
    """G * B rows: encoded completions (with or without the end token), random ids, or empty rows."""
    n_groups = draw(st.integers(1, 3))
    kinds = draw(
        st.lists(
            st.sampled_from(["text", "text", "text", "random", "empty"]),
            min_size=G * n_groups,
            max_size=G * n_groups,
        )
    )
    rows = []
    for kind in kinds:
        if kind == "text":
            rows.append(("text", draw(completion()), draw(st.booleans())))
        elif kind == "random":
            rows.append(
                ("random", draw(st.lists(st.integers(0, vocab_size - 1), min_size=1, max_size=60)), None)
            )
        else:
            rows.append(("empty", None, None))
    return rows


def columns(n_rows: int) -> dict[str, list]:
    ids = [f"i{n}" for n in range(len(ITEMS))]
    out: dict[str, list] = {"request_id": [], "seen": [], "union": [], "counts": [], "responders": []}
    for r in range(n_rows):
        b = r // G
        responders = [ids[b : b + 6], ids[b + 3 : b + 9]]
        union = list(dict.fromkeys(i for rr in responders for i in rr))
        out["request_id"].append(f"q{b}")
        out["seen"].append([ids[(b + 12) % len(ids)]])
        out["union"].append(union)
        out["counts"].append([sum(i in rr for rr in responders) for i in union])
        out["responders"].append(responders)
    out["responder_index"] = [-1] * n_rows
    return out


def encode(tok, rows) -> list[list[int]]:
    out = []
    for kind, value, eos in rows:
        if kind == "text":
            out.append(tok.encode(value, add_special_tokens=False) + ([tok.eos_token_id] if eos else []))
        elif kind == "random":
            out.append(value)
        else:
            out.append([])
    return out


GROUNDINGS = [
    GroundingSettings(),
    GroundingSettings(match_scorer="token_sort_ratio", match_threshold=85, year_tolerance=0),
    GroundingSettings(match_scorer="WRatio", match_threshold=80),  # no length bound: always scored
    GroundingSettings(match_mode="exact"),
]


@pytest.mark.parametrize("which", ["bpe", "spm"])
@pytest.mark.parametrize("scheme", names("reward"))
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_the_scorer_equals_the_oracle(catalog, which, scheme, data):
    grounding = data.draw(st.sampled_from(GROUNDINGS))
    # Rank-GRPO's published reward slots (newlines) define the responder scheme only
    segmentation = data.draw(st.sampled_from(["lines", "newlines"] if scheme == "responder" else ["lines"]))
    new, ref = scorers(catalog, which, scheme, grounding, segmentation)
    tok = new.offsets.tokenizer
    rows = encode(tok, data.draw(batch(len(tok) + 2, tok.eos_token_id)))  # ids past the vocabulary too
    cols = columns(len(rows))
    step = data.draw(st.integers(0, 3))
    assert_same(
        new.submit(rows, cols, group_size=G, step=step).result(),
        ref.submit(rows, cols, group_size=G, step=step).result(),
    )


@pytest.mark.parametrize("scheme", ["union", "marginal", "responder_rb"])
def test_published_slots_refuse_every_scheme_but_responder(catalog, scheme):
    tok = _bpe()
    for cls in (RankScorer, OracleScorer):
        with pytest.raises(
            ValueError, match=f"reward_scheme '{scheme}' is not defined on segmentation 'newlines'"
        ):
            cls(catalog, tok, k=K, scheme=scheme, segmentation="newlines")


def test_byte_level_rows_skip_the_decode_and_still_match(catalog):
    """The concatenation shortcut really is taken for list rows (and U+FFFD rows are decoded)."""
    tok = _bpe()
    new = RankScorer(catalog, tok, k=K, scheme="union")
    text = "1. The Matrix (1999)\n2. Amélie (2001) - é\n3. 東京物語 (1953)"
    rows = [[*tok.encode(text, add_special_tokens=False), tok.eos_token_id], [*tok.encode("ab"), 300, 301]]
    calls = []
    backend = new.offsets._backend
    assert backend is not None and new.offsets._unplain is not None

    class Spy:
        def decode_batch(self, seqs, **kw):
            calls.append(len(seqs))
            return backend.decode_batch(seqs, **kw)

    new.score(rows, columns(2), group_size=G, step=0)  # fill the piece caches
    new.offsets._backend = Spy()
    calls.clear()
    got = new.score(rows, columns(2), group_size=G, step=0)
    want = OracleScorer(catalog, tok, k=K, scheme="union").score(rows, columns(2), group_size=G, step=0)
    assert_same(got, want)
    assert got.texts[0] == text
    assert calls in ([], [1])  # at most the second row (its ids may decode to U+FFFD) is decoded


def test_rows_as_tensors_and_numpy_give_the_same_answers(catalog):
    import numpy as np

    tok = _bpe()
    new = RankScorer(catalog, tok, k=K, scheme="union")
    rows = [[*tok.encode("1. Heat (1995)\n2. Alien (1979)"), tok.eos_token_id], tok.encode("Arrival (2016)")]
    cols = columns(2)
    want = OracleScorer(catalog, tok, k=K, scheme="union").score(rows, cols, group_size=G, step=0)
    for form in ([np.asarray(r) for r in rows], [torch.tensor(r) for r in rows]):
        assert_same(new.score(form, cols, group_size=G, step=0), want)
