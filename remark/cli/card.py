"""``remark card``: add a ``remark eval run``'s test metrics to a model card written by ``remark train``.

Example::

    remark eval run --model runs/remark/best --data data/reddit-v2 --split test --out runs/remark/test
    remark card runs/remark/best --test runs/remark/test      # README.md now has the test section with CIs

The card is re-rendered from the folder's ``card.json`` (``remark.run.cards``); nothing else in it changes.
"""

from __future__ import annotations

import argparse
from pathlib import Path


def add_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "card",
        help="add test metrics (a remark eval run output) to the model card of best/ or final/",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("model", type=Path, help="a run's best/ or final/ (with card.json)")
    p.add_argument("--test", type=Path, required=True, help="a `remark eval run --out` folder (metrics.json)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from remark.run.cards import add_test_metrics

    print(f"wrote {add_test_metrics(args.model, args.test)}")
    return 0
