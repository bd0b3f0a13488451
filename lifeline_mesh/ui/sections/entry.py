"""The Entry page: one entry's fields and body, its neighbours, signatures and fate."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from lifeline.entry import Entry
from lifeline.truth.parse import thread_of
from lifeline_mesh.home.identity import NodeIdentity
from lifeline_mesh.mcp.signatures import entry_signatures
from lifeline_mesh.ui.audit_cache import first_other, line_key
from lifeline_mesh.ui.links import Links
from lifeline_mesh.ui.render import page, viewer_of
from lifeline_mesh.ui.section import Section
from lifeline_mesh.ui.viewer import Viewer

__all__ = ["SECTION", "witnessed"]

MAX_CHILDREN = 200


def witnessed(
    viewer: Viewer, line: str, entry_id: str, signatures: dict[str, Any], key: tuple[int, ...]
) -> dict[str, Any]:
    """The entry's first witness other than its author, from the line's one-pass computation
    (states, summaries and receipts; computed in the background, never per request)."""
    held = viewer.witness.results.get(line)
    if held is None:
        return {"computed": False}
    items = signatures.get("items", [])
    authors = {i.get("node_id") for i in items if i.get("role") == "author" and i.get("valid")}
    mark = first_other(held.marks.get(entry_id, ()), {str(a) for a in authors})
    return {
        "computed": True,
        "current": held.key == key,
        "finished_at": held.finished_at,
        "ts": mark[0] if mark else None,
        "node_id": mark[1] if mark else None,
    }


def _brief(entries: dict[str, Entry], ids: list[str]) -> list[dict[str, Any]]:
    return [
        {
            "id": i,
            "kind": entries[i].kind if i in entries else "",
            "summary": entries[i].summary if i in entries else "(not stored in this line)",
        }
        for i in ids
    ]


async def entry_page(request: Request) -> Response:
    viewer = viewer_of(request)
    line = request.path_params["line"]
    reader = await viewer.reader(line)
    entry = await reader.entry(request.path_params["entry_id"])
    lt = await reader.truth()
    children = await reader.children(entry.id)
    shown_children = children[:MAX_CHILDREN]
    near = await reader.entries([*entry.parents, *shown_children])
    identity = NodeIdentity.maybe_of(viewer.home)
    local = identity.node_id if identity is not None else None
    sigs = await entry_signatures(viewer.home, reader.store, entry.id, entry.ts, local)
    if viewer.static:
        await viewer.witness.run()  # a copy shows fresh times; served pages never wait
    else:
        viewer.witness.refresh()
    key = await reader.store.run_read(line_key)
    return page(
        request,
        "entry.html",
        section="entry",
        title=entry.summary[:80] or entry.id[:12],
        line=line,
        entry=entry,
        intact=entry.is_intact(),
        parents=_brief(near, list(entry.parents)),
        children=_brief(near, shown_children),
        more_children=len(children) - len(shown_children),
        superseded_by=lt.truth.superseded.get(entry.id),
        corrects=_brief(near, list(entry.parents)) if entry.kind == "correction" else [],
        pin_notes=lt.truth.pin_notes.get(entry.id, []),
        thread=thread_of(entry.body) or "",
        body=await viewer.body_html(entry.body) if entry.body else None,
        signatures=sigs,
        witness=witnessed(viewer, line, entry.id, sigs, key),
    )


def _nav(links: Links, line: str | None) -> str | None:
    return None


SECTION = Section("entry", "", _nav, [Route("/lines/{line}/entries/{entry_id}", entry_page)])
