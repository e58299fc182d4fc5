"""The ``rank_grpo_published`` recipe reproduces Rank-GRPO's own token map and rewards on hand-written
completions.

Rewards: the table of SPEC-style cases below (T1-T12, X1) has expectations written by hand from
Rank-GRPO's reward code (``libs/utils.py::process_rec_raw``, ``libs/metrics_align.py``, ``exp_inf``):
which lines its parser keeps, renumbered; its verbatim (title, year) catalog test; its consumption rule
with year +-2; its seen-title test. Each case says which rule gives its answer.

The references below are transcriptions of Rank-GRPO's trainer (yaochenzhu/Rank-GRPO,
``libs/trl/rank_grpo_trainer.py``): ``_segment_items_from_tokens`` (decode each token alone, count its
newlines, a token's item is the count before it) and the advantage broadcast with its length shaping
(``apply_extra_length_shaping``). They loop over tokens in plain Python and share no code with
``remark.algos.tokens``. Three tokenizers: remark's tiny byte-level BPE ("\\n" always its own token), a
Qwen-style byte-level BPE (``")\\n"`` and ``"\\n\\n"`` merge into one token) and a SentencePiece-style one
with byte fallback.
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl
import pytest
import torch

from catalog.io.errors import InputError
from catalog.published import published_slots
from catalog.table import Catalog
from remark.algos import TokenOffsetMapper, end_token_index, token_advantages
from remark.config import compose_config, load_config
from remark.oracles.scorer import OracleScorer
from remark.recipes import load_recipe
from remark.run.tiny_model import train_tokenizer
from remark.scoring.scorer import RankScorer
from remark.step.rank_step import LocalGather, RankSettings, Round, rank_step
from tests.conftest import REPO, TINY_TITLES
from tests.remark.algos.test_tokens import spm  # noqa: F401  (fixture)

K = 4
CPU = {
    "use_vllm": False,
    "bf16": False,
    "use_cpu": True,
    "gradient_checkpointing": False,
    "report_to": "none",
}
COMPLETIONS = [
    "Arrival (2016)\nMoon (2009)\nContact (1997)\nPrimer (2004)",  # exactly K, no final newline
    "Arrival (2016)\nMoon (2009)\nContact (1997)\nPrimer (2004)\n",  # K, then a newline: the end token is slot K
    "Arrival (2016)\n\nMoon (2009)\n\n\nContact (1997)",  # blank lines are slots
    "Here are some movies:\n1. Arrival (2016)\n2. Moon (2009)",  # the preamble is slot 0
    "Arrival (2016)\nno idea at all\nMoon (2009)\nSolaris (1972)\nPrimer (2004)\nHeat (1995)",  # past K
    "Arrival (2016)\nMoon (2009)",  # early stop
    "",  # nothing
    "\n\n\n\n\n\n",  # only blank lines, past K
]


def rank_grpo_items(tok, ids: list[int]) -> list[int]:
    """Rank-GRPO's ``_segment_items_from_tokens`` for one row of valid tokens (end token included)."""
    newline_ids = tok.encode("\n", add_special_tokens=False)
    counts = []
    for tid in ids:
        if len(newline_ids) == 1 and tid == newline_ids[0]:
            counts.append(1)
            continue
        piece = tok.decode([tid], clean_up_tokenization_spaces=False, skip_special_tokens=False)
        counts.append(piece.replace("\r\n", "\n").count("\n"))
    items, item = [], 0
    for n in counts:
        items.append(item)
        item += n
    return items


def rank_grpo_token_advantages(items, adv_K, *, ended: bool, k: int = K) -> list[float]:
    """Rank-GRPO's broadcast and length shaping for one row (the end token is the last item if ``ended``)."""
    out = [adv_K[min(i, k - 1)] if i < k else 0.0 for i in items]
    if ended:
        out[-1] = 0.0  # "Consider EOS token separately"
    emitted = max(items) + 1
    overflow = [i >= k for i in items]
    out = [a + (-0.1 if o else 0.0) for a, o in zip(out, overflow, strict=True)]
    if ended and emitted >= k and not any(overflow):
        out[-1] += 0.1
    if ended and emitted < k:
        out[-1] += -0.1
    return out


def qwen_like():
    """A byte-level BPE whose pre-tokenizer keeps punctuation with the newlines after it and runs of
    newlines together (Qwen2's pattern), so ")\\n" and "\\n\\n" become single tokens."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    pattern = r"[^\r\n\w]?\w+| ?[^\s\w]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(pattern), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=500,
        special_tokens=["<pad>", "<unk>", "<|im_end|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    corpus = [
        "\n".join(TINY_TITLES),
        "\n\n".join(TINY_TITLES),
        "Here are some movies:\n\n\n1. Heat (1995)",
    ] * 5
    tok.train_from_iterator(corpus, trainer=trainer)
    return PreTrainedTokenizerFast(
        tokenizer_object=tok, pad_token="<pad>", unk_token="<unk>", eos_token="<|im_end|>"
    )


@pytest.fixture(scope="module", params=["tiny_bpe", "qwen_like", "spm"])
def tok(request):
    if request.param == "tiny_bpe":
        return train_tokenizer(["\n".join(TINY_TITLES)] * 3, vocab_size=400)
    if request.param == "qwen_like":
        tokenizer = qwen_like()
        pieces = [tokenizer.decode([i]) for i in tokenizer.encode("Moon (2009)\n\nContact (1997)\n")]
        assert ")\n" in pieces or ")\n\n" in pieces or "\n\n" in pieces  # the merged tokens are there
        return tokenizer
    return request.getfixturevalue("spm")


def published():
    return compose_config(
        "rank_grpo_published",
        None,
        {
            **CPU,
            "output_dir": "unused",
            "num_ranks": K,
            "reward_scheme": "responder",
            "sampling": "per_responder",
        },
    ).config


def scorer_for(cfg, tok):
    titles = [t.rsplit(" (", 1) for t in TINY_TITLES]
    catalog = Catalog.from_frame(
        pl.DataFrame({"title": [t for t, _ in titles], "year": [int(y[:-1]) for _, y in titles]})
    )
    return RankScorer(catalog, tok, k=cfg.num_ranks, scheme=cfg.reward_scheme, segmentation=cfg.segmentation)


def columns(n: int) -> dict:
    return {
        "request_id": ["q"] * n,
        "responders": [[["Arrival (2016)"]]] * n,
        "union": [["Arrival (2016)"]] * n,
        "counts": [[1]] * n,
        "seen": [[]] * n,
        "responder_index": [-1] * n,
    }


def encode(tok, texts, eos=True):
    return [[*tok.encode(t, add_special_tokens=False), *([tok.eos_token_id] if eos else [])] for t in texts]


@pytest.mark.parametrize("eos", [True, False])
def test_published_token_ranks_are_rank_grpo_newline_counts(tok, eos):
    cfg = published()
    assert (cfg.segmentation, cfg.end_shaping, cfg.filler_penalty) == ("newlines", "rank_grpo", 0.0)
    ids = encode(tok, COMPLETIONS, eos=eos)
    scored = scorer_for(cfg, tok).score(ids, columns(len(ids)), group_size=None, step=0)
    for r, row in enumerate(ids):
        assert scored.rank_RT[r, : len(row)].tolist() == rank_grpo_items(tok, row), (r, COMPLETIONS[r])
    # remark's own segmentation disagrees with it wherever a blank line, a preamble or a trailing newline is
    lines_cfg = compose_config("rank_grpo", None, {**CPU, "output_dir": "unused", "num_ranks": K}).config
    lines = scorer_for(lines_cfg, tok).score(ids, columns(len(ids)), group_size=None, step=0)
    assert not torch.equal(lines.rank_RT, scored.rank_RT)


def test_published_reward_slots_number_only_the_lines_rank_grpo_keeps(tok):
    """Rank-GRPO's reward drops the lines its parser does not keep before numbering ranks; blank lines too."""
    cfg = published()
    text = "Arrival (2016)\n\n???\nArrival, 2016\nMoon (2009)"
    scored = scorer_for(cfg, tok).score(encode(tok, [text]), columns(1), group_size=None, step=0)
    assert scored.slot_ids[0] == ["Arrival (2016)", "Moon (2009)"] and int(scored.n_lines_R[0]) == 2


# ---- the table: Rank-GRPO's rewards, token ranks and the advantage each raw line's tokens receive -------
TK = 5
TABLE_ITEMS = [
    ("Arrival", 2016),
    ("Moon", 2009),
    ("Contact", 1997),
    ("Primer", 2004),
    ("Solaris", 1972),
    ("Titanic", 1996),
    ("Titanic", 1997),
]
A, M, C, P, S = "Arrival (2016)", "Moon (2009)", "Contact (1997)", "Primer (2004)", "Solaris (1972)"
T96, T97 = "Titanic (1996)", "Titanic (1997)"
OVER = "past K"  # the tokens of a raw line >= K: overflow penalty, no rank advantage
EMPTY = "no slot"  # raw line n < K with no n-th kept slot: A_n of an empty slot


@dataclass(frozen=True)
class Case:
    """A completion, the responder's items, the request's seen titles, and what Rank-GRPO gives it:
    per-rank rewards; per raw line, whose advantage its tokens receive (the n-th kept slot's A_n); the
    end token's shaping."""

    name: str
    text: str
    responder: list[str]
    rewards: list[int]
    lines_get: list[str]
    end: float
    seen: tuple[str, ...] = ()


CASES = [
    # T1: "Arrival" has no " (yyyy)": dropped, the four later slots move up to ranks 0-3; token ranks stay raw
    Case("T1 no year", f"Arrival\n{M}\n{C}\n{P}\n{S}", [M, C, P, S], [1, 1, 1, 1, 0], [M, C, P, S, EMPTY], +0.1),
    # T2: prose mid-list is dropped: Moon is kept slot 1, its tokens (raw line 2) get A_2
    Case("T2 prose", f"{A}\nI think you will love these.\n{M}", [M], [0, 1, 0, 0, 0], [A, M, EMPTY], -0.1),
    # T3: a year without brackets fails "(dddd)": dropped, Moon is slot 0
    Case("T3 comma year", f"Arrival, 2016\n{M}", [A, M], [1, 0, 0, 0, 0], [M, EMPTY], -0.1),
    # T4: (Titanic, 1997) is in the catalog; the responder's titanic holds 1996; years tried 1997, 1998, 1996
    Case("T4 +-1 other item", f"{T97}\n{M}", [T96], [1, 0, 0, 0, 0], [T97, M], -0.1),
    # T5: neither (title, year) is a catalog item: the +-2 rule runs only after the verbatim test
    Case("T5 not in catalog", "Titanic (1998)\nTitanic (1995)", [T97], [0, 0, 0, 0, 0], ["Titanic (1998)", "Titanic (1995)"], -0.1),
    # T6: the numbering cut needs whitespace: "1.Arrival" stays a slot (in place, nothing moves) that no item is
    Case("T6 1.Title", f"1.{A}\n{M}", [A, M], [0, 1, 0, 0, 0], ["1.Arrival (2016)", M], -0.1),
    # T7: square brackets fail "(dddd)": dropped, Moon is slot 0
    Case("T7 [year]", f"Arrival [2016]\n{M}", [A, M], [1, 0, 0, 0, 0], [M, EMPTY], -0.1),
    # T8: consumption: 1st takes 1996, 2nd finds 1996 used and takes 1997 (+1), 3rd finds the bucket empty
    Case("T8 repeat", f"{T96}\n{T96}\n{T96}", [T96, T97], [1, 1, 0, 0, 0], [T96, T96, T96], -0.1),
    # T9: 1997 tries 1997, 1998, then 1996 and consumes it; the exact 1996 slot after it finds nothing
    Case("T9 -1 first", f"{T97}\n{T96}", [T96], [1, 0, 0, 0, 0], [T97, T96], -0.1),
    # T10: preamble and blank line dropped: the five items are slots 0-4; raw lines 5 and 6 are past K
    Case(
        "T10 preamble+blank",
        f"Here are some movies:\n\n1. {A}\n2. {M}\n3. {C}\n4. {P}\n5. {S}",
        [A, S],
        [1, 0, 0, 0, 1],
        [A, M, C, P, S, OVER, OVER],
        -0.1,  # the end token is at raw line 6 >= K: overflow -0.1, and no bonus with tokens past K
    ),
    # T11: slot 0's title is a seen title: skipped in place, nothing consumed; Moon hits at rank 1
    Case("T11 seen", f"{A}\n{M}", [A, M], [0, 1, 0, 0, 0], [A, M], -0.1, seen=("Arrival",)),
    # T12: the bold/numbered Moon cleans to "Moon"; curly quotes stay and "#3" leaves "3 Primer": no items
    Case(
        "T12 cleaning",
        '**1. "Moon" (2009)** - a quiet film\n\u201cContact\u201d (1997)\n#3 Primer (2004)',
        [M, C, P],
        [1, 0, 0, 0, 0],
        [M, "\u201cContact\u201d (1997)", "3 Primer (2004)"],
        -0.1,
    ),
    # X1: a preamble that carries " (yyyy)" is a slot (never an item), so Moon is slot 1
    Case("X1 preamble+year", f"Here are movies like Arrival (2016):\n{M}", [M], [0, 1, 0, 0, 0], ["Here are movies like Arrival (2016)", M], -0.1),
]  # fmt: skip


def table_catalog() -> Catalog:
    return Catalog.from_frame(
        pl.DataFrame({"title": [t for t, _ in TABLE_ITEMS], "year": [y for _, y in TABLE_ITEMS]})
    )


def table_columns(case: Case) -> dict:
    """One per-responder row as ``remark prep`` (match_mode exact) builds it: a seen title names every
    item titled so verbatim, and seen items leave the responder's list."""
    seen = [f"{t} ({y})" for t, y in TABLE_ITEMS if t in case.seen]
    items = [i for i in case.responder if i not in seen]
    return {
        "request_id": ["q"],
        "responders": [[items]],
        "union": [items],
        "counts": [[1] * len(items)],
        "seen": [seen],
        "responder_index": [0],
    }


def table_config():
    return compose_config(
        "rank_grpo_published",
        None,
        {
            **CPU,
            "output_dir": "unused",
            "num_ranks": TK,
            "reward_scheme": "responder",
            "sampling": "per_responder",
        },
    ).config


def score_case(tok, case: Case, scorer_cls=RankScorer):
    cfg = table_config()
    ids = encode(tok, [case.text])
    assert tok.decode(ids[0], skip_special_tokens=True) == case.text
    scorer = scorer_cls(table_catalog(), tok, k=TK, scheme=cfg.reward_scheme, segmentation=cfg.segmentation)
    return cfg, ids[0], scorer.score(ids, table_columns(case), group_size=None, step=0)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_published_rewards_are_rank_grpo_s(tok, case):
    _, _, scored = score_case(tok, case)
    assert scored.rewards_RNK[0, 0].tolist() == case.rewards
    # the oracle (character loops, a catalog scan, counts on titles) agrees slot for slot
    _, _, ref = score_case(tok, case, OracleScorer)
    assert ref.rewards_RNK[0, 0].tolist() == case.rewards and ref.slot_ids == scored.slot_ids


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_published_raw_line_n_gets_the_advantage_of_kept_slot_n(tok, case):
    """Token rank = raw line index (newlines before the token); the tokens of raw line n get A_n, the
    advantage of the n-th *kept* slot, so a dropped line lends its rank to the next kept one."""
    cfg, ids, scored = score_case(tok, case)
    raw = case.text.split("\n")
    assert len(raw) == len(case.lines_get)
    kept = published_slots(case.text)
    shown = [f"{t} ({y})" for t, y in kept]
    for n, gets in enumerate(case.lines_get):  # the table's reading of which slot is A_n
        want = OVER if n >= TK else (shown[n] if n < len(shown) else EMPTY)
        assert gets == want, (n, raw[n])
    rank = scored.rank_RT[0, : len(ids)].tolist()
    for t in range(len(ids)):  # Rank-GRPO: the newlines decoded before the token
        assert rank[t] == tok.decode(ids[:t], skip_special_tokens=True).count("\n"), t
    # every raw line with content has tokens of its own rank (a blank line's may be merged into a "\n\n")
    assert {n for n, line in enumerate(raw) if line} <= set(rank) <= set(range(len(raw)))
    adv_RK = torch.tensor([[10.0, 20.0, 30.0, 40.0, 50.0]])
    got = token_advantages(
        adv_RK,
        scored.rank_RT[:, : len(ids)],
        n_lines_R=scored.n_lines_R,
        end_R=scored.end_R,
        mask_RT=torch.ones(1, len(ids), dtype=torch.int64),
        overflow_penalty=cfg.overflow_penalty,
        filler_penalty=cfg.filler_penalty,
        end_shaping=cfg.end_shaping,
        complete_bonus=cfg.eos_complete_bonus,
        early_stop_penalty=cfg.eos_early_penalty,
    )[0].tolist()
    assert int(scored.end_R[0]) == len(ids) - 1
    for t, r in enumerate(rank[:-1]):
        assert got[t] == pytest.approx(10.0 * (r + 1) if r < TK else cfg.overflow_penalty), (t, r)
    assert got[-1] == pytest.approx(case.end)


@pytest.mark.parametrize(
    ("name", "remark"),
    [
        (
            "T1 no year",
            [0, 1, 1, 1, 1],
        ),  # remark's parser keeps "Arrival" as a slot: every later rank moves down
        ("T4 +-1 other item", [0, 0, 0, 0, 0]),  # ids: Titanic (1997) is not the responder's Titanic (1996)
        ("T6 1.Title", [1, 1, 0, 0, 0]),  # remark strips "1." without a space and grounds Arrival
        ("T7 [year]", [1, 1, 0, 0, 0]),  # remark reads "[2016]" as the year
        ("T8 repeat", [1, 0, 0, 0, 0]),  # an id is rewarded at its first slot only
    ],
)
def test_the_default_rank_grpo_recipe_scores_the_table_its_own_way(name, remark):
    """What docs/recipes.md says ``rank_grpo`` (remark's parser, grounding and ids) does differently."""
    from remark.run.tiny_model import train_tokenizer as tiny

    case = next(c for c in CASES if c.name == name)
    tok = tiny([case.text] * 3, vocab_size=300)
    cfg = compose_config(
        "rank_grpo", None, {**CPU, "output_dir": "unused", "num_ranks": TK, "reward_scheme": "responder"}
    ).config
    assert cfg.segmentation == "lines"
    scorer = RankScorer(table_catalog(), tok, k=TK, scheme=cfg.reward_scheme, segmentation=cfg.segmentation)
    scored = scorer.score(encode(tok, [case.text]), table_columns(case), group_size=None, step=0)
    assert scored.rewards_RNK[0, 0].tolist() == remark != case.rewards


@pytest.mark.parametrize("scheme", ["union", "marginal", "responder_rb"])
def test_published_slots_refuse_schemes_rank_grpo_does_not_define(scheme):
    with pytest.raises(
        InputError, match=rf"reward_scheme '{scheme}' is not defined on segmentation 'newlines'"
    ) as err:
        compose_config("rank_grpo_published", None, {**CPU, "output_dir": "unused", "reward_scheme": scheme})
    assert err.value.field == "reward_scheme" and "segmentation: lines" in str(err.value)


@pytest.mark.parametrize("eos", [True, False])
def test_published_token_advantages_are_rank_grpo_shaping(tok, eos):
    cfg = published()
    ids = encode(tok, COMPLETIONS, eos=eos)
    offsets = TokenOffsetMapper(tok)(ids)
    from remark.algos import get

    rank_RT = get("segmentation", cfg.segmentation)([[] for _ in ids], offsets, k=K)
    width = rank_RT.shape[1]
    mask = torch.tensor([[1] * len(row) + [0] * (width - len(row)) for row in ids])
    adv_RK = torch.linspace(-1.0, 1.0, len(ids) * K).view(len(ids), K)
    got = token_advantages(
        adv_RK,
        rank_RT,
        n_lines_R=torch.zeros(len(ids), dtype=torch.int64),  # not read by Rank-GRPO's shaping
        end_R=end_token_index(ids, tok.eos_token_id),
        mask_RT=mask,
        overflow_penalty=cfg.overflow_penalty,
        filler_penalty=cfg.filler_penalty,
        end_shaping=cfg.end_shaping,
        complete_bonus=cfg.eos_complete_bonus,
        early_stop_penalty=cfg.eos_early_penalty,
    )
    for r, row in enumerate(ids):
        if not row:
            continue
        want = rank_grpo_token_advantages(rank_grpo_items(tok, row), adv_RK[r].tolist(), ended=eos)
        torch.testing.assert_close(
            got[r, : len(row)], torch.tensor(want), msg=lambda m, r=r: f"{COMPLETIONS[r]!r}: {m}"
        )
        assert float(got[r, len(row) :].abs().sum()) == 0.0


def test_published_recipe_through_the_rank_step(tok):
    """The trainer's path: the recipe's fields -> RankSettings -> rank_step, on one scored group."""
    cfg = published()
    texts = COMPLETIONS[:4]
    ids = encode(tok, texts)
    scored = scorer_for(cfg, tok).score(ids, columns(len(ids)), group_size=len(ids), step=0)
    width = scored.rank_RT.shape[1]
    mask = torch.tensor([[1] * len(row) + [0] * (width - len(row)) for row in ids])
    batch = rank_step(
        Round(scored, mask, mask), RankSettings.from_config(cfg), LocalGather(), group_size=len(ids)
    )
    r = torch.tensor([[1.0, 0, 0, 0]] * len(ids))  # every list names Arrival first: no signal, A = 0
    assert torch.equal(scored.rewards_RNK[:, 0], r)
    for row, text in enumerate(texts):
        n = len(ids[row])
        want = rank_grpo_token_advantages(rank_grpo_items(tok, ids[row]), [0.0] * K, ended=True)
        torch.testing.assert_close(
            batch.advantages[row, :n], torch.tensor(want), msg=lambda m, t=text: f"{t!r}: {m}"
        )


def test_published_config_file_is_the_recipe_with_rank_grpo_data_settings():
    path = REPO / "configs" / "rank_grpo_published.yaml"
    cpu = CPU
    composed = compose_config(None, path, cpu)
    assert composed.recipe.name == "rank_grpo_published" and not composed.overridden
    direct = load_config(path, cpu)
    for key, value in load_recipe("rank_grpo_published").fields.items():
        assert getattr(direct, key) == getattr(composed.config, key) == value, key
    assert (direct.reward_scheme, direct.sampling, direct.max_completion_length) == (
        "responder",
        "per_responder",
        1024,
    )


def test_remark_and_rank_grpo_configs_share_rank_grpo_loss_and_guard():
    """configs/remark.yaml and configs/rank_grpo.yaml differ in reward, sampling, cap and output dir only."""
    cpu = CPU
    a = load_config(REPO / "configs" / "remark.yaml", cpu)
    b = load_config(REPO / "configs" / "rank_grpo.yaml", cpu)
    for key, value in load_recipe("rank_grpo").fields.items():
        assert getattr(a, key) == getattr(b, key) == value, key
    differ = {
        f.name
        for f in a.__dataclass_fields__.values()
        if getattr(a, f.name) != getattr(b, f.name) and not f.name.startswith("_")
    }
    assert differ <= {
        "reward_scheme",
        "sampling",
        "max_completion_length",
        "output_dir",
        "logging_dir",
        "run_name",
    }
    assert a.divergence_kl == b.divergence_kl == 1.0 and a.rank_level_ratio and b.rank_level_ratio
