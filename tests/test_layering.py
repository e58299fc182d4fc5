"""The top-level packages depend one way: catalog <- data_prep <- eval <- remark (no cycles)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
LAYERS = ["catalog", "data_prep", "eval", "remark"]


def imported_top_levels(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module.split(".")[0])
    return found


@pytest.mark.parametrize("package", LAYERS)
def test_package_imports_only_lower_layers(package):
    allowed = set(LAYERS[: LAYERS.index(package) + 1])
    forbidden = set(LAYERS) - allowed
    offenders = []
    for path in sorted((REPO / package).rglob("*.py")):
        bad = imported_top_levels(path) & forbidden
        if bad:
            offenders.append(f"{path.relative_to(REPO)} imports {sorted(bad)}")
    assert not offenders, "layering violated (catalog <- data_prep <- eval <- remark):\n" + "\n".join(
        offenders
    )


def test_layering_check_detects_a_violation(tmp_path):
    bad = tmp_path / "m.py"
    bad.write_text("import remark.algos\nfrom eval import metrics\n")
    assert imported_top_levels(bad) == {"remark", "eval"}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


#: Folders of scripts that import each other by bare module name (the folder is on ``sys.path``).
SCRIPT_FOLDERS = ["bench"]


def module_graph(packages: list[str], scripts: list[str] = ()) -> dict[str, set[str]]:
    """Module -> the repository modules it imports: at the top, inside functions and in
    ``TYPE_CHECKING`` blocks alike (a type-only import is still a dependency a reader must follow).

    ``from a.b import c`` points at ``a.b.c`` when that is a module, else at ``a.b``; relative imports
    are resolved against the importing module's package. A script of ``scripts`` (``bench/x.py``) is the
    module ``bench.x``, and ``import x`` inside that folder points at it.
    """
    paths = [p for pkg in [*packages, *scripts] for p in sorted((REPO / pkg).rglob("*.py"))]
    modules = {_module_name(p): p for p in paths}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        tree = ast.parse(path.read_text(), filename=str(path))
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        script_folder = name.split(".")[0] if name.split(".")[0] in scripts else None

        def local(mod: str, script_folder: str | None = script_folder) -> str:
            return f"{script_folder}.{mod}" if script_folder and f"{script_folder}.{mod}" in modules else mod

        targets: set[str] = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                targets.update(local(alias.name) for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = local(node.module or "")
                if node.level:
                    anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                    base = ".".join([*anchor, *([base] if base else [])])
                for alias in node.names:
                    sub = f"{base}.{alias.name}"
                    targets.add(sub if sub in modules else base)
        graph[name] = {t for t in targets if t in modules and t != name}
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle (as a list of modules, first repeated at the end), or None."""
    state: dict[str, int] = {}  # 1 = on the stack, 2 = done
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return [*stack[stack.index(nxt) :], nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (found := visit(node)):
            return found
    return None


def test_no_import_cycle_among_modules():
    cycle = find_cycle(module_graph(LAYERS, SCRIPT_FOLDERS))
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def test_cycle_check_detects_a_cycle():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_the_graph_sees_imports_in_functions_type_checking_blocks_and_scripts():
    graph = module_graph(LAYERS, SCRIPT_FOLDERS)
    assert "catalog.settings" in graph["catalog.ground_ids"]  # a top-level import
    assert "remark.planning.adaptive" in graph["remark.step.trainer"]  # inside a method
    assert "bench.timed_steps" in graph["bench.gpu_check"]  # a script importing a sibling by bare name
    assert "catalog.equivalence" in graph["catalog"]  # only inside catalog/__init__'s TYPE_CHECKING block
    tree = {"m": {"n"}}
    assert find_cycle({**tree, "n": {"m"}}) == ["m", "n", "m"]


#: The rooms of ``remark/``, lowest first: a module imports only from its own room and the rooms before it
#: (lazy and ``TYPE_CHECKING`` imports included). ``remark`` is the package's ``__init__``; the loose
#: modules ``recipes.py`` and ``diagnose.py`` are rooms of their own.
ROOMS = [
    "remark",
    "algos",
    "recipes",
    "planning",
    "scoring",
    "config",
    "step",
    "run",
    "models",
    "diagnose",
    "oracles",
    "demo",
    "cli",
]


def _room(module: str) -> str | None:
    parts = module.split(".")
    if parts[0] != "remark":
        return None
    return parts[1] if len(parts) > 1 else "remark"


def upward_imports(graph: dict[str, set[str]], rooms: list[str]) -> list[str]:
    """``a -> b`` for every import from a room into a later room of ``rooms`` (and of a room not listed)."""
    found = []
    for module, targets in sorted(graph.items()):
        here = _room(module)
        if here is None:
            continue
        for target in sorted(targets):
            there = _room(target)
            if there is None or there == here:
                continue
            if here not in rooms or there not in rooms or rooms.index(there) > rooms.index(here):
                found.append(f"{module} -> {target}")
    return found


def test_every_room_of_remark_is_in_the_order():
    rooms = {_room(m) for m in module_graph(["remark"])}
    assert rooms == set(ROOMS), (
        f"not in ROOMS: {sorted(rooms - set(ROOMS))}; gone: {sorted(set(ROOMS) - rooms)}"
    )


def test_no_import_runs_back_up_the_rooms_of_remark():
    upward = upward_imports(module_graph(LAYERS), ROOMS)
    assert not upward, "imports against the room order " + " < ".join(ROOMS) + ":\n" + "\n".join(upward)


def test_the_room_check_sees_a_lazy_import_back_up():
    graph = {
        "remark.config.validate": {"remark.run.build_tiny", "remark.algos.registry"},
        "remark.run.x": set(),
    }
    assert upward_imports(graph, ROOMS) == ["remark.config.validate -> remark.run.build_tiny"]
    assert upward_imports({"remark.step.trainer": {"remark.config"}}, ROOMS) == []
