"""One training step: TRL's round -> scored rows -> the rank step -> TRL's loss (``docs/architecture.md``).

``trainer`` (``RemarkGRPOTrainer``, the wiring), ``rank_step`` (scored rows -> per-token advantages, no
TRL import), ``refill`` (merging the rounds of a refilled batch), ``logps_hook`` (rank-level ratios and
GMPO's objective through TRL's log-probs), ``checkpoint`` (complete, verified checkpoints).
"""
