"""Listen and peer addresses: parsing ``HOST:PORT`` and the loopback-only rule without TLS."""

from __future__ import annotations

import ipaddress

from lifeline.errors import ConfigError

__all__ = ["require_loopback", "split_address"]


def split_address(value: str) -> tuple[str, int]:
    """``HOST:PORT`` or ``[v6]:PORT`` -> (host, port)."""
    host, sep, port = value.rpartition(":")
    if not sep or not port.isdigit() or not host or int(port) > 65535:
        raise ConfigError(f"address {value!r} is not HOST:PORT; e.g. 127.0.0.1:7420")
    return host.strip("[]"), int(port)


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def require_loopback(value: str, *, tls: bool, what: str) -> tuple[str, int]:
    host, port = split_address(value)
    if not tls and not _is_loopback(host):
        raise ConfigError(
            f"{what} {value!r} is not a loopback address and this node has no TLS "
            "credentials; use 127.0.0.1 or ::1, or set up mesh membership (mutual TLS) first"
        )
    return host, port
