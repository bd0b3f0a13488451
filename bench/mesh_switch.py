"""The fault lab's switch: a userspace IP switch between network namespaces, with faults.

This kernel has no ``sch_netem`` (and no module to load), so delay, jitter and loss are made
here: each node's namespace gets a TUN device (``eth0``) whose other end is a file descriptor
of this process. Every IPv4 packet a node sends comes out here and is delivered to the node
owning its destination address (multicast, e.g. mDNS, to every other node) after a delay
drawn uniformly in ``delay ± jitter``, or dropped with probability ``loss`` (once per packet
and receiver, as netem on the sender's link would). ``cut`` on stdin drops every packet
between the two halves of the nodes (a failed uplink: silence, no error), ``heal`` ends it.

    python bench/mesh_switch.py --delay-ms 50 --jitter-ms 20 --loss 1 --half 3 \
        NS:ADDR/24 NS:ADDR/24 ...

Prints ``ready`` once every node's ``eth0`` is up. Stops when stdin closes.
"""

from __future__ import annotations

import argparse
import asyncio
import fcntl
import ipaddress
import os
import random
import secrets
import struct
import subprocess
import sys

TUNSETIFF = 0x400454CA
IFF_TUN = 0x0001
IFF_NO_PI = 0x1000


def _ip(*args: str) -> None:
    done = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30)
    if done.returncode != 0:
        raise SystemExit(f"ip {' '.join(args)}: {done.stderr.strip()}")


def _tun(name: str) -> int:
    fd = os.open("/dev/net/tun", os.O_RDWR | os.O_NONBLOCK)
    fcntl.ioctl(fd, TUNSETIFF, struct.pack("16sH", name.encode(), IFF_TUN | IFF_NO_PI))
    return fd


class Switch:
    def __init__(self, args: argparse.Namespace) -> None:
        self.delay = args.delay_ms / 1000
        self.jitter = args.jitter_ms / 1000
        self.loss = args.loss / 100
        self.half = args.half
        self.cut = False
        self.fds: list[int] = []
        self.by_addr: dict[bytes, int] = {}
        self.delivered = 0
        self.dropped = 0
        tag = secrets.token_hex(2)
        for i, spec in enumerate(args.nodes):
            namespace, cidr = spec.split(":")
            name = f"lt{tag}{i}"
            fd = _tun(name)
            _ip("link", "set", name, "netns", namespace)
            ns = ["-n", namespace]
            _ip(*ns, "link", "set", name, "name", "eth0")
            _ip(*ns, "addr", "add", cidr, "dev", "eth0")
            _ip(*ns, "link", "set", "eth0", "multicast", "on", "up")
            _ip(*ns, "route", "add", "224.0.0.0/4", "dev", "eth0")
            self.fds.append(fd)
            address = ipaddress.ip_interface(cidr).ip.packed
            self.by_addr[address] = i

    def _side(self, i: int) -> int:
        return int(i >= self.half)

    def _deliver(self, fd: int, packet: bytes) -> None:
        try:
            os.write(fd, packet)
            self.delivered += 1
        except OSError:  # the receiver's queue is full or it is gone: a lost packet
            self.dropped += 1

    def _read(self, source: int) -> None:
        loop = asyncio.get_running_loop()
        while True:
            try:
                packet = os.read(self.fds[source], 65536)
            except BlockingIOError:
                return
            if len(packet) < 20 or packet[0] >> 4 != 4:
                continue  # IPv6 (router solicitations and the like): this LAN is IPv4
            dst = packet[16:20]
            if 224 <= dst[0] <= 239:
                targets = [j for j in range(len(self.fds)) if j != source]
            elif dst in self.by_addr:
                targets = [self.by_addr[dst]]
            else:
                continue
            for j in targets:
                if self.cut and self._side(j) != self._side(source):
                    self.dropped += 1
                    continue
                if random.random() < self.loss:
                    self.dropped += 1
                    continue
                wait = self.delay + random.uniform(-self.jitter, self.jitter)
                loop.call_later(max(0.0, wait), self._deliver, self.fds[j], packet)

    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        for i, fd in enumerate(self.fds):
            loop.add_reader(fd, self._read, i)
        print("ready", flush=True)
        reader = asyncio.StreamReader()
        await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
        while line := await reader.readline():
            command = line.decode().strip()
            if command in ("cut", "heal"):
                self.cut = command == "cut"
            elif command == "stats":
                print(f"delivered {self.delivered} dropped {self.dropped}", flush=True)
                continue
            print(f"ok {command}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--delay-ms", type=float, default=0.0)
    parser.add_argument("--jitter-ms", type=float, default=0.0)
    parser.add_argument("--loss", type=float, default=0.0, help="percent")
    parser.add_argument("--half", type=int, required=True, help="nodes before it: side 0")
    parser.add_argument("nodes", nargs="+", metavar="NS:ADDR/LEN")
    args = parser.parse_args()
    asyncio.run(Switch(args).run())


if __name__ == "__main__":
    main()
