"""Reading standard input from inside a command, so that one Ctrl-C stops the wait.

Commands run inside ``asyncio.run``, whose first SIGINT only cancels the main task and wakes
the event loop. A read blocked in the same thread is not woken by that: the interrupted
system call is retried after the handler (PEP 475), so the first Ctrl-C was swallowed and
only a second one stopped a command waiting for a token or a body on stdin.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable
from typing import TypeVar

__all__ = ["read_stdin"]

T = TypeVar("T")


def read_stdin(read: Callable[[], T]) -> T:
    """``read()``, a blocking read of standard input, during which SIGINT raises
    KeyboardInterrupt at once, as in a program without an event loop (the CLI then prints
    "interrupted" and exits 130)."""
    if threading.current_thread() is not threading.main_thread():
        return read()  # only the main thread gets signals, and may set their handlers
    previous = signal.getsignal(signal.SIGINT)
    if not callable(previous):  # SIGINT ignored or left to the system: nothing swallows it
        return read()
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        return read()
    finally:
        signal.signal(signal.SIGINT, previous)
