"""A small project for the viewer's tests and screenshots: a signed line with decisions, a
correction, open questions, threads with checkpoints, a pin, a fork and a merge, hostile
entries (script tags, ``javascript:`` links, raw HTML), a huge body, and a peer table."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from pathlib import Path

from lifeline.entry import Entry
from lifeline.home import Home
from lifeline.ledger import Draft, Ledger
from lifeline.plugins import load_append_hooks
from lifeline.store.sqlite import SqliteStore
from lifeline_mesh.home.identity import ensure_identity
from lifeline_mesh.home.node_home import NodeHome
from lifeline_mesh.membership.ca import create_mesh
from lifeline_mesh.peering.table import save_peers_file
from tests.ui_sessions import add_sessions

__all__ = ["HOSTILE_SUMMARY", "Project", "build_project"]

HOSTILE_SUMMARY = "<script>window.__pwned = 1</script> hostile <b>summary</b>"
HOSTILE_BODY = (
    "Click [here](javascript:window.__pwned=2) or [there](JaVaScRiPt&#58;alert(1)) "
    "or [data](data:text/html,<script>alert(1)</script>).\n\n"
    '<img src=x onerror="window.__pwned=3"> <script>window.__pwned=4</script>\n\n'
    "A fine link: [docs](https://example.org/docs)."
)
HUGE_BODY_CHARS = 1_200_000


@dataclass
class Project:
    root: Path
    ids: dict[str, str] = field(default_factory=dict)


async def _write(root: Path, ids: dict[str, str]) -> None:
    path = Home(root).line_path("ledger")
    path.parent.mkdir(parents=True, exist_ok=True)
    async with await SqliteStore.open(path) as store:
        ledger = Ledger(store, hooks=load_append_hooks(Home(root)))

        async def log(name: str, draft: Draft) -> str:
            entry, _new = await ledger.append(draft)
            ids[name] = entry.id
            return entry.id

        await log(
            "bootstrap",
            Draft(
                "bootstrap",
                "Payments service",
                "Why our payments work the way they do.",
                author="alice",
            ),
        )
        db = await log(
            "db",
            Draft(
                "decision",
                "Database: PostgreSQL",
                "Audit trail needs **cross-row ACID**.\n\n- ledger rows\n- refunds",
                author="alice",
            ),
        )
        await log(
            "queue",
            Draft(
                "decision",
                "Queue: SQS",
                "Managed, and we are on AWS.",
                author="bob",
                agent="claude",
                provider="anthropic",
                model="claude-opus",
            ),
        )
        await log(
            "open",
            Draft(
                "open",
                "Which region for the EU tenants?",
                "thread: eu-region\nLatency vs data residency.",
                author="bob",
            ),
        )
        await log(
            "cp1",
            Draft(
                "checkpoint",
                "checkpoint eu-region: next — measure latency",
                "thread: eu-region\ndone:\n  - asked legal\nnext:\n  - measure "
                "latency from Frankfurt",
                author="bob",
                agent="claude",
            ),
        )
        await log(
            "fix",
            Draft(
                "correction",
                "Database: PostgreSQL 16 with logical replicas",
                "Replicas for the reporting load.",
                author="alice",
                parents=(db,),
            ),
        )
        await log(
            "pin", Draft("note", "pin the queue decision", f"pin: {ids['queue']}", author="alice")
        )
        base = await log(
            "note",
            Draft(
                "note",
                "Refund latency spiked on Monday",
                "Webhook retries piled up.",
                author="carol",
            ),
        )
        left = await log(
            "left",
            Draft(
                "fix", "Cap webhook retries at 5", "Backoff too.", author="carol", parents=(base,)
            ),
        )
        right = await log(
            "right",
            Draft("feature", "Refund status page", "For support.", author="dave", parents=(base,)),
        )
        await log(
            "merge",
            Draft(
                "milestone",
                "Refunds stable again",
                "Both branches landed.",
                author="carol",
                parents=(left, right),
            ),
        )
        await log("hostile", Draft("note", HOSTILE_SUMMARY, HOSTILE_BODY, author="<i>mallory</i>"))
        await log(
            "cp2",
            Draft(
                "checkpoint",
                "checkpoint eu-region: next — pick Frankfurt",
                "thread: eu-region\ndone:\n  - measured latency\nnext:\n  - pick Frankfurt",
                author="bob",
                agent="claude",
            ),
        )
        # A body far over the local write limit, as a peer running other limits could send it.
        (tip,) = await store.tips()
        huge = Entry.create(
            ts="2026-02-01T00:00:00Z",
            kind="note",
            summary="A huge body",
            body="lorem ipsum " * (HUGE_BODY_CHARS // 12),
            author="zed",
            parents=(tip,),
        )
        await store.append_many([huge])
        ids["huge"] = huge.id


def build_project(root: Path) -> Project:
    """Create the project under ``root`` (a node identity, a mesh, one line, a peer table,
    and a sessions line: see tests/ui_sessions.py)."""
    root.mkdir(parents=True, exist_ok=True)
    ensure_identity(NodeHome(root))
    create_mesh(NodeHome(root), "demo-mesh")
    project = Project(root)
    asyncio.run(_write(root, project.ids))
    add_sessions(root, root.parent / (root.name + "-home"))
    now = time.time()
    rows = [
        {
            "key": "static:127.0.0.1:7411",
            "address": "127.0.0.1:7411",
            "node_id": None,
            "sources": ["static"],
            "last_sync_at": now - 40,
            "failures": 0,
            "last_result": "ledger: sent 3, received 12 (12 new), 4210/18877 bytes out/in",
            "last_error": None,
        },
        {
            "key": "static:127.0.0.1:7412",
            "address": "127.0.0.1:7412",
            "node_id": None,
            "sources": ["static"],
            "last_sync_at": None,
            "failures": 3,
            "last_result": None,
            "last_error": "<script>window.__pwned=5</script> connection refused",
        },
    ]
    save_peers_file(NodeHome(root), rows, pid=0, wall_now=now)
    return project
