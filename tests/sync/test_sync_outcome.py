"""How a node says what its sessions refused (decisions 0111, 0112): one warning per
direction for `sync` and `serve`'s log, and the refusals in a scheduled sync's summary,
which `lifeline-mesh peers` shows as the peer's last result."""

from __future__ import annotations

import logging

import pytest

from lifeline.errors import PermissionDenied
from lifeline_mesh.sync.driver import SyncReport
from lifeline_mesh.sync.outcome import refusal_warnings, scheduled_summary


def test_each_direction_has_its_warning_and_a_clean_session_none() -> None:
    clean = SyncReport("ledger", "initiator", entries_sent=3)
    assert refusal_warnings(clean, "10.0.0.2:7000") == {}
    both = SyncReport("ledger", "initiator", refused=2, refused_there=1)
    both.refusals = ["the peer sent an inadmissible entries item: \x1b[2Jits id does not match"]
    both.refusals_there = ["an inadmissible entry: entry 1234 claims …, before its parent"]
    said = refusal_warnings(both, "10.0.0.2:7000")
    assert said["here"].startswith("line 'ledger': refused 2 items from 10.0.0.2:7000 (")
    assert "\x1b" not in said["here"] and "\\x1b[2J" in said["here"]  # shown, not obeyed
    assert said["there"].startswith("line 'ledger': 10.0.0.2:7000 refused 1 item this node sent")
    assert "before its parent" in said["there"] and "`lifeline verify` here" in said["there"]


def test_a_scheduled_sync_logs_its_refusals_and_sums_them_up(
    caplog: pytest.LogCaptureFixture,
) -> None:
    quiet = SyncReport("ledger", "initiator", entries_sent=1, bytes_sent=10, bytes_received=20)
    told = SyncReport("notes", "initiator", refused_there=3)
    with caplog.at_level(logging.WARNING, logger="lifeline_mesh.sync.outcome"):
        summary = scheduled_summary([quiet, told], "10.0.0.2:7000")
    assert summary == (
        "ledger: sent 1, received 0 (0 new), 10/20 bytes out/in; notes: sent 0, received 0 "
        "(0 new), 0/0 bytes out/in, refused 0 of its items, it refused 3 of ours (the log "
        "names them)"
    )
    [record] = caplog.records
    assert "10.0.0.2:7000 refused 3 items this node sent (no reason given)" in record.message


def test_a_line_the_peer_refused_is_named_and_every_line_refused_is_a_failed_sync() -> None:
    why = "peer 10.0.0.2:7000 refused us: line 'notes' is not shared by the node serving there"
    refused = SyncReport("notes", "initiator", error=why)
    synced = SyncReport("ledger", "initiator", entries_received=2, entries_added=2)
    summary = scheduled_summary([synced, refused], "10.0.0.2:7000")
    assert summary.startswith("ledger: sent 0, received 2 (2 new)")
    assert summary.endswith(f"; notes: not synced ({why})")
    with pytest.raises(PermissionDenied, match="line 'notes' is not shared"):
        scheduled_summary([refused], "10.0.0.2:7000")  # logged and retried as any failure
