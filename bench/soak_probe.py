"""What bench/soak.py measures on each node while it runs: CPU, RSS, WAL, evidence, arrivals.

Read from outside the nodes, as an operator would: /proc for the CPU time and resident
memory of each node's process group (serve and its helper processes), the size of the
line's write-ahead log on disk, and the line itself (read-only SQLite) for row counts and
for when each entry first appeared on each node.
"""

from __future__ import annotations

import os
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["Arrivals", "GroupCpu", "counts", "group_rss_mb", "wal_mb"]

_TICK = os.sysconf("SC_CLK_TCK")


def _group_pids(pgid: int) -> list[int]:
    pids: list[int] = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            stat = Path(entry.path, "stat").read_text()
            if int(stat.rsplit(")", 1)[1].split()[2]) == pgid:
                pids.append(int(entry.name))
        except (OSError, ValueError, IndexError):
            continue
    return pids


def group_rss_mb(pgid: int | None) -> float:
    """Resident memory of process group ``pgid`` (serve and its helpers), MB."""
    if pgid is None:
        return 0.0
    total = 0
    for pid in _group_pids(pgid):
        try:
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
        except (OSError, ValueError, IndexError):
            continue
    return total / 1024


@dataclass
class GroupCpu:
    """CPU seconds (user + system) a node's process groups used, sampled over time.

    Per-process totals are remembered, so a process that started since the last sample
    counts from zero; what a SIGKILLed process used after the last sample is lost (a
    fraction of one interval per kill).
    """

    seen: dict[int, tuple[float, float, int]] = field(default_factory=dict)
    system: float = 0.0  # of the last sample's CPU seconds, those in the kernel
    faults: int = 0  # minor page faults of the group over the last sample's interval

    def sample(self, pgid: int | None) -> float:
        """Seconds of CPU used by the group since the previous sample (user + system;
        ``system`` and ``faults`` are set for the same interval)."""
        self.system, self.faults = 0.0, 0
        if pgid is None:
            return 0.0
        used = 0.0
        for pid in _group_pids(pgid):
            try:
                fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
                user, system = int(fields[11]) / _TICK, int(fields[12]) / _TICK
                minflt = int(fields[7])
            except (OSError, ValueError, IndexError):
                continue
            user0, system0, minflt0 = self.seen.get(pid, (0.0, 0.0, 0))
            used += user + system - user0 - system0
            self.system += system - system0
            self.faults += minflt - minflt0
            self.seen[pid] = (user, system, minflt)
        return used


def wal_mb(line: Path) -> float:
    wal = line.with_name(line.name + "-wal")
    try:
        return wal.stat().st_size / 1e6
    except FileNotFoundError:
        return 0.0


def _ro(line: Path) -> sqlite3.Connection:
    return sqlite3.connect(f"file:{line}?mode=ro", uri=True, timeout=30)


def counts(line: Path) -> tuple[int, int, int, float]:
    """(entries, attestations, statements, database file MB) of a line."""
    conn = _ro(line)
    try:
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
        got = [
            conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0] if t in tables else 0
            for t in ("entries", "attestations", "statements")
        ]
    finally:
        conn.close()
    return got[0], got[1], got[2], line.stat().st_size / 1e6


@dataclass
class Arrivals:
    """When each entry first appeared on a node's line (polled by row sequence)."""

    line: Path
    last_seq: int = 0
    seen: dict[str, float] = field(default_factory=dict)

    def start_after_existing(self) -> None:
        conn = _ro(self.line)
        try:
            self.last_seq = conn.execute("SELECT coalesce(max(seq), 0) FROM entries").fetchone()[0]
        finally:
            conn.close()

    def poll(self, now: float) -> None:
        conn = _ro(self.line)
        try:
            rows = conn.execute(
                "SELECT seq, id FROM entries WHERE seq > ? ORDER BY seq", (self.last_seq,)
            ).fetchall()
        finally:
            conn.close()
        for seq, entry_id in rows:
            self.seen.setdefault(entry_id, now)
            self.last_seq = max(self.last_seq, seq)
