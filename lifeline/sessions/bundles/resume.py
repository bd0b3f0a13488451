"""Building a bundle from a line: by session id or by scope, merged, fitted, rendered.

What the CLI (`lifeline sessions resume`) and the MCP tool (`session_bundle`) call. Not
ready is an answer: :class:`NotReady` carries one line saying why and, when a session was
found, the fitted bundle whose Acceptance slice says why — never an empty or invented one.

Bundles use each session's *stored* verdict, never ``live`` (which depends on the reader's
clock), so two nodes holding the same entries build byte-identical bundles.
"""

from __future__ import annotations

import gc
import json
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from lifeline.errors import LifelineError, NotFound
from lifeline.sessions.bundles.bundle import (
    PROVIDER_FORMATS,
    Bundle,
    SliceKind,
    acceptance_text,
    bundle_json,
    deliver_bundle,
    dumps_compact,
    render_json,
    render_markdown,
)
from lifeline.sessions.bundles.distill import READS, Extractor, Inputs, distill
from lifeline.sessions.bundles.fitting import fit_bundle
from lifeline.sessions.bundles.merge import Group, dedup_key, groups_of, is_subagent, topic_of
from lifeline.sessions.bundles.worktree import worktree_of
from lifeline.sessions.catalogue import Catalogue, filter_sessions
from lifeline.sessions.model import Session, Status
from lifeline.sessions.stored_values import session_status
from lifeline.truth.budget import Budget

Render = Callable[[Bundle], str]

__all__ = ["BundleRequest", "NotReady", "build_bundle", "stored_verdict"]


class NotReady(LifelineError):
    """No bundle can be injected: ``bundle`` (when a session was found) says why."""

    def __init__(self, message: str, bundle: Bundle | None = None, text: str = "") -> None:
        super().__init__(message)
        self.bundle = bundle
        self.text = text


@dataclass(frozen=True, slots=True)
class BundleRequest:
    ref: str | None = None  # a session id or prefix (its group is merged unless single)
    scope: str | None = None
    topic: str | None = None  # a group key or topic slug within the scope
    exclude: tuple[str, ...] = ()
    single: bool = False  # only the named session, no merge
    budget: Budget = field(default_factory=Budget)
    format: str = "md"
    decisions: tuple[tuple[str, str], ...] = ()
    checkout_root: Path | None = None  # add the working tree of the scope (CLI only)


def stored_verdict(catalogue: Catalogue, session: Session) -> Session:
    """``session`` with the verdict its status entry holds (``live`` is the reader's view)."""
    stored = catalogue.sessions[session.id].status or {}
    verdict = Status(
        status=session_status(stored.get("status", "crashed")),
        reason=str(stored.get("reason", "no status recorded yet")),
    )
    return session.model_copy(update={"status": verdict})


_CACHE: OrderedDict[tuple[str, str], Session] = OrderedDict()
_CACHED = 32  # sessions kept with their items (a long-running server builds warm)


@contextmanager
def _gc_paused() -> Iterator[None]:
    """The cyclic collector off while a bundle is built: reading a long session makes tens
    of thousands of objects that all stay alive, and each collection pass would walk them
    again (bench/history/figures-behind-the-code.md). Nothing built here
    forms garbage cycles; reference counting frees the rest as usual."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


async def _loaded(catalogue: Catalogue, session_id: str) -> Session:
    """The session with its items and stored verdict. Entries are content-addressed, so a
    session read under the same status entry has the same items: kept in a small LRU."""
    status = catalogue.sessions[session_id].status or {}
    key = (session_id, json.dumps(status, sort_keys=True))
    found = _CACHE.get(key)
    if found is None:
        found = stored_verdict(catalogue, await catalogue.session(session_id, READS))
        _CACHE[key] = found
        while len(_CACHE) > _CACHED:
            _CACHE.popitem(last=False)
    _CACHE.move_to_end(key)
    return found


def _excluded(catalogue: Catalogue, refs: Sequence[str]) -> set[str]:
    return {catalogue.resolve(ref).header_id for ref in refs}


def _pick_group(
    catalogue: Catalogue, req: BundleRequest, drop: set[str]
) -> tuple[Group, list[Group]]:
    summaries = [stored_verdict(catalogue, s) for s in catalogue.summaries()]
    if req.ref is not None:
        target = next(s for s in summaries if s.id == catalogue.resolve(req.ref).header_id)
        if req.single or is_subagent(target):
            topic, origin = topic_of(target)
            key = dedup_key(target.scope, topic)
            return Group(key, target.scope, topic, origin, (target,)), []
        topic, _ = topic_of(target)
        key = dedup_key(target.scope, topic)
        kept = [s for s in summaries if s.id not in drop or s.id == target.id]
        group = next(g for g in groups_of(kept) if g.key == key)
        return group, []
    scope = req.scope or ""
    found = [s for s in filter_sessions(summaries, scope=scope) if s.id not in drop]
    groups = groups_of(found)
    if req.topic:
        chosen = [g for g in groups if g.key == req.topic or g.topic.startswith(req.topic)]
        if not chosen:
            raise NotFound(f"no topic {req.topic!r} in scope {scope}; see `lifeline sessions list`")
        groups = chosen + [g for g in groups if g not in chosen]
    if not groups:
        raise NotReady(
            f"no sessions in scope {scope!r} to resume; "
            "ingest them with `lifeline sessions ingest` (`--all` for every project's), or "
            "see every scope's with `lifeline sessions list`"
        )
    return groups[0], groups[1:]


def _renderer(req: BundleRequest, sessions: Sequence[Session], scope: str) -> Render:
    """The bundle's rendering, with the working tree after it when asked (fitted together:
    the diff, at most a quarter of the budget, is measured with the bundle)."""
    render: Render = render_json if req.format == "json" else render_markdown
    if req.checkout_root is None:
        return render
    chars = req.budget.limit * (1 if req.budget.unit == "chars" else 4)
    start = next((s.facts.git_commit for s in sessions if s.facts.git_commit), None)
    tree = worktree_of(scope, sessions, req.checkout_root, start, max(chars // 4, 400))
    if tree is None:
        return render
    found = tree
    if req.format == "json":
        return lambda b: dumps_compact({**bundle_json(b), "worktree": found.as_json()}) + "\n"
    return lambda b: render_markdown(b) + "\n" + found.markdown()


async def build_bundle(
    catalogue: Catalogue, req: BundleRequest, extractor: Extractor | None = None
) -> tuple[Bundle, str]:
    """The fitted bundle and its text (``req.format``); :class:`NotReady` when it is not
    injectable; :class:`NotFound` for an unknown or ambiguous id."""
    with _gc_paused():
        return await _build(catalogue, req, extractor)


async def _build(
    catalogue: Catalogue, req: BundleRequest, extractor: Extractor | None
) -> tuple[Bundle, str]:
    drop = _excluded(catalogue, req.exclude)
    group, others = _pick_group(catalogue, req, drop)
    members = [m for m in group.sessions if m.id not in drop]
    if not members:
        raise NotReady(f"every session of topic {group.topic!r} is excluded; nothing to resume")
    sessions = [await _loaded(catalogue, m.id) for m in members]
    inputs = Inputs(
        sessions=sessions,
        key=group.key,
        scope=group.scope,
        topic=group.topic or "(no topic)",
        topic_from=group.topic_from,
        excluded=tuple(sorted(drop)),
        other_topics=tuple(f"{g.key} {g.topic or '(no topic)'}" for g in others),
        decisions=req.decisions,
    )
    bundle = distill(inputs, req.budget.limit, req.budget.unit, extractor)
    bundle.full_sources = req.format == "json"
    measure = req.budget.measure()
    render = _renderer(req, sessions, group.scope)
    text = fit_bundle(bundle, render, measure)
    if req.format in PROVIDER_FORMATS:
        text = deliver_bundle(req.format, text)
    if not bundle.ready:
        acceptance = bundle.slices[SliceKind.ACCEPTANCE]
        why = "; ".join(acceptance.fields["why_not_ready"])
        name = group.topic or members[0].id[:12]
        raise NotReady(
            f"{name} is not ready to resume: {why}", bundle, acceptance_text(bundle, req.format)
        )
    return bundle, text
