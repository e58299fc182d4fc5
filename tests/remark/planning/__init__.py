"""Tests of remark.planning and its CLI (curve, plan-group-size)."""
