"""The fault lab's network: N hosts in network namespaces on one switch, with real faults.

Each node gets a namespace of its own with one interface, ``eth0`` (a 10.x address,
multicast routed on it, so LAN discovery works as on a real segment). The other end of
every ``eth0`` is the lab's switch (``bench/mesh_switch.py``, a userspace process: this
kernel has no ``tc netem``), which delivers each packet after ``delay ± jitter``, drops it
with probability ``loss``, and on :meth:`Net.partition` drops everything between the two
halves of the nodes, silently, as a failed uplink would; healing it brings the links back.

Needs root, iproute2 and ``/dev/net/tun`` (``unavailable()`` says why not). Names carry a
random tag; the switch and every namespace (and with it every interface) are removed by
:meth:`Net.close`, which the lab calls in ``finally``.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["Net", "NodeHost", "unavailable"]

SWITCH = Path(__file__).resolve().parent / "mesh_switch.py"
PORT = 7420  # every node listens on the same port, each at its own address


def _ip(*args: str) -> None:
    done = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30)
    if done.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)}: {done.stderr.strip()}")


def unavailable() -> str | None:
    """None when the lab can build its network here, else the reason."""
    if os.geteuid() != 0:
        return "the fault lab needs root (network namespaces, TUN devices)"
    if shutil.which("ip") is None:
        return "`ip` (iproute2) is not installed"
    if not os.path.exists("/dev/net/tun"):
        return "/dev/net/tun is missing (no TUN devices here)"
    probe = f"llm-probe-{secrets.token_hex(3)}"
    try:
        _ip("netns", "add", probe)
    except (RuntimeError, OSError) as exc:
        return f"cannot make a network namespace here: {exc}"
    finally:
        subprocess.run(["ip", "netns", "del", probe], capture_output=True, timeout=30)
    return None


@dataclass(frozen=True)
class NodeHost:
    index: int
    namespace: str
    address: str
    side: int  # 0 or 1: the half of the switch it hangs on

    @property
    def sync_address(self) -> str:
        return f"{self.address}:{PORT}"

    def wrap(self, argv: list[str]) -> list[str]:
        return ["ip", "netns", "exec", self.namespace, *argv]


@dataclass
class Net:
    size: int
    delay_ms: float = 0.0
    jitter_ms: float = 0.0
    loss_pct: float = 0.0
    tag: str = field(default_factory=lambda: secrets.token_hex(3))
    hosts: list[NodeHost] = field(default_factory=list)
    _made: list[str] = field(default_factory=list)
    _switch: subprocess.Popen[str] | None = None

    def build(self) -> list[NodeHost]:
        prefix = f"10.{100 + secrets.randbelow(90)}.{secrets.randbelow(250)}"
        half = (self.size + 1) // 2
        for i in range(self.size):
            host = NodeHost(i, f"llm-{self.tag}-{i}", f"{prefix}.{i + 1}", int(i >= half))
            _ip("netns", "add", host.namespace)
            self._made.append(host.namespace)
            _ip("-n", host.namespace, "link", "set", "lo", "up")
            self.hosts.append(host)
        argv = [sys.executable, str(SWITCH), "--half", str(half)]
        argv += ["--delay-ms", str(self.delay_ms), "--jitter-ms", str(self.jitter_ms)]
        argv += ["--loss", str(self.loss_pct)]
        argv += [f"{h.namespace}:{h.address}/24" for h in self.hosts]
        self._switch = subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, start_new_session=True
        )
        assert self._switch.stdout is not None
        ready = self._switch.stdout.readline().strip()
        if ready != "ready":
            raise RuntimeError(f"the lab's switch did not start: {ready!r}")
        return self.hosts

    def _command(self, command: str) -> str:
        assert self._switch is not None and self._switch.stdin is not None
        assert self._switch.stdout is not None
        self._switch.stdin.write(command + "\n")
        self._switch.stdin.flush()
        return self._switch.stdout.readline().strip()

    @property
    def switch_pid(self) -> int | None:
        return None if self._switch is None else self._switch.pid

    def partition(self, cut: bool) -> None:
        """Cut (or restore) every link between the two halves."""
        self._command("cut" if cut else "heal")

    def switch_stats(self) -> str:
        return self._command("stats")

    def counters(self, host: NodeHost) -> tuple[int, int]:
        """(received, sent) bytes on the node's ``eth0`` so far."""
        out = subprocess.run(
            ["ip", "-n", host.namespace, "-j", "-s", "link", "show", "dev", "eth0"],
            capture_output=True,
            text=True,
            timeout=30,
        )
        stats = json.loads(out.stdout)[0]["stats64"]
        return int(stats["rx"]["bytes"]), int(stats["tx"]["bytes"])

    def _proc_table(self, host: NodeHost, path: str, prefix: str) -> dict[str, str]:
        """One table of the node's namespace's ``/proc/net`` file (``IpExt:``, ``Tcp:``):
        its header line's names with the values of the line after."""
        out = subprocess.run(
            ["ip", "netns", "exec", host.namespace, "cat", path],
            capture_output=True,
            text=True,
            timeout=30,
        )
        names, values = [x.split() for x in out.stdout.splitlines() if x.startswith(prefix)]
        return dict(zip(names, values, strict=True))

    def multicast_received(self, host: NodeHost) -> int:
        """Multicast bytes (mDNS: discovery) the node's namespace received so far (IP
        layer, from its ``/proc/net/netstat``)."""
        return int(self._proc_table(host, "/proc/net/netstat", "IpExt:")["InMcastOctets"])

    def tcp_opens(self, host: NodeHost) -> int:
        """TCP connections the node's namespace opened or accepted so far (each a TCP and
        TLS handshake: a session dials its own, a Watch call its own)."""
        tcp = self._proc_table(host, "/proc/net/snmp", "Tcp:")
        return int(tcp["ActiveOpens"]) + int(tcp["PassiveOpens"])

    def established(self, host: NodeHost) -> int:
        """TCP connections established in the node's namespace (the node's own)."""
        out = subprocess.run(
            ["ip", "netns", "exec", host.namespace, "ss", "-tnH", "state", "established"],
            capture_output=True,
            text=True,
            timeout=30,
        )
        return sum(1 for line in out.stdout.splitlines() if line.strip())

    def close(self) -> None:
        if self._switch is not None and self._switch.poll() is None:
            self._switch.kill()
            self._switch.wait(timeout=30)
        for name in reversed(self._made):  # a namespace takes its interfaces with it
            subprocess.run(["ip", "netns", "del", name], capture_output=True, timeout=30)
        self._made.clear()
