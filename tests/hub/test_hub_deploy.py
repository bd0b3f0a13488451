"""The systemd unit of a hub process (deploy/systemd/, docs/hub.md): its ExecStart, with the
settings of the example settings file, is a command line the real `lifeline-mesh` parser
takes as `serve --store` of that database with a join port, on the state directory systemd
makes; the one-time `hub init` steps docs/hub.md gives make instance 1 the hub node of a new
mesh and instance 2 another process of it, on the same database and those state
directories; and `systemd-analyze verify` (where installed) finds nothing wrong with the
unit."""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from lifeline_mesh.cli.cmd_hub import cmd_hub_init
from lifeline_mesh.cli.cmd_sync import cmd_serve
from lifeline_mesh.cli.main import build_parser
from tests.support.paths import REPO

UNIT = REPO / "deploy" / "systemd" / "lifeline-hub@.service"
SETTINGS = REPO / "deploy" / "systemd" / "lifeline-hub.env.example"
HUB_DOC = REPO / "docs" / "hub.md"


def _unit(text: str) -> dict[str, dict[str, list[str]]]:
    """Sections of a unit file: each key's values, in order (keys may repeat)."""
    sections: dict[str, dict[str, list[str]]] = {}
    current: dict[str, list[str]] = {}
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("["):
            current = sections.setdefault(line.strip("[]"), {})
            continue
        key, _, value = line.partition("=")
        current.setdefault(key.strip(), []).append(value.strip())
    return sections


def _settings(instance: str) -> dict[str, str]:
    service = _unit(UNIT.read_text(encoding="utf-8"))["Service"]
    env = dict(item.split("=", 1) for item in service["Environment"])
    assert service["EnvironmentFile"] == [f"/etc/lifeline-hub/{'%i'}.env"]
    for raw in SETTINGS.read_text(encoding="utf-8").splitlines():
        if raw.strip() and not raw.startswith("#"):
            key, _, value = raw.partition("=")
            env[key] = value  # the settings file overrides Environment=, as in systemd
    return {k: v.replace("%i", instance) for k, v in env.items()}


def _exec_start(instance: str) -> list[str]:
    """ExecStart as systemd runs it: %i the instance, each ${VAR} one whole argument."""
    service = _unit(UNIT.read_text(encoding="utf-8"))["Service"]
    [command] = service["ExecStart"]
    env = _settings(instance)
    words = shlex.split(command.replace("%i", instance))
    return [re.sub(r"\$\{(\w+)\}", lambda m: env[m.group(1)], w) for w in words]


def test_the_units_command_line_is_serve_store_for_the_real_parser() -> None:
    argv = _exec_start("1")
    assert argv[0] == "/opt/lifeline/bin/lifeline-mesh"  # the image's venv (docker/Dockerfile)
    args = build_parser().parse_args(argv[1:])
    assert args.func is cmd_serve
    env = _settings("1")
    assert args.store == env["LIFELINE_HUB_STORE"] and args.listen == env["LIFELINE_HUB_LISTEN"]
    # every process of the hub node redeems invites, on a port the invites can name
    assert args.join_listen == env["LIFELINE_HUB_JOIN_LISTEN"] and not args.join_listen.endswith(
        ":0"
    )
    assert args.no_discovery and not args.insecure  # mutual TLS; no multicast off the LAN
    service = _unit(UNIT.read_text(encoding="utf-8"))["Service"]
    # --root is the state directory systemd makes for the instance, and the working folder
    [state] = service["StateDirectory"]
    assert Path(args.root) == Path("/var/lib") / state.replace("%i", "1")
    assert service["WorkingDirectory"] == ["/var/lib/lifeline-hub/%i"]
    # the password reaches the driver through PGPASSWORD, never the command line (ps)
    assert "PGPASSWORD" in env and "@" in args.store
    assert ":" not in args.store.removeprefix("postgresql://").split("@")[0]
    assert "on-failure" in service["Restart"]  # an unreachable database exits non-zero


def _documented_hub_inits() -> list[list[str]]:
    """The `hub init` commands of docs/hub.md's systemd section, as the shell runs them with
    the example settings sourced: from the program on, each ${VAR} or "$VAR" its value."""
    text = HUB_DOC.read_text(encoding="utf-8")
    section = text.split("\n## Running a hub with systemd\n", 1)[1].split("\n## ", 1)[0]
    block = section.split("```sh\n", 1)[1].split("```", 1)[0]
    env = _settings("1")
    found = []
    for line in re.sub(r"\\\n\s*", " ", block).splitlines():
        words = shlex.split(line, comments=True)
        if "hub" in words and "init" in words:
            words = [re.sub(r"\$\{?(\w+)\}?", lambda m: env[m.group(1)], w) for w in words]
            found.append(words[words.index("/opt/lifeline/bin/lifeline-mesh") :])
    return found


def test_the_documented_hub_init_steps_make_one_node_of_the_instances() -> None:
    inits = _documented_hub_inits()
    assert len(inits) == 2, inits  # instance 1 makes the node, instance 2 joins it
    parsed = [build_parser().parse_args(argv[1:]) for argv in inits]
    state = _unit(UNIT.read_text(encoding="utf-8"))["Service"]["StateDirectory"][0]
    store = _settings("1")["LIFELINE_HUB_STORE"]
    for instance, args in zip(("1", "2"), parsed, strict=True):
        assert args.func is cmd_hub_init, args
        assert Path(args.root) == Path("/var/lib") / state.replace("%i", instance)
        assert args.store == store  # the same database: the same node
        assert args.source is None
    first, second = parsed
    assert first.new_mesh and second.new_mesh is None  # one mesh, made once
    # the command line carries no password: PGPASSWORD does
    assert ":" not in store.removeprefix("postgresql://").split("@")[0]


def test_the_unit_passes_systemd_analyze(tmp_path: Path) -> None:
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        pytest.skip("no systemd-analyze here (Debian's `systemd` package has it)")
    real = Path(sys.executable).with_name("lifeline-mesh")
    assert real.exists()
    text = UNIT.read_text(encoding="utf-8").replace("/opt/lifeline/bin/lifeline-mesh", str(real))
    text = text.replace("/opt/lifeline/bin/python", sys.executable)  # the readiness probe
    copy = tmp_path / "lifeline-hub@1.service"
    copy.write_text(text, encoding="utf-8")
    done = subprocess.run(
        [analyze, "verify", str(copy)], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0 and not done.stderr.strip(), done.stderr
