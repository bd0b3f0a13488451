"""`lifeline-mesh peers`, `status` and `discover`: what the node of this project is doing.

The reports are built by ``peering/report.py`` (the viewer shows the same); this module
renders them and listens on the LAN for ``discover``.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

from lifeline.cli.common import Commands, add_json_option, print_json
from lifeline.errors import ConfigError
from lifeline.file_modes import loose_modes, loose_warning
from lifeline.ignore import tracked_warning
from lifeline.wording import count, one_line
from lifeline_mesh.cli.home_arg import node_home
from lifeline_mesh.discovery.survey import survey
from lifeline_mesh.home.config import NodeConfig
from lifeline_mesh.membership.ca import local_mesh_id
from lifeline_mesh.membership.registry import member_ids
from lifeline_mesh.peering.report import own_node_id, peers_report, status_report

__all__ = ["register"]

MAX_LISTEN_S = 600.0


def register(sub: Commands, parent: argparse.ArgumentParser) -> None:
    p = sub.add_parser(
        "peers",
        parents=[parent],
        help="static and discovered peers: last sync, last error, next attempt",
    )
    add_json_option(p)
    p.set_defaults(func=cmd_peers)

    p = sub.add_parser(
        "status",
        parents=[parent],
        help="this node: id, mesh, lines and their counts, listening address",
    )
    add_json_option(p)
    p.set_defaults(func=cmd_status)

    p = sub.add_parser(
        "discover",
        parents=[parent],
        help="listen on the LAN and list every lifeline-mesh node heard, ours or not",
    )
    p.add_argument(
        "--interface",
        action="append",
        default=[],
        metavar="ADDR",
        help="IP address of an interface to listen on (repeatable; default: the config's "
        "listen address)",
    )
    p.add_argument("--seconds", type=float, default=3.0, help="how long to listen (default: 3)")
    add_json_option(p)
    p.set_defaults(func=cmd_discover)


# -- rendering ---------------------------------------------------------------------------


def _ago(ts: Any, now: float) -> str:
    if not isinstance(ts, int | float):
        return "never"
    delta = now - ts
    if delta < 0:
        return f"in {_span(-delta)}"
    return f"{_span(delta)} ago"


def _span(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f}s"
    if seconds < 5400:
        return f"{seconds / 60:.0f}m"
    return f"{seconds / 3600:.1f}h"


def _table(rows: list[list[str]]) -> list[str]:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return [
        "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in rows
    ]


def render_peers(report: dict[str, Any], now: float) -> str:
    running = report["node_running"]
    if running:
        head = (
            f"node running (pid {report['pid']}), table updated {_ago(report['updated_at'], now)}"
        )
    elif report["updated_at"] is not None:
        head = f"no node running; table as the last node left it {_ago(report['updated_at'], now)}"
    else:
        head = "no node has run here yet; start one with `lifeline-mesh serve`"
    inbound = _inbound_lines(report.get("inbound") or [], now)
    if not report["peers"]:
        return "\n".join(
            [head, "no peers: add one with `serve --peer HOST:PORT` or enable discovery", *inbound]
        )
    rows = [["ADDRESS", "NODE", "SOURCE", "LAST SYNC", "NEXT", "FAILURES"]]
    errors = []
    for row in report["peers"]:
        if row.get("syncing"):
            upcoming = "syncing now"
        elif not running or not isinstance(row.get("next_attempt_at"), int | float):
            upcoming = "-"
        else:
            wait = row["next_attempt_at"] - now
            upcoming = "now" if wait < 1 else f"in {_span(wait)}"
        rows.append(
            [
                str(row.get("address")),
                str(row.get("node_id") or "-"),
                "+".join(row.get("sources") or []),
                _ago(row.get("last_sync_at"), now),
                upcoming,
                str(row.get("failures", 0)),
            ]
        )
        if row.get("last_error"):
            errors.append(one_line(f"{row.get('address')}: {row['last_error']}"))
    lines = [head, *_table([[one_line(cell) for cell in row] for row in rows])]
    if errors:
        lines += ["", "last errors:", *(f"  {e}" for e in errors)]
    return "\n".join([*lines, *inbound])


def _inbound_lines(rows: list[dict[str, Any]], now: float) -> list[str]:
    """Nodes that synced in, with their last session (from the serving node's table)."""
    if not rows:
        return []
    table = [["NODE", "FROM", "LINE", "LAST SESSION", "RESULT"]]
    for row in sorted(rows, key=lambda r: -float(r.get("last_session_at") or 0)):
        table.append(
            [
                str(row.get("node_id") or "-"),
                str(row.get("address")),
                str(row.get("line")),
                _ago(row.get("last_session_at"), now),
                str(row.get("result")),
            ]
        )
    return ["", "synced in:", *_table([[one_line(cell) for cell in row] for row in table])]


def render_status(report: dict[str, Any]) -> str:
    lines = [
        f"root:      {report['root']}",
        f"node id:   {report['node_id'] or 'none (create one with `lifeline-mesh init`)'}",
        f"mesh id:   {report['mesh_id'] or 'none (not in a mesh)'}",
    ]
    if report["serving"]:
        where = ", ".join(report["interfaces"]) if report["discovery"] else "off"
        lines.append(f"serving:   {report['listen']} (pid {report['pid']}), discovery: {where}")
    else:
        lines.append("serving:   no (start with `lifeline-mesh serve`)")
    peers = report["peers"]
    lines.append(f"peers:     {peers['total']} ({peers['failing']} failing)")
    for line in report["lines"]:
        shared = "shared" if line["shared"] else "private"
        held = count(line["entries"], "entry", "entries")
        lines.append(f"line:      {line['name']}  {held}  {shared}")
    if not report["lines"]:
        lines.append("line:      none (create one with `lifeline init`)")
    return "\n".join(lines)


async def cmd_peers(args: argparse.Namespace) -> int:
    report = peers_report(node_home(args))
    if args.json:
        print_json(report)
    else:
        print(render_peers(report, time.time()))
    return 0


async def cmd_status(args: argparse.Namespace) -> int:
    home = node_home(args)
    report = await status_report(home)
    tracked = report["tracked_by_git"]
    if tracked:
        print(tracked_warning(tracked), file=sys.stderr)
    if report["readable_by_others"]:
        print(loose_warning(home, loose_modes(home)), file=sys.stderr)
    if args.json:
        print_json(report)
    else:
        print(render_status(report))
    return 0


async def cmd_discover(args: argparse.Namespace) -> int:
    home = node_home(args)
    if not 0 < args.seconds <= MAX_LISTEN_S:
        raise ConfigError(f"--seconds {args.seconds:g} is out of range; use 0 < S <= 600")
    config = NodeConfig.load(home)
    interfaces = args.interface or [config.listen.rpartition(":")[0].strip("[]")]
    mesh_id = local_mesh_id(home)
    found = await survey(
        interfaces,
        listen_for=args.seconds,
        mesh_id=mesh_id,
        own_node_id=own_node_id(home) or "",
        members=member_ids(home) if mesh_id else None,
    )
    if args.json:
        print_json(
            {"interfaces": interfaces, "mesh_id": mesh_id, "nodes": [s.to_json() for s in found]}
        )
        return 0
    if not found:
        print(f"no lifeline-mesh node heard on {', '.join(interfaces)} in {args.seconds:g}s")
    for s in found:
        where = ", ".join(f"{a}:{s.port}" for a in s.addresses) or "-"
        note = f"  (ignored: {s.ignored_because})" if s.ignored_because else ""
        # what a node on the network announced, unauthenticated: escaped (decision 0128)
        print(one_line(f"{s.node_id or s.name}  mesh {s.mesh_id or '?'}  {where}{note}"))
    return 0
