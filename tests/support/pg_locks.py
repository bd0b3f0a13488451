"""A PostgreSQL transaction held open on a thread of its own, as a stuck writer or a long
maintenance job would hold it, so tests can show what waits for it and what does not."""

from __future__ import annotations

import asyncio
import threading

import asyncpg

__all__ = ["HeldTransaction"]


class HeldTransaction:
    """Runs ``statement`` (``args`` its parameters) in a transaction and keeps the locks it
    took until the block ends (or :meth:`release`)."""

    def __init__(self, url: str, statement: str, *args: object) -> None:
        self.url, self.statement, self.args = url, statement, args
        self.held, self._release = threading.Event(), threading.Event()
        self.thread = threading.Thread(target=lambda: asyncio.run(self._hold()))

    async def _hold(self) -> None:
        conn = await asyncpg.connect(self.url)
        try:
            async with conn.transaction():
                await conn.execute(self.statement, *self.args)
                self.held.set()
                while not self._release.is_set():
                    await asyncio.sleep(0.05)
        finally:
            await conn.close()

    def __enter__(self) -> HeldTransaction:
        self.thread.start()
        assert self.held.wait(60), f"could not hold: {self.statement}"
        return self

    def release(self) -> None:
        """End the transaction (again: nothing)."""
        self._release.set()
        if self.thread.is_alive():
            self.thread.join(60)

    def __exit__(self, *exc: object) -> None:
        self.release()
