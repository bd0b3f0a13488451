"""A CI job's shallow pull and push are what a CI runner costs its node: the node counts
them in its metrics and its inbound log as it counts sessions (decision 0102). As every
job is a new node, the log keeps the latest callers only and the metrics a bounded number
of peer labels."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from prometheus_client.exposition import generate_latest

from lifeline_mesh.home import inbound
from lifeline_mesh.home.inbound import InboundLog, load_inbound
from lifeline_mesh.home.node_home import NodeHome
from lifeline_mesh.node import metrics
from lifeline_mesh.node.metrics import NodeMetrics
from lifeline_mesh.sync.driver import SyncReport
from tests.support.ci_helpers import Hub, job, stop
from tests.support.mesh_procs import cli, free_port, join_mesh, shared_node, start_ca_serve
from tests.support.scrape import get, labels, value
from tests.support.sync_helpers import make_node


def test_a_ci_jobs_shallow_pull_and_push_are_counted_by_the_node(tmp_path: Path) -> None:
    root = tmp_path / "hub"
    root.mkdir()
    cli("lifeline_mesh", root, "init", "--new-mesh", "team")
    cli("lifeline", root, "init")
    cli("lifeline", root, "log", "--kind", "decision", "--summary", "Payments use Postgres")
    cli("lifeline_mesh", root, "share", "ledger")
    metrics = f"127.0.0.1:{free_port()}"
    proc, sync, joins = start_ca_serve(root, extra=["--metrics-listen", metrics])
    try:
        hub = Hub(root, sync, joins, "", proc)
        token = hub.credential("gha")
        write = "lifeline log --kind test --summary 'CI: counted' --agent ci"
        done = job(tmp_path / "job", token, "ci", "run", "--", "sh", "-c", write)
        assert done.returncode == 0, done.stderr
        assert "shallow: no history" in done.stderr
        status, text = get(metrics, "/metrics")
    finally:
        stop(proc)
    assert status == 200
    # the pull: the truth's rows out; the push: the job's entry in
    assert value(text, "lifeline_sessions_total", direction="in", outcome="ok") == 2
    assert value(text, "lifeline_protocol_bytes_total", direction="out") > 1000
    assert value(text, "lifeline_protocol_bytes_total", direction="in") > 300
    assert value(text, "lifeline_entries_total", direction="out") >= 1
    assert value(text, "lifeline_entries_total", direction="in") == 1
    [runner] = load_inbound(NodeHome(root))
    assert runner["sessions"] == 2 and runner["result"] == "ok: sent 0, received 1"


@dataclass
class _Caller:
    address: str
    auth_context: dict[str, tuple[bytes, ...]] = field(default_factory=dict)


def test_the_inbound_log_keeps_the_latest_callers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(inbound, "MAX_CALLERS", 3)
    home = NodeHome(tmp_path)
    home.inbound_path.parent.mkdir(parents=True, exist_ok=True)
    log = InboundLog(home)
    for k in (1, 2, 3, 4, 2, 5):
        log.record(_Caller(f"10.0.0.{k}:4000"), "ledger", SyncReport("ledger", "push"), None)
    kept = json.loads(home.inbound_path.read_text())["inbound"]
    assert [r["address"] for r in kept] == ["10.0.0.4:4000", "10.0.0.2:4000", "10.0.0.5:4000"]
    assert [r["sessions"] for r in kept] == [1, 2, 1]
    again = InboundLog(home)  # read back: the order of their last sessions
    again.record(_Caller("10.0.0.6:4000"), "ledger", None, "refused")
    assert [r["address"] for r in load_inbound(home)] == [
        "10.0.0.2:4000",
        "10.0.0.5:4000",
        "10.0.0.6:4000",
    ]


def test_past_the_cap_new_peers_are_counted_as_other(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each label is a series a scrape returns for the process's life: a node that served
    thousands of CI jobs (each a new node) keeps a bounded number of them."""
    monkeypatch.setattr(metrics, "MAX_PEER_LABELS", 3)
    counted = NodeMetrics(make_node(tmp_path / "n"))
    for k in (*range(10), 0, 9):
        counted.session(f"runner-{k}", "ledger", "in", SyncReport("ledger", "shallow"))
    text = generate_latest(counted.registry).decode()
    peers = labels(text, "lifeline_sessions_total", "peer")
    assert peers == {"runner-0", "runner-1", "runner-2", metrics.OTHER_PEERS}
    assert value(text, "lifeline_sessions_total", peer="runner-0") == 2
    assert value(text, "lifeline_sessions_total", peer=metrics.OTHER_PEERS) == 8
    assert value(text, "lifeline_sessions_total") == 12


def test_shallow_calls_refused_before_admission_leave_no_trace(tmp_path: Path) -> None:
    """Only a caller that passed authorization is told as a session, as the sync server
    does: a member asking again and again for a line the node does not share, and a
    revoked node, fill neither the inbound log nor the metrics."""
    ca, member, rogue = tmp_path / "ca", tmp_path / "member", tmp_path / "rogue"
    for root in (ca, member, rogue):
        shared_node(root)
    join_mesh(ca, [member, rogue])
    cli("lifeline", member, "--line", "secret", "init")
    cli("lifeline_mesh", member, "share", "secret")  # shared here, not on the CA holder
    rogue_id = cli("lifeline_mesh", rogue, "id").stdout.strip()
    cli("lifeline_mesh", ca, "revoke", rogue_id, "--reason", "laptop stolen")
    metrics_at = f"127.0.0.1:{free_port()}"
    proc, sync, _ = start_ca_serve(ca, extra=["--metrics-listen", metrics_at])
    try:
        for _ in range(3):
            unshared = ["sync", "--shallow", "--line", "secret", sync]
            refused = cli("lifeline_mesh", member, *unshared, check=False)
            assert refused.returncode != 0 and "the owner of that node can run" in refused.stderr, (
                refused
            )
            refused = cli("lifeline_mesh", rogue, "sync", "--shallow", sync, check=False)
            assert refused.returncode != 0 and "revoked" in refused.stderr, refused.stderr
        status, text = get(metrics_at, "/metrics")
    finally:
        stop(proc)
    assert status == 200
    assert value(text, "lifeline_sessions_total") == 0
    assert value(text, "lifeline_protocol_bytes_total") == 0
    assert load_inbound(NodeHome(ca)) == []
    # counted as refusals, by reason, as the sync port's are
    assert value(text, "lifeline_refusals_total", reason="Refused") == 3
