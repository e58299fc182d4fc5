"""Rank rewards + advantages for a 48 x 8 x 20 batch: vectorised path vs the per-element Python loop.

Run by hand (not a test):
    python bench/rewards.py [--requests 48] [--group-size 8] [--k 20] [--repeat 50] [--threads 1]

Times, per scheme, (1) ``rank_rewards`` + ``rank_advantages`` (group scaling) on already encoded rows,
the part a trainer runs after gathering, (2) ``encode_rows`` (strings -> tensors, once per batch), and
(3) the loop reference ``remark.oracles.rank_loops`` (rewards + advantages from the same Python lists),
all in the same run; prints medians and the speed-up of (1) and of (1)+(2) over (3). Goal: (1) >= 50x
faster than (3) and under 5 ms.
"""

from __future__ import annotations

import statistics
import time

import torch
from flags import bench_parser, run_script

from remark.algos import encode_rows, names, per_responder, rank_advantages, rank_rewards
from remark.oracles.rank_loops import random_rows, reference_advantages, reference_rewards


def _median_ms(fn, repeat: int) -> float:
    fn()  # warm-up
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return 1e3 * statistics.median(times)


def main() -> None:
    ap = bench_parser(__file__, __doc__)
    ap.add_argument("--requests", type=int, default=48)
    ap.add_argument("--group-size", type=int, default=8)
    ap.add_argument("--k", type=int, default=20)
    ap.add_argument("--repeat", type=int, default=50)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "--threads", type=int, default=1, help="torch intra-op threads (tiny tensors: 1 is fastest)"
    )
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    g, k = args.group_size, args.k
    rows = random_rows(args.seed, n_requests=args.requests, group_size=g, k=k, max_responders=6)
    enc = encode_rows(k=k, group_size=g, **rows)
    print(f"batch: {args.requests} requests x {g} lists x {k} ranks; torch threads {torch.get_num_threads()}")
    print(
        f"{'scheme':<14}{'vectorised ms':>14}{'encode ms':>11}{'loop ms':>10}{'speed-up':>10}{'incl. encode':>14}"
    )
    encode_ms = _median_ms(lambda: encode_rows(k=k, group_size=g, **rows), max(5, args.repeat // 5))
    for scheme in names("reward"):
        mask = enc.responder_mask_RN if per_responder(scheme) else None

        def vectorised(scheme=scheme, mask=mask):
            return rank_advantages(rank_rewards(enc, scheme), group_size=g, mode="group", mask_RN=mask)

        def loop(scheme=scheme):
            ref = reference_rewards(
                rows["slot_ids"],
                k=k,
                scheme=scheme,
                responders=rows["responders"],
                seen=rows["seen"],
                responder_index=rows["responder_index"],
            )
            return reference_advantages(ref, group_size=g, mode="group")

        torch.testing.assert_close(vectorised(), torch.tensor(loop()), atol=2e-4, rtol=1e-4)
        vec_ms = _median_ms(vectorised, args.repeat)
        loop_ms = _median_ms(loop, max(3, args.repeat // 10))
        print(
            f"{scheme:<14}{vec_ms:>14.3f}{encode_ms:>11.3f}{loop_ms:>10.2f}"
            f"{loop_ms / vec_ms:>9.0f}x{loop_ms / (vec_ms + encode_ms):>13.1f}x"
        )


if __name__ == "__main__":
    run_script(main)
