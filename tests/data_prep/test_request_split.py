"""data_prep.request_split: prompt keys, near-duplicate groups (hand-built and on ProtoQA's questions),
group splits."""

from __future__ import annotations

import json

import numpy as np
import polars as pl
import pytest
from rapidfuzz import fuzz

import data_prep.request_split as rs
from data_prep.request_split import (
    NEAR_DUPLICATE_THRESHOLD,
    SplitSpec,
    group_split,
    hash_split,
    near_duplicate_groups,
    near_pairs,
    normalize_prompt,
    prompt_texts,
    similarity_scores,
    similarity_texts,
)
from data_prep.shipped import protoqa_file


def test_normalize_prompt_folds_case_punctuation_articles_and_plurals():
    assert normalize_prompt("Name a fruit.") == normalize_prompt("name  fruits") == "name fruit"
    assert normalize_prompt("The BOXES, the berries & dishes!") == "box berry dish"
    # 3 letters or fewer, and -ss / -us / -is endings, stay
    assert normalize_prompt("Bus gas glass famous this") == "bus gas glass famous this"
    assert normalize_prompt("comes  in\ta can...") == "come in can"
    assert normalize_prompt("?!") == ""


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
    whole = near_duplicate_groups(texts, threshold=80)
    pairs = near_pairs(texts[:20], texts, threshold=80)
    monkeypatch.setattr(rs, "CHUNK_CELLS", 7)  # one row per block
    assert near_duplicate_groups(texts, threshold=80).tolist() == whole.tolist()
    for got, want in zip(near_pairs(texts[:20], texts, threshold=80), pairs, strict=True):
        assert got.tolist() == want.tolist()
    assert len(set(whole.tolist())) < len(texts)  # the case has groups to find
    # every pair of one group is linked by a chain of pairs at the threshold: check against pairs
    a, b, _ = near_pairs(similarity_texts(texts), similarity_texts(texts), threshold=80)
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
        full = similarity_scores(sim, sim, score_cutoff=threshold)
        want_q, want_c = np.nonzero(full)
        got_q, got_c, got_s = near_pairs(sim, sim, threshold=threshold)
        assert (got_q.tolist(), got_c.tolist()) == (want_q.tolist(), want_c.tolist())
        assert got_s.tolist() == full[want_q, want_c].tolist()
        # the groups are the connected components of those pairs (a breadth-first search over them)
        groups = near_duplicate_groups(texts, threshold=threshold)
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
    scores = similarity_scores(sim, sim).astype(int)
    upper = scores[np.triu_indices(len(qs), 1)]
    assert (len(qs), upper.size) == (980, 479_710)
    assert [(upper >= t).sum() for t in (85, 80, 70)] == [6, 11, 43]
    groups = near_duplicate_groups(qs)
    assert (groups.max() + 1, np.bincount(groups).max()) == (975, 2)

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
