"""One heap for every thread of a lifeline-mesh process (glibc's ``M_ARENA_MAX`` 1).

glibc gives threads heaps of their own ("arenas", up to 8 a core), each keeping what its
thread freed for that thread alone. A node's threads — the store's worker, gRPC's, the
helpers' readers, a session's worker — then hold a little of everything each:

- `serve`: a session's SQLite page cache, read into its worker thread's heap and given
  back when the session closed its line, was faulted in afresh by the next session
  (decision 0044);
- `sync` pulling a million entries: ten heaps, ~60 MB more at its peak than one
  (decision 0102).

`lifeline-mesh` calls :func:`one_arena` first thing, before any thread starts. Light on
purpose (no ``ctypes.util``): every command pays for its imports.
"""

from __future__ import annotations

import ctypes

__all__ = ["one_arena"]

_M_ARENA_MAX = -8  # glibc's mallopt parameter (malloc.h)


def one_arena() -> bool:
    """Have every thread allocate from glibc's main heap; False where the C library has no
    ``mallopt`` (not glibc: musl, macOS). Call before the threads start."""
    try:
        mallopt = ctypes.CDLL(None).mallopt  # the process's own symbols: libc's among them
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    return bool(mallopt(_M_ARENA_MAX, 1))
