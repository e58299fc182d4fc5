import math

import pytest
import torch

from remark.algos import draw_rewards_RNK, eligibility, encode_rows, log_decay, rank_rewards
from tests.remark.algos.cases import COUNTS, RESPONDERS, SEEN, SLOTS, UNION, encoded

T = torch.tensor


def test_eligibility_handles_ungrounded_repeats_seen_short_lists_and_overflow():
    enc = encoded()
    # row 0: b ok, None, b repeat, s seen (a is line 5 > K: overflow, not scored)
    # row 1: a ok, d seen, c ok, no 4th line; rows 2-3: nothing grounded
    expected = T([[1, 0, 0, 0], [1, 0, 1, 0], [0, 0, 0, 0], [0, 0, 0, 0]], dtype=torch.bool)
    assert torch.equal(eligibility(enc), expected)
    assert enc.n_lines_R.tolist() == [5, 3, 2, 0]


def test_union_reward():
    assert torch.equal(
        rank_rewards(encoded(), "union"), T([[1.0, 0, 0, 0], [1, 0, 1, 0], [0, 0, 0, 0], [0, 0, 0, 0]])
    )


def test_marginal_reward_is_count_over_n_responders():
    # b named by 2 of 3 responders, a and c by 1 of 3
    expected = T([[2 / 3, 0, 0, 0], [1 / 3, 0, 1 / 3, 0], [0, 0, 0, 0], [0, 0, 0, 0]])
    torch.testing.assert_close(rank_rewards(encoded(), "marginal"), expected)


def test_responder_reward_uses_the_drawn_responder():
    # R1 = {a, b}: row 0 hits b, row 1 hits a (c is R2's)
    assert torch.equal(
        rank_rewards(encoded(), "responder"), T([[1.0, 0, 0, 0], [1, 0, 0, 0], [0, 0, 0, 0], [0, 0, 0, 0]])
    )
    # drawing R2 = {b, c} instead
    enc = encoded(responder_index=[1, 1, 0, 0])
    assert torch.equal(
        rank_rewards(enc, "responder"), T([[1.0, 0, 0, 0], [0, 0, 1, 0], [0, 0, 0, 0], [0, 0, 0, 0]])
    )


def test_responder_reward_for_per_responder_rows():
    enc = encode_rows(
        SLOTS, k=4, union=UNION, counts=COUNTS, seen=SEEN, responder_items=[["b", "c"]] * 2 + [["x"]] * 2
    )
    assert torch.equal(
        rank_rewards(enc, "responder"), T([[1.0, 0, 0, 0], [0, 0, 1, 0], [0, 0, 0, 0], [0, 0, 0, 0]])
    )


def test_responder_rb_rewards_every_responder_with_mask():
    enc = encoded()
    expected = T(
        [
            [[1.0, 0, 0, 0], [1, 0, 0, 0], [0, 0, 0, 0]],  # row 0 vs R1, R2, R3
            [[1.0, 0, 0, 0], [0, 0, 1, 0], [0, 0, 0, 0]],  # row 1: d is seen, so R3 never pays
            [[0.0, 0, 0, 0], [0, 0, 0, 0], [0, 0, 0, 0]],
            [[0.0, 0, 0, 0], [0, 0, 0, 0], [0, 0, 0, 0]],
        ]
    )
    assert torch.equal(rank_rewards(enc, "responder_rb"), expected)
    assert enc.responder_mask_RN.tolist() == [
        [True] * 3,
        [True] * 3,
        [True, False, False],
        [True, False, False],
    ]


def test_responder_rb_mean_equals_marginal():
    enc = encoded()
    rb = rank_rewards(enc, "responder_rb")
    mean = (rb * enc.responder_mask_RN[..., None]).sum(1) / enc.n_responders_R[:, None]
    torch.testing.assert_close(mean, rank_rewards(enc, "marginal"))


def test_responder_rewards_under_every_draw_are_responder_rb_rewards():
    enc = encoded()  # no drawn responder: every draw is enumerated
    rewards, mask = draw_rewards_RNK(enc, "responder")
    assert torch.equal(rewards, rank_rewards(enc, "responder_rb")) and torch.equal(
        mask, enc.responder_mask_RN
    )
    assert rewards[0].tolist() == [[1.0, 0, 0, 0], [1, 0, 0, 0], [0, 0, 0, 0]]  # row 0 vs R1, R2, R3
    for scheme in ("union", "responder_rb"):
        with pytest.raises(ValueError, match="only a per-list scheme that draws a responder"):
            draw_rewards_RNK(enc, scheme)


def test_log_decay_hand_values():
    d2, d4 = 1 / math.log2(3), 1 / math.log2(5)
    assert d2 == pytest.approx(0.6309298)
    # union row 1 hits [1, 0, 1, 0]: r_k = sum_{j>=k} hit_j d_j with d_1 = 1, d_3 = 1/2
    got = rank_rewards(encoded(), "union", modifier="log_decay")
    torch.testing.assert_close(got[1], T([1.5, 0.5, 0.5, 0.0]))
    hits = T([[0.0, 1, 0, 1]])
    torch.testing.assert_close(log_decay(hits), T([[d2 + d4, d2 + d4, d4, d4]]))
    # per-responder rewards keep their shape
    assert rank_rewards(encoded(), "responder_rb", modifier="log_decay").shape == (4, 3, 4)


def test_counts_default_from_responders_and_union_only():
    enc = encode_rows(SLOTS, k=4, responders=RESPONDERS, seen=SEEN)
    torch.testing.assert_close(rank_rewards(enc, "marginal"), rank_rewards(encoded(), "marginal"))
    only_union = encode_rows(SLOTS, k=4, union=UNION, seen=SEEN)
    assert torch.equal(rank_rewards(only_union, "union"), rank_rewards(encoded(), "union"))
    with pytest.raises(ValueError, match="marginal scheme needs n_x"):
        rank_rewards(only_union, "marginal")
    with pytest.raises(ValueError, match="responder scheme needs the scored responder"):
        rank_rewards(only_union, "responder")


def test_max_responders_pads_for_gather():
    enc = encoded(max_responders=5)
    assert rank_rewards(enc, "responder_rb").shape == (4, 5, 4)
    with pytest.raises(ValueError, match="max_responders=2 is below the largest n_x"):
        encoded(max_responders=2)


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"counts": [[1, 1, 1, 1]] * 2 + [[1]] * 2}, "counts .* disagree with the responders"),
        ({"responder_index": [3, 3, 0, 0]}, "responder_index 3 is out of range for 3 responders"),
        ({"responder_index": [0, 1, 0, 0]}, "form one group but have different responder_index"),
        ({"request_ids": ["A", "B", "B", "B"]}, "form one group but have different request_ids"),
        ({"group_size": 3}, "do not split into groups of group_size=3"),
        ({"seen": [["s"]]}, "seen has 1 rows but slot_ids has 4"),
        ({"union": [["a", "a", "b", "c", "d"]] * 2 + [["x"]] * 2, "counts": None}, "union has repeated ids"),
        ({"union": [["a", "b", "c"]] * 2 + [["x"]] * 2, "counts": None}, "not in the union"),
        ({"counts": [[1, 2, 1]] * 2 + [[1]] * 2}, "counts has 3 entries for 4 union ids"),
        ({"k": 0}, "k must be >= 1"),
        ({"responder_items": [["a"]] * 4}, "not both"),
    ],
)
def test_encode_rejects_bad_input(overrides, message):
    with pytest.raises(ValueError, match=message):
        encoded(**overrides)


def test_encode_needs_some_ground_truth():
    with pytest.raises(ValueError, match="pass union"):
        encode_rows(SLOTS, k=4)
