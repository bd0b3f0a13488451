"""A CI credential's ``--lines`` are the only lines its runners may use (decision 0120):
the node refuses a runner every other line, shared or not, by sync and by shallow sync,
and a node that dials a runner sends it none of them; the members list a runner is handed
names only the runners of its lines (decision 0125). Real processes throughout."""

from __future__ import annotations

import asyncio
import base64
import json
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives.serialization import Encoding

from lifeline.home import Home
from lifeline.ledger import Draft, Ledger
from lifeline.store.sqlite import SqliteStore
from lifeline_mesh.home.identity import NodeIdentity
from lifeline_mesh.home.node_home import NodeHome
from lifeline_mesh.membership.certs import identity_from_cert
from lifeline_mesh.membership.join import join
from lifeline_mesh.membership.service import lists_digest
from lifeline_mesh.membership.tls import channel_credentials, channel_options
from lifeline_mesh.notary.sign import append_hook_factory
from lifeline_mesh.transport.channels import open_channel
from lifeline_mesh.wire import membership_pb2, membership_pb2_grpc
from tests.support.ci_helpers import Hub, job, stop
from tests.support.mesh_procs import cli, free_port, has_entry, log_note

pytestmark = pytest.mark.slow

pb_grpc: Any = membership_pb2_grpc

SECRET = "secret-plans"


def _share(root: Path, line: str) -> None:
    cli("lifeline", root, "--line", line, "init")
    cli("lifeline_mesh", root, "share", line)


def _secret_plan(hub: Hub) -> str:
    """``SECRET`` shared on the hub, with a decision in it: its id."""
    _share(hub.root, SECRET)
    return cli(
        "lifeline", hub.root, "--line", SECRET, "log", "--kind", "decision", "--summary", "Q3 plan"
    ).stdout.strip()


def _scoped_runner(hub: Hub, tmp_path: Path) -> tuple[str, Path]:
    """A job enrolled (`ci start`) with a credential limited to ``ledger``: its token and
    its workspace."""
    token = hub.credential("scoped", "--lines", "ledger")
    workdir = tmp_path / "job"
    started = job(workdir, token, "ci", "start")
    assert started.returncode == 0, started.stderr
    return token, workdir


@contextmanager
def _runner_serving(workdir: Path) -> Iterator[str]:
    """The runner enrolled in ``workdir`` serving (a job's command may run anything): its
    address, until the block ends."""
    port = free_port()
    argv = [sys.executable, "-m", "lifeline_mesh", "serve", "--listen", f"127.0.0.1:{port}"]
    runner = subprocess.Popen(
        [*argv, "--no-discovery"],
        cwd=workdir,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert runner.stdout is not None
        assert runner.stdout.readline().startswith("listening on "), runner.stderr
        yield f"127.0.0.1:{port}"
    finally:
        stop(runner)


def test_a_runner_uses_only_its_credential_s_lines(hub: Hub, tmp_path: Path) -> None:
    plan = _secret_plan(hub)
    token, workdir = _scoped_runner(hub, tmp_path)
    cert = NodeHome(workdir).tls_cert_path.read_bytes()
    assert identity_from_cert(cert).lines == ("ledger",)
    sans = x509.load_pem_x509_certificate(cert).extensions.get_extension_for_class(
        x509.SubjectAlternativeName
    )
    assert "lifeline-mesh://line/ledger" in sans.value.get_values_for_type(
        x509.UniformResourceIdentifier
    )

    _share(workdir, SECRET)
    _share(workdir, "not-on-the-hub")
    for line in (SECRET, "not-on-the-hub"):  # shared or not: the same refusal
        for how in ((), ("--shallow",)):
            refused = job(workdir, token, "sync", hub.sync, "--line", line, *how)
            assert refused.returncode == 2, (line, how, refused.stderr)
            assert "may use only line ledger, not" in refused.stderr, refused.stderr
            assert "not shared" not in refused.stderr
    assert not has_entry(workdir / ".lifeline" / f"{SECRET}.db", plan)
    # its own line still syncs both ways
    note = log_note(workdir, "the runner's note")
    assert job(workdir, token, "sync", hub.sync, "--line", "ledger").returncode == 0
    assert has_entry(hub.line_file, note)


def test_a_node_that_dials_a_runner_sends_it_no_other_line(hub: Hub, tmp_path: Path) -> None:
    """A runner that serves (a job's command may run anything) and is dialed by a member,
    e.g. found on the LAN: only its lines are synced with it."""
    plan = _secret_plan(hub)
    _, workdir = _scoped_runner(hub, tmp_path)
    _share(workdir, SECRET)
    with _runner_serving(workdir) as address:
        refused = cli("lifeline_mesh", hub.root, "sync", address, "--line", SECRET, check=False)
        assert refused.returncode == 2, refused.stderr
        assert "may use only line ledger: line 'secret-plans' is neither sent" in (refused.stderr)
        synced = cli("lifeline_mesh", hub.root, "sync", address, "--line", "ledger", "--json")
        assert [r["line"] for r in json.loads(synced.stdout)] == ["ledger"]
    assert not has_entry(workdir / ".lifeline" / f"{SECRET}.db", plan)


async def _history(root: Path) -> None:
    """Old notes a shallow snapshot of ``SECRET`` leaves out (Recent keeps RECENT_KEEP, 64),
    then a decision: signed by ``root``'s node."""
    hook = append_hook_factory(Home(root))
    async with await SqliteStore.open(Home(root).line_path(SECRET)) as store:
        ledger = Ledger(store, hooks=[hook] if hook else [])
        for n in range(80):
            await ledger.append(Draft(kind="note", summary=f"old note {n}", agent="t"))
        await ledger.append(Draft(kind="decision", summary="Q3: hire two", agent="t"))


def test_a_member_pushes_no_other_line_to_a_runner(hub: Hub, tmp_path: Path) -> None:
    """`sync --push` (what a shallow line wrote) and `sync --shallow` to a runner that
    serves: refused before anything of another line is sent or asked for, as a session is
    (was: the push's entries reached the runner's line)."""
    _share(hub.root, SECRET)
    asyncio.run(_history(hub.root))
    member = tmp_path / "member"
    member.mkdir()
    invite = cli("lifeline_mesh", hub.root, "invite", "--address", hub.join, "--json")
    cli("lifeline_mesh", member, "join", json.loads(invite.stdout)["token"])
    _share(member, SECRET)
    pulled = cli("lifeline_mesh", member, "sync", hub.sync, "--shallow", "--line", SECRET)
    assert "shallow" in pulled.stdout, pulled.stdout
    written = cli(
        "lifeline", member, "--line", SECRET, "log", "--kind", "note", "--summary", "Q4 plan"
    ).stdout.strip()
    _, workdir = _scoped_runner(hub, tmp_path)
    _share(workdir, SECRET)
    with _runner_serving(workdir) as address:
        for how in ("--push", "--shallow"):
            refused = cli(
                "lifeline_mesh", member, "sync", address, how, "--line", SECRET, check=False
            )
            assert refused.returncode == 2, (how, refused.stderr)
            assert f"may use only line ledger: line '{SECRET}' is neither sent" in refused.stderr
    assert not has_entry(workdir / ".lifeline" / f"{SECRET}.db", written)


def _other_runner(hub: Hub, tmp_path: Path) -> str:
    """A job of another credential, limited to ``SECRET``, enrolled and running: its id."""
    token = hub.credential("other", "--lines", SECRET)
    workdir = tmp_path / "other-job"
    started = job(workdir, token, "ci", "start")
    assert started.returncode == 0, started.stderr
    return NodeIdentity.of(NodeHome(workdir)).node_id


def _named(members_json: str) -> tuple[set[str], set[str]]:
    """The node ids of a members list's rows, and the lines their certificates name."""
    data = json.loads(members_json)
    rows = [(m["node_id"], m.get("cert")) for m in data["members"]]
    rows += [(r[0], r[3] if len(r) > 3 else None) for r in data.get("retired", [])]
    lines: set[str] = set()
    for _, cert in rows:
        if cert:
            der = x509.load_der_x509_certificate(base64.b64decode(cert))
            lines |= set(identity_from_cert(der.public_bytes(Encoding.PEM)).lines)
    return {node_id for node_id, _ in rows}, lines


async def _revocations(root: Path, address: str, known: bytes = b"") -> Any:
    """The Revocations reply ``address`` gives the node of ``root`` (its own certificate)."""
    creds = channel_credentials(NodeHome(root))
    async with open_channel(address, creds, channel_options()) as channel:
        request = membership_pb2.RevocationsRequest(known=known)
        return await pb_grpc.MembershipStub(channel).Revocations(request, timeout=30)


def test_a_runner_is_shown_only_the_runners_of_its_lines(hub: Hub, tmp_path: Path) -> None:
    """The members list of a runner limited to ``ledger`` — from its join and from the
    Revocations call — names no runner of another line, nor that line; it still lists a
    runner of ``ledger``, and verifies what that runner signed there."""
    _secret_plan(hub)
    other = _other_runner(hub, tmp_path)
    peer_token = hub.credential("peer", "--lines", "ledger")
    log = ("lifeline", "log", "--kind", "note", "--agent", "ci", "--summary")
    ran = job(tmp_path / "peer-job", peer_token, "ci", "run", "--", *log, "CI: cache key changed")
    assert ran.returncode == 0, ran.stderr
    peer = ran.stderr.split("enrolled ", 1)[1].split()[0]
    hub_id = NodeIdentity.of(NodeHome(hub.root)).node_id
    everyone = {hub_id, peer, other}

    token, workdir = _scoped_runner(hub, tmp_path)
    own = NodeIdentity.of(NodeHome(workdir)).node_id
    joined = tmp_path / "joined"  # the same credential's join alone: what its reply lists
    asyncio.run(join(NodeHome(joined), token, hub.join))
    ours = {own, NodeIdentity.of(NodeHome(joined)).node_id}
    for root in (workdir, joined):
        ids, lines = _named(NodeHome(root).members_path.read_text())
        assert ids & everyone == {hub_id, peer} and lines == {"ledger"}, (root, ids, lines)

    reply = asyncio.run(_revocations(workdir, hub.sync))
    ids, lines = _named(reply.members_json)
    assert ids == {hub_id, peer, *ours} and lines == {"ledger"}
    assert reply.digest == lists_digest(reply.revocations_json, reply.members_json)
    again = asyncio.run(_revocations(workdir, hub.sync, bytes(reply.digest)))
    assert again.unchanged and not again.members_json  # the caller's shortcut still holds
    # A member of every line is still shown every runner.
    ids, lines = _named(asyncio.run(_revocations(hub.root, hub.sync)).members_json)
    assert everyone | ours <= ids and {"ledger", SECRET} <= lines

    # What the other runner of ledger signed is verified from the line.
    assert "CI: cache key changed" in cli("lifeline", workdir, "history").stdout
    verified = job(workdir, token, "verify", "--json")
    report = json.loads(verified.stdout)
    checks = {f["check"] for line in report["lines"] for f in line["findings"]}
    assert report["ok"] and "unknown-signer" not in checks, report


def test_a_list_from_a_runner_drops_nothing_a_member_holds(hub: Hub, tmp_path: Path) -> None:
    """A runner that serves hands its callers its own, partial, list: a member that pulls
    it keeps every row it held (a list from a peer only adds rows)."""
    _secret_plan(hub)
    other = _other_runner(hub, tmp_path)
    _, workdir = _scoped_runner(hub, tmp_path)
    assert other not in _named(NodeHome(workdir).members_path.read_text())[0]
    with _runner_serving(workdir) as address:
        cli("lifeline_mesh", hub.root, "members", "--pull", address)
    assert other in _named(NodeHome(hub.root).members_path.read_text())[0]
