"""The demo report's verdict on across-seed intervals (``remark.demo.report.verdict``), on hand-made values.

The across-seed statistics themselves are ``eval.seeds`` (tests/eval/test_seeds.py).
"""

from __future__ import annotations

from remark.demo.report import verdict


def test_verdict_needs_both_intervals_to_exclude_zero():
    def d(seeds, reqs):
        return {
            "seeds": {"ci_low": seeds[0], "ci_high": seeds[1]},
            "requests": {"ci_low": reqs[0], "ci_high": reqs[1]},
        }

    assert "resolved: A is ahead" in verdict(d((0.01, 0.05), (0.02, 0.04)), "A", "B")
    assert "resolved: B is ahead" in verdict(d((-0.05, -0.01), (-0.04, -0.02)), "A", "B")
    text = verdict(d((-0.02, 0.08), (0.01, 0.05)), "A", "B")
    assert "not resolved" in text and "over seeds" in text and "over requests" not in text
    text = verdict(d((0.01, 0.08), (-0.01, 0.05)), "A", "B")
    assert "not resolved" in text and "over requests" in text
    assert "not resolved" in verdict(d((None, None), (0.01, 0.05)), "A", "B")
