"""Membership commands: invite, join, revoke, members, membership-serve.

A mesh itself is created by `lifeline-mesh init --new-mesh NAME` (cmd_init).
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import os
import sys
from collections.abc import Iterable
from typing import Any

from lifeline.cli.common import Commands, add_json_option, creates_project, print_json
from lifeline.cli.stdin import read_stdin
from lifeline.errors import ConfigError
from lifeline.lines import validate_line_name
from lifeline.wording import count, one_line
from lifeline_mesh.cli.home_arg import node_home
from lifeline_mesh.cli.stopping import stop_on_signals
from lifeline_mesh.home.config import NodeConfig
from lifeline_mesh.home.node_home import NodeHome
from lifeline_mesh.home.state import NodeState, pid_alive, read_node_state
from lifeline_mesh.membership.ca import load_ca_cert
from lifeline_mesh.membership.client import pull_membership
from lifeline_mesh.membership.credential import CredentialSpec, issue_credential
from lifeline_mesh.membership.invite import Token, issue_invite, parse_duration
from lifeline_mesh.membership.join import join
from lifeline_mesh.membership.proof import RowProof
from lifeline_mesh.membership.registry import ROLES, Registry, iso
from lifeline_mesh.membership.revocation import RevocationList, revoke
from lifeline_mesh.notary.enrollment import Runner, seen_runners
from lifeline_mesh.transport.addresses import address_arg, is_loopback, split_address
from lifeline_mesh.transport.call_caps import raise_open_file_limit

__all__ = ["TOKEN_ENV", "register"]

TOKEN_ENV = "LIFELINE_MESH_TOKEN"
WILDCARD_HOSTS = frozenset({"0.0.0.0", "::"})  # every interface: not an address to dial
MAX_TOKEN_CHARS = 4096  # a token is ~110 characters plus its join addresses


def register(sub: Commands, parent: argparse.ArgumentParser) -> None:
    p = sub.add_parser(
        "invite",
        parents=[parent],
        help="print a one-time join token (or, with --ci, a CI credential)",
        description="Print a one-time join token; with --ci NAME, a CI enrollment credential "
        "to store as a CI secret: each job enrolls an ephemeral node with it (`ci run`).",
    )
    p.add_argument("--role", choices=ROLES, default="member", help="member (default) or reader")
    p.add_argument(
        "--ttl", default=None, help="how long the token works (default 24h, --ci 90d; 10m, 7d…)"
    )
    p.add_argument(
        "--address",
        action="append",
        default=[],
        type=address_arg(),
        metavar="HOST:PORT",
        help="a join port the newcomer should dial (repeatable; default: the join port of the "
        "node serving this root, if it has one another host can dial; else `join --peer`)",
    )
    ci = p.add_argument_group("CI credential")
    ci.add_argument("--ci", metavar="NAME", help="mint a reusable CI credential named NAME")
    ci.add_argument(
        "--uses", default="unlimited", type=_uses, help="jobs it may enroll (default unlimited)"
    )
    ci.add_argument(
        "--lines",
        default=None,
        help="lines a job pulls, and the only ones its runners may read or write, L1,L2 "
        "(default: the lines this node shares now)",
    )
    ci.add_argument(
        "--job-ttl", default="6h", help="a runner certificate's life (default 6h; capped by --ttl)"
    )
    ci.add_argument(
        "--sync-address",
        action="append",
        default=[],
        type=address_arg(),
        metavar="HOST:PORT",
        help="sync port jobs pull from and sync back to (default: that of the node serving "
        "this root, if another host can dial it; else `ci run --peer`)",
    )
    add_json_option(p)
    p.set_defaults(func=cmd_invite)

    p = sub.add_parser("join", parents=[parent], help="join a mesh with an invite token")
    p.add_argument(
        "token",
        nargs="?",
        metavar="TOKEN",
        help=f"the token; '-' reads it from standard input, which keeps it out of `ps` "
        f"(default: ${TOKEN_ENV})",
    )
    p.add_argument(
        "--peer",
        metavar="HOST:PORT",
        type=address_arg(),
        help="dial this member instead of the token's",
    )
    p.add_argument(
        "--shallow",
        metavar="HOST:PORT",
        type=address_arg(),
        help="then share the lines (`--line`, default ledger) and take them shallow from this "
        "member's sync port, in this process: the same as `lifeline init`, `share` and "
        "`sync --shallow HOST:PORT` after joining; `serve` deepens them later",
    )
    p.add_argument(
        "--line",
        dest="lines",
        action="append",
        metavar="NAME",
        type=validate_line_name,
        help="a line `--shallow` takes (repeatable; default: ledger)",
    )
    add_json_option(p)
    p.set_defaults(func=cmd_join)
    creates_project(p)

    p = sub.add_parser("revoke", parents=[parent], help="revoke a node (needs the CA key)")
    p.add_argument("node_id", metavar="NODE_ID")
    p.add_argument("--reason", default="", help="why, recorded in the signed statement")
    add_json_option(p)
    p.set_defaults(func=cmd_revoke)

    p = sub.add_parser("members", parents=[parent], help="list members, roles and status")
    p.add_argument(
        "--pull",
        metavar="HOST:PORT",
        type=address_arg(),
        help="first fetch revocations and the members rows the mesh CA's certificates prove "
        "from this member (mutual TLS)",
    )
    p.add_argument("--all", action="store_true", help="also CI runners whose certificates expired")
    add_json_option(p)
    p.set_defaults(func=cmd_members)

    p = sub.add_parser(
        "membership-serve",
        parents=[parent],
        help="serve joins (and member checks) until SIGINT, SIGTERM or SIGHUP",
    )
    listen = address_arg(listen=True)
    p.add_argument(
        "--listen", default="127.0.0.1:0", type=listen, help="join port (default 127.0.0.1:0)"
    )
    p.add_argument("--mtls-listen", default="127.0.0.1:0", type=listen, help="mutual-TLS port")
    p.set_defaults(func=cmd_membership_serve)


def _fields(obj: Any) -> dict[str, Any]:
    return {name: getattr(obj, name) for name in obj.__slots__}


def _uses(text: str) -> int | None:
    if text == "unlimited":
        return None
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of uses >= 1 or 'unlimited'")
    return int(text)


def _defaulted(given: list[str], served: str | None, flag: str, what: str) -> list[str]:
    """The addresses a token names: those given, else the one this root's node serves on
    when another process can dial it (a wildcard host is no address)."""
    if given or served is None:
        return given
    host, _port = split_address(served, listen=True)
    if host in WILDCARD_HOSTS:
        print(
            f"note: the node serving here listens for {what} on {served}, which no one can "
            f"dial; pass {flag} with an address of this host to name it in the token",
            file=sys.stderr,
        )
        return given
    reach = " (loopback: from this machine only)" if is_loopback(host) else ""
    print(
        f"note: the token names the {what} port of the node serving here, {served}{reach}; "
        f"{flag} names another",
        file=sys.stderr,
    )
    return [served]


def _served(home: NodeHome) -> NodeState | None:
    """The state of the node serving this root now, if one does."""
    try:
        state = read_node_state(home)
    except ConfigError:
        return None  # a damaged state file: the token names what was given
    return state if state is not None and pid_alive(state.pid) else None


def _addresses(args: argparse.Namespace, home: NodeHome) -> tuple[list[str], list[str]]:
    """(join ports, sync ports) for the token: given, else where this root's node serves
    (the sync port only for a CI credential, whose jobs pull from it)."""
    state = _served(home)
    joins = _defaulted(list(args.address), state.join if state else None, "--address", "join")
    if not args.ci:
        return joins, []
    listen = state.listen if state else None
    syncs = _defaulted(list(args.sync_address), listen, "--sync-address", "sync")
    return joins, syncs


def _credential(
    args: argparse.Namespace, home: NodeHome, joins: list[str], syncs: list[str]
) -> Token:
    lines = args.lines.split(",") if args.lines else NodeConfig.load(home).shared_lines
    spec = CredentialSpec(
        name=args.ci,
        role=args.role,
        ttl=parse_duration(args.ttl or "90d", "--ttl"),
        uses=args.uses,
        job_ttl=parse_duration(args.job_ttl, "--job-ttl"),
        lines=tuple(validate_line_name(n.strip()) for n in lines if n.strip()),
        addresses=tuple(joins),
        sync_addresses=tuple(syncs),
    )
    return issue_credential(home, spec)


async def cmd_invite(args: argparse.Namespace) -> int:
    home = node_home(args)
    joins, syncs = _addresses(args, home)
    if args.ci:
        token = _credential(args, home, joins, syncs)
    else:
        ttl = parse_duration(args.ttl or "24h", "--ttl")
        token = issue_invite(home, args.role, ttl, joins)
    if not joins:
        dial = "`ci run --peer`" if args.ci else "`join --peer HOST:PORT`"
        print(
            f"note: the token names no join port (no node serves here with one): the "
            f"newcomer dials one with {dial}, or invite again with --address HOST:PORT",
            file=sys.stderr,
        )
    expires = dt.datetime.fromtimestamp(token.expires, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    if args.json:
        print_json(
            {
                "token": token.encode(),
                "role": token.role,
                "expires_at": expires,
                "ci": args.ci,
                "addresses": joins,
                "sync_addresses": syncs,
            }
        )
        return 0
    print(token.encode())
    if args.ci:
        uses = "unlimited uses" if args.uses is None else f"{args.uses} uses"
        print(
            f"CI credential {args.ci!r} ({token.role}, {uses}, lines "
            f"{','.join(token.lines) or 'ledger'}), expires {expires}: store it as the CI "
            "secret LIFELINE_MESH_TOKEN",
            file=sys.stderr,
        )
    else:
        print(f"one-time {token.role} invite, expires {expires}", file=sys.stderr)
    return 0


def _token_text(arg: str | None) -> str:
    """The token from the argument, standard input (``-``) or the environment."""
    text = arg or os.environ.get(TOKEN_ENV, "")
    if arg == "-":
        if sys.stdin.isatty():
            print("paste the invite token, then Enter:", file=sys.stderr)
        text = read_stdin(lambda: sys.stdin.readline(MAX_TOKEN_CHARS + 1))
        if len(text) > MAX_TOKEN_CHARS:
            raise ConfigError(
                f"standard input holds more than {MAX_TOKEN_CHARS} characters; "
                "pipe only the token printed by `lifeline-mesh invite`"
            )
    text = text.strip()
    if not text:
        raise ConfigError(
            f"no token: pipe it to `lifeline-mesh join -` or set {TOKEN_ENV} "
            "(from `lifeline-mesh invite`)"
        )
    return text


async def cmd_join(args: argparse.Namespace) -> int:
    if args.lines and not args.shallow:
        raise ConfigError("--line names the lines `--shallow HOST:PORT` takes; add --shallow")
    text = _token_text(args.token)
    home = node_home(args)
    joined = await join(home, text, args.peer)
    taken = [] if args.shallow is None else await _take_shallow(home, args.shallow, args.lines)
    if args.json:
        print_json({**_fields(joined), **({"lines": taken} if args.shallow else {})})
        return 0
    print(f"joined mesh {joined.mesh_id} as {joined.node_id} ({joined.role}) via {joined.address}")
    if not taken and not NodeConfig.load(home).shared_lines:
        # what a new member runs next: a sync sends and takes only the lines shared here
        print(
            "next: `lifeline-mesh share LINE` for each line to exchange with the mesh (e.g. "
            "ledger), then `lifeline-mesh sync HOST:PORT` or `lifeline-mesh serve`",
            file=sys.stderr,
        )
    for report in taken:
        how = "shallow" if report["role"] == "shallow" else "in full (the peer serves no snapshot)"
        print(
            f"line {report['line']!r} from {args.shallow}: {how}, "
            f"{count(report['entries_added'], 'entry', 'entries')}; `serve` deepens it in the "
            "background"
        )
    return 0


async def _take_shallow(home: NodeHome, peer: str, names: list[str] | None) -> list[dict[str, Any]]:
    """Share ``names`` (made when new) and take them shallow from ``peer``: a new laptop's
    first lines in the process that joined (decision 0082), not three more."""
    from lifeline_mesh.node.root import Node
    from lifeline_mesh.node.shallow_join import shallow_sync

    lines = names or ["ledger"]
    config = NodeConfig.load(home)
    config.shared_lines = sorted({*config.shared_lines, *lines})
    config.save(home)
    reports = await shallow_sync(Node(home), peer, lines)
    return [r.to_dict() for r in reports]


async def cmd_revoke(args: argparse.Namespace) -> int:
    home = node_home(args)
    statement = revoke(home, args.node_id, args.reason)
    if statement.node_id not in Registry.load(home).members:
        print(
            f"warning: {statement.node_id} is not in the members list; revoked anyway",
            file=sys.stderr,
        )
    if args.json:
        print_json(_fields(statement))
    else:
        print(f"revoked {statement.node_id} at {statement.revoked_at}")
    return 0


async def cmd_members(args: argparse.Namespace) -> int:
    home = node_home(args)
    if args.pull:
        new = await pull_membership(home, args.pull)
        for statement in new:
            print(
                f"learned: {statement.node_id} revoked at {statement.revoked_at}", file=sys.stderr
            )
    registry = Registry.load(home)
    ca_cert = load_ca_cert(home)
    runners = seen_runners(home, ca_cert).values() if args.all else ()
    rows = _member_rows(registry, RevocationList.load(home), show_all=args.all, runners=runners)
    proof = RowProof(ca_cert)
    for row in rows:  # a row without the CA's certificate is listed, and marked untrusted
        member, gone = registry.members.get(row["node_id"]), registry.retired.get(row["node_id"])
        if member is not None:
            row["proven"] = proof.member(member) is None
        else:  # a runner proven by its enrollment in a line, or a legacy retired row
            row["proven"] = gone is None or proof.retired(gone, dt.datetime.now(dt.UTC)) is None
        row.pop("cert", None)
    if args.json:
        print_json({"mesh_id": registry.mesh_id, "name": registry.name, "members": rows})
        return 0
    print(f"mesh {registry.name!r} ({registry.mesh_id})")
    for row in rows:
        extra = f" since {row['revoked_at']}" if row["revoked_at"] else ""
        holder = "  ca holder" if row["ca_holder"] else ""
        if row.get("credential"):
            holder = f"  CI runner ({row['credential']}) until {row['expires_at']}"
        status = f"{row['status']}{extra}"
        if not row["proven"]:
            holder += "  NO CA PROOF: not trusted (decision 0047)"
        joined = f"{row['node_id']}  {row['role']:<6}  {status}  joined {row['joined_at']}"
        print(one_line(joined + holder))
    return 0


def _member_rows(
    registry: Registry,
    revoked: RevocationList,
    *,
    show_all: bool,
    runners: Iterable[Runner] = (),
) -> list[dict[str, Any]]:
    """Members; with ``show_all`` also expired runners, status ``expired``: the ones this
    node's lines hold the enrollment of (``runners``), and the legacy retired rows."""
    now = iso(dt.datetime.now(dt.UTC))
    rows = []
    for member in sorted(registry.members.values(), key=lambda m: m.joined_at):
        when = revoked.revoked_at(member.node_id) or member.revoked_at
        expired = member.expires_at is not None and member.expires_at <= now
        if expired and not show_all:
            continue
        status = "revoked" if when else "expired" if expired else member.status
        rows.append({**_fields(member), "status": status, "revoked_at": when})
    if show_all:
        for runner in sorted(runners, key=lambda r: r.expires_at):
            if runner.node_id in registry.members or runner.node_id in registry.retired:
                continue
            when = revoked.revoked_at(runner.node_id)
            rows.append(
                {
                    "node_id": runner.node_id,
                    "role": runner.role,
                    "status": "revoked"
                    if when
                    else "expired"
                    if runner.expires_at <= now
                    else "active",
                    "revoked_at": when,
                    "joined_at": "-",
                    "expires_at": runner.expires_at[:19] + "Z",
                    "credential": runner.credential,
                    "ca_holder": False,
                }
            )
        for gone in sorted(registry.retired.values(), key=lambda r: r.expires_at):
            when = revoked.revoked_at(gone.node_id)
            rows.append(
                {
                    "node_id": gone.node_id,
                    "role": "-",
                    "status": "revoked" if when else "expired",
                    "revoked_at": when,
                    "joined_at": "-",
                    "expires_at": gone.expires_at,
                    "credential": gone.credential,
                    "ca_holder": False,
                }
            )
    return rows


async def cmd_membership_serve(args: argparse.Namespace) -> int:
    raise_open_file_limit()  # decision 0134
    from lifeline_mesh.node.membership_server import serve_membership  # only this command

    served = await serve_membership(node_home(args), args.listen, args.mtls_listen)
    stop = asyncio.Event()
    stop_on_signals(stop)
    # One JSON line on stdout: how scripts and tests learn the ports (port 0 = any free one).
    print(json.dumps({"join_port": served.join_port, "mtls_port": served.mtls_port}), flush=True)
    try:
        await stop.wait()
    finally:
        await served.stop()
    return 0
