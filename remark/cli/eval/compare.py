"""``remark eval compare A B``: paired differences with CIs on the same requests, from eval run dirs,
``per_request.parquet`` files or predictions files (scored here); A and B must be scored alike.

``remark eval compare A1 A2 A3 --vs B1 B2 B3``: several runs (seeds) per side, run i of A paired with run i
of B (or every A with one B, a shared baseline): each pair's difference with its bootstrap over requests,
the spread of the pairs' differences over seeds (mean, SD, range, t-interval) and the bootstrap over
requests of the seed-averaged difference (``eval.seeds.seed_differences``). Every run must be scored
alike and on the same requests.

Beside the differences, each run's list collapse figures (``eval.collapse``, recorded as ``collapse`` in
its ``metrics.json``; none for a bare ``per_request.parquet``) are shown side by side, with a ``warning:``
line per run whose lists collapse (on stderr with ``--json``).

Beside the interval over requests, both print and write ``eval.verdicts``' figures (percentile interval,
sign-flip p, requests ahead / level / behind, macro mean, top-5 share) under ``verdicts`` (view, metric);
with several runs per side, each metric's verdict sentence (docs/metrics.md, "Verdicts").
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from catalog.io.errors import InputError
from catalog.io.files import read_table
from remark.cli.eval.flags import LISTS, bootstrap_config, emit, filter_names, grounding_notes
from remark.cli.eval.score import score_file


def _per_request(path: Path, args: argparse.Namespace) -> tuple[Any, dict, str, dict | None]:
    """(per-request table, settings, what was read, its lists' collapse report or None) from an eval dir,
    a parquet file (no report) or a predictions file."""

    lists = args.lists or "greedy"
    if path.is_dir():
        from catalog.io.outputs import output_kind
        from eval.run import RUN_KIND, SCORE_KIND

        name, part = LISTS[lists]
        table = path / name
        if not table.is_file():
            hint = (
                "evaluate with `remark eval run --num-samples N` to get sampled lists, or pass --lists greedy"
                if lists == "sampled"
                else "pass an `remark eval run` or `remark eval score --out` output dir"
            )
            raise InputError(f"no {name} here ({lists} lists)", path=path, hint=hint)
        if output_kind(path, strict=True) not in (RUN_KIND, SCORE_KIND):
            raise InputError(
                f"not a folder written by `remark eval run` or `eval score --out` (no output marker), so its "
                f"{name} and metrics.json may come from different runs",
                path=path,
                hint=f"re-run the evaluation into a new folder, or pass the {name} file itself",
            )
        from eval.run import read_metrics

        result = read_metrics(path) if (path / "metrics.json").is_file() else {}
        side = result.get(part, {}) if part else result
        what = f"{lists} lists ({table})"
        return read_table(table, format="parquet"), side.get("settings", {}), what, side.get("collapse")
    if path.suffix == ".parquet":
        return read_table(path, format="parquet"), {}, f"the lists scored in {path}", None
    if args.lists == "sampled":
        raise InputError(
            "a predictions file holds one list per request, not sampled lists",
            path=path,
            field="--lists",
            hint="drop --lists sampled, or pass an eval run dir",
        )
    if args.data is None:
        raise InputError("a predictions file needs --data", path=path, field="--data")
    result, scored = score_file(args, path, args.data)
    grounding_notes(result)
    settings = {**scored.settings, **result["settings"]}
    return scored.per_request, settings, f"the lists in {path}", result.get("collapse")


def _grounding_used(settings: dict) -> dict | None:
    """The grounding a result was scored with (``settings.grounding.used``), None where it records none."""
    g = settings.get("grounding")
    return g["used"] if isinstance(g, dict) and isinstance(g.get("used"), dict) else None


def _sides(args: argparse.Namespace) -> tuple[list[Path], list[Path]]:
    """The runs of A and of B, paired by position (one run on a side is paired with every run of the other)."""
    if args.vs is None:
        if len(args.runs) != 2:
            raise InputError(
                f"{len(args.runs)} runs given without --vs",
                field="A B",
                hint="compare A B, or several runs per side: A1 A2 A3 --vs B1 B2 B3",
            )
        return [args.runs[0]], [args.runs[1]]
    a, b = list(args.runs), list(args.vs)
    if len(a) != len(b) and 1 not in (len(a), len(b)):
        raise InputError(
            f"{len(a)} runs of A and {len(b)} of B: run i of A is paired with run i of B",
            field="--vs",
            hint="give as many runs on each side, or one on a side (a shared baseline, paired with every run)",
        )
    for name, side in (("A", a), ("B", b)):
        seen: dict[Path, Path] = {}
        for path in side:
            if path.resolve() in seen:
                raise InputError(
                    f"listed twice among the runs of {name}",
                    path=path,
                    hint="each run is one seed: list it once",
                )
            seen[path.resolve()] = path
    n = max(len(a), len(b))
    return a * n if len(a) == 1 else a, b * n if len(b) == 1 else b


def _dataset_sha(settings: dict) -> str | None:
    d = settings.get("dataset")
    return d.get("sha256") if isinstance(d, dict) else None


def _check_alike(runs: list[tuple[str, dict]]) -> None:
    """Every run scored on the first one's dataset (the sha256 of its files) and split, with its compaction
    and grounding (where both record them)."""
    checks = (
        ("dataset", _dataset_sha),
        ("split", lambda s: s.get("split")),
        ("compact", lambda s: s.get("compact")),
        ("grounding", _grounding_used),
    )
    for key, get in checks:
        recorded = [(label, get(settings)) for label, settings in runs if get(settings) is not None]
        for label, value in recorded[1:]:
            first, v0 = recorded[0]
            if v0 != value:
                shown = (v0[:12], value[:12]) if key == "dataset" else (v0, value)
                raise InputError(
                    f"{first} and {label} were scored with different {key} ({shown[0]} vs {shown[1]})"
                    + (
                        " (the dataset files' sha256 differ: another dataset, or one prepared again)"
                        if key == "dataset"
                        else ""
                    ),
                    field=key,
                    hint="score both on the same split of the same dataset, the same way, before comparing",
                )


def _same_requests(tables: list[tuple[str, Any, str]]) -> None:
    """Every table holds the first one's request ids (a seed average needs the same requests in every run)."""
    first, t0, _ = tables[0]
    ids = set(t0["request_id"].to_list())
    for label, table, what in tables[1:]:
        other = set(table["request_id"].to_list())
        if other != ids:
            raise InputError(
                f"{label} was scored on different requests than {first}: {len(other - ids)} only in {label}, "
                f"{len(ids - other)} only in {first} ({what})",
                hint="score every run on the same split of the same dataset",
            )


def _metric_keys(tables: list[Any], args: argparse.Namespace) -> list[str]:
    """The ``eval/`` columns every table holds, kept by ``--metrics``, ``--k`` and ``--filters``."""
    from eval.views import split_key

    keys = [c for c in tables[0].columns if c.startswith("eval/") and all(c in t.columns for t in tables[1:])]
    filters = filter_names(args.filters)
    keys = [
        k
        for k in keys
        if split_key(k)[0].split("@")[0] in args.metrics
        and int(k.split("@")[1].split("/")[0]) in args.k
        and (k.count("/") == 2 or k.rsplit("/", 1)[1] in filters)
    ]
    if not keys:
        raise InputError("A and B share no metric column", hint="score both with the same --k and --metrics")
    return keys


def _by_view(flat: dict[str, Any], out: dict[str, Any]) -> dict[str, Any]:
    """``{"eval/recall@5/union": cell}`` into ``out["union"]["recall@5"]``."""
    from eval.views import split_key

    for key, cell in flat.items():
        name, view = split_key(key)
        out.setdefault(view, {})[name] = cell
    return out


def _verdicts(
    frames_a: list[Any],
    frames_b: list[Any],
    keys: list[str],
    config: Any,
    names: tuple[str, str],
    requests: dict[str, Any],
    seed_diffs: dict[str, list[float]],
) -> dict[str, Any]:
    """``eval.verdicts.table_verdicts`` by view and metric, for ``out["verdicts"]``; ``requests`` and
    ``seed_diffs``: the intervals over requests and the pairs' differences already printed, per key."""
    from eval.verdicts import table_verdicts

    try:
        verdicts = table_verdicts(frames_a, frames_b, keys, config, names, requests, seed_diffs)
        return _by_view(verdicts, {})
    except ValueError as err:
        raise InputError(str(err), hint="score every run on the same split of the same dataset") from err


def run_compare(args: argparse.Namespace) -> int:
    side_a, side_b = _sides(args)
    if len(side_a) > 1:
        return _compare_seeds(args, side_a, side_b)
    from eval.bootstrap import compare
    from eval.report import compare_markdown

    path_a, path_b = side_a[0], side_b[0]
    (a, sa, what_a, ca), (b, sb, what_b, cb) = _per_request(path_a, args), _per_request(path_b, args)
    _check_alike([("A", sa), ("B", sb)])
    keys = _metric_keys([a, b], args)
    try:
        diff = compare(a, b, keys, bootstrap_config(args))
    except ValueError as err:
        raise InputError(str(err), hint="both must be scored on the same split of the same dataset") from err
    out: dict[str, Any] = {
        "n_requests": a.height,
        "a": str(path_a),
        "b": str(path_b),
        "lists": args.lists or "greedy",
        "compared": {"a": what_a, "b": what_b},
        "difference": "A - B",
    }
    _by_view(diff, out)
    out["ci"] = bootstrap_config(args).as_dict()
    names = (path_a.name, path_b.name)
    means = {k: [cell["mean"]] for k, cell in diff.items()}
    out["verdicts"] = _verdicts([a], [b], keys, bootstrap_config(args), names, diff, means)
    out["collapse"] = {"a": ca, "b": cb}
    header = f"comparing {what_a}\n     with {what_b}\n\n"
    if args.json:
        print(f"comparing {what_a} with {what_b}", file=sys.stderr)
    md = compare_markdown(out, name_a=path_a.name, name_b=path_b.name)
    emit(
        out,
        args,
        header + md + _collapse_markdown({f"A ({path_a.name})": ca, f"B ({path_b.name})": cb}, args),
    )
    return 0


def _collapse_markdown(reports: dict[str, dict | None], args: argparse.Namespace) -> str:
    """Each run's collapse figures side by side (``eval.collapse.compare_lines``), and with ``--json`` each
    run's collapse warning on stderr (the markdown carries them otherwise)."""
    from eval.collapse import compare_lines, warn

    if args.json:
        for label, report in reports.items():
            warn(report, label=label)
    return "\n" + "\n".join(compare_lines(reports)) + "\n"


def _compare_seeds(args: argparse.Namespace, side_a: list[Path], side_b: list[Path]) -> int:
    """Several runs per side: per-pair differences, their spread over seeds, the request bootstrap of the
    seed-averaged difference (``eval.seeds.seed_differences``)."""
    from eval.report import seeds_compare_markdown
    from eval.seeds import seed_differences

    read = {path: _per_request(path, args) for path in dict.fromkeys([*side_a, *side_b])}
    labelled: list[tuple[str, Path]] = []  # each distinct run once, A's then B's
    pairs: list[list[str]] = [[], []]
    for name, side, pair in (("A", side_a, pairs[0]), ("B", side_b, pairs[1])):
        distinct = list(dict.fromkeys(side))
        names = [name] if len(distinct) == 1 else [f"{name}{i + 1}" for i in range(len(distinct))]
        labelled += list(zip(names, distinct, strict=True))
        pair += [names[distinct.index(path)] for path in side]
    runs = [(label, read[path][0], read[path][2]) for label, path in labelled]
    _check_alike([(label, read[path][1]) for label, path in labelled])
    _same_requests(runs)
    keys = _metric_keys([table for _, table, _ in runs], args)
    config = bootstrap_config(args)
    try:
        diff = seed_differences([read[p][0] for p in side_a], [read[p][0] for p in side_b], keys, config)
    except ValueError as err:
        raise InputError(str(err), hint="score every run on the same split of the same dataset") from err
    n = len(side_a)
    out: dict[str, Any] = {
        "n_requests": runs[0][1].height,
        "n_seeds": n,
        "a": [str(p) for p in dict.fromkeys(side_a)],
        "b": [str(p) for p in dict.fromkeys(side_b)],
        "lists": args.lists or "greedy",
        "compared": {label: what for label, _, what in runs},
        "difference": "A - B",
        "pairs": [f"{a} - {b}" for a, b in zip(*pairs, strict=True)],
    }
    _by_view(diff, out)
    out["ci"] = config.as_dict()
    out["seed_interval"] = {"method": "student_t", "confidence_level": config.confidence_level, "df": n - 1}
    frames_a, frames_b = [read[p][0] for p in side_a], [read[p][0] for p in side_b]
    requests = {k: cell["requests"] for k, cell in diff.items()}
    means = {k: cell["seeds"]["values"] for k, cell in diff.items()}
    out["verdicts"] = _verdicts(frames_a, frames_b, keys, config, ("A", "B"), requests, means)
    collapse = {label: read[path][3] for label, path in labelled}
    out["collapse"] = collapse
    header = "".join(f"{label}: {what}\n" for label, _, what in runs) + "\n"
    if args.json:
        print(header, end="", file=sys.stderr)
    emit(out, args, header + seeds_compare_markdown(out) + _collapse_markdown(collapse, args))
    return 0
