"""A training run's life: from a config to a run folder (``docs/architecture.md``).

``training`` (``run_training``: load, build, train, write), ``sampling`` (the training rows: uniform over
requests for ReMaRk, one row per (request, responder) for Rank-GRPO), ``output_dir`` (what a run folder
holds, resume), ``callbacks`` (validation, divergence guard), ``cards`` (model cards), ``sft`` (the
warm-up), ``build_tiny`` and ``tiny_model`` (the built-in synthetic data and tiny model), ``cpu_threads``
(torch's thread pools from a setting).
"""
