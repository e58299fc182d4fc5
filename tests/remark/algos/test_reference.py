"""The vectorised path (encode -> rewards -> advantages) against the per-element loop reference, for
every registered reward scheme and scaling."""

import pytest
import torch

from remark.algos import encode_rows, names, per_responder, rank_advantages, rank_rewards
from remark.oracles.rank_loops import SCHEMES, random_rows, reference_advantages, reference_rewards

SHAPES = [(1, 2, 1), (3, 2, 4), (5, 8, 20), (4, 3, 7)]


def _padded(rb_rows: list, n_max: int, k: int) -> torch.Tensor:
    return torch.tensor([row + [[0.0] * k] * (n_max - len(row)) for row in rb_rows])


def check_against_loop_reference(scheme, *, seed, n_requests, group_size, k, log_decay):
    """``scheme``'s vectorised rewards and advantages (every scaling) equal the loop reference's."""
    rows = random_rows(seed, n_requests=n_requests, group_size=group_size, k=k)
    enc = encode_rows(k=k, group_size=group_size, **rows)
    ref = reference_rewards(
        rows["slot_ids"],
        k=k,
        scheme=scheme,
        responders=rows["responders"],
        seen=rows["seen"],
        responder_index=rows["responder_index"],
        log_decay=log_decay,
    )
    got = rank_rewards(enc, scheme, modifier="log_decay" if log_decay else None)
    want = _padded(ref, got.shape[1], k) if per_responder(scheme) else torch.tensor(ref)
    torch.testing.assert_close(got, want, atol=1e-6, rtol=1e-6)
    mask = enc.responder_mask_RN if per_responder(scheme) else None
    for mode in names("scale"):
        adv = rank_advantages(got, group_size=group_size, mode=mode, mask_RN=mask)
        ref_adv = torch.tensor(reference_advantages(ref, group_size=group_size, mode=mode))
        assert torch.isfinite(adv).all()
        torch.testing.assert_close(adv, ref_adv, atol=2e-4, rtol=1e-4)


def test_every_registered_scheme_has_a_loop_reference():
    assert sorted(SCHEMES) == names("reward")
    with pytest.raises(
        ValueError, match="no loop reference for reward scheme 'nope': add its case to SCHEMES"
    ):
        reference_rewards([[]], k=1, scheme="nope", responders=[[]])


@pytest.mark.parametrize("scheme", names("reward"))
@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize(("n_requests", "group_size", "k"), SHAPES)
@pytest.mark.parametrize("log_decay", [False, True])
def test_vectorised_matches_loop_reference(scheme, seed, n_requests, group_size, k, log_decay):
    check_against_loop_reference(
        scheme, seed=seed, n_requests=n_requests, group_size=group_size, k=k, log_decay=log_decay
    )


def test_reference_sees_every_case():
    """The random batches do contain what the comparison is meant to cover."""
    rows = random_rows(0, n_requests=20, group_size=4, k=5)
    flat = [x for s in rows["slot_ids"] for x in s]
    assert None in flat
    assert any(len(s) > 5 for s in rows["slot_ids"]) and any(len(s) < 5 for s in rows["slot_ids"])
    assert any(len(set(x for x in s if x)) < len([x for x in s if x]) for s in rows["slot_ids"])
    assert any(set(s) & set(seen) for s, seen in zip(rows["slot_ids"], rows["seen"]))
    assert any(c > 1 for cs in rows["counts"] for c in cs)


@pytest.mark.parametrize("scheme", names("reward"))
def test_rows_encoded_per_process_and_gathered_match_one_process(scheme):
    """Two processes encode their own rows (a group straddles them), pad N to a common max_responders,
    and the concatenated ("gathered") rewards give the same advantages as one process."""
    g, k = 4, 6
    rows = random_rows(7, n_requests=5, group_size=g, k=k, max_responders=5)
    whole = encode_rows(k=k, group_size=g, **rows)
    cut = 2 * g + 1  # mid-group
    parts = [
        encode_rows(k=k, max_responders=5, **{name: v[sl] for name, v in rows.items()})
        for sl in (slice(0, cut), slice(cut, None))
    ]
    gathered = torch.cat([rank_rewards(p, scheme) for p in parts])
    mask = torch.cat([p.responder_mask_RN for p in parts]) if per_responder(scheme) else None
    want_mask = whole.responder_mask_RN if per_responder(scheme) else None
    for mode in names("scale"):
        got = rank_advantages(gathered, group_size=g, mode=mode, mask_RN=mask)
        want = rank_advantages(rank_rewards(whole, scheme), group_size=g, mode=mode, mask_RN=want_mask)
        torch.testing.assert_close(got, want)
