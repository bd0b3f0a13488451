"""Fixed HTTP/2 windows instead of bandwidth probes (decision 0101).

A real node serves on 127.0.0.1; the real Watch client takes announcements a few tenths of
a second apart, as a node of a busy mesh does. With gRPC's bandwidth probing, the caller
answered nearly every announcement with window updates and a PING (and then the ping's
ack); with our fixed windows it answers with TCP ACKs only, so what it sends over the call
stays its request, whatever the number of announcements. The kernel's own count of the
payload bytes the caller's socket sent (``ss -ti``) is the measure; the same call with
probing turned back on shows the measure sees the difference.
"""

from __future__ import annotations

import asyncio
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from lifeline_mesh.transport.announce import watch_lines
from tests.support.needs import missing
from tests.support.sync_helpers import make_node, serving

ANNOUNCEMENTS = 24
GAP_S = 0.2


def _payload_sent_to(port: int) -> int:
    """Payload bytes (TLS or plain, not TCP/IP headers) sent so far by this host's one
    established connection to ``127.0.0.1:port``."""
    out = subprocess.run(
        ["ss", "-tinH", "state", "established", f"dport = :{port}"],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    ).stdout
    sent = re.findall(r"\bbytes_sent:(\d+)", out)
    assert len(sent) == 1, out
    return int(sent[0])


async def _caller_sends(tmp_path: Path, options: list[tuple[str, Any]]) -> int:
    """Bytes a Watch caller sent over a call that brought ``ANNOUNCEMENTS`` announcements."""
    node = make_node(tmp_path)
    async with serving(node) as (_, address):
        calls = watch_lines(address, [], options=options)
        async with asyncio.timeout(30):
            assert (await anext(calls)).initial
            for _ in range(ANNOUNCEMENTS):
                await asyncio.sleep(GAP_S)
                node.changes.publish(["ledger"])
                assert (await anext(calls)).lines == ("ledger",)
        await asyncio.sleep(0.3)  # a probe the last announcement drew is sent by now
        sent = _payload_sent_to(int(address.rpartition(":")[2]))
        await calls.aclose()
    return sent


def _need_ss() -> None:
    if shutil.which("ss") is None:
        missing("`ss` (iproute2) is not installed: apt-get install iproute2")


@pytest.mark.slow  # 24 announcements 0.2 s apart, twice
async def test_a_watch_caller_answers_announcements_with_acks_only(tmp_path: Path) -> None:
    _need_ss()
    ours = await _caller_sends(tmp_path / "ours", [])
    # the request, the connection's preface and settings: a few hundred bytes, not a
    # window update and a ping for each announcement
    assert ours < 600, f"the caller sent {ours} B over {ANNOUNCEMENTS} announcements"
    probing = await _caller_sends(tmp_path / "probing", [("grpc.http2.bdp_probe", 1)])
    assert probing > ours + ANNOUNCEMENTS * 10, (ours, probing)
