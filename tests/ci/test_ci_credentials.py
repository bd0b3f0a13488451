"""CI credentials: uses, expiry, revocation, rotation, tampering; racing processes; short
runner certificates naming their credential; expired runners leave the members list for good
(a membership state of constant size); verify resolves runners from their enrollment."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import multiprocessing
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives.serialization import Encoding

from lifeline.errors import BadSignature, PermissionDenied
from lifeline.home import Home
from lifeline.store.sqlite import SqliteStore
from lifeline_mesh.home.identity import NodeIdentity
from lifeline_mesh.home.node_home import NodeHome
from lifeline_mesh.membership import files
from lifeline_mesh.membership.ca import create_mesh, load_ca_cert
from lifeline_mesh.membership.certs import identity_from_cert
from lifeline_mesh.membership.credential import (
    CredentialSpec,
    credential_rows,
    issue_credential,
    revoke_credential,
    rotate_credential,
)
from lifeline_mesh.membership.invite import InviteBook, Token, issue_invite
from lifeline_mesh.membership.registry import Member, Registry
from lifeline_mesh.membership.revocation import RevocationList
from lifeline_mesh.membership.service import MembershipServicer
from lifeline_mesh.notary.enrollment import EnrolledSigners, enrollment_statement
from lifeline_mesh.notary.rules import Policy, check_attestations, verify_items
from lifeline_mesh.notary.signers import FileSigners, KnownSigners
from lifeline_mesh.notary.statement import Attestation, Role, sign
from lifeline_mesh.notary.storage import NotaryStore
from lifeline_mesh.wire import membership_pb2 as pb
from tests.support.ci_helpers import NOW, Clock, runner_request
from tests.support.entries import make_entry
from tests.support.mesh_procs import cli

HOUR = dt.timedelta(hours=1)


def _spec(name: str = "gha", **kw: Any) -> CredentialSpec:
    return CredentialSpec(name=name, lines=("ledger",), sync_addresses=("127.0.0.1:7420",), **kw)


@pytest.fixture
def ca(tmp_path: Path) -> tuple[Path, MembershipServicer, Clock]:
    create_mesh(NodeHome(tmp_path), "team", now=NOW)
    clock = Clock()
    return tmp_path, MembershipServicer(NodeHome(tmp_path), clock), clock


def test_token_carries_lines_and_sync_address_and_invites_are_unchanged(tmp_path: Path) -> None:
    create_mesh(NodeHome(tmp_path), "team", now=NOW)
    token = issue_credential(NodeHome(tmp_path), _spec(), now=NOW)
    back = Token.decode(token.encode())
    assert back == token and back.ci and back.lines == ("ledger",)
    assert back.sync_addresses == ("127.0.0.1:7420",)
    invite = issue_invite(NodeHome(tmp_path), "member", HOUR, ["127.0.0.1:1"], now=NOW)
    assert invite.encode().startswith("lm1_AQ") and not Token.decode(invite.encode()).ci


def test_each_refusal_names_its_rule(ca: tuple[Path, MembershipServicer, Clock]) -> None:
    root, service, clock = ca
    token = issue_credential(NodeHome(root), _spec(uses=2, ttl=dt.timedelta(days=1)), now=NOW)
    for _ in range(2):
        service._join(runner_request(token, service.mesh_id)[0])
    with pytest.raises(PermissionDenied, match=r"'gha' refused: exhausted \(all 2 uses spent\)"):
        service._join(runner_request(token, service.mesh_id)[0])
    other = issue_credential(NodeHome(root), _spec("nightly", ttl=dt.timedelta(days=1)), now=NOW)
    request, _ = runner_request(other, service.mesh_id)
    request.proof = bytes(32)  # what a token with an altered secret produces
    with pytest.raises(PermissionDenied, match="'nightly' refused: altered"):
        service._join(request)
    states = {r["name"]: r["state"] for r in credential_rows(NodeHome(root), NOW)}
    assert states == {"gha": "exhausted", "nightly": "active"}
    clock.now = NOW + dt.timedelta(days=2)
    with pytest.raises(PermissionDenied, match="'nightly' refused: expired at 2026-01-02"):
        service._join(runner_request(other, service.mesh_id)[0])
    assert credential_rows(NodeHome(root), clock.now)[0]["state"] == "expired"


def test_rotation_refuses_the_old_token_and_revocation_ends_the_runners(
    ca: tuple[Path, MembershipServicer, Clock],
) -> None:
    root, service, _ = ca
    old = issue_credential(NodeHome(root), _spec(), now=NOW)
    request, first = runner_request(old, service.mesh_id)
    service._join(request)
    new = rotate_credential(NodeHome(root), "gha", now=NOW + HOUR)
    with pytest.raises(PermissionDenied, match="replaced by a rotation at 2026-01-01T01:00"):
        service._join(runner_request(old, service.mesh_id)[0])
    request, second = runner_request(new, service.mesh_id)
    service._join(request)
    revoked = revoke_credential(NodeHome(root), "gha", now=NOW + 2 * HOUR)
    assert {r.node_id for r in revoked} == {first.node_id, second.node_id}
    listed = RevocationList.load(NodeHome(root))
    assert listed.revoked_at(first.node_id) == listed.revoked_at(second.node_id) is not None
    with pytest.raises(PermissionDenied, match="'gha' refused: revoked at 2026-01-01T02:00"):
        service._join(runner_request(new, service.mesh_id)[0])
    with pytest.raises(Exception, match="no live CI credential named 'gha'"):
        rotate_credential(NodeHome(root), "gha")


def test_runner_certificate_lives_for_the_job_capped_by_the_credential(
    ca: tuple[Path, MembershipServicer, Clock],
) -> None:
    root, service, _ = ca
    six_hours = issue_credential(NodeHome(root), _spec(), now=NOW)
    reply = service._join(runner_request(six_hours, service.mesh_id)[0])
    cert = x509.load_pem_x509_certificate(reply.node_cert_pem)
    assert cert.not_valid_after_utc == NOW + 6 * HOUR
    short = issue_credential(NodeHome(root), _spec("short", ttl=2 * HOUR), now=NOW)
    reply = service._join(runner_request(short, service.mesh_id)[0])
    assert x509.load_pem_x509_certificate(reply.node_cert_pem).not_valid_after_utc == NOW + 2 * HOUR


def _synced_state(root: Path) -> tuple[int, int]:
    """Bytes of the membership state a member sends every peer that pulls it, and those
    bytes less the running runners' certificates, whose DER varies by a byte or two from
    one to the next (a random serial, an ECDSA signature): base64 then moves by 4."""
    registry = Registry.load(NodeHome(root))
    size = len(json.dumps(registry.to_json(), sort_keys=True))
    return size, size - sum(len(m.cert or "") for m in registry.members.values() if m.credential)


def test_membership_state_is_the_same_after_10_and_40_jobs(
    ca: tuple[Path, MembershipServicer, Clock],
) -> None:
    root, service, clock = ca
    token = issue_credential(NodeHome(root), _spec(job_ttl=HOUR), now=NOW)
    sizes = {}
    for job in range(40):
        clock.now = NOW + job * 2 * HOUR  # one job every two hours: earlier ones expired
        last = service._join(runner_request(token, service.mesh_id)[0])
        if job + 1 in (10, 40):
            sizes[job + 1] = _synced_state(root)
    registry = Registry.load(NodeHome(root))
    assert len(registry.members) == 2 and not registry.retired  # CA holder + the running job
    # not one byte per job: expired runners leave nothing
    assert sizes[10][1] == sizes[40][1]
    assert len(last.members_json) == sizes[40][0]
    assert credential_rows(NodeHome(root), clock.now)[0]["used"] == 40


def _enrolled_runner(
    service: MembershipServicer, token: Token
) -> tuple[NodeIdentity, Attestation, x509.Certificate]:
    reply, identity = _join_one(service, token)
    cert = x509.load_pem_x509_certificate(reply.node_cert_pem)
    return identity, enrollment_statement(identity, cert.public_bytes(Encoding.DER)), cert


def test_verify_resolves_runners_from_their_enrollment_not_the_members_list(
    ca: tuple[Path, MembershipServicer, Clock],
) -> None:
    root, service, clock = ca
    token = issue_credential(NodeHome(root), _spec(job_ttl=6 * HOUR), now=NOW)
    runner, enrolled, cert = _enrolled_runner(service, token)
    assert identity_from_cert(cert.public_bytes(Encoding.PEM)).credential == "gha"
    clock.now = NOW + 7 * HOUR
    _join_one(service, token)  # the first runner expired: this join drops it for good
    assert runner.node_id not in json.dumps(Registry.load(NodeHome(root)).to_json())
    during = make_entry("during the job", ts="2026-01-01T01:00:00.000000Z")
    after = make_entry("after the job", ts="2026-01-01T07:00:00.000000Z")
    items = [enrolled.item] + [sign(runner, Role.AUTHOR, e.id, e.ts).item for e in (during, after)]
    local = NodeIdentity.load(NodeHome(root).key_path).node_id

    def findings(signers: KnownSigners) -> set[tuple[str, str, str]]:
        checked = verify_items(items)
        for att in checked.valid:
            if att.role is Role.ENROLLED and isinstance(signers, EnrolledSigners):
                signers.learn(att)
        verdict = check_attestations([during, after], checked, signers, Policy(local))
        return {(f.subject, f.check, f.severity) for f in verdict.findings}

    found = findings(
        EnrolledSigners(FileSigners.load(NodeHome(root), local), load_ca_cert(NodeHome(root)))
    )
    assert (during.id, "expired-after-signing", "note") in found
    assert (after.id, "signed-after-expiry", "fail") in found
    assert not any(check == "unknown-signer" for _, check, _ in found)
    # Without the enrollment, nothing would name the runner any more:
    assert (during.id, "unknown-signer", "fail") in findings(
        FileSigners.load(NodeHome(root), local)
    )


def test_an_enrollment_must_carry_the_signers_own_certificate_from_this_ca(
    ca: tuple[Path, MembershipServicer, Clock], tmp_path: Path
) -> None:
    root, service, _ = ca
    token = issue_credential(NodeHome(root), _spec(), now=NOW)
    _, _, cert = _enrolled_runner(service, token)
    thief = NodeIdentity.generate()  # presents another runner's certificate as its own
    stolen = enrollment_statement(thief, cert.public_bytes(Encoding.DER))
    signers = EnrolledSigners(FileSigners.load(NodeHome(root), None), load_ca_cert(NodeHome(root)))
    with pytest.raises(BadSignature, match="carries the certificate of"):
        signers.learn(stolen)
    other = tmp_path / "other"
    create_mesh(NodeHome(other), "elsewhere", now=NOW)  # a runner of another mesh's CA
    foreign = EnrolledSigners(
        FileSigners.load(NodeHome(other), None), load_ca_cert(NodeHome(other))
    )
    with pytest.raises(BadSignature, match="no certificate of this mesh's CA"):
        foreign.learn(_enrolled_runner(service, token)[1])
    assert signers.status(thief.node_id).state.value == "unknown"


def test_a_store_from_before_0024_keeps_resolving_its_runners(tmp_path: Path) -> None:
    """Its expired runners are compact retired rows, and a runner it enrolled that is still
    running (no enrollment in its lines) retires to one too; a newer runner leaves none."""
    runner, local = NodeIdentity.generate(), NodeIdentity.generate()
    old, new = NodeIdentity.generate(), NodeIdentity.generate()
    path = NodeHome(tmp_path).members_path
    path.parent.mkdir(parents=True)
    expiry = "2026-01-01T06:00:00Z"
    running = Member.new(old.public_key, "member", NOW, expires=NOW + HOUR, credential="gha")
    legacy = {k: v for k, v in asdict(running).items() if k != "carried"}  # as 0022 wrote it
    state = {"mesh_id": "m", "members": [legacy], "retired": [[runner.node_id, expiry, "gha"]]}
    path.write_text(json.dumps(state))
    registry = Registry.load(NodeHome(tmp_path))
    registry.add(Member.new(new.public_key, "member", NOW, expires=NOW + HOUR, credential="gha"))
    assert [m.node_id for m in registry.prune(NOW + 2 * HOUR)] == [old.node_id, new.node_id]
    assert sorted(registry.retired) == sorted([runner.node_id, old.node_id])
    registry.save(NodeHome(tmp_path))
    during = make_entry("during the job", ts="2026-01-01T01:00:00.000000Z")
    after = make_entry("after the job", ts="2026-01-01T07:00:00.000000Z")
    items = [sign(runner, Role.AUTHOR, e.id, e.ts).item for e in (during, after)]
    signers = FileSigners.load(NodeHome(tmp_path), local.node_id)
    verdict = check_attestations([during, after], items, signers, Policy(local.node_id))
    found = {(f.subject, f.check, f.severity) for f in verdict.findings}
    assert (during.id, "expired-after-signing", "note") in found
    assert (after.id, "signed-after-expiry", "fail") in found
    assert not any(f.check == "unknown-signer" for f in verdict.findings)


def _spend(root: str, token_id: str, tries: int, barrier: Any, results: Any) -> None:
    book = InviteBook(NodeHome(Path(root)))
    barrier.wait()
    for n in range(tries):
        with files.exclusive(NodeHome(Path(root))):
            try:
                book.spend(bytes.fromhex(token_id), lambda _key: True, f"n{n}", NOW)
                results.put(True)
            except PermissionDenied:
                results.put(False)


def test_racing_processes_never_spend_beyond_uses(tmp_path: Path) -> None:
    create_mesh(NodeHome(tmp_path), "team", now=NOW)
    token = issue_credential(NodeHome(tmp_path), _spec(uses=25), now=NOW)
    ctx = multiprocessing.get_context("spawn")
    workers, tries = 4, 12
    barrier, results = ctx.Barrier(workers), ctx.Queue()
    procs = [
        ctx.Process(
            target=_spend, args=(str(tmp_path), token.token_id.hex(), tries, barrier, results)
        )
        for _ in range(workers)
    ]
    for proc in procs:
        proc.start()
    outcomes = [results.get(timeout=120) for _ in range(workers * tries)]
    for proc in procs:
        proc.join(timeout=60)
        assert proc.exitcode == 0
    assert outcomes.count(True) == 25
    assert credential_rows(NodeHome(tmp_path), NOW)[0]["used"] == 25


def test_members_hides_expired_runners_and_all_shows_them(
    ca: tuple[Path, MembershipServicer, Clock],
) -> None:
    root, service, clock = ca
    token = issue_credential(NodeHome(root), _spec(), now=NOW)
    first, enrolled, _ = _enrolled_runner(service, token)
    clock.now = NOW + 7 * HOUR  # the first runner expired: this join drops it
    _, second = _join_one(service, token)
    assert first.node_id not in Registry.load(NodeHome(root)).members
    asyncio.run(_hold(root, enrolled))  # a line here holds what the first runner signed
    shown = cli("lifeline_mesh", root, "members").stdout
    assert first.node_id not in shown and second.node_id not in shown  # both expired by now
    every = json.loads(cli("lifeline_mesh", root, "members", "--all", "--json").stdout)
    status = {m["node_id"]: (m["status"], m.get("credential")) for m in every["members"]}
    assert status[first.node_id] == status[second.node_id] == ("expired", "gha")


async def _hold(root: Path, att: Attestation) -> None:
    async with await SqliteStore.open(Home(root).line_path("ledger")) as store:
        await (await NotaryStore.attach(store)).add([att])


def _join_one(service: MembershipServicer, token: Token) -> tuple[pb.JoinReply, NodeIdentity]:
    request, identity = runner_request(token, service.mesh_id)
    return service._join(request), identity
