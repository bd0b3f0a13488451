"""A runner's membership travels with what it signed (decision 0024), through real processes:
a job writes and syncs back; its runner then leaves the members list for good; a member
that joins later still admits and verifies the runner's signatures, from the enrollment
the line carries — and learns nothing about the runner from the membership state."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import sqlite3
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives.serialization import Encoding

from lifeline.errors import BadSignature
from lifeline.home import Home
from lifeline.store.sqlite import SqliteStore
from lifeline_mesh.home.identity import NodeIdentity
from lifeline_mesh.home.node_home import NodeHome
from lifeline_mesh.membership import files
from lifeline_mesh.membership.ca import create_mesh, load_ca_cert
from lifeline_mesh.membership.credential import CredentialSpec, issue_credential
from lifeline_mesh.membership.registry import Registry
from lifeline_mesh.membership.service import MembershipServicer
from lifeline_mesh.notary.attestation_set import AttestationSet
from lifeline_mesh.notary.enrollment import EnrolledSigners, enrollment_statement
from lifeline_mesh.notary.signers import FileSigners
from lifeline_mesh.notary.statement import Attestation, Role, sign
from lifeline_mesh.notary.storage import NotaryStore
from tests.support.ci_helpers import Hub, job, runner_request
from tests.support.entries import make_entry
from tests.support.mesh_procs import cli


def _enrollments(line_file: Path) -> list[tuple[str, str]]:
    with sqlite3.connect(line_file) as conn:
        rows = conn.execute(
            "SELECT node_id, role FROM attestations WHERE role IN ('enrolled', 'author')"
        ).fetchall()
    return [(str(n), str(r)) for n, r in rows]


@pytest.mark.slow  # a dozen CLI processes and a serving node
def test_a_later_member_verifies_a_gone_runner_from_the_line_alone(
    hub: Hub, tmp_path: Path
) -> None:
    token = hub.credential("gha")
    log = "lifeline log --kind note --agent ci --summary"
    writes = f"{log} 'CI: flaky test quarantined' && {log} 'CI: cache key changed'"
    done = job(tmp_path / "job", token, "ci", "run", "--", "sh", "-c", writes)
    assert done.returncode == 0, done.stderr
    runner = done.stderr.split("enrolled ", 1)[1].split()[0]
    rows = _enrollments(hub.line_file)
    assert rows.count((runner, "enrolled")) == 1  # once, however many entries it signed
    assert rows.count((runner, "author")) == 2

    # The runner's certificate expires; the next join or pull drops it from the members.
    with files.exclusive(NodeHome(hub.root)):
        registry = Registry.load(NodeHome(hub.root))
        gone = registry.prune(dt.datetime.now(dt.UTC) + dt.timedelta(days=1))
        registry.save(NodeHome(hub.root))
    assert [m.node_id for m in gone] == [runner]
    state = NodeHome(hub.root).members_path.read_text()
    assert runner not in state

    laptop = tmp_path / "laptop"
    laptop.mkdir()
    invite = json.loads(cli("lifeline_mesh", hub.root, "invite", "--json").stdout)["token"]
    cli("lifeline_mesh", laptop, "join", invite, "--peer", hub.join)
    cli("lifeline", laptop, "init")
    cli("lifeline_mesh", laptop, "share", "ledger")
    synced = cli("lifeline_mesh", laptop, "sync", hub.sync, check=False)
    assert synced.returncode == 0, synced.stderr  # the runner's signatures were admitted
    assert runner not in NodeHome(laptop).members_path.read_text()
    report = json.loads(cli("lifeline_mesh", laptop, "verify", "--json", check=False).stdout)
    checks = {f["check"] for line in report["lines"] for f in line["findings"]}
    assert report["ok"] and "unknown-signer" not in checks, report
    assert "CI: flaky test quarantined" in cli("lifeline", laptop, "history").stdout
    seen = json.loads(cli("lifeline_mesh", laptop, "members", "--all", "--json").stdout)
    runners = {m["node_id"]: m for m in seen["members"] if m.get("credential")}
    assert runners[runner]["credential"] == "gha" and runners[runner]["status"] == "active"
    listed = cli("lifeline_mesh", laptop, "members").stdout
    assert runner not in listed  # not a member: a signer the line proves


def _runner(root: Path) -> tuple[NodeIdentity, Attestation]:
    """A runner enrolled through the real Join handler, and its enrolled statement."""
    create_mesh(NodeHome(root), "team")
    service = MembershipServicer(NodeHome(root))
    token = issue_credential(NodeHome(root), CredentialSpec("gha", lines=("ledger",)))
    request, identity = runner_request(token, service.mesh_id)
    cert = x509.load_pem_x509_certificate(service._join(request).node_cert_pem)
    registry = Registry.load(NodeHome(root))
    registry.prune(cert.not_valid_after_utc)  # the job is over: the runner is no member
    registry.save(NodeHome(root))
    return identity, enrollment_statement(identity, cert.public_bytes(Encoding.DER))


def _signers(root: Path) -> EnrolledSigners:
    return EnrolledSigners(FileSigners.load(NodeHome(root), None), load_ca_cert(NodeHome(root)))


async def _admission(root: Path) -> None:
    runner, enrolled = _runner(root)
    first, second = make_entry("first finding"), make_entry("second finding")
    by_runner = [sign(runner, Role.AUTHOR, e.id, e.ts) for e in (first, second)]
    async with await SqliteStore.open(Home(root).line_path("ledger")) as store:
        notary = await NotaryStore.attach(store, signers=_signers(root))
        with pytest.raises(BadSignature, match="not a member of this mesh"):
            await notary.admit([by_runner[0].item])  # no proof of the runner yet
        assert await notary.admit([enrolled.item, by_runner[0].item]) == 2  # proof first
        later = await NotaryStore.attach(store, signers=_signers(root))  # a new session
        assert await later.admit([by_runner[1].item]) == 1  # proven by the held statement
        # The sending side puts the proof ahead of the runner's signatures, once a session.
        sender = AttestationSet(await NotaryStore.attach(store))
        ids = [by_runner[1].id]
        assert (await sender.fetch(ids)).raws == [enrolled.item, by_runner[1].item]
        assert (await sender.fetch(ids)).raws == [by_runner[1].item]


def test_a_runners_signatures_are_admitted_only_with_its_proof_which_the_sender_sends(
    tmp_path: Path,
) -> None:
    asyncio.run(_admission(tmp_path))
