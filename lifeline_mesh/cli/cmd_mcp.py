"""`lifeline-mesh mcp`: serve this node's ledger to agents -- over stdio to the agents on this
machine, or with ``--http`` to agents elsewhere holding a bearer token (`mcp token ...`)."""

from __future__ import annotations

import argparse
import os
import re
import sys
from pathlib import Path

from lifeline.cli.common import (
    Commands,
    add_json_option,
    add_line_option,
    default_author,
    line_of,
    print_json,
    root_of,
)
from lifeline.errors import ConfigError
from lifeline.lines import DEFAULT_LINE
from lifeline.validate import DEFAULT_LIMITS
from lifeline.wording import count
from lifeline_mesh.cli.home_arg import node_home
from lifeline_mesh.home.identity import NodeIdentity
from lifeline_mesh.home.node_home import NodeHome
from lifeline_mesh.mcp.install import (
    CLIENTS,
    CODEX_AGENT,
    codex_snippet,
    install,
    server_command,
)
from lifeline_mesh.mcp.tokens import DEFAULT_TTL, ROLES, TokenBook, TokenSpec
from lifeline_mesh.mcp.workspace import Workspace
from lifeline_mesh.membership.certs import identity_from_cert
from lifeline_mesh.membership.invite import parse_duration
from lifeline_mesh.transport.addresses import address_arg, split_address

__all__ = ["register"]

SERVER_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")  # a key every client's file takes as it is


def register(sub: Commands, parent: argparse.ArgumentParser) -> None:
    p = sub.add_parser(
        "mcp",
        parents=[parent],
        help="serve the MCP tools (context, append, checkpoint, ...) over stdio or HTTP",
        description="Serve this node's lines to an MCP client over stdin/stdout: configure "
        "your client to run `lifeline-mesh mcp --root /path/to/project`. With --http, serve "
        "agents on other machines over streamable HTTP (TLS, bearer tokens from `mcp token "
        "issue`). See docs/mcp.md.",
    )
    add_line_option(p, "the line the tools read and write by default (default: ledger)")
    p.add_argument(
        "--agent",
        default=None,
        help="the name writes are recorded under and the write policy applies to "
        "(default: $LIFELINE_AGENT, else 'mcp'; over --http: each token's agent)",
    )
    p.add_argument("--author", default=None, help="who (default: $LIFELINE_AUTHOR or $USER)")
    p.add_argument(
        "--http",
        type=address_arg(listen=True),
        metavar="HOST:PORT",
        help="serve streamable HTTP at https://HOST:PORT/mcp instead of stdio (port 0: any "
        "free port, printed); every request needs a bearer token of this node",
    )
    p.add_argument(
        "--tls-cert",
        type=Path,
        metavar="PEM",
        help="--http: serve this certificate (e.g. one for the hub's public name) instead "
        "of the node's mesh certificate; needs --tls-key",
    )
    p.add_argument("--tls-key", type=Path, metavar="PEM", help="--http: the key of --tls-cert")
    p.add_argument(
        "--insecure",
        action="store_true",
        help="--http: plain HTTP, refused off loopback (e.g. behind a TLS proxy on this host)",
    )
    p.add_argument(
        "--stateless",
        action="store_true",
        help="--http: keep no MCP session between requests, so any hub process behind a "
        "load balancer can answer any request (no sticky sessions; docs/hub.md)",
    )
    p.add_argument(
        "--allow-host",
        action="append",
        default=[],
        metavar="NAME",
        help="--http --insecure: answer requests that reach this server by this host name "
        "too (repeatable; localhost and IP addresses always work; other names are refused, "
        "so a web page cannot rename this address; over TLS the certificate decides)",
    )
    p.set_defaults(func=cmd_mcp)
    _register_tokens(p, parent)


def _register_tokens(mcp: argparse.ArgumentParser, parent: argparse.ArgumentParser) -> None:
    subs = mcp.add_subparsers(
        dest="mcp_command",
        metavar="[token|install]",
        help="`mcp` alone serves on stdio, `mcp --http HOST:PORT` over HTTP; "
        "`mcp token ...` issues, lists and revokes the bearer tokens of --http; "
        "`mcp install CLIENT` writes the project's configuration for an MCP client",
    )
    _register_install(subs, parent)
    tokens = subs.add_parser(
        "token",
        parents=[parent],
        help="issue, list or revoke the bearer tokens of `mcp --http`",
        description="Bearer tokens for the remote MCP server of this node. The token is "
        "printed once; the node keeps only its SHA-256 (.lifeline/mesh/mcp-tokens.json).",
    )
    actions = tokens.add_subparsers(dest="token_action", metavar="ACTION", required=True)
    p = actions.add_parser(
        "issue",
        parents=[parent],
        help="make a token; prints it once",
        description="Make a bearer token for `mcp --http` on this node. A reader calls the "
        "read tools; a member also writes, under the write policy, as the token's agent.",
    )
    p.add_argument("name", metavar="NAME", help="what the token is for, e.g. ci-docs")
    p.add_argument("--role", choices=ROLES, default="reader", help="default: reader")
    p.add_argument(
        "--ttl", default=f"{DEFAULT_TTL.days}d", help="lifetime, e.g. 12h, 30d (default: 30d)"
    )
    p.add_argument(
        "--agent", default=None, help="the agent its writes are recorded under (default: NAME)"
    )
    add_json_option(p)
    p.set_defaults(func=cmd_token_issue)
    p = actions.add_parser("list", parents=[parent], help="the tokens issued here and their state")
    add_json_option(p)
    p.set_defaults(func=cmd_token_list)
    p = actions.add_parser(
        "revoke", parents=[parent], help="refuse a token from its next request on"
    )
    p.add_argument("name", metavar="NAME", help="the token's name (or its token id)")
    p.set_defaults(func=cmd_token_revoke)


def _register_install(subs: Commands, parent: argparse.ArgumentParser) -> None:
    p = subs.add_parser(
        "install",
        parents=[parent],
        help="write the project's MCP configuration for a client (claude-code, cursor, ...)",
        description="Add `lifeline-mesh mcp` on this project to the configuration an MCP "
        "client reads in the project: claude-code (.mcp.json), cursor (.cursor/mcp.json), "
        "vscode (.vscode/mcp.json), gemini (.gemini/settings.json); for codex, print the "
        "TOML to add to its config.toml. Other servers and keys of the file are kept; "
        "lifeline-context's `lifeline-mcp` entry is replaced.",
    )
    p.add_argument(
        "client", choices=[*CLIENTS, "codex"], metavar="CLIENT", help=", ".join([*CLIENTS, "codex"])
    )
    add_line_option(p, "the line the tools use by default (default: ledger)")
    p.add_argument(
        "--agent",
        default=None,
        help="the name its writes are recorded under (default: the "
        "client's: claude-code, cursor, copilot, gemini, codex)",
    )
    p.add_argument("--name", default="lifeline", help="the server's name (default: lifeline)")
    p.add_argument(
        "--force",
        action="store_true",
        help="replace an entry of that name that runs another command",
    )
    add_json_option(p)
    p.set_defaults(func=cmd_mcp_install)


async def cmd_mcp_install(args: argparse.Namespace) -> int:
    root = root_of(args).resolve()
    if not NodeHome(root).exists():
        raise ConfigError(f"{root} holds no .lifeline/; run `lifeline init` there first")
    if not SERVER_NAME.fullmatch(args.name):
        raise ConfigError(f"--name {args.name!r}: use 1 to 64 letters, digits, '-' or '_'")
    named = line_of(args)
    line = None if named == DEFAULT_LINE else named  # the entry names only another line
    command, note = server_command()
    if note:
        print(f"note: {note}", file=sys.stderr)
    if args.client == "codex":
        agent = args.agent or CODEX_AGENT
        snippet = codex_snippet(root, command=command, name=args.name, agent=agent, line=line)
        if args.json:
            print_json({"client": "codex", "path": None, "toml": snippet, "changed": False})
            return 0
        print(snippet, end="")
        print(
            "add this to .codex/config.toml (a trusted project) or ~/.codex/config.toml",
            file=sys.stderr,
        )
        return 0
    client = CLIENTS[args.client]
    done = install(
        root,
        client,
        command=command,
        name=args.name,
        agent=args.agent or client.agent,
        line=line,
        force=args.force,
    )
    if args.json:
        print_json(
            {
                "client": args.client,
                "path": str(done.path),
                "entry": done.entry,
                "changed": done.changed,
                "replaced": done.replaced,
            }
        )
        return 0
    if not done.changed:
        print(f"{done.path}: {args.name!r} already runs lifeline-mesh mcp here; nothing changed")
    elif done.replaced:
        print(f"{done.path}: {args.name!r} now runs lifeline-mesh mcp (it ran {done.replaced!r})")
    else:
        print(f"{done.path}: added {args.name!r}, which runs lifeline-mesh mcp on {root}")
    return 0


def _book(args: argparse.Namespace) -> TokenBook:
    home = node_home(args)
    identity = NodeIdentity.maybe_of(home)
    if identity is None:
        raise ConfigError(
            f"{home.root} has no node identity; run `lifeline-mesh init` first (tokens are bound "
            "to the node that issues them)"
        )
    return TokenBook(home, identity.node_id)


def _mesh_role(home: NodeHome) -> str | None:
    cert = home.tls_cert_path
    return identity_from_cert(cert.read_bytes()).role if cert.exists() else None


async def cmd_token_issue(args: argparse.Namespace) -> int:
    book = _book(args)
    if args.role == "member" and _mesh_role(book.home) == "reader":
        raise ConfigError(
            "this node is a reader in its mesh, so it cannot hand out write access; "
            "issue --role reader, or issue member tokens on a member node"
        )
    spec = TokenSpec(args.name, args.role, parse_duration(args.ttl, "--ttl"), args.agent)
    token, record = book.issue(spec)
    if args.json:
        print_json({"token": token, **record.model_dump(exclude={"sha256"})})
        return 0
    print(token)
    print(
        f"MCP token {spec.name!r}: role {record.role}, agent {record.agent!r}, "
        f"expires {record.expires_at}. It is shown once; keep it in the client's secret "
        "store (e.g. a CI secret) and send it as 'Authorization: Bearer TOKEN'.",
        file=sys.stderr,
    )
    return 0


async def cmd_token_list(args: argparse.Namespace) -> int:
    rows = _book(args).rows()
    if args.json:
        print_json({"tokens": [r.model_dump() for r in rows]})
        return 0
    if not rows:
        print("no MCP tokens issued here; `lifeline-mesh mcp token issue NAME` makes one")
        return 0
    for r in rows:
        until = f"revoked {r.revoked_at}" if r.revoked_at else f"until {r.expires_at}"
        print(f"{r.name:<20} {r.role:<7} {r.state:<8} {until}  agent={r.agent}")
    return 0


async def cmd_token_revoke(args: argparse.Namespace) -> int:
    revoked = _book(args).revoke(args.name)
    print(
        f"revoked {count(len(revoked), 'token')} named {args.name!r}; refused from the next request"
    )
    return 0


async def cmd_mcp(args: argparse.Namespace) -> int:
    agent = (args.agent or os.environ.get("LIFELINE_AGENT") or "mcp").strip()
    if not agent or len(agent.encode("utf-8")) > DEFAULT_LIMITS.field_bytes:
        raise ConfigError(
            f"--agent {agent!r} must be 1 to {DEFAULT_LIMITS.field_bytes} bytes; "
            "name the client, e.g. --agent claude-code"
        )
    extras = args.insecure or args.tls_cert or args.tls_key or args.stateless or args.allow_host
    if args.http is None and extras:
        raise ConfigError(
            "--insecure, --tls-cert, --tls-key, --stateless and --allow-host go with "
            "--http HOST:PORT"
        )
    ws = Workspace.open(
        NodeHome(root_of(args).resolve()),
        agent=agent,
        author=args.author or default_author(),
        line=line_of(args),
    )
    try:
        await _serve(args, ws)
    finally:
        ws.close()
    return 0


async def _serve(args: argparse.Namespace, ws: Workspace) -> None:
    # Imported here: the MCP SDK is heavy, and only this command needs it.
    from lifeline_mesh.mcp.server import serve_stdio

    if args.http is None:
        await serve_stdio(ws)
        return
    from lifeline_mesh.mcp.remote import HttpOptions, serve_http

    host, port = split_address(args.http, what="--http", listen=True)
    opts = HttpOptions(
        host,
        port,
        args.insecure,
        args.tls_cert,
        args.tls_key,
        stateless=args.stateless,
        allow_hosts=tuple(args.allow_host),
    )
    book = _book(args)
    book.load()  # a damaged or world-readable token book stops start-up, not the first call
    await serve_http(ws, opts, book)
