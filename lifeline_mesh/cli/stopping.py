"""Which signals stop a long-running command (`serve`, `membership-serve`, `ui`) gracefully.

SIGINT and SIGTERM, and SIGHUP too (decision 0133): a hang-up means the terminal or the
session that started the process is gone, and Python's default for it kills the process at
once — no grace for open sessions, no closing report, the node's state file left behind.
The process has nothing to reload (each command reads the configuration when it needs it),
so a hang-up stops it as SIGTERM does. A process started under `nohup` (SIGHUP ignored
when it starts) keeps ignoring it.
"""

from __future__ import annotations

import asyncio
import signal

__all__ = ["stop_on_signals"]


def stop_on_signals(stop: asyncio.Event) -> None:
    """Set ``stop`` on SIGINT, SIGTERM and (unless ignored at start) SIGHUP."""
    loop = asyncio.get_running_loop()
    signals = [signal.SIGINT, signal.SIGTERM]
    if signal.getsignal(signal.SIGHUP) is not signal.SIG_IGN:
        signals.append(signal.SIGHUP)
    for sig in signals:
        loop.add_signal_handler(sig, stop.set)
