"""`lifeline-mesh` identity and notary commands: id, verify, sign."""

from __future__ import annotations

import argparse
import sys

from lifeline.cli.common import (
    Commands,
    add_json_option,
    add_line_option,
    external_checker,
    open_line,
    print_json,
)
from lifeline.cli.progress import progress_for
from lifeline.errors import ConfigError
from lifeline.ledger import utc_now
from lifeline.lines import validate_line_name
from lifeline.wording import count, one_line
from lifeline_mesh.cli.home_arg import node_home
from lifeline_mesh.home.identity import NodeIdentity
from lifeline_mesh.membership.ca import load_ca_cert
from lifeline_mesh.notary.audit import LineReport, audit_line, write_json
from lifeline_mesh.notary.enrollment import EnrolledSigners
from lifeline_mesh.notary.rules import DEFAULT_BACKDATE_WINDOW_S, DEFAULT_SKEW_S, Policy
from lifeline_mesh.notary.shallow_head import audit_shallow
from lifeline_mesh.notary.sign import sign_unsigned
from lifeline_mesh.notary.signers import FileSigners, KnownSigners

__all__ = ["register"]

NOTES_SHOWN = 3  # notes (e.g. thousands of unsigned imports) are summarised, not listed


def register(sub: Commands, parent: argparse.ArgumentParser) -> None:
    p = sub.add_parser("id", parents=[parent], help="print this node's id")
    add_json_option(p)
    p.set_defaults(func=cmd_id)

    p = sub.add_parser(
        "verify",
        parents=[parent],
        help="audit every entry: ids, parents, signatures, signers, times; exit 1 on failure",
        description="Audit every line of the project (only LINE with --line): ids, parents, "
        "signatures, signers, times, and the truth tables `context` reads against the "
        "entries. Exit 0 when clean, 1 when anything failed. Truth tables that differ are "
        "rebuilt from the entries (reported as truth-rebuilt).",
    )
    add_line_option(p, "audit only this line (default: every line)")
    add_json_option(p, "machine-readable report")
    p.add_argument(
        "--skew",
        type=_seconds,
        default=DEFAULT_SKEW_S,
        metavar="SECONDS",
        help=f"clock-skew tolerance between nodes (default: {DEFAULT_SKEW_S:g})",
    )
    p.add_argument(
        "--backdate-window",
        type=_seconds,
        default=DEFAULT_BACKDATE_WINDOW_S,
        metavar="SECONDS",
        help="how long before its first witness an entry may claim to be written "
        f"(default: {DEFAULT_BACKDATE_WINDOW_S:g}, one day)",
    )
    p.add_argument(
        "--require-signed",
        action="store_true",
        help="count every unsigned entry as a failure (by default only those on a line "
        "its nodes sign fail)",
    )
    p.add_argument(
        "--allow-unsigned",
        action="store_true",
        help="report unsigned entries on a line its nodes sign as notes, not failures "
        "(entries imported from lifeline-context; or attest them with `sign --unsigned`)",
    )
    p.set_defaults(func=cmd_verify)

    p = sub.add_parser(
        "sign",
        parents=[parent],
        help="attest entries that carry no signature as imported by this node (--unsigned)",
        description="With --unsigned: attest every entry of every line (only LINE with "
        "--line) that has no author signature and no import attestation -- entries "
        "imported from lifeline-context, or written before this node had an identity -- as "
        '"imported by" this node, dated now. This is custody, not authorship: verify '
        "reports such entries as imported, never as signed.",
    )
    p.add_argument(
        "--unsigned",
        action="store_true",
        help="attest the unsigned entries (required: the only kind of signing done here)",
    )
    add_json_option(p)
    p.set_defaults(func=cmd_sign)


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text!r} is negative; give seconds >= 0")
    return value


async def cmd_id(args: argparse.Namespace) -> int:
    identity = NodeIdentity.of(node_home(args))
    if args.json:
        print_json({"node_id": identity.node_id})
    else:
        print(identity.node_id)
    return 0


async def cmd_sign(args: argparse.Namespace) -> int:
    if not args.unsigned:
        raise ConfigError(
            "nothing to sign: local writes are signed as they are written; "
            "use `lifeline-mesh sign --unsigned` to attest imported or unsigned entries"
        )
    home = node_home(args)
    identity = NodeIdentity.of(home)
    line = getattr(args, "line", None)
    lines = [validate_line_name(line)] if line else home.line_names()
    if not lines:
        raise ConfigError(f"no lines under {home.root}; create one with `lifeline init`")
    now = utc_now()
    done: dict[str, int] = {}
    for name in lines:
        async with open_line(args, line=name) as store:
            done[name] = len(await sign_unsigned(store, identity, now))
    if args.json:
        print_json({"node_id": identity.node_id, "ts": now, "imported": done})
        return 0
    for name, n in done.items():
        print(
            f"line {name!r}: {n} unsigned entr{'y' if n == 1 else 'ies'} attested as "
            f"imported by {identity.node_id} at {now}"
        )
    return 0


def _local_node_id(args: argparse.Namespace) -> str | None:
    identity = NodeIdentity.maybe_of(node_home(args))
    return identity.node_id if identity is not None else None


async def cmd_verify(args: argparse.Namespace) -> int:
    home = node_home(args)
    line = getattr(args, "line", None)
    lines = [validate_line_name(line)] if line else home.line_names()
    if not lines:
        raise ConfigError(f"no lines under {home.root}; create one with `lifeline init`")
    local = _local_node_id(args)
    ca = home.ca_cert_path
    listed = FileSigners.load(home, local)
    signers: KnownSigners = listed
    if ca.exists():  # runners are resolved from their enrollments, checked against the CA
        signers = EnrolledSigners(signers, load_ca_cert(home))
    policy = Policy(
        local,
        args.skew,
        args.backdate_window,
        args.require_signed,
        allow_unsigned=args.allow_unsigned,
    )

    external_exists = external_checker(args)

    reports: list[LineReport] = []
    shallow: dict[str, tuple[str | None, str | None]] = {}
    for name in lines:
        async with open_line(args, line=name) as store:
            shallow[name] = await audit_shallow(store, name)
            with progress_for(args, f"verifying line {name}", await store.count()) as bar:
                reports.append(
                    await audit_line(
                        store,
                        name,
                        signers,
                        policy,
                        external_exists=external_exists,
                        advance=bar.advance,
                    )
                )
    ok = all(r.ok for r in reports) and not any(bad for _note, bad in shallow.values())
    try:
        unproven = [{"node_id": n, "reason": why} for n, why in listed.unproven]
        if args.json:  # written as the findings are read back: a line may hold millions
            head: dict[str, object] = {"ok": ok, "node_id": local, "unproven_members": unproven}
            notes = {n: {"note": t, "failure": f} for n, (t, f) in shallow.items() if t}
            if notes:
                head["shallow"] = notes
            write_json(sys.stdout, head, reports)
        else:
            _print_reports(reports, require_signed=args.require_signed)
            _print_unproven(unproven)
            _print_shallow(shallow)
    finally:
        for report in reports:
            report.log.close()
    return 0 if ok else 1


def _print_shallow(shallow: dict[str, tuple[str | None, str | None]]) -> None:
    """Lines that lack their older history (decision 0063): what verify covered there."""
    for note, failure in shallow.values():
        if note is not None:
            print(f"\n{note}")
        if failure is not None:
            print(f"  FAILED: {one_line(failure)}")


def _print_unproven(rows: list[dict[str, str]]) -> None:
    """Members rows this node holds without the mesh CA's proof: not trusted (0047)."""
    if not rows:
        return
    print(
        f"\nmembers: {count(len(rows), 'row')} "
        f"{'carries' if len(rows) == 1 else 'carry'} no proof from the mesh CA and "
        f"{'is' if len(rows) == 1 else 'are'} not trusted "
        "(a row is proven by the node's certificate; `lifeline-mesh members --pull "
        "HOST:PORT` fetches proven rows from a member)"
    )
    for row in rows:
        print(f"  {one_line(row['node_id'])}: {one_line(row['reason'])}")


def _print_reports(reports: list[LineReport], *, require_signed: bool) -> None:
    failed = [r for r in reports if not r.ok]
    total = sum(r.log.fails for r in reports)
    if failed:
        print(
            f"FAILED: {count(total, 'problem')} in {len(failed)} of {count(len(reports), 'line')}"
        )
    else:
        print(f"OK: {count(len(reports), 'line')} verified, no problems")
    for report in sorted(reports, key=lambda r: r.ok):
        v = report.verdict
        print(
            f"\nline {report.line!r}: {count(v.entries, 'entry', 'entries')} ({v.signed} "
            f"signed, {v.imported} imported, {v.unsigned} unsigned), "
            f"{count(v.attestations, 'attestation')}, "
            f"{count(report.log.fails, 'failure')}"
        )
        for f in report.log.failures():
            print(f"  {f.check:<21} {one_line(f.subject[:12])}  {one_line(f.detail)}")
        for check, n in sorted(report.log.notes.items()):
            shown = [s[:12] for s in report.log.examples(check)][:NOTES_SHOWN]
            more = f" and {n - len(shown)} more" if n > len(shown) else ""
            print(f"  note: {check} x{n} ({', '.join(shown)}{more})")
        if v.unsigned and not require_signed and "unsigned" in report.log.notes:
            print(
                "  (unsigned entries are not failures here: they were imported or written "
                "without a node identity; use --require-signed to fail on them, or attest "
                "them with `lifeline-mesh sign --unsigned`)"
            )
        elif v.unsigned and not require_signed:
            print(
                "  (this line's nodes sign what they write, so an unsigned entry fails: its "
                "signature was stripped or never sent; entries imported from lifeline-context "
                "pass with --allow-unsigned, or attest them with `lifeline-mesh sign "
                "--unsigned`)"
            )
