"""Listen and peer addresses: parsing ``HOST:PORT`` and the loopback-only rule without TLS."""

from __future__ import annotations

import argparse
import errno
import ipaddress
import re
import socket
from collections.abc import Callable

from lifeline.errors import ConfigError

__all__ = [
    "address_arg",
    "check_bindable",
    "is_loopback",
    "listen_socket",
    "require_loopback",
    "split_address",
]

_PORT = re.compile(r"[0-9]{1,5}")
_HOST = re.compile(r"[A-Za-z0-9._%-]+")  # a name, an IPv4 address, or an IPv6 zone id part


def split_address(value: str, *, what: str = "address", listen: bool = False) -> tuple[str, int]:
    """``HOST:PORT`` or ``[IPV6]:PORT`` -> (host, port); one clear ConfigError otherwise.

    Ports are 1-65535 (0, "any free port", only for a ``listen`` address); an IPv6 address
    needs brackets, as without them its last group would be taken for the port.
    """
    text = value.strip()
    host, sep, port = text.rpartition(":")
    bracketed = host.startswith("[") and host.endswith("]")
    host = host[1:-1] if bracketed else host
    lowest = 0 if listen else 1
    if not sep or not host:
        reason = "no port" if not sep else "no host"
    elif ":" in host and not bracketed:
        reason = "an IPv6 address needs brackets"
    elif not (_ipv6(host) if bracketed else _HOST.fullmatch(host)):
        reason = "the host has characters no host name has"
    elif not _PORT.fullmatch(port) or not lowest <= int(port) <= 65535:
        reason = f"the port must be a number from {lowest} to 65535"
    else:
        return host, int(port)
    raise ConfigError(
        f"{what} {value!r} is not HOST:PORT ({reason}); write it like 192.168.1.20:7420 "
        "or [::1]:7420"
    )


def _ipv6(host: str) -> bool:
    """An IPv6 address, optionally with a zone (``fe80::1%eth0``)."""
    address, _, zone = host.partition("%")
    try:
        ipaddress.IPv6Address(address)
    except ValueError:
        return False
    return not zone or bool(_HOST.fullmatch(zone))


def address_arg(*, listen: bool = False) -> Callable[[str], str]:
    """An argparse ``type`` that checks a ``HOST:PORT`` before the command runs."""

    def check(text: str) -> str:
        try:
            split_address(text, listen=listen)
        except ConfigError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
        return text.strip()

    return check


def is_loopback(host: str) -> bool:
    """``localhost`` or a loopback address (``127.0.0.1``, ``::1``, bracketed or not)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def require_loopback(value: str, *, tls: bool, what: str, listen: bool = False) -> tuple[str, int]:
    host, port = split_address(value, what=what, listen=listen)
    if not tls and not is_loopback(host):
        raise ConfigError(
            f"{what} {value!r} is not a loopback address, and without TLS (--insecure, or no "
            "mesh membership yet) a node listens and dials on loopback only; use 127.0.0.1 "
            "or ::1, or drop --insecure on a member (`lifeline-mesh init --new-mesh` or "
            "`join` makes one) to use mutual TLS"
        )
    return host, port


def check_bindable(host: str, port: int, *, what: str) -> None:
    """A ConfigError in one line — which address, why, what to do — when ``host:port``
    cannot be listened on; nothing when it can (port 0 always can). gRPC's own failure is
    a bare "Failed to bind" with a traceback, and with SO_REUSEPORT (gRPC's default, which
    our servers turn off) a second node would share a port another one serves."""
    if port == 0:
        return
    family = socket.AF_INET6 if ":" in host.strip("[]") else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as gRPC binds
        try:
            probe.bind((host.strip("[]"), port))
        except OSError as exc:
            shown = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
            raise ConfigError(
                f"cannot listen on {shown} ({what}): "
                f"{_BIND_ADVICE.get(exc.errno or 0, exc.strerror or str(exc))}"
            ) from exc


_BIND_ADVICE: dict[int, str] = {
    errno.EADDRINUSE: "the port is taken — by another `lifeline-mesh serve` (another project "
    "on this machine?) or another program (`ss -ltnp` shows which); pick another port "
    "(HOST:0 picks a free one)",
    errno.EADDRNOTAVAIL: "this machine has no such address; listen on one of its own "
    "(`ip -brief addr`), 127.0.0.1 for this machine only, or 0.0.0.0 for every interface",
    errno.EACCES: "permission denied (ports below 1024 need privileges); use a port above 1024",
}


def listen_socket(host: str, port: int, *, hint: str) -> socket.socket:
    """A listening, non-blocking TCP socket on ``host:port`` (IPv6 when the host has a
    colon), or a ConfigError that names the address and ends with ``hint``.

    The protocol is named (``IPPROTO_TCP``, not 0): the sockets accepted from it inherit
    it, and asyncio sets ``TCP_NODELAY`` only on sockets whose protocol says TCP. Without
    it, a response written as headers then body waits for the client's delayed ACK, and
    every request after the first on a kept-alive connection takes 40 ms more."""
    family = socket.AF_INET6 if ":" in host.strip("[]") else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host.strip("[]"), port))
    except OSError as exc:
        sock.close()
        raise ConfigError(f"cannot listen on {host}:{port} ({exc.strerror}); {hint}") from exc
    sock.listen(128)
    sock.setblocking(False)
    return sock
