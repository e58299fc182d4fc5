"""``remark demo``: settings and inputs checked up front, ProtoQA split by question, the learning rate chosen
on validation, and a whole fast run."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math

import polars as pl
import pytest

from catalog.io.errors import InputError
from remark.cli.main import main
from remark.demo import METHODS, default_settings, find_protoqa, prepare_protoqa, rl_fields
from remark.demo.pipeline import check_out, numbers
from remark.demo.report import readme_table


def test_settings_errors_say_what_to_pass():
    assert default_settings().data == "protoqa" and default_settings().data_dir is None  # the shipped copy
    with pytest.raises(InputError, match="--data-dir"):
        default_settings("synthetic", data_dir="x")
    with pytest.raises(InputError, match="unknown data"):
        default_settings("reddit")
    with pytest.raises(InputError, match="--steps"):
        default_settings(steps=0)
    s = default_settings("synthetic", steps=3)
    assert s.steps == 3 and s.validation_every == 3
    assert default_settings("protoqa", data_dir="x").k == 10
    assert s.metric == "sampled/recall@5/per_responder" and s.greedy_metric == "eval/recall@5/per_responder"
    assert s.validation_logs() == {
        "sampled": ("sampled", "sampled/recall@5/per_responder"),
        "greedy": ("", "eval/recall@5/per_responder"),
    }
    assert default_settings("synthetic").rl_seeds == (0,) and default_settings().threads == 1
    assert default_settings().lr_grid == (1e-4, 3e-4, 1e-3) and default_settings(lr_grid=[3e-4]).lr_grid == (
        3e-4,
    )
    with pytest.raises(InputError, match="--lr-grid"):
        default_settings(lr_grid=[1e-4, 1e-4])
    assert default_settings().rl_seeds == (0, 1, 2) and default_settings().warmup_threads == 2
    assert default_settings(fast=True).warmup_threads == 1
    assert default_settings(rl_seeds=[4, 5], threads=2, jobs=3).rl_seeds == (4, 5)
    with pytest.raises(InputError, match="--seeds"):
        default_settings(rl_seeds=[1, 1])
    with pytest.raises(InputError, match="--threads"):
        default_settings(threads=0)
    greedy_only = dataclasses.replace(s, validation_samples=0)
    assert greedy_only.metric == greedy_only.greedy_metric and list(greedy_only.validation_logs()) == [
        "greedy"
    ]


def test_cli_data_dir_missing_or_without_protoqa_exits_2(tmp_path, capsys):
    assert (
        main(["demo", "--data", "synthetic", "--data-dir", str(tmp_path), "--out", str(tmp_path / "o")]) == 2
    )
    assert "--data-dir is read by --data protoqa only" in capsys.readouterr().err
    missing = tmp_path / "nowhere" / "dev.scraped.jsonl"
    assert main(["demo", "--data", "protoqa", "--data-dir", str(missing), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert "ProtoQA path not found" in err and "nowhere" in err
    assert not (tmp_path / "o" / "report.md").exists()


def test_find_protoqa_accepts_file_folder_or_prepared_dir(tmp_path):
    (tmp_path / "dev").mkdir()
    f = tmp_path / "dev" / "dev.scraped.jsonl"
    f.write_text("{}\n")
    assert find_protoqa(f) == f
    assert find_protoqa(tmp_path) == f
    assert find_protoqa(tmp_path / "dev") == f
    prepared = tmp_path / "prepared"
    prepared.mkdir()
    (prepared / "requests.parquet").write_bytes(b"")
    assert find_protoqa(prepared) == prepared
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(InputError, match=r"no dev\.scraped\.jsonl"):
        find_protoqa(empty)


WORDS = ["apple", "river", "garden", "winter", "doctor", "kitchen", "market", "school", "guitar", "planet"]


def _scraped_line(
    i: int, counts: list[int], question: str | None = None, prefix: str = "dev-scraped_q"
) -> str:
    qid = f"{prefix}{i}"
    question = question or f"Name something about {WORDS[i % 10]} and {WORDS[(i // 10) % 10]} {i}"
    clusters = {f"{qid}.{j}": {"count": c, "answers": [f"answer {i}-{j}"]} for j, c in enumerate(counts)}
    raw = {f"answer {i}-{j}": c for j, c in enumerate(counts)}
    obj = {
        "metadata": {"id": qid},
        "question": {"original": question, "normalized": question.lower()},
        "answers": {"raw": raw, "clusters": clusters},
    }
    return json.dumps(obj)


def test_protoqa_splits_by_question_with_near_duplicates_on_one_side(tmp_path):
    counts = [10, 6, 4, 2, 2]
    lines = [_scraped_line(i, counts) for i in range(40)]
    lines.append(_scraped_line(40, [30, 3]))  # 2 clusters: not eligible
    # two rewordings of one question (punctuation, plural): one side only
    lines.append(_scraped_line(41, counts, "Name a fruit people eat at breakfast."))
    lines.append(_scraped_line(42, counts, "name fruits people eat at breakfast"))
    path = tmp_path / "dev.scraped.jsonl"
    path.write_text("\n".join(lines) + "\n")
    crowd = tmp_path / "dev.crowdsourced.jsonl"
    crowd.write_text("\n".join(_scraped_line(i, [5, 4, 3], prefix="r1q") for i in range(3)) + "\n")
    s = default_settings("protoqa", data_dir=path, fast=True)
    s = dataclasses.replace(s, n_questions=None)
    ds, data_dir = prepare_protoqa(path, tmp_path / "data", s, crowd_dir=tmp_path / "crowd")
    assert data_dir == tmp_path / "data"
    req = ds.requests
    assert req["request_id"].n_unique() == req.height == 42  # one row per question; q40 has < 5 clusters
    assert not req["request_id"].str.contains("#").any()
    assert set(req["split"]) == {"train", "valid", "test"}
    by_split = {k: set(v) for k, v in req.group_by("split").agg("request_id").iter_rows()}
    assert len(by_split["train"]) > len(by_split["valid"]) > 0
    twins = dict(zip(req["request_id"], req["split"]))
    assert twins["dev-scraped_q41"] == twins["dev-scraped_q42"]
    from data_prep.request_split import prompt_texts

    texts = dict(zip(req["request_id"], prompt_texts(req)))
    assert not {texts[r] for r in by_split["test"]} & {texts[r] for r in by_split["train"]}
    # the grounding catalog holds the training answers only, popularity their training mentions: an item
    # named only by held-out questions stays a target but is no catalog item
    pop = dict(zip(ds.catalog.df["item_id"], ds.catalog.df["popularity"]))
    train = req.filter(pl.col("split") == "train")
    train_items = set(train["union"].explode().to_list())
    test_only = set(req.filter(pl.col("split") == "test")["union"].explode().to_list()) - train_items
    assert test_only and not test_only & set(pop) and set(pop) == train_items
    mentions = train.select(pl.col("union"), pl.col("counts")).explode("union", "counts")
    expected = mentions.group_by("union").agg(pl.col("counts").sum())
    assert all(pop[i] == n for i, n in expected.iter_rows())
    # ProtoQA's answer clusters travel with the dataset, for the per-question matching of eval
    assert ds.answers is not None and set(ds.answers["request_id"]) == set(req["request_id"])
    # the crowdsourced questions: a test-only dataset beside it
    from data_prep.dataset import load_dataset

    c = load_dataset(tmp_path / "crowd")
    assert set(c.requests["split"]) == {"test"} and c.requests.height == 3
    again, _ = prepare_protoqa(path, tmp_path / "data2", s)
    assert again.requests.sort("request_id")["split"].equals(req.sort("request_id")["split"])
    # a prepared dataset is used as it is, and must have the three splits
    prepared, prepared_dir = prepare_protoqa(tmp_path / "data", tmp_path / "unused", s)
    assert prepared.requests.height == req.height and prepared_dir == tmp_path / "data"
    only_train = tmp_path / "only_train"
    from data_prep.dataset import write_dataset

    write_dataset(
        only_train,
        _pooled(ds.requests.filter(pl.col("split") == "train"), ds),
        ds.catalog,
        ds.meta,
        grounding=ds.grounding,
    )
    with pytest.raises(InputError, match="split"):
        prepare_protoqa(only_train, tmp_path / "unused", s)


def test_settings_file_overrides_defaults_and_flags_override_it(tmp_path):
    f = tmp_path / "s.yaml"
    f.write_text("rl_seeds: [0, 1, 2]\nsteps: 40\nlr_grid: [1.0e-4]\n")
    s = default_settings(settings_file=f, steps=30)
    assert (s.rl_seeds, s.steps, s.lr_grid) == ((0, 1, 2), 30, (1e-4,))
    for text, match in (
        ("stepz: 4\n", "'stepz' is not a setting"),
        ("data: synthetic\n", "use its flag"),
        ("steps: 1.5\n", "steps must be an integer"),
        ("rl_seeds: 3\n", "rl_seeds must be a non-empty list"),
        ("- 1\n", "a mapping"),
    ):
        f.write_text(text)
        with pytest.raises(InputError, match=match):
            default_settings(settings_file=f)


def test_pretrained_base_model_settings_refuse_what_has_no_effect(tmp_path, capsys):
    from remark.demo.pipeline import check_base_model

    f = tmp_path / "s.yaml"
    f.write_text("base_model: some/model\nuse_vllm: true\nvllm_kv_cache_gib: 2.0\n")
    s = default_settings(settings_file=f)
    assert (s.base_model, s.use_vllm, s.vllm_kv_cache_gib) == ("some/model", True, 2.0)
    a = rl_fields("remark", s, tmp_path, tmp_path, tmp_path / "r")
    assert (a["use_vllm"], a["vllm_mode"], a["vllm_kv_cache_gib"]) == (True, "colocate", 2.0)
    assert "use_vllm" not in rl_fields("remark", default_settings(), tmp_path, tmp_path, tmp_path / "r")
    for text, match in (
        ("base_model: m\nhidden_size: 64\n", "hidden_size shapes the tiny model"),
        ("vllm_kv_cache_gib: 2.0\n", "only with use_vllm"),
        ("use_vllm: true\nvllm_kv_cache_gib: 0\n", "must be > 0"),
        ("base_model: 3\n", "base_model must be a folder"),
    ):
        f.write_text(text)
        with pytest.raises(InputError, match=match):
            default_settings(settings_file=f)
    # a base_model folder without weights: one line naming it and how to fetch one, nothing run
    (tmp_path / "empty").mkdir()
    with pytest.raises(InputError, match=r"config\.json and"):
        check_base_model(tmp_path / "empty")
    f.write_text(f"base_model: {tmp_path / 'empty'}\n")
    assert main(["demo", "--fast", "--settings", str(f), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "make fetch-model" in err and not (tmp_path / "out").exists()


def test_learning_rate_chosen_by_validation_alone():
    from remark.demo.runs import choose_rates

    best = {"remark": {1e-4: 0.10, 2e-4: 0.15, 4e-4: 0.12}, "rank_grpo": {1e-4: 0.09, 2e-4: 0.09, 4e-4: None}}
    assert choose_rates(best) == {"remark": 2e-4, "rank_grpo": 1e-4}  # ties: the smaller rate
    assert choose_rates({"remark": {1e-4: None, 2e-4: 0.0}}) == {"remark": 2e-4}


def test_training_reward_windows_never_overlap(tmp_path):
    from remark.demo.runs import train_diagnostics

    def log(rewards, zero=None):
        folder = tmp_path / str(len(rewards))
        folder.mkdir()
        rows = [
            {"reward": r, **({"train/zero_signal_frac": zero} if zero is not None else {})} for r in rewards
        ]
        (folder / "progress.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
        return train_diagnostics(folder)

    ten = log([0.0] * 5 + [1.0] * 5, zero=0.25)  # 10 steps: steps 1-5 against 6-10, not 1-10 twice
    assert (ten["reward_window"], ten["reward_first"], ten["reward_last"]) == (5, 0.0, 1.0)
    assert ten["reward_mean"] == 0.5 and ten["zero_signal_frac_mean"] == 0.25
    long = log([float(i) for i in range(30)])  # 30 steps: the first and the last 10
    assert (long["reward_window"], long["reward_first"], long["reward_last"]) == (10, 4.5, 24.5)
    assert long["zero_signal_frac_mean"] is None
    one = log([2.0])
    assert (one["reward_window"], one["reward_first"], one["reward_last"]) == (1, 2.0, 2.0)


def test_scale_line_names_the_lists_below_the_best_reference():
    from remark.demo.report import _scale_lines, _seed_range

    def summary(sampled, greedy):
        cell = lambda x: {"per_responder": {"requests": {"mean": x}}}  # noqa: E731
        return {
            "settings": {"k": 10},
            "test": {"sft": {"greedy": {"n_requests": 123}}},
            "across_seeds": {"models": {"sft": {"sampled": cell(sampled), "greedy": cell(greedy)}}},
            "reference_levels": {
                "chance": {"per_responder": 0.003},
                "popularity": {"per_responder": 0.031},
                "retrieval": {"per_responder": 0.045},
            },
            # chosen on validation: retrieval is not the strongest there, whatever it scores on test
            "strongest_baseline": {
                "name": "popularity",
                "validation": {"popularity": 0.042, "retrieval": 0.040},
            },
        }

    line = _scale_lines(summary(0.027, 0.050))[0]
    assert "strongest simple baseline, chosen on the validation questions" in line
    assert "is popularity (validation 0.042, test 0.031)" in line
    assert (
        "The SFT start's sampled lists (0.027) are below the strongest simple baseline (popularity 0.031)"
        in line
    )
    assert "Its greedy lists (0.050) are above it." in line
    line = _scale_lines(summary(0.027, 0.030))[0]
    assert "below the strongest simple baseline" in line and "greedy lists (" not in line
    assert "are below" not in _scale_lines(summary(0.040, 0.050))[0]
    assert _seed_range({"min": 0.0381, "max": 0.0672}) == "0.038 to 0.067"
    assert _seed_range({"min": None, "max": None}) == "n/a"  # a view the data cannot score


def _pooled(requests: pl.DataFrame, ds) -> pl.DataFrame:
    ids = ds.responder_rows.group_by("request_id", maintain_order=True).agg(pl.col("responder_id"))
    return requests.join(ids.rename({"responder_id": "responder_ids"}), on="request_id")


def test_out_folder_not_written_by_a_demo_is_refused(tmp_path, capsys):
    (tmp_path / "mine.txt").write_text("keep me")
    with pytest.raises(InputError, match="refusing to replace"):
        check_out(tmp_path)
    assert main(["demo", "--fast", "--out", str(tmp_path)]) == 2
    assert "--force" in capsys.readouterr().err
    assert (tmp_path / "mine.txt").read_text() == "keep me" and sorted(
        p.name for p in tmp_path.iterdir()
    ) == ["mine.txt"]
    # a folder that looks like a demo output (its settings file) but carries no ownership marker was not
    # written by remark demo: refused unless --force, and left as it was
    unmarked = tmp_path / "unmarked"
    unmarked.mkdir()
    (unmarked / "demo_settings.json").write_text("{}")
    capsys.readouterr()
    assert main(["demo", "--fast", "--out", str(unmarked)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "remark did not write" in err and "--force" in err
    assert "Traceback" not in err and sorted(p.name for p in unmarked.iterdir()) == ["demo_settings.json"]
    check_out(unmarked, force=True)


def test_methods_differ_only_in_reward_and_sampling(tmp_path):
    from remark.config import RemarkGRPOConfig

    s = default_settings()
    a, b = (rl_fields(m, s, tmp_path, tmp_path, tmp_path / m, learning_rate=2e-4) for m in METHODS)
    differ = {k for k in a if a[k] != b[k]}
    assert differ == {"reward_scheme", "sampling", "output_dir"}
    assert (a["reward_scheme"], a["sampling"]) == ("union", "uniform")
    assert (b["reward_scheme"], b["sampling"]) == ("responder", "per_responder")
    assert a["per_device_train_batch_size"] == s.prompts_per_step * s.num_generations
    # the library's sampled validation picks the best checkpoint: the config accepts the demo's metric
    assert (a["validation_metric"], a["validation_num_samples"]) == (f"sampled/recall@{s.k}/per_responder", 4)
    cfg = RemarkGRPOConfig(**a)
    assert cfg.validation_metric == s.metric and cfg.validation_num_samples == s.validation_samples


def _finite_cell(cell):
    return all(isinstance(cell[k], float) and math.isfinite(cell[k]) for k in ("mean", "ci_low", "ci_high"))


@pytest.mark.slow
def test_fast_demo_end_to_end(tmp_path, capsys):
    out = tmp_path / "demo"
    assert main(["demo", "--fast", "--out", str(out), "--seed", "1"]) == 0
    printed = capsys.readouterr().out
    assert f"report: {out / 'report.md'}" in printed
    assert "'loss'" not in printed and "'loss'" in (out / "sft_model" / "sft_log.txt").read_text()

    report = (out / "report.md").read_text()
    lead = report.split("## What ran")[0]
    assert lead.index("## Result on the test split") < lead.index(
        "## Steps to reach"
    )  # the test result first
    n_test = json.loads((out / "summary.json").read_text())["test"]["sft"]["greedy"]["n_requests"]
    assert "verdict" in lead and "over seeds" in lead and f"over the {n_test} test requests" in lead
    for text in ("ReMaRk", "Rank-GRPO", "SFT start", "Paired differences", "curves.png", "Per seed"):
        assert text in report
    assert report.count(" parameters") == 1  # one parameter count
    for png in ("curves.png", "curves_greedy.png"):
        assert (out / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    summary = json.loads((out / "summary.json").read_text())
    assert summary["settings"]["data"] == "protoqa" and summary["settings"]["data_dir"] is None  # shipped
    # every saved stage's weights by hash, so that two hosts' runs compare stage by stage
    weights = summary["weights"]
    assert "sft_model/model.safetensors" in weights and any(
        p.endswith("best/model.safetensors") for p in weights
    )
    for rel, digest in weights.items():
        assert hashlib.sha256((out / rel).read_bytes()).hexdigest() == digest
    head = summary["headline"]
    assert head["data"] == "protoqa" and report.split("\n")[2] == head["sentence"]
    cell = summary["across_seeds"]["paired"]["remark_vs_rank_grpo"]["sampled"]["per_responder"]["requests"]
    assert head["difference"] == pytest.approx(100 * cell["mean"])
    assert head["ci"] == pytest.approx([100 * cell["ci_low"], 100 * cell["ci_high"]])
    # two seeds: every figure, and no verdict (the rule needs three)
    assert head["resolved"] is None and head["verdict"] == "no verdict (fewer than three RL seeds)"
    verdict = summary["across_seeds"]["paired"]["remark_vs_rank_grpo"]["sampled"]["per_responder"]["verdict"]
    assert verdict["n_seeds"] == 2 and verdict["resolved"] is None
    assert head["figures"]["sign_flip_p"] == verdict["sign_flip"]["p"]
    assert sum(head["figures"]["ahead_level_behind"]) == verdict["n_requests"]
    assert head["seeds"]["n"] == 2 and len(head["seeds"]["ci"]) == 2
    assert "over 2 RL seeds" in head["sentence"] and head["sentence"].replace("**", "") in printed
    assert "| verdict | no verdict (< 3 seeds) |" in report
    assert (
        "List collapse on the held-out scraped questions" in report
        and "| lists of SFT start, greedy |" in report
    )
    assert summary["strongest_baseline"]["name"] in summary["reference_levels"]
    assert "retrieval" in summary["reference_levels"]
    seeds = summary["settings"]["rl_seeds"]
    assert seeds == [0, 1]
    k, steps = summary["settings"]["k"], list(range(summary["settings"]["steps"] + 1))
    names = ["sft", *(f"{m}-seed{x}" for x in seeds for m in METHODS)]
    assert sorted(summary["test"]) == sorted(names)
    for name in names:
        for lists in ("greedy", "sampled"):
            for view in ("per_responder", "union"):
                assert _finite_cell(summary["test"][name][lists][view][f"recall@{k}"]), (name, lists, view)
    across = summary["across_seeds"]
    for pair in ("remark_vs_rank_grpo", "remark_vs_sft", "rank_grpo_vs_sft"):
        for lists in ("greedy", "sampled"):
            d = across["paired"][pair][lists]["per_responder"]
            per_seed = [
                summary["paired"][pair][f"seed{x}"][lists]["per_responder"][f"recall@{k}"]["mean"]
                for x in seeds
            ]
            assert d["seeds"]["values"] == per_seed
            assert d["requests"]["mean"] == pytest.approx(sum(per_seed) / len(per_seed))
    for lists in ("sampled", "greedy"):
        v = summary["validation"][lists]
        final = v["pooled"]["remark_reaches_rank_grpo"]["final"]
        assert (final["target"], final["baseline_step"]) == ("final", steps[-1])
        assert v["pooled"]["remark_reaches_rank_grpo"]["best"]["target"] == "best"
        assert sorted(v["per_seed"]) == [f"seed{x}" for x in seeds]
        for m in METHODS:
            assert v["curves"][m]["pooled"]["x"] == steps
    # the learning rate: a grid on seed 0, chosen by validation alone, written before the test evaluation
    tuning = json.loads((out / "tuning.json").read_text())
    assert tuning == summary["protocol"]["tuning"]
    chosen = {m: tuning[m]["chosen"] for m in METHODS}
    for m in METHODS:
        values = {r["learning_rate"]: r["best_value"] for r in tuning[m]["validation"]}
        assert sorted(values) == sorted(summary["settings"]["lr_grid"])
        assert chosen[m] == max(sorted(values), key=lambda lr: values[lr])  # first of ties: the smaller
        for lr in values:
            best = json.loads((out / m / f"lr{lr:.0e}" / "seed0" / "best" / "best.json").read_text())
            assert best["value"] == values[lr]
    assert (out / "tuning.json").stat().st_mtime <= min(
        (out / "logs" / name / "job.json").stat().st_mtime for name in ("eval-test-0", "eval-crowd-0")
    )
    for m in METHODS:
        for x in seeds:
            run = summary["runs"][m][f"seed{x}"]
            assert run["learning_rate"] == chosen[m]
            assert run["best_step"] in steps and run["train"]["steps"] == steps[-1]
            best = json.loads(
                (out / m / f"lr{chosen[m]:.0e}" / f"seed{x}" / "best" / "best.json").read_text()
            )
            assert best["metric"] == summary["metric"] == f"sampled/recall@{k}/per_responder"
            assert best["value"] == run["best_value"]
    # held-out questions: no test question is a training question, and the headline says so
    assert summary["split_overlap"]["exact_prompt"] == summary["split_overlap"]["near_duplicate_prompt"] == 0
    assert (
        summary["protocol"]["test_requests_in_train"] == 0 and head["protocol"]["test_requests_in_train"] == 0
    )
    assert head["protocol"]["learning_rate"]["remark"]["chosen"] == chosen["remark"]
    assert "## Protocol" in report and "tuning.json" in report
    # the crowdsourced questions: a second test set, none of them trained on
    crowd = summary["test_sets"]["crowd"]
    assert crowd["split_overlap"]["near_duplicate_prompt"] == 0 and crowd["n_requests"] > 0
    assert sorted(crowd["models"]) == sorted(names)
    # reference levels on the test requests: chance is K / (catalog - seen) per row, the lists score <= 1
    levels = summary["reference_levels"]
    assert sorted(levels) == ["chance", "nearest_request", "popularity", "retrieval"]  # no genres, no twins
    assert 0 < levels["chance"]["per_responder"] <= 1 and 0 <= levels["popularity"]["union"] <= 1
    assert f"For scale, test per-responder recall@{k} on the same {n_test} requests" in report
    assert readme_table(summary) in report
    # every stage process ran with the set thread counts and the pinned instruction set, and the summary says so
    threads = summary["threads"]
    assert threads["per_process"] == 1 and threads["env"]["POLARS_MAX_THREADS"] == "1"
    grid = [f"{m}-lr{lr:.0e}-seed0" for lr in summary["settings"]["lr_grid"] for m in METHODS]
    more = [f"{m}-lr{chosen[m]:.0e}-seed{x}" for x in seeds[1:] for m in METHODS]
    evals = ["eval-test-0", "eval-test-1", "eval-crowd-0", "eval-crowd-1"]
    assert threads["stages"] == sorted(["warmup", *evals, *grid, *more])
    for name in threads["stages"]:
        rec = json.loads((out / "logs" / name / "threads.json").read_text())
        assert (rec["torch_intra_op"], rec["polars"], rec["env"]["PYTHONHASHSEED"]) == (1, 1, "0")
        assert rec["cpu_capability"] == "AVX2" and rec["env"]["ATEN_CPU_CAPABILITY"] == "avx2"
        assert rec["mkl_branch"] in ("COMPATIBLE", None) and rec["env"]["MKL_CBWR"] == "COMPATIBLE"
    assert summary["machine"]["stage_cpu_capability"] == ["AVX2"] and summary["machine"]["has_avx2"]
    assert summary["machine"]["stage_mkl_branch"] in (["COMPATIBLE"], [])  # [] where torch has no MKL
    assert not [p for p in out.rglob("*") if p.suffix in (".bin", ".pt", ".pth", ".pkl")]  # no pickle
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temporary folder left

    # the README's commands on the demo's outputs print the report's numbers (its CI settings: --resamples)
    capsys.readouterr()
    cmp = ["eval", "compare", str(out / "eval" / "remark-seed0"), str(out / "eval" / "rank_grpo-seed0")]
    assert main([*cmp, "--lists", "sampled", "--resamples", "199", "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert (
        printed["per_responder"][f"recall@{k}"]
        == (summary["paired"]["remark_vs_rank_grpo"]["seed0"]["sampled"]["per_responder"][f"recall@{k}"])
    )
    # several runs per side: the report's across-seed cells (its CI seed: the demo's --seed)
    by_seed = [
        "eval",
        "compare",
        *(str(out / "eval" / f"remark-seed{x}") for x in seeds),
        "--vs",
        *(str(out / "eval" / f"rank_grpo-seed{x}") for x in seeds),
    ]
    ci_seed = str(summary["settings"]["seed"])
    assert main([*by_seed, "--lists", "sampled", "--resamples", "199", "--seed", ci_seed, "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)["per_responder"][f"recall@{k}"]
    cell = summary["across_seeds"]["paired"]["remark_vs_rank_grpo"]["sampled"]["per_responder"]
    assert printed["seeds"] == cell["seeds"]
    assert printed["requests"] == pytest.approx(cell["requests"], rel=1e-9, abs=1e-12)
    steps_cmd = [
        "eval",
        "steps",
        "--run",
        str(out / "remark" / f"lr{chosen['remark']:.0e}" / "seed0"),
        "--baseline",
        str(out / "rank_grpo" / f"lr{chosen['rank_grpo']:.0e}" / "seed0"),
    ]
    assert main([*steps_cmd, "--metric", summary["metric"], "--resamples", "199", "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    reach = summary["validation"]["sampled"]["per_seed"]["seed0"]["remark_reaches_rank_grpo"]["final"]
    for field in ("baseline_value", "step", "fraction", "ci_low", "ci_high"):
        assert printed[field] == reach[field], field

    # one process at a time instead of two: the same numbers, bit for bit, in a folder replaced whole
    assert main(["demo", "--fast", "--out", str(out), "--seed", "1", "--sequential"]) == 0
    again = json.loads((out / "summary.json").read_text())
    assert again["settings"]["jobs"] == 1
    first = numbers(summary)
    first["settings"] = {**first["settings"], "jobs": 1}
    # the test evaluations are split over --jobs processes: one process, one eval stage
    stages = [x for x in first["threads"]["stages"] if x not in ("eval-test-1", "eval-crowd-1")]
    first["threads"] = {**first["threads"], "processes_at_once": 1, "stages": stages}
    assert numbers(again) == first
    for log in ("eval_log.jsonl", "sampled/eval_log.jsonl"):
        lines = (out / "remark" / f"lr{chosen['remark']:.0e}" / "seed0" / log).read_text().splitlines()
        assert [json.loads(x)["step"] for x in lines] == steps
