"""A hand-built batch used across the reward/advantage tests (values computed by hand in the tests).

Request A (rows 0-1): responders R1 = {a, b}, R2 = {b, c}, R3 = {d}; union [a, b, c, d], counts
[1, 2, 1, 1], n_x = 3; seen {s, d}. Row 0 lists b, <ungrounded>, b (repeat), s (seen), a (overflow past
K = 4). Row 1 lists a, d (seen), c: shorter than K. Request B (rows 2-3): one responder {x}; row 2 has two
ungrounded lines, row 3 is empty. Rows are scored against responder 0 (R1, resp. {x}).
"""

from remark.algos import encode_rows

K = 4
SLOTS = [["b", None, "b", "s", "a"], ["a", "d", "c"], [None, None], []]
RESPONDERS = [[["a", "b"], ["b", "c"], ["d"]]] * 2 + [[["x"]]] * 2
UNION = [["a", "b", "c", "d"]] * 2 + [["x"]] * 2
COUNTS = [[1, 2, 1, 1]] * 2 + [[1]] * 2
SEEN = [["s", "d"]] * 2 + [[]] * 2
DRAWN = [0, 0, 0, 0]


def encoded(**overrides):
    kwargs = dict(
        k=K,
        union=UNION,
        counts=COUNTS,
        responders=RESPONDERS,
        seen=SEEN,
        responder_index=DRAWN,
        group_size=2,
        request_ids=["A", "A", "B", "B"],
    )
    kwargs.update(overrides)
    return encode_rows(SLOTS, **kwargs)
