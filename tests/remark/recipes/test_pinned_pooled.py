"""``scoring_workers``: the trainer that scores in a ``remark.scoring.pool.ScoringPool`` from the end of
generation on gives the pinned per-token advantages of the scripted rollouts (refill rounds included)."""

from __future__ import annotations

import json

import pytest
import torch

from tests.remark.recipes.test_pinned import CASES, PINNED

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("name", ["union", "responder_drawn", "dapo_refill"])
def test_pooled_trainer_gives_the_pinned_advantages(name, recipe_dataset, recipe_model_dir, tmp_path):
    from tests.remark.conftest import scripted_rollout
    from tests.remark.recipes.conftest import REQUESTS, make_trainer

    recipe, scheme, overrides, script, eos = CASES[name]
    trainer, tok = make_trainer(
        recipe,
        recipe_dataset,
        recipe_model_dir,
        tmp_path,
        scheme=scheme,
        script=script,
        scoring_workers=2,
        **overrides,
    )
    trainer.rollout_func = scripted_rollout(tok, script, REQUESTS, eos=eos)
    pool = trainer.rank_reward.scorer
    assert pool.overlaps and len(pool.pids) == 2
    try:
        trainer.train()
    finally:
        pool.close()
    want = json.loads(PINNED.read_text())[name]["batches"]
    assert len(trainer.captured) == len(want)
    for (cols, out), w in zip(trainer.captured, want, strict=True):
        assert list(cols["request_id"]) == w["request_id"]
        assert out["rank_ids"].tolist() == w["rank_ids"]
        torch.testing.assert_close(
            out["advantages"].to(torch.float64),
            torch.tensor(w["advantages"], dtype=torch.float64),
            rtol=0,
            atol=1e-6,
        )
    assert trainer.rank_reward.prefetched >= len(want)  # every round was scored by the pool
