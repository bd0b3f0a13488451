"""docker/ on a real Docker engine.

`docker/build.sh --postgres` builds the node and PostgreSQL images with nothing fetched inside
a container (offline base image, host-built wheelhouse, host-downloaded Debian packages; all
cached under ~/.cache/lifeline-mesh/docker, so a second run takes seconds). Then the
three-node mesh of docker/compose.yaml comes up, every node writes, the entries reach every
node over the compose network, `verify` finds them signed and witnessed, and a node on this
host joins and syncs through the ports compose publishes on 127.0.0.1. The PostgreSQL service
of docker/compose.hub.yml comes up healthy, takes a password login over the compose network,
refuses a wrong one, and keeps its data across a restart; its two hub processes (`serve
--store`) come up on that database as one node (`hub init`: one node id, no key on their
volumes, the same members listed through either), a laptop-like container joins through hub-2
with an invite made on hub-1's root and syncs through both, a node on this host joins through
hub-1 with an invite issued through hub-2 and syncs with both, every entry reaches every node
and the database, `verify` is clean, and after the database restarts the hubs serve again.
Every compose project is taken down with its volumes and network, and the test checks that
nothing of it is left.

Without a Docker engine these tests skip with how to get one; with CI set they fail instead.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.mesh_procs import free_ports
from tests.support.needs import missing
from tests.support.paths import REPO

DOCKER = REPO / "docker"
NODES = ("node-a", "node-b", "node-c")
HOWTO = (
    "as root: `apt-get install docker.io docker-compose debootstrap`, start `dockerd &`, "
    "check `docker info`, then `pytest -m slow tests/deploy/test_docker_engine.py`"
    " (.ci/run does this)"
)

# Not serial: with the image cache kept (tests/conftest.py) its build takes a second, and what
# it waits for (containers starting, health checks) overlaps the other workers' tests.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(1200)]


def _compose_command() -> list[str] | None:
    if shutil.which("docker-compose"):
        return ["docker-compose"]
    plugin = subprocess.run(["docker", "compose", "version"], capture_output=True, timeout=30)
    return ["docker", "compose"] if plugin.returncode == 0 else None


@pytest.fixture(scope="module")
def compose_command() -> list[str]:
    problem = ""
    command = None
    if shutil.which("docker") is None:
        problem = "no docker client on PATH"
    else:
        info = subprocess.run(["docker", "info"], capture_output=True, text=True, timeout=60)
        if info.returncode != 0:
            problem = "no Docker engine answers `docker info`"
        else:
            command = _compose_command()
            if command is None:
                problem = "neither docker-compose nor the `docker compose` plugin is installed"
    if problem or command is None:
        missing(
            f"{problem}; {HOWTO}", under_ci_says=f"CI must run the Docker tests: {problem}; {HOWTO}"
        )
    return command


@pytest.fixture(scope="module")
def images(compose_command: list[str]) -> None:
    started = time.monotonic()
    proc = subprocess.run(
        [str(DOCKER / "build.sh"), "--postgres"],
        capture_output=True,
        text=True,
        timeout=1200,
    )
    assert proc.returncode == 0, f"docker/build.sh failed:\n{proc.stderr}"
    print(f"docker/build.sh --postgres: {time.monotonic() - started:.1f} s\n{proc.stderr}")


class Compose:
    """One compose project (unique name), driven through the real compose CLI."""

    def __init__(self, command: list[str], file: Path, env: dict[str, str]) -> None:
        self.project = f"lmtest{os.getpid()}{secrets.token_hex(3)}"
        self.argv = [*command, "-p", self.project, "-f", str(file)]
        self.env = {**os.environ, **env}
        self.containers: dict[str, str] = {}

    def __call__(
        self, *args: str, check: bool = True, timeout: float = 300
    ) -> subprocess.CompletedProcess[str]:
        proc = subprocess.run(
            [*self.argv, *args], capture_output=True, text=True, env=self.env, timeout=timeout
        )
        if check:
            assert proc.returncode == 0, f"compose {' '.join(args)}:\n{proc.stdout}{proc.stderr}"
        return proc

    def exec(self, service: str, *argv: str) -> str:
        """Run argv in the service's container (`docker exec`: faster than compose's)."""
        if service not in self.containers:
            self.containers[service] = self("ps", "-q", service).stdout.strip()
        proc = subprocess.run(
            ["docker", "exec", self.containers[service], *argv],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert proc.returncode == 0, f"{service}: {' '.join(argv)}:\n{proc.stderr}"
        return proc.stdout

    def health(self, service: str) -> str:
        container = self("ps", "-q", service).stdout.strip()
        if not container:
            return "absent"
        state = subprocess.run(
            ["docker", "inspect", "-f", "{{.State.Status}} {{.State.Health.Status}}", container],
            capture_output=True,
            text=True,
            timeout=30,
        )
        return state.stdout.strip()

    def wait_healthy(self, service: str, seconds: float = 300) -> None:
        """Until the service's health check passes (generous: the machine may be loaded)."""
        deadline = time.monotonic() + seconds
        while (status := self.health(service)) != "running healthy":
            if time.monotonic() > deadline:
                container = self("ps", "-q", service).stdout.strip()
                checks = subprocess.run(
                    ["docker", "inspect", "-f", "{{json .State.Health}}", container],
                    capture_output=True,
                    text=True,
                    timeout=30,
                ).stdout[-3000:]
                pytest.fail(f"{service} not healthy within {seconds:.0f} s: {status}; {checks}")
            time.sleep(1)

    def leftovers(self) -> list[str]:
        label = f"label=com.docker.compose.project={self.project}"
        found = []
        for kind in (["ps", "-a"], ["network", "ls"], ["volume", "ls"]):
            out = subprocess.run(
                ["docker", *kind, "-q", "--filter", label],
                capture_output=True,
                text=True,
                timeout=30,
            ).stdout.split()
            found += [f"{kind[0]} {item}" for item in out]
        return found


@pytest.fixture
def project(compose_command: list[str], images: None) -> Iterator[Callable[..., Compose]]:
    made: list[Compose] = []

    def make(file: Path, env: dict[str, str]) -> Compose:
        made.append(Compose(compose_command, file, env))
        return made[-1]

    yield make
    for compose in made:
        print(compose("logs", "--no-color", check=False).stdout[-20000:])
        compose("down", "-v", "--remove-orphans", "-t", "5", check=False)
        assert compose.leftovers() == [], f"{compose.project} left behind after down"


def _wait(what: str, check: Callable[[], bool], seconds: float = 180) -> None:
    deadline = time.monotonic() + seconds
    while not check():
        assert time.monotonic() < deadline, f"{what}: not within {seconds:.0f} s"
        time.sleep(1)


def _host(root: Path, module: str, *args: str, **env: str) -> str:
    proc = subprocess.run(
        [sys.executable, "-m", module, "--root", str(root), *args],
        capture_output=True,
        text=True,
        env={**os.environ, **env},
        timeout=120,
    )
    assert proc.returncode == 0, f"{module} {args[0]} on the host:\n{proc.stderr}"
    return proc.stdout


def _summaries(history_json: str) -> set[str]:
    return {entry["summary"] for entry in json.loads(history_json)}


def _verified(report_json: str, entries: int) -> dict[str, Any]:
    report: dict[str, Any] = json.loads(report_json)
    assert report["ok"] is True, report
    (line,) = [line for line in report["lines"] if line["line"] == "ledger"]
    assert line["failures"] == 0 and line["entries"] == entries, line
    assert line["signed"] == entries and line["unsigned"] == 0, line
    assert line["attestations"] >= entries, line
    return line


def test_the_compose_mesh_syncs_signs_and_verifies(
    project: Callable[..., Compose], tmp_path: Path
) -> None:
    port_a, join_a, port_b, port_c = free_ports(4)
    mesh = project(
        DOCKER / "compose.yaml",
        {
            "LIFELINE_MESH_PORT_A": str(port_a),
            "LIFELINE_MESH_JOIN_PORT_A": str(join_a),
            "LIFELINE_MESH_PORT_B": str(port_b),
            "LIFELINE_MESH_PORT_C": str(port_c),
        },
    )
    started = time.monotonic()
    # Compose's own ordering: bootstrap completes, node-a turns healthy, then b and c start.
    mesh("up", "-d")
    for name in NODES:
        mesh.wait_healthy(name)
    print(f"mesh up and healthy in {time.monotonic() - started:.1f} s")
    assert mesh.health("bootstrap").startswith("exited")

    written = {name: f"written on {name} in its container" for name in NODES}
    for name, summary in written.items():
        mesh.exec(name, "lifeline", "log", "--kind", "note", "--summary", summary)
    synced = time.monotonic()
    for name in NODES:
        _wait(
            f"every entry on {name}",
            lambda name=name: (
                _summaries(mesh.exec(name, "lifeline", "history", "--json"))
                == set(written.values())
            ),
        )
    print(f"three entries on three nodes in {time.monotonic() - synced:.1f} s")
    for name in NODES:
        _verified(mesh.exec(name, "lifeline-mesh", "verify", "--json"), entries=3)
    members = mesh.exec("node-c", "lifeline-mesh", "members")
    assert members.count(" active ") == 3, members

    # A node on this host joins through node-a's published join port and syncs with the
    # containers through their published sync ports (127.0.0.1 only).
    token = mesh.exec(
        "node-a", "lifeline-mesh", "invite", "--address", f"127.0.0.1:{join_a}", "--ttl", "5m"
    ).strip()
    host = tmp_path / "host"
    host.mkdir()
    _host(host, "lifeline", "init")
    _host(host, "lifeline_mesh", "share", "ledger")
    _host(host, "lifeline_mesh", "join", LIFELINE_MESH_TOKEN=token)
    _host(host, "lifeline_mesh", "sync", f"127.0.0.1:{port_a}")
    assert _summaries(_host(host, "lifeline", "history", "--json")) == set(written.values())
    _host(host, "lifeline", "log", "--kind", "note", "--summary", "written on the host")
    _host(host, "lifeline_mesh", "sync", f"127.0.0.1:{port_b}")
    everything = {*written.values(), "written on the host"}
    _wait(
        "the host's entry on node-c",
        lambda: _summaries(mesh.exec("node-c", "lifeline", "history", "--json")) == everything,
    )
    _verified(_host(host, "lifeline_mesh", "verify", "--json"), entries=4)
    _verified(mesh.exec("node-c", "lifeline-mesh", "verify", "--json"), entries=4)
    assert mesh.exec("node-a", "lifeline-mesh", "members").count(" active ") == 4


def _host_synced(root: Path, address: str) -> bool:
    """One sync from the host node; False when it failed (a hub still reconnecting)."""
    proc = subprocess.run(
        [sys.executable, "-m", "lifeline_mesh", "--root", str(root), "sync", address],
        capture_output=True,
        text=True,
        timeout=120,
    )
    return proc.returncode == 0


def test_the_hub_compose_serves_one_postgres_through_two_processes(
    project: Callable[..., Compose], tmp_path: Path
) -> None:
    pg_port, hub_1, join_1, hub_2, join_2 = free_ports(5)
    password = secrets.token_urlsafe(12)
    hub = project(
        DOCKER / "compose.hub.yml",
        {
            "LIFELINE_PG_PORT": str(pg_port),
            "LIFELINE_PG_PASSWORD": password,
            "LIFELINE_HUB_PORT_1": str(hub_1),
            "LIFELINE_HUB_JOIN_PORT_1": str(join_1),
            "LIFELINE_HUB_PORT_2": str(hub_2),
            "LIFELINE_HUB_JOIN_PORT_2": str(join_2),
        },
    )
    started = time.monotonic()
    # Compose's order: postgres healthy, bootstrap done, hub-1 and hub-2 healthy, laptop.
    hub("up", "-d")
    for name in ("postgres", "hub-1", "hub-2", "laptop"):
        hub.wait_healthy(name)
    print(f"hub up and healthy in {time.monotonic() - started:.1f} s")
    assert hub.health("bootstrap").startswith("exited")
    # hub-1 and hub-2 are two processes of one node: one id, no node key on either volume
    # (it is in the database), each with a TLS certificate of its own
    node_id = hub.exec("hub-1", "lifeline-mesh", "id").strip()
    assert node_id and hub.exec("hub-2", "lifeline-mesh", "id").strip() == node_id
    for name in ("hub-1", "hub-2"):
        held = hub.exec(name, "ls", "/data/.lifeline/mesh").split()
        assert "hub.json" in held and "tls.pem" in held, (name, held)
        assert "node.key" not in held and "ca.key" not in held, (name, held)

    def psql(secret: str, sql: str) -> subprocess.CompletedProcess[str]:
        # A second container on the compose network, logging in over TCP by service name.
        return hub(
            "run", "--rm", "-T", "--no-deps", "-e", f"PGPASSWORD={secret}", "postgres",
            "psql", "-h", "postgres", "-U", "lifeline", "-d", "lifeline", "-v",
            "ON_ERROR_STOP=1", "-Atc", sql,
            check=False, timeout=120,
        )  # fmt: skip

    made = psql(password, "CREATE TABLE probe (x int); INSERT INTO probe VALUES (42)")
    assert made.returncode == 0, made.stderr
    wrong = psql("not-" + password, "SELECT 1")
    assert wrong.returncode != 0 and "password authentication failed" in wrong.stderr
    superuser = psql(password, "SELECT rolsuper FROM pg_roles WHERE rolname = current_user")
    assert superuser.stdout.strip() == "f", superuser.stdout  # the hub's role is no superuser

    # The laptop writes; its scheduled syncs carry the entry into the database through a hub.
    hub.exec("laptop", "lifeline", "log", "--kind", "note", "--summary", "written on the laptop")
    # A node on this host joins with an invite issued through hub-2, redeemed at hub-1's join
    # port (the laptop's, written by bootstrap on hub-1's root, was redeemed at hub-2's), and
    # reads the laptop's entry from hub-2.
    token = hub.exec(
        "hub-2", "lifeline-mesh", "invite", "--address", f"127.0.0.1:{join_1}", "--ttl", "5m"
    ).strip()
    host = tmp_path / "host"
    host.mkdir()
    _host(host, "lifeline", "init")
    _host(host, "lifeline_mesh", "share", "ledger")
    _host(host, "lifeline_mesh", "join", LIFELINE_MESH_TOKEN=token)
    _wait(
        "the laptop's entry on the host, through hub-2",
        lambda: (
            _host_synced(host, f"127.0.0.1:{hub_2}")
            and "written on the laptop" in _host(host, "lifeline", "history")
        ),
    )
    _host(host, "lifeline", "log", "--kind", "note", "--summary", "written on the host")
    _host(host, "lifeline_mesh", "sync", f"127.0.0.1:{hub_1}")
    both = {"written on the laptop", "written on the host"}
    _wait(
        "the host's entry on the laptop",
        lambda: _summaries(hub.exec("laptop", "lifeline", "history", "--json")) == both,
    )
    _verified(hub.exec("laptop", "lifeline-mesh", "verify", "--json"), entries=2)
    _verified(_host(host, "lifeline_mesh", "verify", "--json"), entries=2)
    # Both entries, each with its author signature, in the one database.
    rows = psql(
        password,
        "SELECT l.n, (SELECT count(*) FROM attestations a WHERE a.line_id = l.line_id"
        " AND a.role = 'author') FROM lines l WHERE l.name = 'ledger'",
    )
    assert rows.returncode == 0 and rows.stdout.strip() == "2|2", (rows.stdout, rows.stderr)
    # One membership, in the database: the hub node, the laptop and the host, the same
    # through either process
    listed = {
        name: sorted(
            (m["node_id"], m["status"])
            for m in json.loads(hub.exec(name, "lifeline-mesh", "members", "--json"))["members"]
        )
        for name in ("hub-1", "hub-2")
    }
    assert listed["hub-1"] == listed["hub-2"], listed
    assert len(listed["hub-1"]) == 3 and node_id in {n for n, _ in listed["hub-1"]}, listed

    # The database restarts: its data stays, and the hubs reconnect and serve again.
    hub("restart", "postgres")
    hub.wait_healthy("postgres")
    kept = psql(password, "SELECT x FROM probe")
    assert kept.returncode == 0 and kept.stdout.strip() == "42", kept.stderr
    _host(host, "lifeline", "log", "--kind", "note", "--summary", "after the restart")
    _wait("a sync through hub-2 after the restart",
          lambda: _host_synced(host, f"127.0.0.1:{hub_2}"))  # fmt: skip
    _wait(
        "the entry written after the restart on the laptop",
        lambda: "after the restart" in hub.exec("laptop", "lifeline", "history"),
    )
