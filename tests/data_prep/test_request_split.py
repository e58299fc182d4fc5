"""data_prep.request_split: prompt keys (Unicode spellings too), near-duplicate groups (hand-built and on
ProtoQA's questions, float scores against the threshold), the blocked method against the exact one,
group splits and the warning when one group overfills its split."""

from __future__ import annotations

import io
import json
from collections import Counter

import numpy as np
import polars as pl
import pytest
from rapidfuzz import fuzz

import data_prep.request_split as rs
from data_prep.request_split import (
    NEAR_DUPLICATE_THRESHOLD,
    SplitSpec,
    group_balance,
    group_split,
    hash_split,
    near_duplicate_groups,
    near_pairs,
    normalize_prompt,
    prompt_texts,
    similarity_scores,
    similarity_texts,
    split_by_groups,
    twin_pairs,
)
from data_prep.shipped import protoqa_file


def test_normalize_prompt_folds_case_punctuation_articles_and_plurals():
    assert normalize_prompt("Name a fruit.") == normalize_prompt("name  fruits") == "name fruit"
    assert normalize_prompt("The BOXES, the berries & dishes!") == "box berry dish"
    # 3 letters or fewer, and -ss / -us / -is endings, stay
    assert normalize_prompt("Bus gas glass famous this") == "bus gas glass famous this"
    assert normalize_prompt("comes  in\ta can...") == "come in can"
    assert normalize_prompt("?!") == ""


def test_one_prompt_in_nfc_nfd_and_fullwidth_is_one_key_one_group_and_a_twin():
    import unicodedata

    nfc = unicodedata.normalize("NFC", "Name a café you'd recommend in Zürich")
    nfd = unicodedata.normalize("NFD", nfc)
    full = "".join(chr(ord(c) + 0xFEE0) if "!" <= c <= "~" else c for c in nfc)  # fullwidth ASCII
    assert len({nfc, nfd, full}) == 3
    keys = {
        normalize_prompt(t)
        for t in (nfc, nfd, full, nfc.upper(), "Name a ca\u200bfé you’d recommend in ZÜRICH")
    }
    assert keys == {"name café you d recommend in zürich"}
    texts = [nfc, "Old classics?", nfd, full]
    for method in ("exact", "blocked"):
        assert near_duplicate_groups(texts, method=method).tolist() == [0, 1, 0, 0]
    qi, ci, score = twin_pairs([nfd, full], [nfc, "Old classics?"])
    assert (qi.tolist(), ci.tolist(), score.tolist()) == ([0, 1], [0, 0], [100.0, 100.0])
    # the split: all three spellings on one side
    ids = ["q1", "q2", "q3", "q4"]
    got = group_split(ids, texts, SplitSpec())
    assert got[0] == got[2] == got[3]


def test_prompt_texts_join_the_user_messages():
    prompts = [
        [{"role": "system", "content": "be brief"}, {"role": "user", "content": "Name a fruit"}],
        [
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": "hello"},
            {"role": "user", "content": "sci-fi?"},
        ],
        [{"role": "system", "content": "only a system message"}],
    ]
    assert prompt_texts(pl.DataFrame({"prompt": prompts})) == ["Name a fruit", "hi\nsci-fi?", ""]


def test_similarity_texts_drop_stop_words_and_a_shared_instruction_and_sort():
    assert similarity_texts(["Name something that comes in a can"]) == ["can come"]
    assert similarity_texts(["Name something you do"]) == ["do name something you"]  # all stop words: kept
    instruction = "Pretend you are a movie recommender system and give twenty titles please."
    texts = [f"{instruction}\n\nSci-fi like Arrival?", f"{instruction} Old classics?", f"{instruction} Moon"]
    texts.append("Something else entirely")
    # 3 of 4 rows share the 11-word prefix: it goes, from those rows only
    assert similarity_texts(texts) == ["arrival fi like sci", "classic old", "moon", "else entirely"]
    # a row that is the prefix alone keeps it; fewer than half the rows sharing it: nothing goes
    assert similarity_texts([instruction, f"{instruction} Moon"])[0] != ""
    assert (
        similarity_texts([f"{instruction} Moon", "a", "b"])[0] == similarity_texts([f"{instruction} Moon"])[0]
    )


def test_the_scorer_is_token_sort_ratio_of_the_content_words():
    a, b = "Name something people get removed from their body", "name something that comes in a carton"
    sa, sb = similarity_texts([a, b])
    assert (sa, sb) == ("body from get removed their", "carton come")
    want = fuzz.token_sort_ratio("get removed from their body", "come carton")
    assert similarity_scores([sa], [sb])[0, 0] == round(want)
    # "can" / "carton": 2 * |LCS("can come", "carton come")| / (8 + 11) = 2 * 8 / 19 = 84.2
    can, carton = similarity_texts(
        ["name something that comes in a can", "name something that comes in a carton"]
    )
    assert similarity_scores([can], [carton])[0, 0] == 84
    assert similarity_scores([can], [carton], dtype=np.float32)[0, 0] == pytest.approx(1600 / 19)


def test_near_duplicate_groups_by_hand():
    texts = [
        "Name a fruit.",
        "Name something you bring to the beach",
        "Name something you bring to a picnic",
        "name fruits",
        "NAME A FRUIT!!",
    ]
    assert near_duplicate_groups(texts).tolist() == [0, 1, 2, 0, 0]
    assert near_duplicate_groups([]).tolist() == []
    assert near_duplicate_groups(["", "?"]).tolist() == [0, 0]  # equal normalized text (empty)


def test_groups_are_connected_components_not_pairs():
    # A ~ B (2 * 19 / 43 = 88.4) and B ~ C (2 * 24 / 53 = 90.6), A !~ C (2 * 19 / 48 = 79.2): one group
    a, b, c = "aaaa bbbb cccc dddd", "aaaa bbbb cccc dddd eeee", "aaaa bbbb cccc dddd eeee ffff"
    assert similarity_scores([a], [c])[0, 0] < NEAR_DUPLICATE_THRESHOLD
    assert near_duplicate_groups([a, "zzzz yyyy", b, c]).tolist() == [0, 1, 0, 0]
    assert near_duplicate_groups([a, c]).tolist() == [0, 1]
    assert near_duplicate_groups([a, c], threshold=79).tolist() == [0, 0]


def test_blocks_give_the_same_groups_and_pairs(monkeypatch):
    rng = np.random.default_rng(0)
    words = np.array(["alpha", "beta", "gamma", "delta", "eps", "zeta", "eta", "theta"])
    texts = [" ".join(rng.choice(words, size=rng.integers(2, 6))) for _ in range(60)]
    whole = near_duplicate_groups(texts, threshold=80, method="exact")
    pairs = near_pairs(texts[:20], texts, threshold=80, method="exact")
    monkeypatch.setattr(rs, "CHUNK_CELLS", 7)  # one row per block
    assert near_duplicate_groups(texts, threshold=80, method="exact").tolist() == whole.tolist()
    for got, want in zip(near_pairs(texts[:20], texts, threshold=80, method="exact"), pairs, strict=True):
        assert got.tolist() == want.tolist()
    assert len(set(whole.tolist())) < len(texts)  # the case has groups to find
    # every pair of one group is linked by a chain of pairs at the threshold: check against pairs
    a, b, _ = near_pairs(similarity_texts(texts), similarity_texts(texts), threshold=80, method="exact")
    assert (whole[a] == whole[b]).all()


def _components(n: int, pairs) -> np.ndarray:
    """(n, n) bool: i and j are linked by a chain of pairs."""
    links: dict[int, set[int]] = {i: set() for i in range(n)}
    for q, c in pairs:
        links[q].add(c)
        links[c].add(q)
    label = [-1] * n
    for start in range(n):
        if label[start] < 0:
            label[start], todo = start, [start]
            while todo:
                for j in links[todo.pop()]:
                    if label[j] < 0:
                        label[j] = start
                        todo.append(j)
    lab = np.array(label)
    return lab[:, None] == lab[None, :]


def test_the_length_window_loses_no_pair(monkeypatch):
    """Blocks skip choices too short or too long to reach the threshold; the pairs equal a full cdist's."""
    monkeypatch.setattr(rs, "BLOCK_ROWS", 4)  # short blocks: each sees a narrow window of lengths
    rng = np.random.default_rng(1)
    words = np.array(["ab", "abc", "abcd", "b", "bcd", "cde", "de", "e"])
    texts = [" ".join(rng.choice(words, size=rng.integers(1, 12))) for _ in range(150)]
    sim = similarity_texts(texts)
    for threshold in (60, 85, 100):
        full = similarity_scores(sim, sim, score_cutoff=threshold, dtype=np.float32)
        want_q, want_c = np.nonzero(full)
        got_q, got_c, got_s = near_pairs(sim, sim, threshold=threshold, method="exact")
        assert (got_q.tolist(), got_c.tolist()) == (want_q.tolist(), want_c.tolist())
        assert got_s.tolist() == full[want_q, want_c].tolist()
        # the groups are the connected components of those pairs (a breadth-first search over them)
        groups = near_duplicate_groups(texts, threshold=threshold, method="exact")
        same = _components(len(sim), zip(want_q.tolist(), want_c.tolist(), strict=True))
        assert (same == (groups[:, None] == groups[None, :])).all()
        assert len(set(groups.tolist())) < len(texts)  # the case has groups to find


def test_thresholds_outside_0_100_are_refused():
    for bad in (0, 100.5, -3):
        with pytest.raises(ValueError, match=r"threshold must be in \(0, 100\]"):
            near_duplicate_groups(["a"], threshold=bad)


def test_group_split_hashes_the_smallest_id_of_each_group():
    # Pinned hashes (SplitSpec()): q1 valid, q2 train, q3 train
    assert hash_split(["q1", "q2", "q3"], SplitSpec()) == ["valid", "train", "train"]
    got = group_split(["q2", "q1", "q3"], ["Name a fruit.", "name fruits", "Old classics?"], SplitSpec())
    assert got == ["valid", "valid", "train"]
    assert group_split(["q2", "q3"], ["Name a fruit.", "Old classics?"], SplitSpec(), threshold=1) == [
        "train",
        "train",
    ]
    with pytest.raises(ValueError, match="2 request ids but 1 texts"):
        group_split(["a", "b"], ["x"], SplitSpec())


def _questions(path):
    return [json.loads(line)["question"]["normalized"] for line in path.read_text().splitlines()]


def test_the_threshold_on_protoqa_scraped_dev_questions():
    """The measurement NEAR_DUPLICATE_THRESHOLD's comment states, on the shipped file."""
    qs = _questions(protoqa_file("scraped"))
    sim = similarity_texts(qs)
    scores = similarity_scores(sim, sim, dtype=np.float32)
    upper = scores[np.triu_indices(len(qs), 1)]
    assert (len(qs), upper.size) == (980, 479_710)
    assert [(upper >= t).sum() for t in (NEAR_DUPLICATE_THRESHOLD, 80, 70)] == [6, 11, 42]
    top = [round(float(x), 3) for x in np.sort(upper)[::-1][:8]]
    assert top == [100.0, 100.0, 88.889, 88.372, 88.136, 84.906, 84.211, 83.019]
    groups = near_duplicate_groups(qs)
    assert (groups.max() + 1, np.bincount(groups).max()) == (974, 2)
    crowd = similarity_texts([*qs, *_questions(protoqa_file("crowdsourced"))])
    assert similarity_scores(crowd[980:], crowd[:980], dtype=np.float32).max() == pytest.approx(80.0)

    def together(a: str, b: str) -> bool:
        return groups[qs.index(a)] == groups[qs.index(b)]

    assert together(
        "name a job title someone might have in a big company.",
        "name a job title someone might have at a big company.",
    )
    assert together(
        "name a food that doesnt need to be refrigerated",
        "name a food that does not need to be refrigerated.",
    )
    assert not together("name something that comes in a can", "name something that comes in a carton")
    assert not together("past or present, name a famous joan.", "past or present, name a famous bob.")

    assert together(
        "name something you'd find at most amusement parks. (rides is not an answer, be more specific)",
        'name something you\'d find at most amusement parks. (more specific than "rides.")',
    )


def test_the_amusement_park_pair_is_compared_as_a_float_not_rounded_up():
    """84.906 >= 84.5: grouped; rounding it to 85 and then comparing 84.906 with a cutoff of 85 (the old
    code) left it out, while can / carton (84.211) stays out. Among ProtoQA's questions (with only the
    two, their shared 8-word start would count as an instruction and be dropped)."""
    qs = _questions(protoqa_file("scraped"))
    ia = next(
        i for i, q in enumerate(qs) if q.startswith("name something you'd find at most amusement parks. (r")
    )
    ib = next(
        i for i, q in enumerate(qs) if q.startswith("name something you'd find at most amusement parks. (m")
    )
    sim = similarity_texts(qs)
    sa, sb = sim[ia], sim[ib]
    score = similarity_scores([sa], [sb], dtype=np.float32)[0, 0]
    assert score == pytest.approx(84.906, abs=1e-3) and round(score) == 85
    assert similarity_scores([sa], [sb], score_cutoff=85)[0, 0] == 0  # the old comparison: missed
    assert score > NEAR_DUPLICATE_THRESHOLD
    for method in ("exact", "blocked"):
        groups = near_duplicate_groups(qs, method=method)
        assert groups[ia] == groups[ib]
        assert near_pairs([sa], [sb], method=method)[2].tolist() == [pytest.approx(score)]
    can = qs.index("name something that comes in a can")
    assert groups[can] != groups[qs.index("name something that comes in a carton")]
    ids = [f"q{i:03d}" for i in range(len(qs))]
    splits = group_split(ids, qs, SplitSpec(seed=3))
    assert splits[ia] == splits[ib]


def _mass(a: str, b: str) -> int:
    """Characters of the words two similarity texts share (min count, len + 1 each)."""
    ca, cb = Counter(a.split()), Counter(b.split())
    return sum(min(ca[w], cb[w]) * (len(w) + 1) for w in ca)


def _random_prompts(rng, n: int, vocab: int) -> list[str]:
    """Prompts of 3-14 words from a Zipf vocabulary, a quarter of them edited copies of earlier ones (a
    word dropped, added or misspelt, a plural, upper case): near duplicates to find."""
    letters = np.array(list("abcdefghiklmnoprstuvy"))
    words = sorted({"".join(rng.choice(letters, size=rng.integers(2, 9))) for _ in range(vocab)})
    p = 1 / np.arange(1, len(words) + 1) ** 1.1
    p /= p.sum()
    out: list[list[str]] = []
    for _ in range(n):
        if out and rng.random() < 0.25:
            w = list(out[int(rng.integers(0, len(out)))])
            i = int(rng.integers(0, len(w)))
            op = int(rng.integers(0, 5))
            if op == 0 and len(w) > 2:
                del w[i]
            elif op == 1:
                w.insert(i, str(rng.choice(words, p=p)))
            elif op == 2 and len(w[i]) > 3:
                w[i] = w[i][:1] + w[i][2] + w[i][1] + w[i][3:]
            elif op == 3:
                w[i] += "s"
            else:
                w = [x.upper() for x in w]
        else:
            w = [str(x) for x in rng.choice(words, size=rng.integers(3, 15), p=p)]
        out.append(w)
    return [" ".join(w) + "?" for w in out]


def _brute_force(uniq: list[str], threshold: float, *, share: float | None) -> np.ndarray:
    """Component labels from every pair scored (float), kept when its shared words carry ``share``."""
    scores = similarity_scores(uniq, uniq, dtype=np.float32)
    pairs = [
        (i, j)
        for i in range(len(uniq))
        for j in range(i + 1, len(uniq))
        if scores[i, j] >= threshold
        and (share is None or _mass(uniq[i], uniq[j]) >= share * (len(uniq[i]) + len(uniq[j])) - 1e-9)
    ]
    return _components(len(uniq), pairs)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_blocked_finds_every_pair_whose_shared_words_carry_the_share(seed):
    """The blocked method's groups are exactly the components of the pairs that score at the threshold
    and share words carrying SHARED_WORD_SHARE of their characters (a brute force over all pairs); on
    these prompts that is the exact method's groups too, and the pairs of near_pairs are the same."""
    rng = np.random.default_rng(seed)
    texts = _random_prompts(rng, 400, 300)
    uniq = sorted(set(similarity_texts(texts)))
    want = _brute_force(uniq, NEAR_DUPLICATE_THRESHOLD, share=rs.SHARED_WORD_SHARE)
    got = near_duplicate_groups(uniq, method="blocked")
    assert (got[:, None] == got[None, :]).tolist() == want.tolist()
    exact = near_duplicate_groups(uniq, method="exact")
    assert (got[:, None] == got[None, :]).tolist() == (exact[:, None] == exact[None, :]).tolist()
    assert len(set(got.tolist())) < len(uniq) - 20  # the case has groups to find
    q, c = uniq[:150], uniq[100:]
    for a, b in zip(near_pairs(q, c, method="blocked"), near_pairs(q, c, method="exact"), strict=True):
        assert a.tolist() == pytest.approx(b.tolist())


def test_blocked_leaves_out_only_pairs_whose_shared_words_are_too_few():
    """Tiny words (ab, abc, ...) make pairs that score high through unequal words: the blocked method
    misses exactly those whose shared words carry less than SHARED_WORD_SHARE."""
    rng = np.random.default_rng(1)
    words = np.array(["ab", "abc", "abcd", "b", "bcd", "cde", "de", "e"])
    texts = [" ".join(rng.choice(words, size=rng.integers(1, 12))) for _ in range(150)]
    uniq = sorted(set(similarity_texts(texts)))
    got = near_duplicate_groups(uniq, method="blocked")
    same = got[:, None] == got[None, :]
    assert same.tolist() == _brute_force(uniq, NEAR_DUPLICATE_THRESHOLD, share=rs.SHARED_WORD_SHARE).tolist()
    exact = _brute_force(uniq, NEAR_DUPLICATE_THRESHOLD, share=None)
    assert (same <= exact).all() and (same != exact).any()  # never joins what exact keeps apart


def test_blocked_equals_exact_on_protoqa_dev_questions():
    qs = _questions(protoqa_file("scraped")) + _questions(protoqa_file("crowdsourced"))
    exact = near_duplicate_groups(qs, method="exact")
    blocked = near_duplicate_groups(qs, method="blocked")
    assert blocked.tolist() == exact.tolist() == near_duplicate_groups(qs).tolist()  # auto: exact here
    assert exact.max() + 1 == 1026
    sim = similarity_texts(qs)
    for a, b in zip(
        near_pairs(sim[:300], sim, method="blocked"), near_pairs(sim[:300], sim, method="exact"), strict=True
    ):
        assert a.tolist() == b.tolist()


def test_groups_do_not_depend_on_the_order_of_the_texts():
    rng = np.random.default_rng(5)
    texts = _random_prompts(rng, 300, 200)
    ids = [f"r{i:03d}" for i in range(len(texts))]
    for method in ("exact", "blocked"):
        groups = near_duplicate_groups(texts, method=method)
        perm = rng.permutation(len(texts))
        again = near_duplicate_groups([texts[i] for i in perm], method=method)
        assert (groups[perm][:, None] == groups[perm][None, :]).tolist() == (
            again[:, None] == again[None, :]
        ).tolist()
        split = split_by_groups(ids, texts, SplitSpec(), method=method).splits
        shuffled = split_by_groups(
            [ids[i] for i in perm], [texts[i] for i in perm], SplitSpec(), method=method
        )
        assert [split[i] for i in perm] == shuffled.splits


def test_long_texts_are_joined_by_their_word_score(monkeypatch):
    """Pairs of texts over LONG_CHARS: joined when the words they share reach the threshold (a lower
    bound of the character score); shorter pairs are scored exactly."""
    monkeypatch.setattr(rs, "LONG_CHARS", 30)
    base = "alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima"
    near = " ".join(reversed(base.split())) + " zulu"  # one word added
    typos = "alpah bravo charlie delat echo foxtort golf hotle india juleit kilo lmia"  # many typos
    far = "mike november oscar papa quebec romeo sierra tango uniform victor whiskey"
    sim = similarity_texts([base, near, typos, far])
    assert min(len(t) for t in sim) > 30
    assert similarity_scores([sim[0]], [sim[2]], dtype=np.float32)[0, 0] >= NEAR_DUPLICATE_THRESHOLD
    assert 200 * (_mass(sim[0], sim[2]) - 1) / (len(sim[0]) + len(sim[2])) < NEAR_DUPLICATE_THRESHOLD
    assert near_duplicate_groups([base, near, typos, far], method="blocked").tolist() == [0, 0, 1, 2]
    assert near_duplicate_groups([base, near, typos, far], method="exact").tolist() == [0, 0, 0, 1]
    qi, ci, score = near_pairs(sim[:1], sim, method="blocked")
    assert (qi.tolist(), ci.tolist()) == ([0, 0], [0, 1])
    assert score[1] == pytest.approx(200 * (_mass(sim[0], sim[1]) - 1) / (len(sim[0]) + len(sim[1])))


def test_auto_takes_exact_on_small_inputs_and_blocked_on_large(monkeypatch):
    calls: list[str] = []
    monkeypatch.setattr(rs, "_exact_labels", lambda u, t: calls.append("exact") or np.arange(len(u)))
    monkeypatch.setattr(rs, "_blocked_labels", lambda u, t: calls.append("blocked") or np.arange(len(u)))
    texts = [f"question {i} about topic {i * 7}" for i in range(50)]
    near_duplicate_groups(texts)
    monkeypatch.setattr(rs, "EXACT_MAX_WORK", 10)
    near_duplicate_groups(texts)
    assert calls == ["exact", "blocked"]
    with pytest.raises(ValueError, match="method must be one of"):
        near_duplicate_groups(texts, method="fast")


def test_one_group_that_overfills_its_split_is_one_warning_line():
    """5,000 copies of one prompt and 200 others at 0.8 / 0.1 / 0.1: the group goes to one split whole,
    so at least 96% of the requests land there; the split says so on stderr and in its report."""
    rng = np.random.default_rng(0)
    others = [
        " ".join("".join(rng.choice(list("abcdefghijklmnop"), 7)) for _ in range(4)) for _ in range(200)
    ]
    texts = ["Name something people do on a rainy day."] * 5000 + others
    ids = [f"q{i:05d}" for i in range(len(texts))]
    err = io.StringIO()
    splits = group_split(ids, texts, SplitSpec(), file=err)
    shares = Counter(splits)
    assert max(shares.values()) >= 5000
    lines = err.getvalue().splitlines()
    assert len(lines) == 1 and lines[0].startswith(
        "warning: one near-duplicate group holds 5000 of 5200 requests"
    )
    result = split_by_groups(ids, texts, SplitSpec())
    assert result.splits == splits
    balance = result.balance
    assert (balance["largest_group"], balance["n_groups"], balance["oversized_groups"]) == (5000, 201, 1)
    assert balance["n_requests"] == 5200
    assert f"the {balance['largest_group_split']} split it went to" in balance["warning"]
    assert "(request q00000 among them)" in balance["warning"]
    assert json.loads(json.dumps(balance)) == balance
    quiet = io.StringIO()
    group_split(ids[4900:], texts[4900:], SplitSpec(), file=quiet)  # 100 of 300: below train's share
    # wherever the 100 copies go, valid or test (30 requests each) is overfilled, train (240) is not
    went = split_by_groups(ids[4900:], texts[4900:], SplitSpec()).balance["largest_group_split"]
    assert (quiet.getvalue() == "") == (went == "train")


def test_group_balance_by_hand():
    got = group_balance([0, 0, 0, 1, 2, 3], ["test"] * 3 + ["train"] * 3, (("train", 0.5), ("test", 0.5)))
    assert (got["largest_group"], got["largest_group_split"], got["warning"]) == (3, "test", None)  # 3 = 3
    got = group_balance([0, 0, 0, 0, 1, 2], ["test"] * 4 + ["train"] * 2, {"train": 0.5, "test": 0.5})
    assert got["warning"].startswith(
        "one near-duplicate group holds 4 of 6 requests (66.7%), more than the 50% share"
    )
    # one request alone never warns; a split without a fraction (given with the input) is not checked
    assert group_balance([0, 1], ["test", "train"], {"train": 0.9, "test": 0.1})["warning"] is None
    assert group_balance([0, 0, 1], ["given", "given", "train"], {"train": 1.0})["warning"] is None
    assert group_balance([], [], {"train": 1.0})["n_requests"] == 0
