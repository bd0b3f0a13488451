"""Who is on the other end of a loopback TCP connection: the user owning the client's socket.

A port on 127.0.0.1 is open to every user of the machine, not only to the one who started
the server. On Linux the kernel lists every TCP socket of the network namespace with its
owner's uid (``/proc/net/tcp`` and ``tcp6``, as ``ss -tne`` shows them): the client's end of
a loopback connection is the row whose local address is the client's and whose remote
address is the server's. A loopback connection cannot come from another namespace, so a
local user cannot hide their socket from that list.

:func:`loopback_peer_uid` gives that uid, or None where it cannot be known (another
system, no ``/proc``, the connection already gone); the caller decides what None means.
A socket no process holds any more (its owner closed it or exited, and the kernel is
finishing the connection) is listed with uid 0 and inode 0: that is not root's, and is
read as unknown.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path
from typing import TypeVar

__all__ = ["PROC_NET", "listener_uids", "loopback_hosts", "loopback_peer_uid", "proc_address"]

PROC_NET = Path("/proc/net")
T = TypeVar("T")


def proc_address(host: str, port: int) -> str | None:
    """``host:port`` as ``/proc/net/tcp{,6}`` writes it (each 32-bit word of the address in
    the kernel's byte order, hex, upper case), or None for a host that is not an IP."""
    try:
        if ":" in host:
            raw = socket.inet_pton(socket.AF_INET6, host.split("%")[0])
        else:
            raw = socket.inet_pton(socket.AF_INET, host)
    except OSError:
        return None
    words = [raw[k : k + 4][::-1] for k in range(0, len(raw), 4)]  # little-endian words
    return f"{b''.join(words).hex().upper()}:{port:04X}"


def loopback_hosts(host: str) -> tuple[str, ...]:
    """The addresses a loopback ``host`` stands for: ``localhost`` is both families' (gRPC
    binds and dials either), an address itself (brackets dropped)."""
    return ("127.0.0.1", "::1") if host == "localhost" else (host.strip("[]"),)


def _forms(host: str) -> tuple[str, ...]:
    """``host`` as either table may list it: an IPv4 client of a dual-stack server is seen
    as ``::ffff:127.0.0.1`` by the server and listed as ``127.0.0.1`` (``tcp``)."""
    if host.startswith("::ffff:") and "." in host:
        return (host, host.removeprefix("::ffff:"))
    return (host, f"::ffff:{host}") if ":" not in host else (host,)


def loopback_peer_uid(
    client: tuple[str, int], *servers: tuple[str, int], proc: Path = PROC_NET
) -> int | None:
    """The uid owning the client end of the TCP connection from ``client`` to one of
    ``servers`` (a server's addresses: each table is read once for all of them)."""
    pairs: dict[str, set[tuple[str, str]]] = {"tcp": set(), "tcp6": set()}
    for server in servers:
        for chost in _forms(client[0]):
            for shost in _forms(server[0]):
                local, remote = proc_address(chost, client[1]), proc_address(shost, server[1])
                if local is not None and remote is not None and (":" in chost) == (":" in shost):
                    pairs["tcp6" if ":" in chost else "tcp"].add((local, remote))
    for text, wanted in _tables(proc, pairs):
        for local, remote in wanted:
            uid = _owner_in(text, local, remote)
            if uid is not None:
                return uid
    return None


def _tables(proc: Path, wanted: dict[str, set[T]]) -> Iterator[tuple[str, set[T]]]:
    """The text of each table (``tcp``, ``tcp6``) something is wanted from, with what;
    a table that cannot be read is left out."""
    for table, things in wanted.items():
        if not things:
            continue
        try:
            text = (proc / table).read_text(encoding="ascii", errors="replace")
        except OSError:
            continue
        yield text, things


def _owner_in(text: str, local: str, remote: str) -> int | None:
    """The uid on the row of ``text`` (a ``/proc/net/tcp`` table) for ``local`` →
    ``remote``; found by its addresses, so the other rows are not split (a busy machine
    lists thousands)."""
    needle = f" {local} {remote} "
    at = text.find(needle)
    while at >= 0:
        start = text.rfind("\n", 0, at) + 1
        end = text.find("\n", at)
        fields = text[start : end if end >= 0 else len(text)].split()
        at = text.find(needle, at + 1)
        if len(fields) <= 9 or (fields[1], fields[2]) != (local, remote):
            continue
        if not fields[7].isdigit() or fields[9] == "0":  # no process holds it any more
            continue  # (closing, TIME_WAIT): its uid reads 0, which is not root's
        return int(fields[7])
    return None


LISTEN = "0A"  # the state column of a listening socket


def listener_uids(host: str, port: int, *, proc: Path = PROC_NET) -> set[int] | None:
    """The owners of the listening sockets a connection to the loopback ``host:port`` can
    reach: bound to that address (either of ``localhost``'s), or to every address
    (``0.0.0.0``, or ``::``, which takes IPv4 too). None when neither table can be read."""
    wanted: dict[str, set[str | None]] = {"tcp": set(), "tcp6": {proc_address("::", port)}}
    for address in loopback_hosts(host):
        if ":" in address:
            wanted["tcp6"].add(proc_address(address, port))
        else:
            wanted["tcp"] |= {proc_address(address, port), proc_address("0.0.0.0", port)}
            wanted["tcp6"].add(proc_address(f"::ffff:{address}", port))
    found: set[int] = set()
    read = False
    for text, addresses in _tables(proc, wanted):
        read = True
        for line in text.splitlines()[1:]:
            fields = line.split()
            if len(fields) <= 9 or fields[3] != LISTEN or fields[1] not in addresses:
                continue
            if fields[7].isdigit() and fields[9] != "0":
                found.add(int(fields[7]))
    return found if read else None
