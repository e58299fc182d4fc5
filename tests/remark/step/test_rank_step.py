"""``remark.step.rank_step`` on hand-made scored rows: no TRL, no model, no tokenizer.

Rows are built from slot ids (``encode_rows`` + the scheme) with a fixed token layout (two tokens per
line, then the end token), so every per-token advantage has a known value: the loop reference's rank
advantage (``remark.oracles.rank_loops``), the overflow penalty, or the end-token shaping. Two "processes"
are two threads whose gather is a real all-gather (a barrier and a shared list).
"""

from __future__ import annotations

import dataclasses
import subprocess
import sys
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
import torch

from catalog.parse import ParsedLine
from remark.algos import encode_rows, names, per_responder, rewards_RNK
from remark.oracles.rank_loops import random_rows, reference_advantages, reference_rewards
from remark.scoring.scorer import ScoredRows
from remark.step.rank_step import LocalGather, RankSettings, Round, modified_rewards, rank_step

SCHEMES = names("reward")


def test_the_rank_step_imports_no_trl():
    code = "import sys, remark.step.rank_step; sys.exit(int(any(m in sys.modules for m in ('trl', 'transformers'))))"
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 0


def scored_round(rows: dict, scheme: str, *, k: int, eos: bool = True, ends_newline: bool = True) -> Round:
    """A Round of ``rows`` (``random_rows`` form): line j's two tokens have rank j, then the end token."""
    enc = encode_rows(k=k, **{key: v for key, v in rows.items() if key != "request_ids"})
    rewards, mask = rewards_RNK(enc, scheme)
    n_R = [len(s) for s in rows["slot_ids"]]
    width = 2 * max(n_R) + 1
    rank_RT = torch.full((len(n_R), width), -1, dtype=torch.int64)
    completion_mask = torch.zeros(len(n_R), width, dtype=torch.int64)
    for r, n in enumerate(n_R):
        rank_RT[r, : 2 * n] = torch.arange(n).repeat_interleave(2)
        completion_mask[r, : 2 * n + int(eos)] = 1
    lines = [
        [
            ParsedLine(j, 3 * j, 3 * j + 1, "x", None if item is None else "x", None)
            for j, item in enumerate(slots)
        ]
        for slots in rows["slot_ids"]
    ]
    scored = ScoredRows(
        request_ids=list(rows.get("request_ids", [f"q{r}" for r in range(len(n_R))])),
        texts=["x\n" * n if ends_newline else "x\n" * max(n - 1, 0) + "x" * bool(n) for n in n_R],
        lines=lines,
        slot_ids=[list(s) for s in rows["slot_ids"]],
        rewards_RNK=rewards,
        mask_RN=mask,
        per_responder=per_responder(scheme),
        rank_RT=rank_RT,
        end_R=torch.tensor([2 * n if eos else -1 for n in n_R]),
        n_lines_R=torch.tensor(n_R),
    )
    return Round(scored, completion_mask, completion_mask.clone())


def request_rows(seed: int, *, n_requests: int, g: int, k: int) -> dict:
    rows = random_rows(seed, n_requests=n_requests, group_size=g, k=k)
    rows["request_ids"] = [f"req{r // g}" for r in range(n_requests * g)]
    return rows


def expected_token_advantages(
    rows, scheme, mode, *, k, g, log_decay=False, overflow=-0.1, bonus=0.1, early=-0.1
):
    """Per-token advantages of :func:`scored_round`'s layout from the loop reference."""
    rewards = reference_rewards(
        rows["slot_ids"],
        k=k,
        scheme=scheme,
        responders=rows["responders"],
        seen=rows["seen"],
        responder_index=rows["responder_index"],
        log_decay=log_decay,
    )
    adv = reference_advantages(rewards, group_size=g, mode=mode)
    out = []
    for r, slots in enumerate(rows["slot_ids"]):
        n = len(slots)
        row = [adv[r][j] if j < k else overflow for j in range(n) for _ in range(2)]
        row.append(bonus if n >= k else early)
        out.append(row)
    return out


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("scheme", SCHEMES)
@pytest.mark.parametrize("mode", names("scale"))
@pytest.mark.parametrize("log_decay", [False, True])
def test_token_advantages_equal_the_loop_reference(seed, scheme, mode, log_decay):
    k, g = 5, 4
    rows = request_rows(seed, n_requests=3, g=g, k=k)
    settings = RankSettings(num_ranks=k, advantage_scaling=mode, modifier="log_decay" if log_decay else None)
    batch = rank_step(scored_round(rows, scheme, k=k), settings, LocalGather(), group_size=g)
    want = expected_token_advantages(rows, scheme, mode, k=k, g=g, log_decay=log_decay)
    for r, row in enumerate(want):
        torch.testing.assert_close(
            batch.advantages[r, : len(row)].double(),
            torch.tensor(row, dtype=torch.float64),
            atol=1e-5,
            rtol=1e-5,
        )
        assert float(batch.advantages[r, len(row) :].abs().sum()) == 0.0  # padding
    assert batch.rows == [(0, r) for r in range(len(want))]
    assert batch.keep.all() and batch.num_items == sum(len(row) for row in want)
    torch.testing.assert_close(batch.loss_weights, torch.ones(len(want)))


def test_settings_from_a_config_object():
    cfg = dataclasses.make_dataclass("Cfg", [("num_ranks", int), ("log_decay", bool), ("reward_scheme", str)])
    s = RankSettings.from_config(cfg(num_ranks=7, log_decay=True, reward_scheme="union"))
    assert (s.num_ranks, s.modifier, s.truncation) == (7, "log_decay", "score")


def test_interrupt_zeroes_the_cut_line_before_the_modifier():
    """A list cut mid-line (no end token, no final newline): its last line earns 0, and with log_decay it
    credits no earlier rank either (truncation comes first)."""
    k = 3
    rows = {
        "slot_ids": [["a", "b", "c"], ["a", "b", "c"]],
        "responders": [[["a", "b", "c"]]] * 2,
        "seen": [[], []],
        "responder_index": [0, 0],
    }
    cut = scored_round(rows, "union", k=k, eos=False, ends_newline=False)
    d = [1.0, 1 / 1.584962500721156, 0.5]  # 1 / log2(j + 1)
    got = modified_rewards(
        cut.scored, RankSettings(num_ranks=k, truncation="interrupt", modifier="log_decay")
    )
    torch.testing.assert_close(got[:, 0], torch.tensor([[d[0] + d[1], d[1], 0.0]] * 2))
    got = modified_rewards(cut.scored, RankSettings(num_ranks=k, truncation="score", modifier="log_decay"))
    torch.testing.assert_close(got[:, 0], torch.tensor([[sum(d), d[1] + d[2], d[2]]] * 2))
    ended = scored_round(rows, "union", k=k, eos=False, ends_newline=True)  # the cap fell after a newline
    got = modified_rewards(ended.scored, RankSettings(num_ranks=k, truncation="interrupt"))
    torch.testing.assert_close(got[:, 0], torch.ones(2, 3))


HAND = {  # request -> (responders, the four lists' slot ids): r1 has signal, r2 (perfect) and r3 do not
    "r1": ([["A", "B"], ["B", "C"]], [["A", "B", "C"], ["B", "F", "D"], [None, "A", "A"], ["D", "B"]]),
    "r2": ([["D", "E", "F"]], [["D", "E", "F"]] * 4),
    "r3": ([["E"], ["A"]], [["E", "A", "B"]] * 4),
}


def hand_rows(order: list[str], g: int = 4) -> dict:
    rows = {key: [] for key in ("slot_ids", "responders", "seen", "responder_index", "request_ids")}
    for rid in order:
        responders, lists = HAND[rid]
        for j in range(g):
            rows["slot_ids"].append(lists[j % len(lists)])
            rows["responders"].append(responders)
            rows["seen"].append([])
            rows["responder_index"].append(0)
            rows["request_ids"].append(rid)
    return rows


def test_filters_mask_rows_count_tokens_and_remember_dropped_requests():
    k, g = 3, 4
    settings = RankSettings(num_ranks=k, zero_signal_filter=True, pass_rate_drop=0.9)
    first = scored_round(hand_rows(["r1", "r2", "r3"]), "union", k=k)
    batch = rank_step(first, settings, LocalGather(), group_size=g)
    # r2: identical perfect lists (zero signal, pass rate 1) -> dropped for good; r3: identical, pass rate 2/3
    assert batch.keep.tolist() == [True] * 4 + [False] * 8
    assert batch.dropped == {"r2"}
    assert float(batch.completion_mask[4:].sum()) == 0 and float(batch.advantages[4:].abs().sum()) == 0
    assert int(batch.num_items) == int(first.loss_mask[:4].sum())
    assert batch.stats["zero_signal_frac"] == pytest.approx(2 / 3)
    assert batch.stats["kept_frac"] == pytest.approx(1 / 3)
    assert batch.stats["dropped_requests"] == 1.0
    assert batch.stats["rank_reward/01"] == pytest.approx((1 + 1 + 0 + 0 + 4 + 4) / 12)
    # the next step: r2 stays dropped even with signal; evaluation batches are never filtered
    again = rank_step(
        first,
        dataclasses.replace(settings, zero_signal_filter=False),
        LocalGather(),
        group_size=g,
        dropped=batch.dropped,
    )
    assert again.keep.tolist() == [True] * 4 + [False] * 4 + [True] * 4
    evaluation = rank_step(first, settings, LocalGather(), group_size=g, train=False, dropped=batch.dropped)
    assert evaluation.keep.all() and evaluation.dropped == {"r2"}


def test_prompt_aggregation_weights_average_each_groups_token_mean():
    k, g = 3, 4
    first = scored_round(hand_rows(["r1", "r3"]), "union", k=k)
    settings = RankSettings(num_ranks=k, loss_aggregation="prompt", zero_signal_filter=True)
    batch = rank_step(first, settings, LocalGather(), group_size=g)
    n_r1 = float(first.loss_mask[:4].sum())
    torch.testing.assert_close(batch.loss_weights, torch.tensor([n_r1 / n_r1] * 4 + [0.0] * 4))


def test_refill_replaces_groups_without_signal_from_further_rounds():
    k, g = 3, 4
    first = scored_round(hand_rows(["r2", "r1"]), "union", k=k)
    extra = [
        scored_round(hand_rows(["r3", "r3"]), "union", k=k),
        scored_round(hand_rows(["r1", "r3"]), "union", k=k),
    ]
    calls = []

    def refill(dropped):
        calls.append(set(dropped))
        return extra[len(calls) - 1]

    settings = RankSettings(num_ranks=k, zero_signal_filter=True, refill_batch=True, refill_max_rounds=4)
    batch = rank_step(first, settings, LocalGather(), group_size=g, refill=refill)
    assert len(calls) == 2  # round 1 had no signal, round 2 filled the batch
    assert batch.rows == [(0, 4), (0, 5), (0, 6), (0, 7), (2, 0), (2, 1), (2, 2), (2, 3)]
    assert batch.keep.all()
    assert (
        batch.stats["refill_rounds"],
        batch.stats["refill_prompts"],
        batch.stats["refill_short_groups"],
    ) == (
        2.0,
        4.0,
        0.0,
    )
    assert batch.stats["zero_signal_frac"] == 0.5  # the sampled batch's, not the refilled one's
    # both kept groups are r1's lists: equal advantages, row for row
    torch.testing.assert_close(batch.advantages[:4], batch.advantages[4:])


def test_refill_gives_up_after_the_last_round_and_masks_what_is_left():
    k, g = 3, 4
    first = scored_round(hand_rows(["r2", "r3"]), "union", k=k)
    settings = RankSettings(num_ranks=k, zero_signal_filter=True, refill_batch=True, refill_max_rounds=2)
    batch = rank_step(first, settings, LocalGather(), group_size=g, refill=lambda d: first)
    assert batch.stats["refill_rounds"] == 2.0 and batch.stats["refill_short_groups"] == 2.0
    assert batch.rows == [(0, r) for r in range(8)] and not batch.keep.any()


class ThreadGather:
    """A real all-gather between ``world`` threads (process order = thread rank)."""

    def __init__(self, rank: int, world: int, shared: list, barrier: threading.Barrier) -> None:
        self.rank, self.world, self.device = rank, world, torch.device("cpu")
        self.shared, self.barrier = shared, barrier

    def _all(self, x):
        self.shared[self.rank] = x
        self.barrier.wait()
        out = list(self.shared)
        self.barrier.wait()
        return out

    def __call__(self, x):
        return torch.cat(self._all(x))

    def objects(self, xs):
        return [x for part in self._all(list(xs)) for x in part]


def split(rows: dict, world: int) -> list[dict]:
    n = len(rows["slot_ids"]) // world
    return [{key: v[p * n : (p + 1) * n] for key, v in rows.items()} for p in range(world)]


def run_processes(world: int, fn):
    shared, barrier = [None] * world, threading.Barrier(world)
    with ThreadPoolExecutor(world) as pool:
        return list(pool.map(lambda p: fn(p, ThreadGather(p, world, shared, barrier)), range(world)))


@pytest.mark.parametrize("scheme", SCHEMES)
@pytest.mark.parametrize("mode", ["group", "batch"])
def test_two_processes_give_the_one_process_advantages(scheme, mode):
    """Groups of 4 over processes of 6 rows straddle them; per-responder rewards are padded to the widest N."""
    k, g = 4, 4
    rows = request_rows(7, n_requests=3, g=g, k=k)
    settings = RankSettings(num_ranks=k, advantage_scaling=mode, zero_signal_filter=True, pass_rate_drop=0.5)
    one = rank_step(scored_round(rows, scheme, k=k), settings, LocalGather(), group_size=g)
    parts = split(rows, 2)

    def process(p, gather):
        return rank_step(scored_round(parts[p], scheme, k=k), settings, gather, group_size=g)

    two = run_processes(2, process)
    for p, batch in enumerate(two):
        local = slice(6 * p, 6 * (p + 1))
        width = batch.advantages.shape[1]
        torch.testing.assert_close(batch.advantages, one.advantages[local, :width])
        assert float(one.advantages[local, width:].abs().sum()) == 0.0
        assert batch.keep.tolist() == one.keep[local].tolist()
        assert batch.dropped == one.dropped and int(batch.num_items) == int(one.num_items)
        assert batch.stats == pytest.approx(one.stats)


def test_two_processes_refill_their_own_groups_in_step():
    k, g = 3, 4
    first = [hand_rows(["r1", "r2"]), hand_rows(["r3", "r3"])]
    extra = [hand_rows(["r3", "r1"]), hand_rows(["r1", "r3"])]
    settings = RankSettings(num_ranks=k, zero_signal_filter=True, refill_batch=True, refill_max_rounds=3)

    def process(p, gather):
        rounds = iter([extra[p], extra[p], extra[p]])
        return rank_step(
            scored_round(first[p], "union", k=k),
            settings,
            gather,
            group_size=g,
            refill=lambda dropped: scored_round(next(rounds), "union", k=k),
            with_groups=True,
        )

    b0, b1 = run_processes(2, process)
    # process 0 kept r1, then took r1 from the refill; process 1 needed two refills (r1 twice)
    assert b0.rows == [(0, 0), (0, 1), (0, 2), (0, 3), (1, 4), (1, 5), (1, 6), (1, 7)]
    assert b1.rows == [(1, 0), (1, 1), (1, 2), (1, 3), (2, 0), (2, 1), (2, 2), (2, 3)]
    assert b0.stats["refill_rounds"] == b1.stats["refill_rounds"] == 2.0
    assert b0.stats["refill_prompts"] == 8.0 and b0.stats["refill_short_groups"] == 0.0
    assert b0.groups[0] == b1.groups[0] == ["r1", "r1", "r1", "r1"]
    assert b0.keep.all() and b1.keep.all()


class CountingGather(LocalGather):
    def __init__(self):
        super().__init__()
        self.tensors, self.object_lists = 0, 0

    def __call__(self, x):
        self.tensors += 1
        return x

    def objects(self, xs):
        self.object_lists += 1
        return list(xs)


@pytest.mark.parametrize("scheme", ["union", "responder_rb"])
def test_each_reduction_runs_once_per_round(scheme, monkeypatch):
    """One tensor gather and one zero-signal pass per generation round, refills included; request ids are
    gathered (once per round) only when the pass-rate filter or the advisor needs them."""
    import remark.step.rank_step as rs

    calls = []
    real = rs.zero_signal_groups
    monkeypatch.setattr(rs, "zero_signal_groups", lambda *a, **kw: calls.append(1) or real(*a, **kw))
    k, g = 3, 4
    first = scored_round(hand_rows(["r2", "r1"]), scheme, k=k)
    extra = scored_round(hand_rows(["r3", "r1"]), scheme, k=k)
    settings = RankSettings(num_ranks=k, zero_signal_filter=True, refill_batch=True, refill_max_rounds=3)
    gather = CountingGather()
    batch = rank_step(first, settings, gather, group_size=g, refill=lambda d: extra)
    assert batch.stats["refill_rounds"] == 1.0
    assert (gather.tensors, gather.object_lists, len(calls)) == (2, 0, 2)
    gather, calls[:] = CountingGather(), []
    rank_step(
        first, dataclasses.replace(settings, pass_rate_drop=0.9), gather, group_size=g, refill=lambda d: extra
    )
    assert (gather.tensors, gather.object_lists, len(calls)) == (2, 2, 2)


def test_rank_settings_are_the_configs_fields_with_the_configs_defaults():
    """``RankSettings`` repeats no default of its own: each field is a config field with the same default
    (``modifier`` stands for ``log_decay``), and ``from_config`` reads every one of them."""
    import dataclasses

    from remark.config import RemarkGRPOConfig

    config_defaults = {f.name: f.default for f in dataclasses.fields(RemarkGRPOConfig)}
    for f in dataclasses.fields(RankSettings):
        if f.name == "modifier":
            assert f.default is None and config_defaults["log_decay"] is False
            continue
        assert f.name in config_defaults, f"RankSettings.{f.name} is no config field"
        assert f.default == config_defaults[f.name], f.name
    changed = {f.name: f.default for f in dataclasses.fields(RankSettings) if f.name != "modifier"}
    changed.update(num_ranks=7, truncation="interrupt", advantage_scaling="none", refill_max_rounds=3)

    class Cfg:
        log_decay = True

    for name, value in changed.items():
        setattr(Cfg, name, value)
    got = RankSettings.from_config(Cfg)
    assert got == RankSettings(**changed, modifier="log_decay")
