"""Typed name -> function registry for the pure pieces of rank-level RL (rewards, scalings, baselines, ...).

Modelled on verl's ``core_algos`` (``@register_adv_est("grpo")``), made generic over *kinds*. Each kind has
one call signature, written as a ``Protocol`` below, and the signature of every function is checked when it
is registered (its positional arity and keyword-only names), so a scheme that would fail at the first
training step fails at import instead. Every entry carries a one-line ``help`` (what it computes, whose it
is), from which config help texts and command-line choices are built. A kind may also declare facts its
entries must state (``meta``): a reward scheme says whether it returns one reward vector per list or one
per responder (``output``) and whether it reads the responder drawn for the group (``draws``), a scaling
says which of TRL's ``scale_rewards`` values it equals (``trl``), a segmentation says which lines are
reward slots (``reward_slots``: ``lines``, remark's parsed lines, or ``rank_grpo``, Rank-GRPO's published
parser and hit rule, ``catalog.published``), which reward schemes those slots define (``schemes``) and
whether it leaves whitespace tokens without a rank (``filler``). Code that needs such a fact reads it from the registry
(:func:`spec`), never from a scheme's name or a tensor's shape.

>>> from remark.algos.registry import register, get
>>> @register("scale", "unit_demo", help="1 everywhere (a demo)")
... def _unit(rewards_BGK, *, eps, mask_B=None):
...     return 1.0
>>> get("scale", "unit_demo") is _unit
True
>>> _ = _REGISTRY["scale"].pop("unit_demo")

A new kind is declared with :func:`define_kind`; :func:`get` on an unknown kind or name raises a
``ValueError`` that lists what is valid.

Two views of one registry:

- the live one (:func:`spec`, :func:`get`, :func:`names`, :func:`kinds`, :func:`describe`): the functions
  themselves. Its first use imports the modules of :data:`REGISTRANTS` (torch and numpy with them), whose
  ``@register`` decorators fill it; this module imports neither, nor does the ``remark.algos`` package
  (its names are imported on first use), so importing the registry is cheap;
- the declared one (:func:`declared`): the names, helps and facts written in those modules'
  ``@register("kind", "name", ..., help="...")`` decorators, read from their source with ``ast``, with no
  import. :func:`offered` adds what this process registered since (a scheme registered at run time); a
  command-line help lists that, so ``remark diagnose --help`` loads no torch. The decorators' arguments
  are literals, and a test checks that the declared entries are the live ones, kind by kind.
"""

from __future__ import annotations

import ast
import functools
import importlib
import importlib.util
import inspect
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol, TypeVar

if TYPE_CHECKING:  # annotations only: importing the registry loads no torch
    import torch

F = TypeVar("F", bound=Callable)


# -- one Protocol per kind: the call every registered function of the kind must accept -----------------
class RewardFn(Protocol):
    """``fn(enc: EncodedRows) -> rewards``: (R, K) when ``output="list"``, (R, N, K) when ``"responder"``."""

    def __call__(self, enc: Any) -> torch.Tensor: ...


class ModifierFn(Protocol):
    """``fn(rewards_...K) -> rewards_...K`` on the last (rank) axis, any leading shape."""

    def __call__(self, rewards_K: torch.Tensor) -> torch.Tensor: ...


class BaselineFn(Protocol):
    """``fn(rewards_BGK) -> baseline`` broadcastable to (B, G, K)."""

    def __call__(self, rewards_BGK: torch.Tensor) -> torch.Tensor: ...


class ScaleFn(Protocol):
    """``fn(rewards_BGK, *, eps, mask_B=None) -> denominator`` broadcastable to (B, G, K)."""

    def __call__(
        self, rewards_BGK: torch.Tensor, *, eps: float, mask_B: torch.Tensor | None = None
    ) -> Any: ...


class RatioFn(Protocol):
    """``fn(logps_RT, old_logps_RT, rank_RT, mask_RT) -> logps'_RT`` with exp(logp' - old) the ratio."""

    def __call__(
        self, logps_RT: torch.Tensor, old_logps_RT: torch.Tensor, rank_RT: torch.Tensor, mask_RT: torch.Tensor
    ) -> torch.Tensor: ...


class ObjectiveFn(Protocol):
    """``fn(logps, old, adv, segment, mask, *, clip_low, clip_high) -> logps'`` (all (R, T))."""

    def __call__(
        self,
        logps_RT: torch.Tensor,
        old_logps_RT: torch.Tensor,
        adv_RT: torch.Tensor,
        segment_RT: torch.Tensor,
        mask_RT: torch.Tensor,
        *,
        clip_low: float,
        clip_high: float,
    ) -> torch.Tensor: ...


class AggregationFn(Protocol):
    """``fn(tokens_R, *, group_size) -> weight_R``: per-row loss weights from the rows' loss tokens."""

    def __call__(self, tokens_R: torch.Tensor, *, group_size: int) -> torch.Tensor: ...


class TruncationFn(Protocol):
    """``fn(rewards_...K, *, last_rank_R, cut_R) -> rewards_...K`` for lists cut at the length cap."""

    def __call__(
        self, rewards: torch.Tensor, *, last_rank_R: torch.Tensor, cut_R: torch.Tensor
    ) -> torch.Tensor: ...


class SegmentationFn(Protocol):
    """``fn(lines, offsets, *, k) -> rank_RT``: the rank of every completion token (``remark.algos.tokens``).

    Its facts: ``reward_slots`` says how ``remark.scoring.scorer.RankScorer`` finds the reward slots that
    go with these token ranks: ``lines`` (every line of remark's parser, grounded with the run's
    ``GroundingSettings``) or ``rank_grpo`` (the lines Rank-GRPO's parser keeps, matched by its verbatim
    test and +-year rule, ``catalog.published``); ``schemes`` names the reward schemes defined on those
    slots (``"all"``, or a tuple of names: :func:`scheme_problem`); ``filler`` says whether a token can be
    left with no rank and only whitespace (``FILLER``, the tokens ``filler_penalty`` acts on)."""

    def __call__(self, lines: Sequence[Sequence[Any]], offsets: Any, *, k: int) -> torch.Tensor: ...


@dataclass(frozen=True)
class Kind:
    """A kind of registered function: its call signature and the facts (``meta``) its entries state.

    ``meta`` maps a key to its allowed values (None: any value); keys in ``required`` must be given.
    """

    name: str
    protocol: type
    meta: Mapping[str, tuple | None] = field(default_factory=dict)
    required: frozenset[str] = frozenset()


@dataclass(frozen=True)
class Entry:
    """One registered function with the facts it declared and its one-line help."""

    fn: Callable
    meta: Mapping[str, Any]
    help: str


class Description(NamedTuple):
    """What a help text says about one entry: its name, one-line help and declared facts."""

    name: str
    help: str
    meta: Mapping[str, Any]


#: The modules whose ``@register`` decorators fill the live registry (imported by its first use) and
#: whose source :func:`declared` reads. A module that registers entries is listed here.
REGISTRANTS: tuple[str, ...] = (
    "remark.algos.advantages",
    "remark.algos.family",
    "remark.algos.ratios",
    "remark.algos.rewards",
    "remark.algos.tokens",
)


_KINDS: dict[str, Kind] = {}
_REGISTRY: dict[str, dict[str, Entry]] = {}


def define_kind(
    name: str, protocol: type, *, meta: Mapping[str, tuple | None] | None = None, required: Sequence[str] = ()
) -> Kind:
    """Declare a kind: the ``Protocol`` its functions follow and the ``meta`` keys they may (or must) state."""
    if name in _KINDS:
        raise ValueError(f"kind {name!r} is already defined")
    meta = dict(meta or {})
    if set(required) - set(meta):
        raise ValueError(
            f"required meta {sorted(set(required) - set(meta))} of kind {name!r} are not declared"
        )
    kind = Kind(name, protocol, meta, frozenset(required))
    _KINDS[name] = kind
    _REGISTRY.setdefault(name, {})
    return kind


define_kind(
    "reward",
    RewardFn,
    meta={"output": ("list", "responder"), "draws": (True, False)},
    required=["output", "draws"],
)


def lists_alone(meta: Mapping[str, Any]) -> bool:
    """Whether a reward scheme with these declared facts rewards each list from the list and its request
    alone: one reward vector per list (``output="list"``) and no responder draw (``draws=False``). Its mean
    over a request's G lists is then a property of the policy on that request (a pass rate)."""
    return meta.get("output") == "list" and meta.get("draws") is False


define_kind("modifier", ModifierFn)
define_kind("baseline", BaselineFn)
define_kind("scale", ScaleFn, meta={"trl": ("group", "batch", "none")})
define_kind("ratio", RatioFn)
define_kind("objective", ObjectiveFn)
define_kind("aggregation", AggregationFn)
define_kind("truncation", TruncationFn)
#: A segmentation's ``reward_slots`` fact: which lines are reward slots, and how they are matched.
REWARD_SLOTS: dict[str, str] = {
    "lines": "remark's parsed lines, grounded with the run's grounding settings",
    "rank_grpo": "Rank-GRPO's published parser and hit rule, which define one responder's hits only",
}
define_kind(
    "segmentation",
    SegmentationFn,
    meta={"reward_slots": tuple(REWARD_SLOTS), "schemes": None, "filler": (True, False)},
    required=["reward_slots", "schemes", "filler"],
)


def scheme_problem(scheme: str, segmentation: str) -> tuple[str, str] | None:
    """(why, what to do) when reward scheme ``scheme`` is not defined on the reward slots of
    ``segmentation`` (its ``schemes`` fact: ``"all"`` or the names of the schemes it defines), else None.

    The config's validation and ``remark.scoring.scorer.RankScorer`` both ask this, so the rule has one home.
    """
    entry = spec("segmentation", segmentation)
    allowed = entry.meta["schemes"]
    if allowed == "all" or scheme in allowed:
        return None
    everywhere = [d.name for d in describe("segmentation") if d.meta["schemes"] == "all"]
    return (
        f"reward_scheme {scheme!r} is not defined on segmentation {segmentation!r} (its reward slots are "
        f"{REWARD_SLOTS[entry.meta['reward_slots']]})",
        f"set reward_scheme: {' or '.join(allowed)}"
        + (
            f", or segmentation: {' or '.join(everywhere)} (where every scheme is defined)"
            if everywhere
            else ""
        ),
    )


def _signature_error(kind: Kind, fn: Callable) -> str | None:
    """Why ``fn`` cannot be called as ``kind.protocol`` says (None when it can)."""
    want = list(inspect.signature(kind.protocol.__call__).parameters.values())[1:]  # drop self
    try:
        got = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return None  # builtins without a signature: trust them
    positional = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    n_want = sum(p.kind in positional for p in want)
    got_pos = [p for p in got if p.kind in positional]
    var_pos = any(p.kind is inspect.Parameter.VAR_POSITIONAL for p in got)
    var_kw = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in got)
    required_pos = [p for p in got_pos if p.default is inspect.Parameter.empty]
    if len(required_pos) > n_want:
        return f"it needs {len(required_pos)} positional arguments, the kind passes {n_want}"
    if len(got_pos) < n_want and not var_pos:
        return f"it takes {len(got_pos)} positional arguments, the kind passes {n_want}"
    accepted = {p.name for p in got if p.kind is not inspect.Parameter.POSITIONAL_ONLY}
    for p in want:
        if p.kind is inspect.Parameter.KEYWORD_ONLY and p.name not in accepted and not var_kw:
            return f"it does not accept the keyword {p.name!r}"
    passed = {p.name for p in want if p.kind is inspect.Parameter.KEYWORD_ONLY}
    for p in got:
        if (
            p.kind is inspect.Parameter.KEYWORD_ONLY
            and p.default is inspect.Parameter.empty
            and p.name not in passed
        ):
            return f"it requires the keyword {p.name!r}, which the kind never passes"
    return None


def register(kind: str, name: str, *, help: str, **meta: Any) -> Callable[[F], F]:
    """Decorator registering ``fn`` under ``(kind, name)`` with its one-line ``help`` and the facts ``meta``
    (see :class:`Kind`).

    ``help`` says what the entry computes and whose it is, in one line (help texts list it after the
    name). Raises ``ValueError`` for an undefined kind, a taken name, an empty or multi-line help, a
    signature that does not fit the kind's ``Protocol``, or missing / unknown / invalid ``meta``.
    """
    if not kind or not name:
        raise ValueError(
            f"register(kind, name) needs two non-empty strings, got kind={kind!r}, name={name!r}"
        )
    if kind not in _KINDS:
        raise ValueError(
            f"unknown kind {kind!r}; define it first (define_kind) or use one of: {', '.join(sorted(_KINDS))}"
        )
    if not isinstance(help, str) or not help.strip() or help != help.strip() or len(help.splitlines()) > 1:
        raise ValueError(
            f"{kind} {name!r}: help must be one non-empty line with no surrounding spaces (what it computes, "
            f"whose it is), got {help!r}"
        )
    spec_ = _KINDS[kind]
    unknown = set(meta) - set(spec_.meta)
    missing = spec_.required - set(meta)
    if unknown or missing:
        raise ValueError(
            f"{kind} {name!r}: "
            + (f"unknown meta {sorted(unknown)}; " if unknown else "")
            + (f"missing meta {sorted(missing)}; " if missing else "")
            + f"{kind} entries declare {sorted(spec_.meta) or 'nothing'}"
        )
    for key, value in meta.items():
        allowed = spec_.meta[key]
        if allowed is not None and value not in allowed:
            raise ValueError(f"{kind} {name!r}: {key}={value!r} is not one of {allowed}")

    def deco(fn: F) -> F:
        table = _REGISTRY[kind]
        if name in table and table[name].fn is not fn:
            taken = table[name].fn
            raise ValueError(
                f"{kind} {name!r} is already registered (by {taken.__module__}.{taken.__qualname__}); pick another name"
            )
        why = _signature_error(spec_, fn)
        if why is not None:
            raise ValueError(
                f"{kind} {name!r}: {getattr(fn, '__qualname__', fn)}{inspect.signature(fn)} does not fit the "
                f"{kind} signature {spec_.protocol.__name__}{inspect.signature(spec_.protocol.__call__)}: {why}"
            )
        table[name] = Entry(fn, dict(meta), help)
        return fn

    return deco


_loaded = False


def _load() -> None:
    """Import :data:`REGISTRANTS` once, so the live registry holds every entry they register."""
    global _loaded
    if not _loaded:
        for module in REGISTRANTS:
            importlib.import_module(module)
        _loaded = True


def spec(kind: str, name: str) -> Entry:
    """The :class:`Entry` (function, declared facts, help) of ``(kind, name)``; unknown ones raise ``ValueError``."""
    _load()
    if kind not in _REGISTRY:
        raise ValueError(f"unknown kind {kind!r}; valid kinds: {', '.join(kinds())}")
    table = _REGISTRY[kind]
    if name not in table:
        raise ValueError(f"unknown {kind} {name!r}; valid {kind} names: {', '.join(names(kind))}")
    return table[name]


def get(kind: str, name: str) -> Callable:
    """The function registered as ``(kind, name)``; an unknown kind or name raises ``ValueError`` listing the valid ones."""
    return spec(kind, name).fn


def names(kind: str) -> list[str]:
    """Registered names of ``kind``, sorted (empty for an unknown kind)."""
    _load()
    return sorted(_REGISTRY.get(kind, {}))


def kinds() -> list[str]:
    """Kinds that have at least one registered function, sorted."""
    _load()
    return sorted(k for k, table in _REGISTRY.items() if table)


def describe(kind: str) -> list[Description]:
    """Every live entry of ``kind`` (name, help, facts), sorted by name (empty for an unknown kind)."""
    _load()
    return [Description(n, e.help, dict(e.meta)) for n, e in sorted(_REGISTRY.get(kind, {}).items())]


def declared(kind: str) -> list[Description]:
    """The entries of ``kind`` that the :data:`REGISTRANTS` declare in their ``@register`` decorators, read
    from their source without importing them (no torch), sorted by name; equal to :func:`describe` on a
    registry holding only those modules' entries."""
    return list(_declarations().get(kind, []))


def offered(kind: str) -> list[Description]:
    """What a command-line help may offer for ``kind`` without loading the registrants: the declared
    entries, and on top of them every entry registered in this process so far (a scheme registered at run
    time), sorted by name. Once the registry is loaded this is :func:`describe`."""
    found = {d.name: d for d in declared(kind)}
    found.update((n, Description(n, e.help, dict(e.meta))) for n, e in _REGISTRY.get(kind, {}).items())
    return [found[n] for n in sorted(found)]


def choices_help(entries: Iterable[Description]) -> str:
    """``"'a': help of a; 'b': help of b"``: entries as a help text lists them."""
    return "; ".join(f"'{d.name}': {d.help}" for d in entries)


@functools.cache
def _declarations() -> dict[str, list[Description]]:
    """Kind -> the entries the registrants' decorators declare (each module's source parsed once)."""
    found: dict[str, dict[str, Description]] = {}
    for module in REGISTRANTS:
        origin = importlib.util.find_spec(module).origin  # the parent package is light: nothing heavy runs
        path = Path(origin)
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in ast.walk(tree):
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                continue
            for deco in node.decorator_list:
                if isinstance(deco, ast.Call) and _is_register(deco.func):
                    kind, entry = _declared_entry(deco, path)
                    if entry.name in found.setdefault(kind, {}):
                        raise ValueError(
                            f"{path}, line {deco.lineno}: {kind} {entry.name!r} is declared twice"
                        )
                    found[kind][entry.name] = entry
    return {kind: [table[n] for n in sorted(table)] for kind, table in found.items()}


def _is_register(func: ast.expr) -> bool:
    return (isinstance(func, ast.Name) and func.id == "register") or (
        isinstance(func, ast.Attribute) and func.attr == "register"
    )


def _declared_entry(call: ast.Call, path: Path) -> tuple[str, Description]:
    """(kind, entry) of one ``@register(...)`` decorator, whose arguments must be literals."""
    try:
        args = [ast.literal_eval(a) for a in call.args]
        keywords = {kw.arg: ast.literal_eval(kw.value) for kw in call.keywords}
    except (ValueError, TypeError, SyntaxError):
        args, keywords = [], {}
    if len(args) != 2 or None in keywords or not isinstance(keywords.get("help"), str):
        raise ValueError(
            f"{path}, line {call.lineno}: write register('kind', 'name', help='...', fact=value, ...) with "
            "literal arguments, so that the registry can be read without importing the module"
        )
    help_ = keywords.pop("help")
    return args[0], Description(args[1], help_, keywords)
