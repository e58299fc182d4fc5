"""The real SmolLM2-135M-Instruct through the pipeline: what a real instruct model writes (its chat
template, its own numbering, preambles and sentences) is parsed, grounded, scored and mapped to token
ranks exactly as the independent oracle does it, and ``remark eval run`` scores it. Skipped, with the
reason, without the folder (``make fetch-model``)."""

from __future__ import annotations

import json

import polars as pl
import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from catalog.table import Catalog
from data_prep.prompts import build_messages
from remark.cli.main import main
from remark.oracles.scorer import OracleScorer
from remark.scoring.scorer import RankScorer
from tests.remark.scoring.test_scorer_oracle import assert_same

pytestmark = pytest.mark.real_model

ANSWERS = ["sandwiches", "blanket", "basket", "drinks", "fruit", "chips", "plates", "napkins"]
MOVIES = [("Arrival", 2016), ("Interstellar", 2014), ("Contact", 1997), ("Moon", 2009), ("Solaris", 1972)]
PROMPTS = [
    ("Name something people bring to a picnic.", "answer", False),
    ("Mind-bending sci-fi like Arrival?", "movie", True),
]


@pytest.fixture(scope="module")
def smol(smollm2_dir):
    tok = AutoTokenizer.from_pretrained(smollm2_dir)
    model = AutoModelForCausalLM.from_pretrained(smollm2_dir, dtype=torch.float32).eval()
    return tok, model


@pytest.fixture(scope="module")
def completions(smol):
    """Greedy and sampled completions of both prompts (K = 5, 64 new tokens)."""
    tok, model = smol
    out = []
    for text, domain, with_year in PROMPTS:
        messages = build_messages(text, k=5, domain=domain, with_year=with_year)
        prompt = tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        assert prompt.startswith("<|im_start|>system\n") and prompt.endswith("<|im_start|>assistant\n")
        ids = tok(prompt, return_tensors="pt", add_special_tokens=False).input_ids
        torch.manual_seed(0)
        with torch.no_grad():
            greedy = model.generate(ids, max_new_tokens=64, do_sample=False)
            sampled = model.generate(
                ids, max_new_tokens=64, do_sample=True, temperature=1.0, num_return_sequences=3
            )
        for row in [*greedy, *sampled]:
            out.append((domain, row[ids.shape[1] :].tolist()))
    return out


def _catalog(domain: str) -> Catalog:
    if domain == "answer":
        return Catalog.from_frame(pl.DataFrame({"title": ANSWERS}))
    return Catalog.from_frame(
        pl.DataFrame(
            {"title": [t for t, _ in MOVIES], "year": [y for _, y in MOVIES]},
            schema_overrides={"year": pl.Int32},
        )
    )


def _columns(n: int, catalog: Catalog) -> dict[str, list]:
    ids = catalog.df["item_id"].to_list()
    responders = [ids[:3], ids[2:]]
    union = list(dict.fromkeys(i for r in responders for i in r))
    return {
        "request_id": ["q"] * n,
        "seen": [[]] * n,
        "union": [union] * n,
        "counts": [[sum(i in r for r in responders) for i in union]] * n,
        "responders": [responders] * n,
        "responder_index": [-1] * n,
    }


@pytest.mark.parametrize("segmentation", ["lines", "newlines"])
def test_real_completions_score_as_the_oracle_scores_them(smol, completions, segmentation):
    tok, _ = smol
    for domain in ("answer", "movie"):
        rows = [ids for d, ids in completions if d == domain]
        catalog = _catalog(domain)
        # Rank-GRPO's published slots (newlines) define one responder's hits only
        scheme = "responder" if segmentation == "newlines" else "union"
        settings = dict(k=5, scheme=scheme, segmentation=segmentation, eos_token_ids=[tok.eos_token_id])
        columns = _columns(len(rows), catalog)
        if scheme == "responder":
            columns["responder_index"] = [r % 2 for r in range(len(rows))]
        got = RankScorer(catalog, tok, **settings).score(rows, columns, group_size=None, step=0)
        want = OracleScorer(catalog, tok, **settings).score(rows, columns, group_size=None, step=0)
        assert_same(got, want)
        assert got.texts == tok.batch_decode(rows, skip_special_tokens=True)
        if segmentation == "lines":  # a token of rank k overlaps line k's content or its newline
            offsets = RankScorer(catalog, tok, **settings).offsets(rows)
            for r, row in enumerate(got.lines):
                for line in row[:5]:
                    stop = got.texts[r].find("\n", line.end)
                    stop = len(got.texts[r]) if stop < 0 else stop + 1
                    tokens = (got.rank_RT[r] == line.rank).nonzero().flatten().tolist()
                    assert tokens, f"line {line.rank} of row {r} has no token"
                    for t in tokens:
                        assert offsets.start_RT[r, t] < stop and offsets.end_RT[r, t] > line.start


def test_a_list_written_in_the_real_tokenizer_gets_its_rewards(smol):
    """Hand-computed: lines 1 and 2 name union items, line 3 is the model's kind of sentence, line 4 a repeat."""
    tok, _ = smol
    catalog = _catalog("answer")
    text = "1. Sandwiches\n2. Blanket\n3. I'm not sure what you mean.\n4. sandwiches\n5. Napkins"
    ids = [*tok(text, add_special_tokens=False).input_ids, tok.eos_token_id]
    got = RankScorer(catalog, tok, k=5, scheme="union").score(
        [ids], _columns(1, catalog), group_size=None, step=0
    )
    # union = sandwiches, blanket, basket, drinks, fruit, chips, plates, napkins (all items): hits 1, 1, 0 (no
    # item), 0 (a repeat of rank 1), 1
    assert got.rewards_RNK[0, 0].tolist() == [1.0, 1.0, 0.0, 0.0, 1.0]
    assert got.end_R.tolist() == [len(ids) - 1]
    assert got.texts == [text]


def test_eval_run_on_the_real_model(smollm2_dir, tmp_path, capsys):
    rows = [
        {
            "metadata": {"id": f"q{i}"},
            "question": {"original": q, "normalized": q.lower()},
            "answers": {"raw": {a: 3 for a in ANSWERS[i : i + 4]}},
        }
        for i, q in enumerate(
            ["Name something people bring to a picnic.", "Name something you eat at a picnic."]
        )
    ]
    src = tmp_path / "tiny.crowdsourced.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert main(["prep", "protoqa", "--input", str(src), "--out", str(tmp_path / "data")]) == 0
    code = main(
        [
            "eval",
            "run",
            "--model",
            str(smollm2_dir),
            "--data",
            str(tmp_path / "data"),
            "--split",
            "all",
            "--k",
            "10",
            "--max-new-tokens",
            "48",
            "--out",
            str(tmp_path / "zs"),
        ]
    )
    out = capsys.readouterr().out
    assert code == 0 and "What the greedy lists were: 2 lists" in out
    metrics = json.loads((tmp_path / "zs" / "metrics.json").read_text())
    assert metrics["n_requests"] == 2 and metrics["lists"]["shape"]["n_lists"] == 2
    recall = metrics["per_responder"]["recall@10"]
    assert recall["ci_low"] <= recall["mean"] <= recall["ci_high"]
    assert "recall@10 | " in out  # the zero-shot level with its CI, printed
