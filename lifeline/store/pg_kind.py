"""Whether a store is a PostgreSQL line, asked without loading the driver.

Apart from ``pg_dsn.py`` (the URL's options, which the PostgreSQL adapter itself reads), so
that naming the adapter's type here ties no module of the adapter back to this one.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, TypeGuard

if TYPE_CHECKING:
    from lifeline.store.postgres import PgStore

__all__ = ["is_pg_store"]


def is_pg_store(store: object) -> TypeGuard[PgStore]:
    """Whether ``store`` is a PostgreSQL line, without importing the driver: a process
    that never opened one (every `serve` of line files) never loads it."""
    module = sys.modules.get("lifeline.store.postgres")
    return module is not None and isinstance(store, module.PgStore)
