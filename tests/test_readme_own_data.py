"""docs/usage.md's "Your own threads and your own model" block, run as written: a thread file in the page's
format, a catalog, ``remark prep`` -> ``stats`` -> ``sft`` -> ``train`` -> ``eval run`` on a tiny local model.

Only what keeps it CPU-small is added: smaller ``max_steps`` and batches for ``remark train``.
"""

from __future__ import annotations

import json
import re
import shlex
import shutil
from pathlib import Path

import polars as pl
import pytest

from catalog.io.outputs import output_kind
from remark.cli.main import main
from tests.conftest import REPO, TINY_TITLES

pytestmark = pytest.mark.slow
HEADING = "## Your own threads and your own model"
#: added to the README's `remark train` line: a 2-step run on 2 requests per step
SMALL = ["max_steps=2", "save_steps=2", "validation_steps=1", "validation_max_requests=4"]
SMALL += ["num_generations=4", "per_device_train_batch_size=8", "max_completion_length=32"]


def readme_section() -> tuple[list[dict], list[str]]:
    """(the JSON rows, the bash command lines) of the README section."""
    text = (REPO / "docs" / "usage.md").read_text()
    assert HEADING in text, "docs/usage.md lost its own-data section"
    body = text.split(HEADING, 1)[1].split("\n## ", 1)[0]
    (rows,) = re.findall(r"```json\n(.*?)```", body, flags=re.S)
    (commands,) = re.findall(r"```bash\n(.*?)```", body, flags=re.S)
    return [json.loads(x) for x in rows.splitlines() if x.strip()], [
        c for c in commands.splitlines() if c.strip()
    ]


def write_inputs(root: Path, readme_rows: list[dict]) -> dict[str, int]:
    """threads.jsonl (the README's rows, then more requests in the same format) and catalog.csv."""
    items = [re.match(r"(.*) \((\d{4})\)$", t).groups() for t in TINY_TITLES]
    pl.DataFrame({"title": [t for t, _ in items], "year": [int(y) for _, y in items]}).write_csv(
        root / "catalog.csv"
    )
    rows = list(readme_rows)
    splits = ["train"] * 8 + ["valid"] * 4 + ["test"] * 4
    for n, split in enumerate(splits):
        for r in range(2 + n % 2):
            for j in range(2):
                title = TINY_TITLES[(n + 3 * r + j) % len(TINY_TITLES)]
                rows.append(
                    {
                        "request_id": f"q{n}",
                        "prompt": f"Something like {TINY_TITLES[n % len(TINY_TITLES)]}?",
                        "responder_id": f"u{r}",
                        "title": title,
                        "split": split,
                    }
                )
    (root / "threads.jsonl").write_text("".join(json.dumps(x) + "\n" for x in rows))
    counts = {s: splits.count(s) for s in ("train", "valid", "test")}
    counts["train"] += len({x["request_id"] for x in readme_rows})
    return counts


def test_readme_own_threads_and_model_end_to_end(tiny_model_dir, tmp_path, monkeypatch, capsys):
    readme_rows, commands = readme_section()
    assert [c.split()[:2] for c in commands] == [
        ["remark", "prep"],
        ["remark", "stats"],
        ["remark", "sft"],
        ["remark", "train"],
        ["remark", "eval"],
    ]
    assert {"request_id", "prompt", "responder_id", "title"} <= set(readme_rows[0])
    counts = write_inputs(tmp_path, readme_rows)
    (tmp_path / "configs").mkdir()
    shutil.copy(REPO / "configs" / "tiny_cpu.yaml", tmp_path / "configs" / "tiny_cpu.yaml")
    monkeypatch.chdir(tmp_path)

    for line in commands:
        argv = [str(tiny_model_dir) if a == "PATH/TO/MODEL" else a for a in shlex.split(line)][1:]
        if argv[0] == "train":
            argv += SMALL
        code = main(argv)
        assert code == 0, f"{line}\n{capsys.readouterr().err}"
        printed = capsys.readouterr().out
        if argv[0] == "stats":
            assert "responders" in printed

    data = tmp_path / "data" / "mine"
    requests = pl.read_parquet(data / "requests.parquet")
    assert dict(requests.group_by("split").len().iter_rows()) == counts
    r1 = requests.filter(pl.col("request_id") == "r1").row(0, named=True)
    assert r1["n_responders"] == 2 and len(r1["union"]) == 2  # the README's two rows, both grounded

    sft = tmp_path / "runs" / "mine-sft"
    assert output_kind(sft) == "sft" and (sft / "model.safetensors").is_file()

    run = tmp_path / "runs" / "mine"
    summary = json.loads((run / "train_summary.json").read_text())
    assert summary["global_step"] == 2
    used = json.loads((run / "remark_config.json").read_text())
    assert (used["data_dir"], used["model_name_or_path"], used["build_tiny"]) == (
        "data/mine",
        "runs/mine-sft",
        None,
    )
    assert not (run / "assets").exists()  # the tiny config's own data and model were not built
    log = [json.loads(x) for x in (run / "eval_log.jsonl").read_text().splitlines()]
    assert [x["step"] for x in log] == [0, 1, 2]
    assert (run / "best" / "README.md").is_file()

    metrics = json.loads((run / "test" / "metrics.json").read_text())
    assert metrics["n_requests"] == counts["test"]
    recall = metrics["per_responder"]["recall@5"]
    assert 0.0 <= recall["ci_low"] <= recall["mean"] <= recall["ci_high"] <= 1.0
    lines = (run / "test" / "predictions.jsonl").read_text().splitlines()
    assert len(lines) == counts["test"]
