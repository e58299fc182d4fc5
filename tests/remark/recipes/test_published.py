"""The ``rank_grpo_published`` recipe reproduces Rank-GRPO's own token map on hand-written completions.

The references below are transcriptions of Rank-GRPO's trainer (yaochenzhu/Rank-GRPO,
``libs/trl/rank_grpo_trainer.py``): ``_segment_items_from_tokens`` (decode each token alone, count its
newlines, a token's item is the count before it) and the advantage broadcast with its length shaping
(``apply_extra_length_shaping``). They loop over tokens in plain Python and share no code with
``remark.algos.tokens``. Three tokenizers: remark's tiny byte-level BPE ("\\n" always its own token), a
Qwen-style byte-level BPE (``")\\n"`` and ``"\\n\\n"`` merge into one token) and a SentencePiece-style one
with byte fallback.
"""

from __future__ import annotations

import polars as pl
import pytest
import torch

from catalog.table import Catalog
from remark.algos import TokenOffsetMapper, end_token_index, token_advantages
from remark.config import compose_config, load_config
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
        {**CPU, "output_dir": "unused", "num_ranks": K},
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


def test_published_reward_slots_number_only_parsed_lines(tok):
    """Rank-GRPO's reward drops lines that do not parse before numbering ranks; blank lines too."""
    cfg = published()
    text = "Arrival (2016)\n\n???\nMoon (2009)"
    scored = scorer_for(cfg, tok).score(encode(tok, [text]), columns(1), group_size=None, step=0)
    assert scored.slot_ids[0] == ["Arrival (2016)", "Moon (2009)"] and int(scored.n_lines_R[0]) == 2


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
