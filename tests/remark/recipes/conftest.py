"""Fixtures for the recipe tests: a four-request hand dataset, a tiny model, scripted rollouts, and a
slow loop reference of TRL's loss (with remark's ratio levels, GMPO, aggregation weights) to check the
trainer against on crafted batches."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest
import torch

from remark.config import compose_config
from remark.run.sampling import training_dataset
from tests.remark.conftest import HAND_REQUESTS, HAND_SCRIPT, Capturing, write_hand_dataset
from tests.remark.conftest import scripted_rollout as shared_rollout

K = 3
G = 4
EPS = 1e-4

# request -> (prompt, seen ids, responders' id lists)
REQUESTS = {
    **HAND_REQUESTS,  # r1, r2
    "r3": ("Anything like Epsilon", [], [["E"], ["A"]]),
    "r4": ("Show me Gamma films", [], [["C", "D", "E"]]),
}
# four lists per request, replayed in order for every group of G rows
SCRIPT = {
    **HAND_SCRIPT,  # r1, r2
    "r3": ["Epsilon (2005)\nAlpha (2001)\nBeta (2002)"] * 4,  # identical lists: zero signal
    "r4": ["Gamma (2003)\nDelta (2004)\nEpsilon (2005)"]
    * 4,  # identical and perfect: zero signal, pass rate 1
}
# rank rewards of the scripted lists, per responder (0, 1) and on the union ("u")
REWARDS = {
    ("r1", "u"): [[1, 1, 1], [1, 0, 0], [0, 1, 0], [0, 1, 0]],
    ("r1", 0): [[1, 1, 0], [1, 0, 0], [0, 1, 0], [0, 1, 0]],
    ("r1", 1): [[0, 1, 1], [1, 0, 0], [0, 0, 0], [0, 1, 0]],
    ("r2", "u"): [[1, 0, 0], [0, 1, 0], [0, 0, 1], [1, 0, 0]],
    ("r2", 0): [[1, 0, 0], [0, 1, 0], [0, 0, 1], [1, 0, 0]],
    ("r3", "u"): [[1, 1, 0]] * 4,
    ("r3", 0): [[1, 0, 0]] * 4,
    ("r3", 1): [[0, 1, 0]] * 4,
    ("r4", "u"): [[1, 1, 1]] * 4,
    ("r4", 0): [[1, 1, 1]] * 4,
}
SIGNAL = {"r1", "r2"}
# Rank-GRPO's published reward slots (segmentation newlines) read r1's third list differently: its parser
# drops "no idea" and renumbers, so the first Alpha is slot 0 (responder 0's Alpha) and the repeat at slot 1
# finds no Alpha left; every other list scores as above
PUBLISHED_REWARDS = {**REWARDS, ("r1", 0): [[1, 1, 0], [1, 0, 0], [1, 0, 0], [0, 1, 0]]}

SCHEMES = {
    "union": {"reward_scheme": "union", "sampling": "uniform"},
    "responder": {"reward_scheme": "responder", "sampling": "per_responder"},
}


@pytest.fixture(autouse=True, scope="package")
def one_torch_thread():
    """Tiny models on a shared 2-core machine: one intra-op thread is ~10x faster than two spinning ones
    (2 training steps: 0.4 s instead of 5 s CPU under load). Restored after this package's tests."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="session")
def recipe_data_dir(tmp_path_factory):
    path = tmp_path_factory.mktemp("recipes_data") / "hand"
    write_hand_dataset(path, requests=REQUESTS)
    return path


@pytest.fixture(scope="session")
def recipe_dataset(recipe_data_dir):
    from data_prep.dataset import load_dataset

    return load_dataset(recipe_data_dir)


@pytest.fixture(scope="session")
def recipe_model_dir(tmp_path_factory):
    """A tiny model whose tokenizer knows the hand catalog's titles and the prompts."""
    from tests.remark.conftest import build_hand_model

    return build_hand_model(tmp_path_factory.mktemp("recipes_model"), [t for t, _, _ in REQUESTS.values()])


def scripted_rollout(tokenizer, script=SCRIPT, eos=True):
    return shared_rollout(tokenizer, script, REQUESTS, eos=eos)


def run_fields(tmp_path, scheme="union", **overrides):
    values = dict(
        output_dir=str(tmp_path / "run"),
        use_cpu=True,
        bf16=False,
        report_to="none",
        per_device_train_batch_size=8,
        num_generations=G,
        max_completion_length=32,
        max_steps=2,
        learning_rate=1e-3,
        save_strategy="no",
        num_ranks=K,
        match_mode="exact",
        seed=0,
        logging_steps=1,
        gradient_checkpointing=False,  # TRL's default recomputes activations: slower on a tiny model
        **SCHEMES[scheme],
    )
    values.update(overrides)
    return values


def make_trainer(recipe, dataset, model_dir, tmp_path, scheme="union", script=SCRIPT, **overrides):
    """A Capturing trainer for ``recipe`` composed the way `remark train --recipe` composes it."""
    from transformers import AutoTokenizer

    composed = compose_config(recipe, None, run_fields(tmp_path, scheme, **overrides))
    args = composed.config
    tok = AutoTokenizer.from_pretrained(model_dir)
    train = training_dataset(dataset, split="train", sampling=args.sampling, k=K)
    trainer = Capturing(
        model=str(model_dir),
        args=args,
        train_dataset=train,
        catalog=dataset.catalog,
        processing_class=tok,
        rollout_func=scripted_rollout(tok, script),
    )
    trainer.captured = []
    return trainer, tok


@pytest.fixture(scope="session")
def trained(recipe_dataset, recipe_model_dir, tmp_path_factory):
    """``trained(name, scheme)``: a Capturing trainer of the recipe after 2 scripted steps, trained once
    per session and shared by the training and behaviour tests (which only read it, or zero its grads)."""
    cache: dict[tuple[str, str], tuple] = {}

    def get(name, scheme="union"):
        if (name, scheme) not in cache:
            tmp = tmp_path_factory.mktemp(f"{name}_{scheme}")
            trainer, tok = make_trainer(name, recipe_dataset, recipe_model_dir, tmp, scheme=scheme)
            before = {n: p.detach().clone() for n, p in trainer.model.named_parameters()}
            trainer.train()
            changed = any(not torch.equal(before[n], p) for n, p in trainer.model.named_parameters())
            cache[(name, scheme)] = (trainer, tok, changed)
        return cache[(name, scheme)]

    return get


def expected_rewards(cols, scheme, table=REWARDS):
    """Hand rank rewards (R, K) of the captured rows (each group replays its request's four lists)."""
    out, seen = [], {}
    for rid, resp in zip(cols["request_id"], cols["responder_index"], strict=True):
        key = (rid, "u" if scheme == "union" else resp)
        g = seen.get(key, 0)
        seen[key] = g + 1
        out.append(table[key][g % G])
    return torch.tensor(out, dtype=torch.float64)


def group_advantages(rewards_RK, *, baseline="mean", scale="group"):
    """Loop reference of the advantages of (R, K) rewards in groups of G consecutive rows."""
    r = rewards_RK.double()
    out = torch.zeros_like(r)
    batch_mean = r.mean(0)
    batch_std = r.std(0, unbiased=True)
    for b in range(0, r.shape[0], G):
        grp = r[b : b + G]
        for g in range(G):
            for k in range(r.shape[1]):
                others = [float(grp[h, k]) for h in range(G) if h != g]
                if baseline == "mean":
                    base = float(grp[:, k].mean())
                elif baseline == "rloo":
                    base = sum(others) / (G - 1)
                else:
                    base = float(batch_mean[k])
                if scale == "group":
                    s = float(grp[:, k].std(unbiased=True)) + EPS
                elif scale == "batch":
                    s = float(batch_std[k]) + EPS
                else:
                    s = 1.0
                out[b + g, k] = (float(grp[g, k]) - base) / s
    return out


def assert_rank_advantages(out, expected_RK, rows=None, end_id=None):
    """Every ranked token of row r, rank k < K carries expected_RK[r, k] (end tokens ``end_id`` aside)."""
    adv, rank, mask = out["advantages"], out["rank_ids"], out["completion_mask"]
    rows = range(adv.shape[0]) if rows is None else rows
    not_end = (
        out["completion_ids"] != end_id if end_id is not None else torch.ones_like(mask, dtype=torch.bool)
    )
    for r in rows:
        for k in range(K):
            sel = (rank[r] == k) & mask[r].bool() & not_end[r]
            if sel.any():
                torch.testing.assert_close(
                    adv[r, sel].double(),
                    torch.full((int(sel.sum()),), float(expected_RK[r, k]), dtype=torch.float64),
                    rtol=1e-4,
                    atol=1e-5,
                )


def policy_logps(trainer, out):
    """The current policy's per-token log-probs of the batch (no grad)."""
    input_ids = torch.cat([out["prompt_ids"], out["completion_ids"]], 1)
    attention = torch.cat([out["prompt_mask"], out["completion_mask"]], 1)
    with torch.no_grad():
        logps, _, _ = trainer._get_per_token_logps_and_entropies(
            trainer.model, input_ids, attention, out["completion_ids"].shape[1]
        )
    return logps.double()


def reference_loss(out, logps, old, *, trainer, **overrides):
    """Slow loop reference of the loss the trainer should compute for ``out`` (one process, GA = 1).

    Ratios per token / sequence / rank, GMPO's clipped geometric means, the clipped, CISPO and SAPO
    terms, DeepSeek-V3.2's off-policy mask, the k3 KL (optionally times the ratio), and TRL's
    aggregations, with remark's aggregation weights in the loss mask.
    """
    a = SimpleNamespace(**{**vars(trainer.args), **overrides})
    eps_lo = a.epsilon
    eps_hi = a.epsilon_high if a.epsilon_high is not None else a.epsilon
    adv = out["advantages"].double()
    cmask = out["completion_mask"].double()
    wmask = cmask * out["tool_mask"].double()
    rank = out["rank_ids"]
    ref = out.get("ref_per_token_logps")
    n_rows, width = adv.shape
    per_token = torch.zeros(n_rows, width, dtype=torch.float64)
    for r in range(n_rows):
        toks = [t for t in range(width) if cmask[r, t] > 0]
        if not toks:
            continue
        lr = {t: float(logps[r, t] - old[r, t]) for t in toks}
        seq_kl = sum(float(old[r, t] - logps[r, t]) for t in toks) / len(toks)
        ratio = {}
        for t in toks:
            if a.gmpo_level is not None:
                if a.gmpo_level == "sequence":
                    seg = toks
                else:
                    seg = [u for u in toks if rank[r, u] == rank[r, t]] if rank[r, t] >= 0 else [t]
                # the geometric mean of the clipped token ratios of the segment, as a product
                clipped = [math.exp(_gmpo_clip(lr[u], float(adv[r, u]), eps_lo, eps_hi)) for u in seg]
                ratio[t] = math.prod(clipped) ** (1 / len(seg))
            elif a.importance_sampling_level == "sequence":
                ratio[t] = math.exp(sum(lr.values()) / len(toks))
            elif a.rank_level_ratio and rank[r, t] >= 0:
                seg = [u for u in toks if rank[r, u] == rank[r, t]]
                ratio[t] = math.exp(sum(lr[u] for u in seg) / len(seg))
            else:
                ratio[t] = math.exp(lr[t])
        for t in toks:
            w, A = ratio[t], float(adv[r, t])
            if a.loss_type == "cispo":
                term = -min(w, eps_hi) * A * float(logps[r, t])
            elif a.loss_type == "sapo":
                tau = a.sapo_temperature_pos if A > 0 else a.sapo_temperature_neg
                term = -(1 / (1 + math.exp(-tau * (w - 1)))) * 4 / tau * A
            elif a.gmpo_level is not None:
                term = -w * A
            else:
                term = -min(w * A, min(max(w, 1 - eps_lo), 1 + eps_hi) * A)
            if a.off_policy_mask_threshold is not None and not (
                A >= 0 or seq_kl <= a.off_policy_mask_threshold
            ):
                term = 0.0
            if a.beta:
                d = float(ref[r, t] - logps[r, t])
                kl = math.exp(d) - d - 1
                term += a.beta * kl * (w if a.use_bias_correction_kl else 1.0)
            per_token[r, t] = term
    if a.loss_type in ("grpo", "sapo"):
        rows = [(per_token[r] * wmask[r]).sum() / wmask[r].sum().clamp(min=1) for r in range(n_rows)]
        return float(torch.stack(rows).mean())
    if a.loss_type == "bnpo":
        return float((per_token * wmask).sum() / wmask.sum().clamp(min=1))
    if a.loss_type == "dr_grpo":
        return float((per_token * wmask).sum() / (n_rows * a.max_completion_length))
    return float((per_token * wmask).sum() / float(out["num_items_in_batch"]))


def _gmpo_clip(x, a, lo, hi):
    """GMPO's token clip in log space, by the sign of the advantage."""
    return min(x, hi) if a > 0 else (max(x, -lo) if a < 0 else x)


def trainer_loss(trainer, out, old, *, advantages=None):
    """The trainer's loss on ``out`` with behaviour log-probs ``old`` (and optionally other advantages)."""
    batch = dict(out)
    batch["old_per_token_logps"] = old.float()
    if advantages is not None:
        batch["advantages"] = advantages
    return trainer._compute_loss(trainer.model, batch)
