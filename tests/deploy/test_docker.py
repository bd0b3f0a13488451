"""docker/: what can be checked without a Docker engine (tests/deploy/test_docker_engine.py
uses one).

The compose file parses and matches the topology documented in docker/README.md; every
`lifeline`/`lifeline-mesh` command and flag the entry point uses exists in the real
`--help`; the Dockerfile has the promised shape; the entry point's `bootstrap` step runs
for real in a temporary directory; the whole compose topology runs as local processes on
loopback (entry points, settings and start order from compose.yaml); README.md says which
test runs the Docker files on an engine.
"""

from __future__ import annotations

import functools
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from tests.support.compose_docs import defaults as _defaults
from tests.support.compose_docs import documented_topology as _documented_topology
from tests.support.compose_docs import service_env as _env
from tests.support.mesh_procs import free_ports
from tests.support.paths import REPO
from tests.support.yaml_subset import YamlSubsetError, parse

DOCKER = REPO / "docker"
ENTRYPOINT = DOCKER / "entrypoint.sh"
NODES = ("node-a", "node-b", "node-c")

# Flags and commands another branch is adding (LAN discovery / peers / status). Until they
# are on this branch the check below skips, naming them; once they land it is strict.
PENDING = {("serve", "--peer"), ("serve", "--no-discovery"), ("status", "")}


def _compose() -> dict[str, Any]:
    data = _defaults(parse((DOCKER / "compose.yaml").read_text(encoding="utf-8")))
    assert isinstance(data, dict)
    return data


def _dockerfile_env(key: str) -> str:
    text = (DOCKER / "Dockerfile").read_text(encoding="utf-8")
    match = re.search(rf"\b{key}=(\S+)", text)
    assert match, f"Dockerfile sets no {key}"
    return match.group(1)


def test_yaml_subset_reader_refuses_what_it_cannot_read() -> None:
    for bad in ("a: &x 1", "a:\n  <<: *x", "a: {b: 1}", "a: |\n  text", "a:\n\t- b", "- a: 1"):
        with pytest.raises(YamlSubsetError):
            parse(bad)
    assert parse('a:\n  - "x"\n  - y\nb: ["p", "q"]\nc:\n') == {
        "a": ["x", "y"],
        "b": ["p", "q"],
        "c": None,
    }


def test_compose_matches_the_documented_topology() -> None:
    compose = _compose()
    services = compose["services"]
    documented = _documented_topology()
    assert set(services) == {"bootstrap", *NODES} == set(documented)
    for name, doc in documented.items():
        service = services[name]
        assert service["volumes"] == doc["volumes"], name
        assert service.get("ports", []) == doc["ports"], name
        peers = _env(service, "LIFELINE_MESH_PEERS").split()
        assert peers == doc["peers"], name
    declared = set(compose["volumes"])
    used = {v.split(":")[0] for s in services.values() for v in s["volumes"]}
    assert used == declared


def test_every_node_peers_with_the_other_two_on_the_sync_port() -> None:
    services = _compose()["services"]
    sync_port = _dockerfile_env("LIFELINE_MESH_LISTEN").rsplit(":", 1)[1]
    for name in NODES:
        peers = _env(services[name], "LIFELINE_MESH_PEERS").split()
        assert sorted(peers) == sorted(f"{n}:{sync_port}" for n in NODES if n != name)
        assert services[name]["command"] == ["node"]
        assert _env(services[name], "LIFELINE_MESH_NODE") == name


def test_bootstrap_feeds_the_joiners() -> None:
    services = _compose()["services"]
    boot = services["bootstrap"]
    assert boot["command"][0] == "bootstrap" and len(boot["command"]) == 2
    assert boot["restart"] == "no"
    # It runs on node-a's volume, so node-a holds the CA it creates.
    assert (
        "node-a-data:/data" in boot["volumes"]
        and "node-a-data:/data" in services["node-a"]["volumes"]
    )
    assert set(_env(boot, "LIFELINE_MESH_INVITE_FOR").split()) == {"node-b", "node-c"}
    join_port = _dockerfile_env("LIFELINE_MESH_JOIN_LISTEN").rsplit(":", 1)[1]
    assert _env(boot, "LIFELINE_MESH_JOIN_ADDRESS") == f"node-a:{join_port}"
    assert services["node-a"]["depends_on"] == {
        "bootstrap": {"condition": "service_completed_successfully"}
    }
    for name in ("node-b", "node-c"):
        assert "tokens:/tokens:ro" in services[name]["volumes"]
        assert services[name]["depends_on"] == {"node-a": {"condition": "service_healthy"}}


# What docker/build.sh stages beside the Dockerfile: the build context holds only these.
STAGED = {"wheels/deps/", "wheels/project/", "entrypoint.sh"}


def test_dockerfile_shape() -> None:
    text = (DOCKER / "Dockerfile").read_text(encoding="utf-8")
    joined = re.sub(r"\\\n\s*", " ", text)
    instructions = [
        (line.split()[0], line.split(None, 1)[1] if " " in line else "")
        for line in joined.splitlines()
        if line.strip() and not line.lstrip().startswith("#")
    ]
    ops = [op for op, _ in instructions]
    # The base is a build argument: build.sh passes its offline one; the default is public.
    assert instructions[:2] == [("ARG", "BASE_IMAGE=python:3.11-slim"), ("FROM", "${BASE_IMAGE}")]
    user = [arg for op, arg in instructions if op == "USER"]
    assert user and user[-1] not in ("root", "0")
    assert ops.index("USER") > max(i for i, op in enumerate(ops) if op == "RUN")
    assert f"useradd --create-home --uid 10001 --user-group {user[-1]}" in joined
    for op, arg in instructions:
        if op == "COPY":
            *sources, _dest = arg.split()
            assert set(sources) <= STAGED, f"COPY {sources}: build.sh stages only {STAGED}"
    build = (DOCKER / "build.sh").read_text(encoding="utf-8")
    assert 'cp "$REPO/docker/Dockerfile" "$REPO/docker/entrypoint.sh" "$context/"' in build
    # Nothing is fetched inside the build: every pip install is from the wheelhouse only.
    installs = re.findall(r"pip install [^&]*", joined)
    assert installs and all("--no-index" in i for i in installs), installs
    assert "COPY entrypoint.sh /usr/local/bin/lifeline-mesh-entrypoint" in joined
    assert dict(instructions)["ENTRYPOINT"] == '["lifeline-mesh-entrypoint"]'
    health = dict(instructions)["HEALTHCHECK"]
    assert health.endswith('CMD ["lifeline-mesh-entrypoint", "health"]')
    assert dict(instructions)["CMD"] == '["node"]'


def _entrypoint_modes() -> set[str]:
    text = ENTRYPOINT.read_text(encoding="utf-8")
    case = text[text.index('case "${1:-node}" in') :]
    return set(re.findall(r"^\s+(\w+)\)", case, flags=re.M))


def test_entrypoint_is_posix_sh_and_offers_every_mode_used() -> None:
    text = ENTRYPOINT.read_text(encoding="utf-8")
    assert text.startswith("#!/bin/sh\n") and "\nset -eu\n" in text
    assert os.access(ENTRYPOINT, os.X_OK)
    shell = shutil.which("dash") or shutil.which("sh")
    assert shell is not None
    subprocess.run([shell, "-n", str(ENTRYPOINT)], check=True)
    used = {"health", "node"} | {s["command"][0] for s in _compose()["services"].values()}
    assert used <= _entrypoint_modes()


GROUPS = {"hub"}  # commands whose next word is a subcommand: `lifeline-mesh hub init`


def _cli_uses() -> set[tuple[str, str, str]]:
    """(program, command, flag or "") for each CLI call in entrypoint.sh; a group's
    subcommand is part of the command ("hub init")."""
    text = re.sub(r"\\\n\s*", " ", ENTRYPOINT.read_text(encoding="utf-8"))
    uses: set[tuple[str, str, str]] = set()
    pending: list[str] = []  # flags added with `set -- "$@" --flag`, for the next "$@" call
    for line in text.splitlines():
        if line.lstrip().startswith("#") or not line.strip():
            continue
        words = shlex.split(line, comments=True)
        if words[:2] == ["set", "--"]:
            pending += [w for w in words if w.startswith("--")]
            continue
        for i, word in enumerate(words):
            if word not in ("lifeline", "lifeline-mesh"):
                continue
            rest = words[i + 1 :]
            while rest[:1] and rest[0] in ("--line", "--root"):
                uses.add((word, "", rest[0]))
                rest = rest[2:]
            if not rest or rest[0].startswith("$"):
                continue  # passthrough of the caller's arguments
            command, flags = rest[0], []
            if command in GROUPS and rest[1:2] and re.fullmatch(r"[a-z][a-z-]*", rest[1]):
                command, rest = f"{command} {rest[1]}", rest[1:]
            for arg in rest[1:]:
                if arg[:1] in (">", "|", ";", "&") or arg == "$@":
                    break
                if arg.startswith("--"):
                    flags.append(arg)
            if "$@" in rest:
                flags += pending
                pending = []
            uses.add((word, command, ""))
            uses.update((word, command, flag) for flag in flags)
    return uses


@cache
def _help(program: str, command: str) -> tuple[int, str]:
    module = "lifeline" if program == "lifeline" else "lifeline_mesh"
    argv = [sys.executable, "-m", module, *command.split(), "--help"]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    return proc.returncode, proc.stdout


def _missing(uses: set[tuple[str, str, str]]) -> list[tuple[str, str, str]]:
    """The uses whose command fails `--help` or whose flag that help does not list."""
    missing = []
    for program, command, flag in sorted(uses):
        code, text = _help(program, command)
        if code != 0 or (flag and not re.search(rf"(^|\s|\[){re.escape(flag)}\b", text)):
            missing.append((program, command, flag))
    return missing


def test_entrypoint_uses_only_real_commands_and_flags() -> None:
    uses = _cli_uses()
    # The extraction itself must see the calls the design depends on.
    for expected in [
        ("lifeline-mesh", "init", "--new-mesh"),
        ("lifeline-mesh", "hub init", "--store"),
        ("lifeline-mesh", "hub init", "--new-mesh"),
        ("lifeline-mesh", "invite", "--address"),
        ("lifeline-mesh", "invite", "--ttl"),
        ("lifeline-mesh", "join", ""),
        ("lifeline-mesh", "share", ""),
        ("lifeline-mesh", "serve", "--listen"),
        ("lifeline-mesh", "serve", "--join-listen"),
        ("lifeline-mesh", "serve", "--peer"),
        ("lifeline-mesh", "serve", "--no-discovery"),
        ("lifeline-mesh", "status", "--json"),
        ("lifeline", "init", ""),
    ]:
        assert expected in uses
    missing = _missing(uses)
    pending = [m for m in missing if (m[1], m[2]) in PENDING or (m[1], "") in PENDING]
    assert [m for m in missing if m not in pending] == []
    if pending:
        pytest.skip(f"not on this branch yet (another branch adds them): {pending}")


def test_bootstrap_runs_for_real(tmp_path: Path) -> None:
    data, tokens = tmp_path / "data", tmp_path / "tokens"
    data.mkdir()
    env = {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        "LIFELINE_MESH_TOKENS": str(tokens),
        "LIFELINE_MESH_JOIN_ADDRESS": "127.0.0.1:7421",
        "LIFELINE_MESH_INVITE_FOR": "node-b node-c",
    }

    def boot() -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(ENTRYPOINT), "bootstrap", "compose"],
            cwd=data,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )

    first = boot()
    assert first.returncode == 0, first.stderr
    written = {p.name: p.read_text().strip() for p in tokens.iterdir()}
    assert set(written) == {"node-b", "node-c"}
    assert all(t.startswith("lm1_") and len(t.split()) == 1 for t in written.values())
    assert (data / ".lifeline" / "mesh" / "ca.key").exists()
    lines = subprocess.run(
        [str(ENTRYPOINT), "lines"], cwd=data, env=env, capture_output=True, text=True, timeout=60
    )
    assert re.search(r"^ledger\s+shared$", lines.stdout, flags=re.M), lines.stdout
    again = boot()
    assert again.returncode == 0, again.stderr
    assert "already holds a mesh CA" in again.stderr
    assert {p.name: p.read_text().strip() for p in tokens.iterdir()} == written


def test_bootstrap_without_a_join_address_says_what_to_set(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "LIFELINE_MESH_JOIN_ADDRESS"}
    proc = subprocess.run(
        [str(ENTRYPOINT), "bootstrap", "x"], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    assert proc.returncode == 2
    assert "set LIFELINE_MESH_JOIN_ADDRESS" in proc.stderr
    assert not (tmp_path / ".lifeline").exists()


def test_readme_says_how_the_docker_files_are_tested() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert "tests/deploy/test_docker_engine.py" in readme and "untested here" not in readme.lower()
    docker_readme = (DOCKER / "README.md").read_text(encoding="utf-8")
    assert "tests/deploy/test_docker_engine.py" in docker_readme
    assert "untested here" not in docker_readme.lower()
    assert (REPO / "tests" / "deploy" / "test_docker_engine.py").exists()


def _wait_for(what: str, check: Callable[[], bool], procs: list[subprocess.Popen[str]]) -> None:
    deadline = time.monotonic() + 60
    while not check():
        dead = [p.args for p in procs if p.poll() is not None]
        assert not dead, f"{what}: a node exited: {dead}"
        assert time.monotonic() < deadline, f"{what}: not within 60 s"
        time.sleep(0.2)


def _healthy(run: Callable[..., subprocess.CompletedProcess[str]], name: str) -> bool:
    return run(name, "health").returncode == 0


@pytest.mark.slow
def test_the_compose_topology_runs_on_loopback(tmp_path: Path) -> None:
    """The services of compose.yaml, in its start order and with its settings, but as local
    processes on 127.0.0.1 (host names and ports mapped) instead of containers."""
    missing = _missing(_cli_uses())
    if missing:
        pytest.skip(f"needs {missing} (from another branch)")
    services = _compose()["services"]
    sync_port = _dockerfile_env("LIFELINE_MESH_LISTEN").rsplit(":", 1)[1]
    join_port = _dockerfile_env("LIFELINE_MESH_JOIN_LISTEN").rsplit(":", 1)[1]
    *ports, join = free_ports(len(NODES) + 1)
    hosts = {f"{n}:{sync_port}": f"127.0.0.1:{p}" for n, p in zip(NODES, ports, strict=True)}
    hosts[f"node-a:{join_port}"] = f"127.0.0.1:{join}"
    (tmp_path / "tokens").mkdir()
    base = {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        "LIFELINE_MESH_TOKENS": str(tmp_path / "tokens"),
        "LIFELINE_MESH_JOIN_LISTEN": f"127.0.0.1:{join}",
    }

    def env_of(name: str) -> dict[str, str]:
        env = dict(base)
        for key, value in (services[name].get("environment") or {}).items():
            env[key] = " ".join(hosts.get(v, v) for v in value.split())
        if name in NODES:
            env["LIFELINE_MESH_LISTEN"] = hosts[f"{name}:{sync_port}"]
        return env

    def volume(name: str) -> Path:
        data = next(v for v in services[name]["volumes"] if v.endswith(":/data"))
        path: Path = tmp_path / str(data).split(":")[0]
        path.mkdir(exist_ok=True)
        return path

    def run(name: str, *argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(ENTRYPOINT), *argv],
            cwd=volume(name),
            env=env_of(name),
            capture_output=True,
            text=True,
            timeout=60,
        )

    boot = run("bootstrap", *services["bootstrap"]["command"])
    assert boot.returncode == 0, boot.stderr
    procs: list[subprocess.Popen[str]] = []
    try:
        for wave in (["node-a"], ["node-b", "node-c"]):  # compose.yaml's depends_on order
            for name in wave:
                procs.append(
                    subprocess.Popen(
                        [str(ENTRYPOINT), *services[name]["command"]],
                        cwd=volume(name),
                        env=env_of(name),
                        stdout=subprocess.DEVNULL,
                        stderr=subprocess.DEVNULL,
                        text=True,
                    )
                )
            for name in wave:
                _wait_for(f"{name} healthy", functools.partial(_healthy, run, name), procs)
        note = subprocess.run(
            ["lifeline", "log", "--kind", "note", "--summary", "hello from node-b"],
            cwd=volume("node-b"),
            env=env_of("node-b"),
            capture_output=True,
            text=True,
        )
        assert note.returncode == 0, note.stderr

        # node-c has node-b only through node-a: the schedulers carry it two hops.
        def on_node_c() -> bool:
            history = subprocess.run(
                ["lifeline", "history"],
                cwd=volume("node-c"),
                env=env_of("node-c"),
                capture_output=True,
                text=True,
            )
            return "hello from node-b" in history.stdout

        _wait_for("node-b's entry on node-c", on_node_c, procs)
        members = run("node-c", "members")
        assert members.returncode == 0 and members.stdout.count(" active ") == 3, members.stdout
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            proc.wait(timeout=30)


def test_compose_files_publish_on_loopback_only_and_postgres_takes_its_password() -> None:
    hub = _defaults(parse((DOCKER / "compose.hub.yml").read_text(encoding="utf-8")))
    for services in (_compose()["services"], hub["services"]):
        for name, service in services.items():
            for port in service.get("ports", []):
                assert port.startswith("127.0.0.1:"), f"{name} publishes {port} off loopback"
    postgres = hub["services"]["postgres"]
    raw = parse((DOCKER / "compose.hub.yml").read_text(encoding="utf-8"))
    assert raw["services"]["postgres"]["environment"]["POSTGRES_PASSWORD"].startswith(
        "${LIFELINE_PG_PASSWORD"
    )
    assert postgres["image"] == "lifeline-postgres:dev"


def test_build_script_says_what_is_missing(tmp_path: Path) -> None:
    build = str(DOCKER / "build.sh")
    env = {**os.environ, "DOCKER_HOST": f"unix://{tmp_path}/no-engine.sock"}
    usage = subprocess.run([build, "--help"], capture_output=True, text=True, env=env)
    assert usage.returncode == 0 and "BASE_IMAGE=python:3.11-slim" in usage.stdout
    bad = subprocess.run([build, "--bogus"], capture_output=True, text=True, env=env)
    assert (bad.returncode, bad.stderr) == (2, "build: unknown argument --bogus (try --help)\n")
    none = subprocess.run([build], capture_output=True, text=True, env=env, timeout=60)
    assert none.returncode == 2
    if shutil.which("docker"):
        assert (
            none.stderr == "build: no Docker engine answers (docker info): start dockerd as root\n"
        )
    else:
        assert "no docker client on PATH" in none.stderr
    assert not (tmp_path / "no-engine.sock").exists()
