"""`lifeline-mesh` sync commands: serve, sync, share, unshare, lines."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import sys
from contextlib import AbstractAsyncContextManager, nullcontext
from dataclasses import replace
from typing import TYPE_CHECKING

from lifeline.cli.common import Commands, add_json_option, add_line_option, print_json
from lifeline.cli.progress import Progress, progress_for
from lifeline.errors import (
    ConfigError,
    LifelineError,
    NotAuthenticated,
    PeerError,
    PermissionDenied,
)
from lifeline.lines import validate_line_name
from lifeline.store.pg_dsn import is_postgres_url
from lifeline.wording import count
from lifeline_mesh.cli.home_arg import node_home
from lifeline_mesh.cli.stopping import stop_on_signals
from lifeline_mesh.cli.ui_args import add_serve_ui_arguments
from lifeline_mesh.home.config import NodeConfig
from lifeline_mesh.home.mesh_state import holds_ca_key
from lifeline_mesh.home.node_home import NodeHome
from lifeline_mesh.home.state import serve_lock
from lifeline_mesh.peering.arguments import add_peering_arguments
from lifeline_mesh.sync.driver import SyncReport
from lifeline_mesh.sync.fast import ENV, PLAIN, FastPaths
from lifeline_mesh.sync.memory import SESSIONS
from lifeline_mesh.sync.outcome import refusal_warnings
from lifeline_mesh.transport.addresses import address_arg, require_loopback, split_address
from lifeline_mesh.transport.authz import MeshRole
from lifeline_mesh.transport.call_caps import raise_open_file_limit

if TYPE_CHECKING:
    from lifeline_mesh.node.metrics import MetricsServer
    from lifeline_mesh.node.root import Node

__all__ = ["register"]


log = logging.getLogger(__name__)

SESSIONS_RETRY_S = 10  # `serve --sessions` after its sessions line refused a write


def register(sub: Commands, parent: argparse.ArgumentParser) -> None:
    p = sub.add_parser(
        "serve", parents=[parent], help="run the gRPC peer until SIGINT, SIGTERM or SIGHUP"
    )
    p.add_argument(
        "--listen",
        default=None,
        type=address_arg(listen=True),
        metavar="HOST:PORT",
        help="address to listen on (default: the node config, 127.0.0.1:0 = a free port)",
    )
    p.add_argument(
        "--join-listen",
        default=None,
        type=address_arg(listen=True),
        metavar="HOST:PORT",
        help="where newcomers join (only on the node holding the mesh CA; default: the "
        "listen host, a free port); printed as `join port on HOST:PORT`",
    )
    _insecure(p)
    _fast_paths(p)
    p.add_argument(
        "--store",
        default=None,
        metavar="URL",
        type=_store_url,
        help="keep the lines in a PostgreSQL database (postgresql://user@host/db) instead of "
        "the line files in .lifeline/: a hub; several serve processes may share one database "
        "(docs/hub.md)",
    )
    p.add_argument(
        "--metrics-listen",
        default=None,
        type=address_arg(listen=True),
        metavar="HOST:PORT",
        help="serve Prometheus metrics at http://HOST:PORT/metrics, with /healthz and /readyz "
        "(default: the node config's metrics_listen, else none); printed as `metrics on "
        "HOST:PORT` (docs/operations.md)",
    )
    add_peering_arguments(p)
    add_serve_ui_arguments(p)
    p.add_argument(
        "--sessions",
        action="store_true",
        help="also ingest this project's agent sessions as they change (see `lifeline "
        "sessions watch`); share the sessions line for peers to receive them",
    )
    p.set_defaults(func=cmd_serve)

    p = sub.add_parser(
        "sync",
        parents=[parent],
        help="run one sync session with a peer",
        description="Sync every shared line with PEER (only LINE with --line), one session "
        "per line, and report what moved. On a terminal, a counter on stderr shows the "
        "entries and signatures stored so far. An item PEER sends damaged or altered (an "
        "entry whose id does not match its content, a signature that does not verify) is "
        "refused alone, with a warning on stderr naming it, and the rest is stored "
        "(refused, refusals in --json); so is an item the notary's rules refuse (an entry "
        "dated before its parent, a rolled-back state). When PEER refuses items this node "
        "sent, it says so at the end of the session, and a warning names them "
        "(refused_there, refusals_there). A line PEER refuses (not shared there, or not "
        "allowed to this node) does not stop the others: each line that synced is reported, "
        "then the refused lines are named and the exit status is 2 (in --json, each has an "
        "entry whose error says why).",
    )
    p.add_argument("peer", metavar="PEER", type=address_arg(), help="the peer's HOST:PORT")
    add_line_option(p, "sync only this line (default: every shared line)")
    depth = p.add_mutually_exclusive_group()
    depth.add_argument(
        "--shallow",
        action="store_true",
        help="take each empty (or shallow) line's current truth, its signatures and tips, "
        "signed by PEER, without the history (a line holding history syncs in full); a "
        'plain `sync` later deepens it (docs/protocol.md, "Shallow join")',
    )
    depth.add_argument(
        "--push",
        action="store_true",
        help="send what was written on each shallow line since its snapshot, and nothing "
        "more (a line that is not shallow syncs in full)",
    )
    add_json_option(p)
    _insecure(p)
    _fast_paths(p)
    p.set_defaults(func=cmd_sync)

    p = sub.add_parser("share", parents=[parent], help="share a line with the mesh")
    p.add_argument("name", metavar="LINE")
    p.set_defaults(func=cmd_share)

    p = sub.add_parser("unshare", parents=[parent], help="stop sharing a line (keep it private)")
    p.add_argument("name", metavar="LINE")
    p.set_defaults(func=cmd_unshare)

    p = sub.add_parser("lines", parents=[parent], help="the node's lines and which are shared")
    add_json_option(p)
    p.set_defaults(func=cmd_lines)


def _store_url(value: str) -> str:
    if not is_postgres_url(value):
        raise argparse.ArgumentTypeError(
            f"{value!r} is not a PostgreSQL URL; give postgresql://USER@HOST[:PORT]/DATABASE"
        )
    return value


def _insecure(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--insecure",
        action="store_true",
        help="plain text without mutual TLS, on loopback only (a lab): the node answers, "
        "and dials, its own user only (and root)",
    )


def _fast_paths(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--no-fast-paths",
        action="store_true",
        help="sync without helper processes, read-ahead, pipelined admission or (in `sync`) "
        f"batches committed together: slower, stores exactly the same (also {ENV}=off)",
    )


def _fast(args: argparse.Namespace, *, grouped: bool = False) -> FastPaths:
    """The fast paths; ``grouped``: and the pull's writes grouped (`sync` alone)."""
    fast = PLAIN if args.no_fast_paths else FastPaths.from_env()
    return replace(fast, grouped=True) if grouped and fast.any else fast


async def cmd_serve(args: argparse.Namespace) -> int:
    home = node_home(args)
    SESSIONS.freezing = True  # many sessions: each collection walks only what is new
    raise_open_file_limit()  # before the caps that follow it are read (decision 0134)
    with serve_lock(home):
        return await _serve(args, home)


async def _serve(args: argparse.Namespace, home: NodeHome) -> int:
    from lifeline_mesh.cli.serve_root import prepare_root

    prepare_root(home)  # ignore file, what git tracks, modes
    store = getattr(args, "store", None)
    if store is not None or home.lines.url is not None:
        # A hub's: imported only then. `serve` of line files listens sooner without the
        # PostgreSQL driver (nor the viewer, nor the sessions' models; decision 0039).
        from lifeline_mesh.cli.cmd_hub import hub_home

        home = hub_home(home, store)
    from lifeline_mesh.node.root import Node  # the node's parts, for the commands that run one

    node = Node(home, insecure=args.insecure, fast=_fast(args))
    try:
        async with _metrics_beside(args, node) as metrics:
            await node.connect()  # a hub's database unreachable: one line, before listening
            return await _serve_node(args, node, metrics)
    finally:
        await node.close()


async def _serve_node(args: argparse.Namespace, node: Node, metrics: MetricsServer | None) -> int:
    config = node.config()
    listen = args.listen or config.listen
    # Plain text is loopback only: said first, before what discovery would ask of the address
    tls = node.security.server_credentials is not None
    require_loopback(listen, tls=tls, what="listen address", listen=True)
    _warn_no_joins(args, node)
    join_listen = args.join_listen or f"{listen.rpartition(':')[0]}:0"
    if node.home.hub_binding_path.exists():
        # A hub process is reached by its address; its sibling processes are the same node
        # and would collide announcing it on the LAN (docs/hub.md).
        args.no_discovery = True
    from lifeline_mesh.peering.service import peering_options

    peering = peering_options(args, config, listen_host=split_address(listen, listen=True)[0])
    stop = asyncio.Event()
    stop_on_signals(stop)

    def ready(address: str) -> None:
        sys.stdout.write(f"listening on {address}\n")
        if node.join_address:
            sys.stdout.write(f"join port on {node.join_address}\n")
        if metrics is not None:
            metrics.readiness.listening = True
            sys.stdout.write(f"metrics on {metrics.address}\n")
        sys.stdout.flush()

    sessions_line = _sessions_line(node.home) if args.sessions else None
    async with _ui_beside(args, node.home, stop), asyncio.TaskGroup() as group:
        if sessions_line is not None:
            group.create_task(_watch_sessions(node, sessions_line, stop))
        try:
            server = await node.serve(listen, stop, ready, join_listen=join_listen, peering=peering)
        finally:
            stop.set()  # the watcher ends with the server
    out, taken = node.outbound, node.rows.taken
    print(
        f"stopped after {count(len(server.reports) + server.failures.total, 'session')} in "
        f"({server.failures.total} failed) and {count(out['syncs'], 'sync')} out "
        f"({out['failed']} failed); took the rows of {count(taken['changes'], 'change')} over "
        f"watches ({taken['held']} more were here already, {taken['refused']} refused: synced "
        "instead); asked peers to leave it out of "
        f"{count(node.changes.relays['prunes asked'], 'tree')} of relays"
    )
    return 0


def _sessions_line(home: NodeHome) -> str:
    from lifeline.sessions.config import load_session_settings

    return load_session_settings(home).line


def _metrics_beside(
    args: argparse.Namespace, node: Node
) -> AbstractAsyncContextManager[MetricsServer | None]:
    """``serve --metrics-listen`` (or the config's): metrics, imported only then."""
    listen = args.metrics_listen or node.config().metrics_listen
    if listen is None:
        return nullcontext()
    from lifeline_mesh.node.metrics import metrics_beside

    return metrics_beside(node, listen)


def _ui_beside(
    args: argparse.Namespace, home: NodeHome, stop: asyncio.Event
) -> AbstractAsyncContextManager[None]:
    """``serve --ui``: the viewer beside the node (imported only then)."""
    if not getattr(args, "ui", False):
        return nullcontext()
    from lifeline_mesh.cli.cmd_ui import ui_beside

    return ui_beside(args, home, stop)


async def cmd_sync(args: argparse.Namespace) -> int:
    from lifeline_mesh.node.root import Node
    from lifeline_mesh.node.shallow_join import push_lines, shallow_sync

    node = Node(node_home(args), insecure=args.insecure, fast=_fast(args, grouped=True))
    chosen = getattr(args, "line", None)
    lines = [validate_line_name(chosen)] if chosen else node.config().shared_lines
    if not lines:
        raise ConfigError("no line is shared on this node; run `lifeline-mesh share LINE` first")
    try:
        if args.shallow:
            reports = await shallow_sync(node, args.peer, lines, go_on=True)
        elif args.push:
            reports = await push_lines(node, args.peer, lines, go_on=True)
        else:
            with _Stored(args, args.peer) as shown:
                reports = await node.sync(args.peer, lines, progress=shown, go_on=True)
    except NotAuthenticated as exc:
        if not args.insecure:
            raise
        raise PeerError(
            f"{args.peer} would not talk plain text: it serves mutual TLS, and this sync used "
            "--insecure (plain text, loopback only, for nodes in no mesh); drop --insecure"
        ) from exc
    for report in reports:
        for warning in refusal_warnings(report, args.peer).values():
            print(f"warning: {warning}", file=sys.stderr)
    failed = [r for r in reports if r.error is not None]  # refused there: the others synced
    if args.json:
        print_json([r.to_dict() for r in reports])
    else:
        reader = node.security.role is MeshRole.READER
        for report in (r for r in reports if r.error is None):
            print(_report_text(report, args.peer))
            if reader:
                print(
                    f"  (this node is a reader: its own entries never leave it; line "
                    f"{report.line!r} only receives)"
                )
    if failed:
        raise _not_synced(failed, len(lines))
    return 0


def _not_synced(failed: list[SyncReport], asked: int) -> PermissionDenied:
    """The one error `sync` ends with when the peer refused some lines (the others synced,
    their reports printed)."""
    if len(failed) == 1 and asked == 1:
        return PermissionDenied(str(failed[0].error))
    names = ", ".join(repr(r.line) for r in failed)
    reasons = "; ".join(str(r.error) for r in failed)
    return PermissionDenied(
        f"{count(len(failed), 'line')} of {asked} did not sync ({names}): {reasons}"
    )


class _Stored:
    """`sync`'s counter on a terminal (stderr, not with ``--json``): a large pull says how
    far it is, a line at a time, as its received batches are stored."""

    def __init__(self, args: argparse.Namespace, peer: str) -> None:
        self.args, self.peer = args, peer
        self.shown: Progress | None = None
        self.line: str | None = None

    def __enter__(self) -> _Stored:
        return self

    def __exit__(self, *_exc: object) -> None:
        if self.shown is not None:
            self.shown.close()

    def __call__(self, report: SyncReport) -> None:
        if self.shown is None or report.line != self.line:
            self.__exit__()
            self.line = report.line
            self.shown = progress_for(self.args, f"line {report.line!r} from {self.peer}:")
        self.shown.update(
            report.entries_added,
            note=f"entries and {report.attestations_added:,} signatures and statements stored",
        )


def _warn_no_joins(args: argparse.Namespace, node: Node) -> None:
    """--join-listen where no join is served: a warning, not an error, so a unit or compose
    file that sets it on every node (or hub process) keeps them serving."""
    if args.join_listen is None:
        return
    if node.security.insecure:
        why = "--insecure serves no joins"
    elif not holds_ca_key(node.home):
        why = (
            "this node does not hold the mesh CA key, so it serves no joins (the node that "
            "created the mesh does; `lifeline-mesh members` names it)"
        )
    else:
        return
    print(f"warning: --join-listen {args.join_listen} ignored: {why}", file=sys.stderr)


def _report_text(r: SyncReport, peer: str) -> str:
    if r.role == "shallow":
        return (
            f"line {r.line!r} from {peer}: shallow, {count(r.entries_added, 'entry', 'entries')}"
            f" in force taken with "
            f"{count(r.signatures_received, 'signature or statement', 'signatures and statements')}"
            ", signed "
            f"by the peer; {r.bytes_received} bytes in; {r.seconds:.3f}s (`sync` deepens it)"
        )
    if r.role == "push":
        return (
            f"line {r.line!r} to {peer}: pushed {count(r.entries_sent, 'entry', 'entries')} "
            f"written since the shallow snapshot; {r.bytes_sent} bytes out; {r.seconds:.3f}s"
        )
    return (
        f"line {r.line!r} with {peer}: sent {count(r.entries_sent, 'entry', 'entries')}, received "
        f"{r.entries_received} ({r.ts_lowered} with an earlier ts); signatures "
        f"{r.signatures_sent} out / {r.signatures_received} in; "
        f"protocol bytes {r.bytes_sent} out / {r.bytes_received} in; "
        f"{count(r.round_trips, 'round trip')}; {r.seconds:.3f}s"
    )


async def cmd_share(args: argparse.Namespace) -> int:
    home = node_home(args)
    name = validate_line_name(args.name)
    # Sharing a line that does not exist is a typo, except the sessions line, which the
    # first ingest creates (`serve --sessions` right after sharing it).
    if name != _sessions_line(home):
        home.require_line(name)
    config = NodeConfig.load(home)
    if name not in config.shared_lines:
        config.shared_lines = sorted([*config.shared_lines, name])
        config.save(home)
    print(f"line {name!r} is shared with the mesh")
    return 0


async def cmd_unshare(args: argparse.Namespace) -> int:
    home = node_home(args)
    name = validate_line_name(args.name)
    config = NodeConfig.load(home)
    config.shared_lines = [line for line in config.shared_lines if line != name]
    config.save(home)
    print(f"line {name!r} is private: it is neither offered to nor accepted from peers")
    return 0


async def cmd_lines(args: argparse.Namespace) -> int:
    home = node_home(args)
    shared = set(NodeConfig.load(home).shared_lines)
    names = sorted(set(home.line_names()) | shared)
    rows = [{"line": n, "shared": n in shared} for n in names]
    if args.json:
        print_json(rows)
    elif not rows:
        print("no lines yet; create one with `lifeline init`")
    else:
        for row in rows:
            print(f"{row['line']:<20} {'shared' if row['shared'] else 'private'}")
    return 0


async def _watch_sessions(node: Node, line: str, stop: asyncio.Event) -> None:
    """``serve --sessions``: transcripts into the sessions line, beside the server."""
    if line not in node.config().shared_lines:
        print(
            f"sessions go to line {line!r}, which is not shared: run "
            f"`lifeline-mesh share {line}` for peers to receive them",
            file=sys.stderr,
        )
    from lifeline.sessions.ingest.watch import watch_project

    failing = False

    def ingested(_result: object) -> None:
        nonlocal failing
        if failing:
            log.warning("serve --sessions: transcripts are ingested again")
            failing = False

    # A sessions line that cannot be written (locked by another process past the wait, a
    # full disk) stops the watcher, not the node: said once, tried again until it works.
    while not stop.is_set():
        try:
            await watch_project(node.home, stop, announce=ingested)
        except (LifelineError, OSError) as exc:
            if not failing:
                log.warning(
                    "serve --sessions: %s; the node goes on serving and tries the transcripts "
                    "again every %d s (said once until they are ingested)",
                    exc,
                    SESSIONS_RETRY_S,
                )
            failing = True
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), timeout=SESSIONS_RETRY_S)
