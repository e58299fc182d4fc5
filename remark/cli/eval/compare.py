"""``remark eval compare A B``: paired differences with CIs on the same requests, from eval run dirs,
``per_request.parquet`` files or predictions files (scored here); A and B must be scored alike.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from catalog.shared.errors import InputError
from catalog.shared.files import read_table
from remark.cli.eval.flags import LISTS, bootstrap_config, emit, filter_names, grounding_notes
from remark.cli.eval.score import score_file


def _per_request(path: Path, args: argparse.Namespace) -> tuple[Any, dict, str]:
    """(per-request table, settings, what was read) from an eval dir, a parquet file or a predictions file."""

    lists = args.lists or "greedy"
    if path.is_dir():
        from catalog.shared.outputs import output_kind
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
        settings = (result.get(part, {}) if part else result).get("settings", {})
        return read_table(table, format="parquet"), settings, f"{lists} lists ({table})"
    if path.suffix == ".parquet":
        return read_table(path, format="parquet"), {}, f"the lists scored in {path}"
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
    return scored.per_request, {**scored.settings, **result["settings"]}, f"the lists in {path}"


def _grounding_used(settings: dict) -> dict | None:
    """The grounding a result was scored with (results written before the contract: their ``match``)."""
    g = settings.get("grounding")
    if isinstance(g, dict) and isinstance(g.get("used"), dict):
        return g["used"]
    return {"match_mode": settings["match"]} if isinstance(settings.get("match"), str) else None


def _same(a: Any, b: Any) -> bool:
    """Equal, or (grounding dicts) equal on the fields both record."""
    if isinstance(a, dict) and isinstance(b, dict):
        return all(a[k] == b[k] for k in set(a) & set(b))
    return a == b


def run_compare(args: argparse.Namespace) -> int:
    from eval.bootstrap import compare
    from eval.report import compare_markdown
    from eval.views import split_key

    (a, sa, what_a), (b, sb, what_b) = _per_request(args.a, args), _per_request(args.b, args)
    checks = {
        "compact": (sa.get("compact"), sb.get("compact")),
        "grounding": (_grounding_used(sa), _grounding_used(sb)),
    }
    for key, (va, vb) in checks.items():
        if va is not None and vb is not None and not _same(va, vb):
            raise InputError(
                f"A and B were scored with different {key} ({va} vs {vb})",
                field=key,
                hint="score both the same way before comparing",
            )
    keys = [c for c in a.columns if c.startswith("eval/") and c in b.columns]
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
    try:
        diff = compare(a, b, keys, bootstrap_config(args))
    except ValueError as err:
        raise InputError(str(err), hint="both must be scored on the same split of the same dataset") from err
    lists = args.lists or "greedy"
    out: dict[str, Any] = {
        "n_requests": a.height,
        "a": str(args.a),
        "b": str(args.b),
        "lists": lists,
        "compared": {"a": what_a, "b": what_b},
        "difference": "A - B",
    }
    for key, cell in diff.items():
        name, view = split_key(key)
        out.setdefault(view, {})[name] = cell
    out["ci"] = bootstrap_config(args).as_dict()
    header = f"comparing {what_a}\n     with {what_b}\n\n"
    if args.json:
        print(f"comparing {what_a} with {what_b}", file=sys.stderr)
    emit(out, args, header + compare_markdown(out, name_a=args.a.name, name_b=args.b.name))
    return 0
