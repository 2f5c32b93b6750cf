"""One evaluation's index: its objects, resolved once, and what the view derives from them.

The evaluator builds one :class:`EvaluationIndex` before any rule runs and hands it to
every rule as ``ctx.index`` (issue 32): the objects under review and the context objects
(what the cluster says, reported on by no rule), each object's kind read once, the
objects of the kinds a rule reports on (issue 35), and the store of what is derived
from all of them once per evaluation (pools, operators, engine sites). The objects it
holds are not mutated once it is built; what is derived is computed on first read and
then only read.

Two stores, one per scope: :meth:`EvaluationIndex.derived` for what is derived from all
the objects (an index of Services by name, the GPU pools), :meth:`EvaluationIndex.fact`
for what is resolved about one object (its engine sites, each site's capacity inputs).
Both live and die with the evaluation: the view keeps no cache of its own keyed by
``id()`` or in a module global.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar, final

from gpustrata.core.unknown import ABSENT, TAINTED, UNKNOWN, memoised

if TYPE_CHECKING:
    from gpustrata_policies.view.objects import K8sObject

__all__ = ["EvaluationIndex", "Replica", "content_key"]

_T = TypeVar("_T")
_BY_KIND = ("index", "objects-by-kind")
"""The :meth:`EvaluationIndex.derived` key of the objects grouped by kind."""


_PLAIN = (int, float, bool, type(None))


def content_key(*parts: Any) -> Hashable | None:
    """A hashable key equal for equal *parts* of plain data (what YAML and JSON give:
    dicts, lists, strings, numbers, booleans, null), to share what is derived from
    exactly those inputs across objects that repeat them (one chart in many namespaces):
    a fact keyed so costs a dict lookup on every copy after the first. ``None`` when a
    part holds anything else (a value unknown until deployment, a tracked mapping):
    such inputs are not shared. Non-string scalars carry their type, so ``1``, ``1.0``
    and ``True`` (equal in Python) make different keys."""
    out: list[Hashable] = []
    stack: list[Any] = list(reversed(parts))
    while stack:
        item = stack.pop()
        kind = type(item)
        if kind is str:
            out.append(item)
        elif kind is dict:
            out.append(("{", len(item)))
            for name, value in reversed(item.items()):
                stack.append(value)
                stack.append(name)
        elif kind is list or kind is tuple:
            out.append(("[", len(item)))
            stack.extend(reversed(item))
        elif kind in _PLAIN:
            out.append((kind.__name__, item))
        else:
            return None
    return tuple(out)


@final
@dataclass(frozen=True, slots=True)
class Replica:
    """A subject whose namespace repeats an earlier one (one chart installed per tenant):
    every object of the two namespaces is equal but for ``metadata.namespace``, and no
    object of the evaluation names a namespace of the class (:meth:`EvaluationIndex.
    replicas`). A rule that treats namespaces alike judges it as it judged :attr:`of`."""

    of: K8sObject
    """The object of the class's first namespace that this one repeats."""
    peers: Mapping[int, K8sObject]
    """``id()`` of each object of the first namespace -> its copy in this namespace."""
    names: frozenset[str]
    """The namespaces of the class."""

    def mentions(self, text: str) -> bool:
        """Does *text* name a namespace of the class (as a whole name: ``llm`` in
        ``svc.llm.cluster``, not in ``vllm`` or ``llm-2``)? An outcome that names one
        is not replayed. A namespace name is a DNS label, so it is named where a run of
        ``[A-Za-z0-9_-]`` is one."""
        if not any(name in text for name in self.names):
            return False  # not even inside another word (most texts)
        return not self.names.isdisjoint(_WORD.findall(text))


_WORD = re.compile(r"[A-Za-z0-9_-]+")
"""A run that may be a namespace name (a DNS label) and what borders it."""


def _stated_namespace(obj: K8sObject) -> Any:
    """*obj*'s ``metadata.namespace`` as written (``None`` where it states none)."""
    meta = obj.raw.get("metadata")
    return meta.get("namespace") if type(meta) is dict else None


def _without_namespace(raw: Mapping[str, Any], texts: dict[Hashable, str]) -> str | None:
    """*raw*'s text with ``metadata.namespace`` left out: equal texts, equal objects but
    for their namespace (``repr`` keeps types: ``1``, ``1.0``, ``True`` and ``"1"``
    differ). ``None`` for an object that is not a plain dict.

    The text is ``repr`` of the dict, made of its values' texts. *texts* keeps them by the
    ``id`` of what they are made of (the caller keeps the objects alive): copies read once
    share their values (a repeated document or item, a Pulumi property sent for every
    tenant), so a copy's text is its first copy's, the same string, found by ids alone."""
    if type(raw) is not dict:
        return None
    meta = raw.get("metadata")
    if type(meta) is not dict:
        return None
    shape = (
        *((k, None if v is meta else id(v)) for k, v in raw.items()),
        *((k, id(v)) for k, v in meta.items() if k != "namespace"),
    )
    found = texts.get(shape)
    if found is not None:
        return found
    parts = []
    for key, value in raw.items():
        if key == "metadata":
            bare = dict(meta)
            del bare["namespace"]
            text = repr(bare)
        else:
            text = texts.get(id(value)) or texts.setdefault(id(value), repr(value))
        parts.append(f"{key!r}: {text}")
    found = texts[shape] = "{" + ", ".join(parts) + "}"
    return found


@final
class EvaluationIndex:
    """The objects of one evaluation, by role and kind, and what is derived from them.

    *subjects* are the objects under review (the rules report on them), *context* the
    objects the rules read but report nothing on (``gpustrata check --context``, a
    cluster profile's pools); :attr:`objects` is both, subjects first.
    """

    __slots__ = (
        "_at",
        "_by_kinds",
        "_context",
        "_copies",
        "_derived",
        "_facts",
        "_kinds",
        "_others",
        "_replicas",
        "_texts",
        "objects",
        "subjects",
    )

    def __init__(self, subjects: Sequence[K8sObject], context: Sequence[K8sObject] = ()) -> None:
        self.subjects: tuple[K8sObject, ...] = tuple(subjects)
        """The objects under review, in input order."""
        self.objects: tuple[K8sObject, ...] = (
            (*self.subjects, *context) if context else self.subjects
        )
        """Every object the rules read: the subjects, then the context objects."""
        self._context = frozenset(map(id, context))
        # Each subject's kind, read once; "" for a kind unknown until deployment (an object
        # that may be of any kind), "?" for none.
        self._kinds = tuple(
            "" if o.raw.get("kind") is UNKNOWN else (o.kind or "?") for o in self.subjects
        )
        self._by_kinds: dict[frozenset[str], tuple[K8sObject, ...]] = {}
        self._derived: dict[Hashable, Any] = {}
        # Each object's position, and its facts (None until one is read): a list, not a
        # dict per object, so an object nothing is resolved about costs one pointer.
        self._at = {id(o): i for i, o in enumerate(self.objects)}
        self._facts: list[dict[Hashable, Any] | None] = [None] * len(self.objects)
        # Facts of objects outside the evaluation (a view read on an object built apart,
        # in a test), each kept with its object so that its id stays its own.
        self._others: dict[int, tuple[K8sObject, dict[Hashable, Any]]] = {}
        self._texts: dict[str, str] = {}
        self._replicas: dict[int, Replica] | None = None
        self._copies: dict[int, list[K8sObject]] = {}

    def text(self, value: str) -> str:
        """*value*, as the one string object of its text in this evaluation: a report
        repeats few texts many times (the corpus: 13,179 finding messages, 785 distinct),
        so the findings and not-evaluated records share them instead of each keeping a
        copy of its own (~9 MiB of the corpus's peak)."""
        return self._texts.setdefault(value, value)

    def of_kinds(self, kinds: frozenset[str] | None) -> tuple[K8sObject, ...]:
        """The subjects of *kinds* in input order, and those of an unknown kind (every
        subject when *kinds* is ``None``); each kind set's tuple is built once."""
        if kinds is None:
            return self.subjects
        found = self._by_kinds.get(kinds)
        if found is None:
            found = self._by_kinds[kinds] = tuple(
                o for o, k in zip(self.subjects, self._kinds, strict=True) if not k or k in kinds
            )
        return found

    def objects_of(self, kind: str) -> tuple[K8sObject, ...]:
        """Every object (subjects, then context objects) whose :attr:`~gpustrata_policies.
        view.objects.K8sObject.kind` is *kind*, in input order: one dict read where a rule
        would scan every object per subject (G001's routes and InferencePools). Built in one
        pass over the objects on the first call; an unknown kind read there counts as read
        by every caller, as a scan's would (:meth:`derived`)."""
        by_kind: dict[str, tuple[K8sObject, ...]] = self.derived(_BY_KIND, self._group_kinds)
        return by_kind.get(kind, ())

    def _group_kinds(self) -> dict[str, tuple[K8sObject, ...]]:
        groups: dict[str, list[K8sObject]] = {}
        for obj in self.objects:
            groups.setdefault(obj.kind, []).append(obj)
        return {kind: tuple(objs) for kind, objs in groups.items()}

    def replicas(self) -> dict[int, Replica]:
        """``id()`` of each subject whose namespace repeats an earlier namespace ->
        :class:`Replica` (built once).

        Two namespaces are of one class when their subjects, ``metadata.namespace`` left
        out, are the same multiset of objects (as text: :func:`_without_namespace`; equal
        objects of one namespace pair in input order). A namespace is left out when one
        of its objects is not plain data or states no namespace (it lands wherever
        ``kubectl`` applies it), when a context object lives in it (the context is read,
        never reported on), or when any object of the evaluation names it in its text (a
        Service's DNS name, a route's backend: what refers to it does not refer to its
        copies)."""
        if self._replicas is None:
            self._replicas = self._group_replicas()
        return self._replicas

    def fold_copies(self) -> None:
        """Let what is summed over every object count each first copy once per copy
        (:meth:`copies`, :meth:`is_copy`): the evaluator's switch, on where it replays
        outcomes onto copies (never with a value unknown until deployment)."""
        copies: dict[int, list[K8sObject]] = {}
        for at, replica in self.replicas().items():
            copies.setdefault(id(replica.of), []).append(self.objects[self._at[at]])
        self._copies = copies

    def copies(self, obj: K8sObject) -> Sequence[K8sObject]:
        """The copies in other namespaces of *obj*, a first copy, where the evaluator folds
        them (:meth:`fold_copies`): an index over every object may take *obj*'s share once
        per copy and skip them (:meth:`is_copy`). Empty otherwise."""
        return self._copies.get(id(obj), ())

    def position(self, obj: K8sObject) -> int:
        """*obj*'s place in :attr:`objects` (input order)."""
        return self._at[id(obj)]

    def is_copy(self, obj: K8sObject) -> bool:
        """Is *obj* a copy whose share a folded index takes from its first copy?"""
        return bool(self._copies) and id(obj) in self.replicas()

    def _group_replicas(self) -> dict[int, Replica]:
        by_namespace: dict[str, list[K8sObject]] = {}
        barred: set[str] = set()
        for obj in self.subjects:
            ns = _stated_namespace(obj)
            if type(ns) is not str or not ns:
                if obj.namespace != "-":  # a namespaced object applied wherever kubectl says
                    barred.add(obj.namespace)
                continue
            if obj.namespace != "-":  # a cluster-scoped kind: its namespace field means nothing
                by_namespace.setdefault(ns, []).append(obj)
        for obj in self.objects[len(self.subjects) :]:
            ns = _stated_namespace(obj)
            barred.add(ns if type(ns) is str else "default")
        # Only namespaces holding the same kinds and names can be copies: the objects' texts
        # are made for those alone (most namespaces of a cluster dump repeat none).
        alike: dict[tuple[tuple[str, str], ...], list[str]] = {}
        for ns, objs in by_namespace.items():
            if ns not in barred:
                alike.setdefault(tuple(sorted((o.kind, o.name) for o in objs)), []).append(ns)
        keyed: dict[str, list[tuple[str, K8sObject]]] = {}
        texts: dict[Hashable, str] = {}  # texts by ids: the objects keep them alive
        classes: dict[tuple[str, ...], list[str]] = {}
        for group in alike.values():
            if len(group) < 2:
                continue
            for ns in group:
                pairs = []
                for obj in by_namespace[ns]:
                    key = _without_namespace(obj.raw, texts)
                    if key is None:
                        break
                    pairs.append((key, obj))
                else:
                    pairs.sort(key=lambda pair: pair[0])  # stable: an object twice keeps order
                    keyed[ns] = pairs
                    classes.setdefault(tuple(key for key, _ in pairs), []).append(ns)
        candidates = {ns for names in classes.values() if len(names) > 1 for ns in names}
        if not candidates:
            return {}
        # A namespace some text names (a route's backend, a Service's DNS name) is referred
        # to: its copies elsewhere are not referred to alike, so it is judged on its own.
        # Each class's texts are read once (equal in every member), and every other object's.
        words: set[str] = set()
        for signature, names in classes.items():
            if len(names) > 1:
                for key in signature:
                    words.update(_WORD.findall(key))
        for obj in self.objects:
            if _stated_namespace(obj) not in candidates or obj.namespace == "-":
                words.update(_WORD.findall(repr(obj.raw)))
        named = words & candidates
        found: dict[int, Replica] = {}
        for names in classes.values():
            names = [n for n in names if n not in named]
            if len(names) < 2:
                continue
            first = keyed[names[0]]
            members = frozenset(names)
            for ns in names[1:]:
                copies = keyed[ns]
                peers = {id(a): b for (_, a), (_, b) in zip(first, copies, strict=True)}
                for (_, a), (_, b) in zip(first, copies, strict=True):
                    found[id(b)] = Replica(a, peers, members)
        return found

    def in_context(self, obj: K8sObject) -> bool:
        """Is *obj* a context object (read, never reported on)?"""
        return bool(self._context) and id(obj) in self._context

    def derived(self, key: Hashable, factory: Callable[[], _T]) -> _T:
        """``factory()`` once per evaluation and *key*: a value derived from the objects
        (an index over all of them, an object's engine sites). The unknown values its
        factory read count as read by every later reader, and an
        :class:`~gpustrata.core.unknown.UnknownInput` it raised is raised again
        (:func:`~gpustrata.core.unknown.memoised`)."""
        found = self._derived.get(key, ABSENT)
        if found is ABSENT or type(found) is TAINTED:
            return memoised(self._derived, key, factory)
        known: _T = found  # a plain hit, one dict read (most reads: ~100 k per check)
        return known

    def release(self) -> None:
        """Drop what the evaluation derived, here and on its objects
        (:meth:`~gpustrata_policies.view.objects.K8sObject.forget_derived`): the report is
        made, and the views point back at the objects, so without this a caller that
        lets the objects go (``check`` before writing the report) would keep them all
        alive until the cycle collector's next full collection."""
        for obj in self.objects:
            obj.forget_derived()
        self._derived.clear()
        self._facts = [None] * len(self.objects)
        self._others.clear()
        self._texts.clear()

    def fact(self, obj: K8sObject, name: Hashable, resolve: Callable[[], _T]) -> _T:
        """The fact *name* about *obj* (its engine sites, one site's capacity inputs):
        ``resolve()`` on the first read in this evaluation, then only read. The one place
        the view keeps what it resolves per object; unknown values read and an
        :class:`~gpustrata.core.unknown.UnknownInput` raised replay as with
        :meth:`derived`."""
        at = self._at.get(id(obj))
        if at is not None:
            facts = self._facts[at]
            if facts is None:
                facts = self._facts[at] = {}
        else:
            held = self._others.get(id(obj))
            if held is None or held[0] is not obj:
                held = self._others[id(obj)] = (obj, {})
            facts = held[1]
        found = facts.get(name, ABSENT)
        if found is ABSENT or type(found) is TAINTED:
            return memoised(facts, name, resolve)
        known: _T = found  # a plain hit: no call into memoised
        return known
