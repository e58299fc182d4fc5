"""Evaluation: metrics at k per responder / on the union, bootstrap CIs, generation, steps-to-reach, reports.

Layering: imports ``catalog`` and ``data_prep`` only (never ``remark``). Pure math lives in
:mod:`eval.metrics` and :mod:`eval.bootstrap`; :mod:`eval.views` is the one scoring path shared with the
trainer's validation.
"""
