"""CI commands: `ci run|start|finish` for a job, `credentials` for the CA holder.

A CI credential itself is minted by `lifeline-mesh invite --ci NAME` (cmd_membership).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys

from lifeline.cli.common import Commands, add_json_option, creates_project, print_json
from lifeline.errors import ConfigError
from lifeline.wording import count
from lifeline_mesh.ci.job import (
    CiJob,
    finish_job,
    ingest_sessions,
    run_command,
    say_undelivered,
    start_job,
)
from lifeline_mesh.cli.cmd_membership import TOKEN_ENV
from lifeline_mesh.cli.home_arg import node_home
from lifeline_mesh.membership.credential import (
    credential_rows,
    revoke_credential,
    rotate_credential,
)
from lifeline_mesh.transport.addresses import address_arg

__all__ = ["register"]


def register(sub: Commands, parent: argparse.ArgumentParser) -> None:
    ci = sub.add_parser(
        "ci",
        parents=[parent],
        help="one CI job: enroll from $LIFELINE_MESH_TOKEN, pull, run, sync back",
        description=f"Enroll an ephemeral node with the CI credential in ${TOKEN_ENV}, pull "
        "its lines, export the context, run the command, sync back (docs/user-guide.md §3).",
    )
    steps = ci.add_subparsers(dest="ci_step", metavar="STEP", required=True)
    p = steps.add_parser(
        "run",
        parents=[parent],
        help="start, run CMD, finish; exits with CMD's status",
        description="Everything a job does, in one command: `ci run [--peer HOST:PORT] -- "
        "CMD ARG…`. Exit status: CMD's; 2 if the job could not enroll or pull (CMD not run).",
    )
    _peer_options(p)
    p.add_argument("command", nargs=argparse.REMAINDER, metavar="-- CMD…", help="the job")
    p.set_defaults(func=cmd_ci_run)
    creates_project(p)

    p = steps.add_parser(
        "start",
        parents=[parent],
        help="enroll and pull; writes .lifeline/ci/ (for jobs whose steps are separate)",
    )
    _peer_options(p)
    p.set_defaults(func=cmd_ci_start)
    creates_project(p)

    p = steps.add_parser(
        "finish", parents=[parent], help="ingest agent sessions if possible, then sync back"
    )
    p.set_defaults(func=cmd_ci_finish)
    creates_project(p)

    p = sub.add_parser(
        "credentials",
        parents=[parent],
        help="list, rotate or revoke CI credentials (on the CA holder)",
        description="`credentials [list]`, `credentials rotate NAME` (a new token, the old "
        "one refused), `credentials revoke NAME` (refused, and every runner it enrolled "
        "that still runs is revoked).",
    )
    p.add_argument("action", nargs="?", default="list", choices=["list", "rotate", "revoke"])
    p.add_argument("name", nargs="?", metavar="NAME", help="the credential (rotate, revoke)")
    p.add_argument("--reason", default="", help="revoke: why, in the signed statements")
    add_json_option(p)
    p.set_defaults(func=cmd_credentials)


def _peer_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--peer",
        type=address_arg(),
        metavar="HOST:PORT",
        help="the member to pull from and sync back to (default: the token's)",
    )
    p.add_argument(
        "--join-peer",
        type=address_arg(),
        metavar="HOST:PORT",
        help="the CA holder's join port (default: the token's)",
    )
    p.add_argument(
        "--full-history",
        action="store_true",
        help="pull every line's whole history (default: shallow — the current truth, its "
        "signatures and tips, signed by the peer; what the job writes is pushed back)",
    )


# `ci run` hands the credential to itself on this pipe (see _out_of_environ).
TOKEN_FD_ENV = "LIFELINE_MESH_TOKEN_FD"


def _out_of_environ() -> None:
    """Run this same command again with the credential out of its environment, handed over
    on a pipe: the job's command runs as the same user and could read the credential in
    ``/proc/PPID/environ`` for as long as the job lasts (the process's first environment
    stays there whatever ``os.environ`` says). Linux only; elsewhere nothing changes."""
    token = os.environ.get(TOKEN_ENV, "")
    if not token or TOKEN_FD_ENV in os.environ or not sys.platform.startswith("linux"):
        return
    read, write = os.pipe()
    os.write(write, token.encode())  # a token is far below a pipe's buffer
    os.close(write)
    os.set_inheritable(read, True)
    env = {k: v for k, v in os.environ.items() if k != TOKEN_ENV}
    env[TOKEN_FD_ENV] = str(read)
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        os.execve(sys.executable, sys.orig_argv, env)
    except OSError:  # cannot run ourselves again: go on with the credential where it is
        os.close(read)


PR_SET_DUMPABLE = 4  # prctl(2)


def _not_dumpable() -> None:
    """Linux: make this process non-dumpable. Other processes of its user — the job's
    command among them — can then neither read its memory (``/proc/PPID/mem``, where the
    credential it read lingers for the whole job) nor its environment or descriptors, nor
    trace it, wherever ptrace is not restricted further (no Yama, or ``ptrace_scope`` 0).
    A program it runs is dumpable again: execve resets the flag."""
    if not sys.platform.startswith("linux"):
        return
    import ctypes

    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)
    except (OSError, AttributeError):  # no prctl in this C library: nothing more to do
        return


def _token() -> str:
    fd = os.environ.pop(TOKEN_FD_ENV, None)
    if fd is not None and fd.isdigit():
        with os.fdopen(int(fd), "rb") as pipe:
            text = pipe.read(1 << 16).decode("utf-8", "replace").strip()
    else:
        # Out of the environment any program started from here inherits (a helper, the
        # projection on a failed sync), had running ourselves again failed.
        text = os.environ.pop(TOKEN_ENV, "").strip()
    if not text:
        raise ConfigError(
            f"${TOKEN_ENV} is empty: store the CI credential (`lifeline-mesh invite --ci NAME`) "
            "as a CI secret of that name and pass it to the job's environment"
        )
    return text


async def cmd_ci_start(args: argparse.Namespace) -> int:
    await start_job(
        node_home(args), _token(), args.peer, args.join_peer, shallow=not args.full_history
    )
    return 0


async def cmd_ci_finish(args: argparse.Namespace) -> int:
    job = CiJob.load(node_home(args))
    await ingest_sessions(job)
    await finish_job(job)
    return 0  # a failed sync is a warning: the job's own status is what counts


async def cmd_ci_run(args: argparse.Namespace) -> int:
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        raise ConfigError("no command to run; give it after --, e.g. `ci run -- make test`")
    _out_of_environ()
    _not_dumpable()  # before the credential is read: the command may read our memory
    job = await start_job(
        node_home(args), _token(), args.peer, args.join_peer, shallow=not args.full_history
    )
    try:
        status = run_command(job, command)
        await ingest_sessions(job)
        await finish_job(job)
    except (KeyboardInterrupt, asyncio.CancelledError):
        # Ctrl-C: the command got it too and may have written already; asyncio.run turns
        # the cancelled task into the CLI's "interrupted", exit 130.
        say_undelivered(job)
        raise
    return status


async def cmd_credentials(args: argparse.Namespace) -> int:
    home = node_home(args)
    if args.action != "list" and not args.name:
        raise ConfigError(f"`credentials {args.action}` needs the credential's NAME")
    if args.action == "rotate":
        token = rotate_credential(home, args.name)
        if args.json:
            print_json({"name": args.name, "token": token.encode()})
        else:
            print(token.encode())
            print(
                f"credential {args.name!r} rotated: store this token in the CI secret; "
                "the old one is refused from now on",
                file=sys.stderr,
            )
        return 0
    if args.action == "revoke":
        revoked = revoke_credential(home, args.name, args.reason)
        if args.json:
            print_json({"name": args.name, "runners_revoked": [r.node_id for r in revoked]})
        else:
            running = count(len(revoked), "running runner")
            print(f"credential {args.name!r} revoked; {running} revoked")
        return 0
    rows = credential_rows(home)
    if args.json:
        print_json(rows)
    elif not rows:
        print("no CI credentials; mint one with `lifeline-mesh invite --ci NAME`")
    for row in [] if args.json else rows:
        uses = "unlimited" if row["uses"] is None else row["uses"]
        print(
            f"{row['name']:<16} {row['state']:<9} {row['role']:<6} used {row['used']}/{uses}  "
            f"runners {row['runners']}  expires {row['expires_at']}  lines "
            f"{','.join(row['lines']) or '-'}"
        )
    return 0
