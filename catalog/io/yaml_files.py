"""YAML read safely: ``yaml.safe_load`` with the expansion of aliases bounded, for every YAML remark reads.

``safe_load`` builds no objects, but an alias (``*name``) stands for the whole node it names, and nodes
can name each other: ``a: &a [x, x, x, x, x, x, x, x, x]`` then ``b: &b [*a, *a, ...]`` nine levels deep is
a few hundred bytes whose value has 9**9 leaves. PyYAML shares the nodes, so the load itself is quick,
but anything that walks the value (the config's type checks, ``json.dumps``, a copy) walks every leaf:
the config check of such a file hung for over a minute and took 1.1 GB. :func:`load_yaml` counts, while
composing, the nodes each alias stands for (each anchored node's size is computed once), and refuses the
document once aliases would expand past :data:`MAX_ALIAS_NODES` nodes, or once it nests deeper than
:data:`MAX_DEPTH`; a refusal is an ``InputError`` naming the file and the line of the alias.
"""

from __future__ import annotations

from os import PathLike
from typing import Any

import yaml

from catalog.io.errors import InputError

__all__ = ["MAX_ALIAS_NODES", "MAX_DEPTH", "compose_yaml", "load_yaml"]

#: the most nodes all aliases of one document may stand for together (a config file uses a handful)
MAX_ALIAS_NODES = 10_000
#: the deepest nesting of collections (a config is a flat mapping; Python's recursion ends near 1000)
MAX_DEPTH = 100


def _size(node: yaml.Node, memo: dict[int, int]) -> int:
    """Nodes in the tree ``node`` stands for, aliases expanded (each node's count computed once)."""
    key = id(node)
    if key in memo:
        return memo[key]
    memo[key] = 1  # a node that contains itself counts once (PyYAML refuses such recursion anyway)
    if isinstance(node, yaml.SequenceNode):
        total = 1 + sum(_size(child, memo) for child in node.value)
    elif isinstance(node, yaml.MappingNode):
        total = 1 + sum(_size(k, memo) + _size(v, memo) for k, v in node.value)
    else:
        total = 1
    memo[key] = total
    return total


class _BoundedLoader(yaml.SafeLoader):
    """``SafeLoader`` that refuses documents whose aliases expand past :data:`MAX_ALIAS_NODES` nodes or that
    nest past :data:`MAX_DEPTH` (see the module docstring)."""

    def __init__(self, stream: Any) -> None:
        super().__init__(stream)
        self._expanded = 0
        self._sizes: dict[int, int] = {}
        self._depth = 0
        self.refusal: tuple[str, Any] | None = None

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            node = self.anchors.get(event.anchor)
            if node is not None:
                self._expanded += _size(node, self._sizes)
                if self._expanded > MAX_ALIAS_NODES:
                    self.refusal = (
                        f"its aliases (*{event.anchor} and others) expand to more than {MAX_ALIAS_NODES} nodes",
                        event.start_mark,
                    )
                    raise _Refused
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                self.refusal = (f"it nests deeper than {MAX_DEPTH} levels", self.peek_event().start_mark)
                raise _Refused
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1


class _Refused(Exception):
    """Raised inside the loader; turned into an ``InputError`` by :func:`_run`."""


def _run(text: str, path: str | PathLike[str] | None, what: str, method: str) -> Any:
    loader = _BoundedLoader(text)
    try:
        return getattr(loader, method)()
    except _Refused:
        message, mark = loader.refusal or ("refused", None)
        row = None if mark is None else mark.line + 1
        raise InputError(
            f"{what} refused: {message}",
            path=path,
            row=row,
            hint="write the values out instead of through YAML aliases",
        ) from None
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        problem = getattr(err, "problem", None) or " ".join(str(err).split())
        where = f" at column {mark.column + 1}" if mark is not None else ""
        row = None if mark is None else mark.line + 1
        raise InputError(f"not valid YAML: {problem}{where}", path=path, row=row) from err
    finally:
        loader.dispose()


def load_yaml(text: str, *, path: str | PathLike[str] | None = None, what: str = "YAML") -> Any:
    """``yaml.safe_load(text)`` with aliases and nesting bounded; errors are ``InputError`` naming ``path``
    and the line (a syntax error, or a refused document: see the module docstring)."""
    return _run(text, path, what, "get_single_data")


def compose_yaml(text: str, *, path: str | PathLike[str] | None = None, what: str = "YAML") -> Any:
    """``yaml.compose(text)`` (the node tree, with each node's line) under the same bounds."""
    return _run(text, path, what, "get_single_node")
