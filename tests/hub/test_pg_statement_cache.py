"""`?statement_cache_size=0` in a hub's database URL: the driver's prepared-statement cache
off, as a transaction-mode pooler (PgBouncer) needs (docs/hub.md). The store contract runs
with it too (tests/store/test_store_contract.py, ``postgres-nocache``)."""

from __future__ import annotations

import pytest

from lifeline.errors import ConfigError
from lifeline.store.pg_dsn import connect_options
from lifeline.store.postgres import PgStore
from tests.support.entries import make_entry
from tests.support.pg_server import line_name, no_statement_cache


def test_driver_options_leave_the_url_and_the_rest_stays() -> None:
    url = "postgresql://hub@/db?host=/run/postgresql&statement_cache_size=0&application_name=x"
    plain, options = connect_options(url)
    assert options == {"statement_cache_size": 0}
    assert plain == "postgresql://hub@/db?host=/run/postgresql&application_name=x"
    assert connect_options("postgresql://hub@h/db") == ("postgresql://hub@h/db", {})
    with pytest.raises(ConfigError, match="must be a whole number"):
        connect_options("postgresql://hub@h/db?statement_cache_size=off")


async def _named_statements(url: str) -> int:
    """Named prepared statements the server holds for a connection of the store's pool
    after the same query ran twice on it (the store works either way)."""
    store = await PgStore.open(url, line_name())
    try:
        for n in range(2):
            assert await store.append(make_entry(f"e{n}"))
            assert await store.count() == n + 1
        async with store.db.pool.acquire() as conn:
            for _ in range(2):
                assert await conn.fetchval("SELECT $1::int + 1", 1) == 2
            return int(await conn.fetchval("SELECT count(*) FROM pg_prepared_statements"))
    finally:
        await store.close()


async def test_statement_cache_off_prepares_nothing_named(pg_server: str) -> None:
    assert await _named_statements(pg_server) > 0  # the default: cached, named statements
    assert await _named_statements(no_statement_cache(pg_server)) == 0
