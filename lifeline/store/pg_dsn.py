"""Options a ``postgresql://`` URL carries for the driver rather than the server.

asyncpg sends every query parameter it does not know to the server as a setting, so ours are
taken out of the URL first: ``command_timeout`` (seconds; the store reads it itself, see
``postgres.client_options``) and ``statement_cache_size``. ``statement_cache_size=0``
turns the driver's prepared-statement cache off, which a transaction-mode pooler
(PgBouncer ``pool_mode = transaction``, managed poolers) needs: there, consecutive
transactions of one client may run on different server connections, and a statement
prepared on one is unknown on the next (docs/hub.md).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from lifeline.errors import ConfigError

__all__ = ["DRIVER_OPTIONS", "connect_options", "is_postgres_url"]

DRIVER_OPTIONS = ("statement_cache_size", "command_timeout")


def connect_options(dsn: str) -> tuple[str, dict[str, Any]]:
    """``dsn`` without our driver options, and those options as asyncpg keyword arguments."""
    parts = urlsplit(dsn)
    if not parts.query:
        return dsn, {}
    kept: list[tuple[str, str]] = []
    options: dict[str, Any] = {}
    for key, value in parse_qsl(parts.query, keep_blank_values=True):
        if key not in DRIVER_OPTIONS:
            kept.append((key, value))
            continue
        if key == "command_timeout":  # seconds: the client's bound on a query
            try:
                options[key] = float(value)
            except ValueError:
                raise ConfigError(
                    f"command_timeout={value!r} in the database URL is not a number of seconds"
                ) from None
            continue
        if not value.isdigit():
            raise ConfigError(
                f"{key}={value!r} in the database URL must be a whole number (0 turns the "
                "prepared-statement cache off, for a transaction-mode pooler)"
            )
        options[key] = int(value)
    if not options:
        return dsn, {}
    return urlunsplit(parts._replace(query=urlencode(kept, safe="/"))), options


def is_postgres_url(target: str) -> bool:
    """Whether a ``--store`` value names a PostgreSQL database rather than a folder."""
    return target.startswith(("postgresql://", "postgres://"))
