"""Fixtures for trainer tests: hand-built pooled datasets, tiny models (all local, CPU), and scripted
rollouts with a trainer that keeps its batches (shared with tests/remark/recipes)."""

from __future__ import annotations

import polars as pl
import pytest
from trl import GRPOTrainer

from catalog.match import GroundingSettings, Matcher
from catalog.table import Catalog
from data_prep.dataset import write_dataset
from data_prep.pool import pool_threads
from data_prep.schema import Threads
from remark.step.trainer import RemarkGRPOTrainer

HAND_ITEMS = {
    "A": ("Alpha", 2001),
    "B": ("Beta", 2002),
    "C": ("Gamma", 2003),
    "D": ("Delta", 2004),
    "E": ("Epsilon", 2005),
    "F": ("Zeta", 2006),
}
# request -> (prompt, seen ids, responders' id lists)
HAND_REQUESTS = {
    "r1": ("Movies like Alpha please", ["F"], [["A", "B"], ["B", "C"]]),
    "r2": ("Something like Delta", [], [["D"]]),
}


# four lists per request, replayed in order for every group of rows of the request
HAND_SCRIPT = {
    "r1": [
        "Alpha (2001)\nBeta (2002)\nGamma (2003)",  # union hits [1, 1, 1], complete
        "Beta (2002)\nZeta (2006)\nDelta (2004)",  # [1, 0, 0]: Zeta is seen, Delta not in r1's union
        "no idea\nAlpha (2001)\nAlpha (2001)",  # [0, 1, 0]: unparsed slot 1, repeat at slot 3
        "Delta (2004)\nBeta (2002)",  # [0, 1, 0], stops early
    ],
    "r2": [
        "Delta (2004)",  # [1, 0, 0]
        "Xyz (1990)\nDelta (2004)",  # [0, 1, 0]
        "Xyz (1990)\nQrs (1991)\nDelta (2004)",  # [0, 0, 1]
        "Delta (2004)\nXyz (1990)",  # [1, 0, 0]
    ],
}


def write_hand_dataset(out_dir, requests=HAND_REQUESTS, split="train", grounding=None):
    """A pooled dataset written by the real pipeline (threads -> grounding -> pooling -> parquet), grounded
    and recorded with ``grounding`` (default: exact matching)."""
    cat = Catalog.from_frame(
        pl.DataFrame(
            {
                "item_id": list(HAND_ITEMS),
                "title": [t for t, _ in HAND_ITEMS.values()],
                "year": [y for _, y in HAND_ITEMS.values()],
            }
        )
    )
    rows = []
    for rid, (text, seen, responders) in requests.items():
        for n, items in enumerate(responders):
            for item in items:
                title, year = HAND_ITEMS[item]
                seen_titles = [f"{HAND_ITEMS[s][0]} ({HAND_ITEMS[s][1]})" for s in seen]
                rows.append(
                    {
                        "request_id": rid,
                        "prompt": [{"role": "user", "content": text}],
                        "responder_id": f"u{n}",
                        "title": title,
                        "year": year,
                        "seen": seen_titles,
                        "split": split,
                    }
                )
    frame = pl.DataFrame(rows, schema_overrides={"year": pl.Int32})
    meta = {"source": "hand", "domain": "movie", "has_years": True, "instruction_included": False}
    matcher = Matcher(cat, grounding or GroundingSettings(match_mode="exact"))
    pooled = pool_threads(Threads(frame, cat, meta), matcher)
    return write_dataset(out_dir, pooled, cat, meta, grounding=matcher.settings)


@pytest.fixture
def hand_dataset(tmp_path):
    return write_hand_dataset(tmp_path / "hand")


def build_hand_model(out_dir, prompts):
    """A tiny model whose tokenizer knows the hand catalog's titles (and ``prompts``)."""
    from remark.config.tiny import TinySpec
    from remark.run.tiny_model import build_tiny_model

    lines = [f"{t} ({y})" for t, y in HAND_ITEMS.values()] + ["Xyz (1990)", "Qrs (1991)"]
    corpus = ["\n".join(lines[i:] + lines[:i]) for i in range(len(lines))] * 3
    corpus += list(prompts)
    spec = TinySpec(
        vocab_size=400, hidden_size=32, intermediate_size=64, num_attention_heads=2, num_key_value_heads=1
    )
    return build_tiny_model(out_dir, corpus, spec=spec, seed=0)


@pytest.fixture(scope="session")
def hand_model_dir(tmp_path_factory):
    return build_hand_model(tmp_path_factory.mktemp("hand_model"), [t for t, _, _ in HAND_REQUESTS.values()])


def scripted_rollout(tokenizer, script, requests=HAND_REQUESTS, eos=True):
    """A ``rollout_func`` that replaces sampling with fixed lists: the i-th row of request ``rid`` (found
    by its prompt text in ``requests``) gets ``script[rid][i % len(script[rid])]``, plus the end token
    when ``eos``. ``script`` is read at call time, so a test may swap a request's lists."""
    counters: dict[str, int] = {}

    def rollout(prompts, trainer):
        prompt_ids, completion_ids = [], []
        for messages in prompts:
            rid = next(r for r, (text, _, _) in requests.items() if text in messages[-1]["content"])
            i = counters.get(rid, 0)
            counters[rid] = i + 1
            rendered = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
            prompt_ids.append(tokenizer(rendered, add_special_tokens=False)["input_ids"])
            ids = tokenizer(script[rid][i % len(script[rid])], add_special_tokens=False)["input_ids"]
            completion_ids.append([*ids, tokenizer.eos_token_id] if eos else ids)
        return {"prompt_ids": prompt_ids, "completion_ids": completion_ids, "logprobs": None}

    return rollout


class _RoundInputs(GRPOTrainer):
    """Records the dataset rows of every TRL generation round (sits right above ``GRPOTrainer``)."""

    def _generate_and_score_completions(self, inputs):
        self.round_inputs.append(list(inputs))
        return super()._generate_and_score_completions(inputs)


class Capturing(RemarkGRPOTrainer, _RoundInputs):
    """Keeps every final batch (after refills) with its rows' request and responder in ``captured``."""

    def _generate_and_score_completions(self, inputs):
        import remark.step.trainer

        self.round_inputs, rows, real = [], [], remark.step.trainer.rank_step

        def spy(*args, **kwargs):
            batch = real(*args, **kwargs)
            rows.extend(batch.rows)
            return batch

        remark.step.trainer.rank_step = spy
        try:
            out = super()._generate_and_score_completions(inputs)
        finally:
            remark.step.trainer.rank_step = real
        picked = [self.round_inputs[i][r] for i, r in rows]
        cols = {c: [x[c] for x in picked] for c in ("request_id", "responder_index")}
        self.captured.append((cols, out))
        return out
