"""Dataset statistics on a hand-computed table, and the prompt builder's contract."""

from __future__ import annotations

import polars as pl
import pytest

from data_prep.prompts import build_messages, instruction
from data_prep.schema import REQUESTS_SCHEMA
from data_prep.stats import dataset_stats, format_stats, split_fractions_of, split_group_balance


def requests_table() -> pl.DataFrame:
    return pl.DataFrame(
        {
            "request_id": ["r1", "r2", "r3"],
            "prompt": [[{"role": "user", "content": "x"}]] * 3,
            "seen": [["s"], [], []],
            "responders": [[["a", "b"], ["b"]], [["c"]], [["d"], ["e"], ["f"]]],
            "n_responders": [2, 1, 3],
            "union": [["b", "a"], ["c"], ["d", "e", "f"]],
            "counts": [[2, 1], [1], [1, 1, 1]],
            "ungrounded": [["x"], [], ["y", "z"]],
            "split": ["train", "test", "train"],
        },
        schema=REQUESTS_SCHEMA,
    )


def test_stats_match_hand_computed_values():
    s = dataset_stats(requests_table())
    assert s["requests"] == 3
    assert s["n_responders"] == {
        "min": 1, "median": 2.0, "mean": 2.0, "max": 3, "total": 6, "histogram": {"1": 1, "2": 1, "3": 1}
    }  # fmt: skip
    assert s["union_size"] == {"min": 1, "median": 2.0, "mean": 2.0, "max": 3, "total": 6}
    assert s["single_mention_item_share"] == pytest.approx(5 / 6, abs=1e-6)  # c_i = 1: 1 + 1 + 3 of 6
    assert s["single_mention_item_share_multi"] == pytest.approx(4 / 5, abs=1e-6)  # r1 and r3 only
    assert s["union_reward_equals_summed_hits_share"] == pytest.approx(2 / 3, abs=1e-6)  # r2, r3
    assert s["single_responder_request_share"] == pytest.approx(1 / 3, abs=1e-6)
    assert s["ungrounded_share"] == pytest.approx(3 / 9, abs=1e-6)
    assert s["seen_per_request"] == {"mean": pytest.approx(1 / 3, abs=1e-6)}
    assert s["items_per_responder"] == {"mean": pytest.approx(7 / 6, abs=1e-6), "max": 2}
    assert s["by_split"] == {
        "test": {"requests": 1, "n_responders.mean": 1.0, "union_size.mean": 1.0},
        "train": {"requests": 2, "n_responders.mean": 2.5, "union_size.mean": 2.5},
    }
    text = format_stats(s)
    assert "single-responder requests: 33.3%" in text and "(c_i = 1): 83.3%" in text


def test_single_responder_only_has_no_multi_share():
    one = requests_table().filter(pl.col("request_id") == "r2")
    s = dataset_stats(one)
    assert s["single_mention_item_share_multi"] is None and s["single_responder_request_share"] == 1.0
    assert "nan" not in format_stats(s)


def test_histogram_bins_large_counts():
    t = requests_table().with_columns(pl.Series("n_responders", [7, 100, 1500], dtype=pl.UInt32))
    assert dataset_stats(t)["n_responders"]["histogram"] == {"6-10": 1, "51-100": 1, ">1000": 1}


def test_messages_single_user_turn():
    msgs = build_messages(
        [{"role": "user", "content": "Sci-fi like Arrival?"}], k=20, domain="movie", with_year=True
    )
    assert msgs == [
        {
            "role": "user",
            "content": "Pretend you are a movie recommender system. Based on the conversation below, recommend "
            "exactly 20 movies that the user has not mentioned. Write one per line in the format Title (Year), "
            "with no numbering and no extra words.\n\nSci-fi like Arrival?",
        }
    ]


def test_messages_multi_turn_render_into_one_user_message_and_keep_system():
    prompt = [
        {"role": "system", "content": "Be brief."},
        {"role": "assistant", "content": "Hi! What do you like?"},
        {"role": "user", "content": "I loved Arrival (2016)"},
    ]
    msgs = build_messages(prompt, k=5, domain="book", with_year=False)
    assert msgs[0] == {"role": "system", "content": "Be brief."}
    assert len(msgs) == 2 and msgs[1]["role"] == "user"
    body = msgs[1]["content"]
    assert "exactly 5 books" in body and "format Title," in body and "(Year)" not in body
    assert body.endswith("\n\nAssistant: Hi! What do you like?\nUser: I loved Arrival (2016)")
    assert prompt[1] == {"role": "assistant", "content": "Hi! What do you like?"}  # input untouched


def test_messages_answer_domain_and_plain_string():
    msgs = build_messages("name a pet.", k=10, domain="answer", with_year=False)
    assert msgs[0]["content"].startswith("Answer the question below with exactly 10 different answers")
    assert msgs[0]["content"].endswith("\n\nname a pet.")


def test_instruction_included_passes_messages_unchanged():
    prompt = [{"role": "user", "content": "Pretend you are ... give 20 ...\n\n[Request] x"}]
    out = build_messages(prompt, k=20, domain="movie", with_year=True, instruction_included=True)
    assert out == prompt and out[0] is not prompt[0]


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"k": 0, "domain": "movie", "with_year": True}, "k must be a positive integer"),
        ({"k": 5, "domain": "podcast", "with_year": True}, "valid: \\['movie', 'book', 'music', 'answer'\\]"),
    ],
)
def test_instruction_rejects_bad_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        instruction(**kwargs)


def test_build_messages_rejects_malformed_messages():
    with pytest.raises(ValueError, match="message 0 needs a role"):
        build_messages([{"role": "robot", "content": "x"}], k=1, domain="movie", with_year=True)


def test_split_group_balance_reads_the_fractions_the_dataset_was_split_with():
    prep = {
        "split_fractions": {"train": 0.8, "valid": 0.1, "test": 0.1},
        "split_near_duplicate_threshold": 84.5,
    }
    assert split_fractions_of(prep) == ({"train": 0.8, "valid": 0.1, "test": 0.1}, 84.5)
    assert split_fractions_of({**prep, "inputs": [{"path": "a", "split": "train"}]}) is None  # given splits
    assert split_fractions_of({**prep, "split_near_duplicate_threshold": None}) is None  # not grouped
    assert split_fractions_of({"split_fractions": None, "split_by_time": "train=..2022-10"}) is None
    demo = {"demo": {"question_split": [0.6, 0.2, 0.2], "near_duplicate_threshold": 84.5}}
    assert split_fractions_of(demo) == ({"train": 0.6, "valid": 0.2, "test": 0.2}, 84.5)
    # r1..r3 all "x": one group of 3 in train, more than 0.5 x 3
    got = split_group_balance(
        requests_table().with_columns(split=pl.lit("train")),
        {**prep, "split_fractions": {"train": 0.5, "test": 0.5}},
    )
    assert (got["threshold"], got["largest_group"], got["oversized_groups"]) == (84.5, 3, 1)
    assert got["warning"].startswith(
        "one near-duplicate group holds 3 of 3 requests (100.0%) (request r1 among them)"
    )
    assert split_group_balance(requests_table(), {}) is None
