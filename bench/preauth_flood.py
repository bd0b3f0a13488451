"""Pre-authentication flood: what unauthenticated callers cost a real `serve`.

Creates a mesh node holding the CA (so `serve` opens a join port, the one port that takes
callers without a certificate), starts `lifeline-mesh serve` on 127.0.0.1 with its log in
a file, then, as a caller with no certificate:

1. opens ``--streams`` streams that never send a message, half of them Sync and half Join
   calls, over ``--channels`` connections to the join port, and holds them ``--hold``
   seconds;
2. sends ``--hellos`` Sync hellos naming a line of ``--hello-mib`` MiB, ``--parallel`` at a
   time.

Prints serve's RSS (before, highest seen, after), the size of its log, and how the calls
ended. Loopback only, every count and wait bounded::

    .venv/bin/python bench/preauth_flood.py --streams 20000 --hellos 1000
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import grpc
from memory import Sampler

from lifeline_mesh.home.node_home import NodeHome
from lifeline_mesh.membership.certs import TARGET_NAME
from lifeline_mesh.wire import sync_pb2 as pb

SYNC = "/lifeline_mesh.v1.Mesh/Sync"
JOIN = "/lifeline_mesh.v1.Membership/Join"
CALL_S = 30.0


def _run(root: Path, module: str, *args: str) -> None:
    subprocess.run(
        [sys.executable, "-m", module, "--root", str(root), *args],
        check=True,
        capture_output=True,
        timeout=120,
    )


def _rss_mb(pid: int) -> float:
    for row in Path(f"/proc/{pid}/status").read_text().splitlines():
        if row.startswith("VmRSS:"):
            return int(row.split()[1]) / 1024
    return 0.0


class Peak:
    """Samples a process's RSS every 50 ms in a thread; ``high`` is the highest seen."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.high = 0.0
        self.stop = Sampler(self._sample, 0.05).stop

    def _sample(self) -> None:
        self.high = max(self.high, _rss_mb(self.pid))


def _channel(address: str, ca_pem: bytes) -> grpc.aio.Channel:
    credentials = grpc.ssl_channel_credentials(root_certificates=ca_pem)
    options: list[tuple[str, Any]] = [
        ("grpc.ssl_target_name_override", TARGET_NAME),
        ("grpc.max_send_message_length", 64 << 20),
    ]
    return grpc.aio.secure_channel(address, credentials, options=options)


async def _silent_streams(
    address: str, ca_pem: bytes, streams: int, channels: int, hold: float, peak: Peak
) -> tuple[collections.Counter[str], float]:
    """``streams`` calls that never send; how they had ended after ``hold`` s, and serve's
    highest RSS meanwhile."""
    chans = [_channel(address, ca_pem) for _ in range(channels)]
    calls = []
    for n in range(streams):
        method = SYNC if n % 2 == 0 else JOIN
        calls.append(chans[n % channels].stream_stream(method)())
    await asyncio.gather(*(c.channel_ready() for c in chans))
    await asyncio.sleep(hold)  # a bench holding its streams open, not a synchronisation
    ended: collections.Counter[str] = collections.Counter()
    for call in calls:
        ended["still open" if not call.done() else (await call.code()).name.lower()] += 1
        call.cancel()
    for chan in chans:
        await chan.close()
    return ended, peak.high


async def _hellos(
    address: str, ca_pem: bytes, hellos: int, mib: int, parallel: int
) -> collections.Counter[str]:
    frame = pb.Frame(
        hello=pb.Hello(protocol_version=1, line="x" * (mib << 20), sets=["entries"])
    ).SerializeToString()
    ended: collections.Counter[str] = collections.Counter()
    gate = asyncio.Semaphore(parallel)
    async with _channel(address, ca_pem) as chan:

        async def one() -> None:
            async with gate:
                call = chan.stream_stream(SYNC)()
                try:
                    async with asyncio.timeout(CALL_S):
                        await call.write(frame)
                        await call.done_writing()
                        while await call.read() is not grpc.aio.EOF:
                            pass
                    ended["ok"] += 1
                except grpc.aio.AioRpcError as exc:
                    ended[exc.code().name.lower()] += 1
                except TimeoutError:
                    ended["no answer in 30 s"] += 1
                finally:
                    call.cancel()

        await asyncio.gather(*(one() for _ in range(hellos)))
    return ended


def _start(root: Path, log: Path) -> tuple[subprocess.Popen[str], str]:
    with log.open("w") as out:
        proc = subprocess.Popen(
            [
                sys.executable, "-m", "lifeline_mesh", "--root", str(root), "serve",
                "--listen", "127.0.0.1:0", "--join-listen", "127.0.0.1:0", "--no-discovery",
            ],
            stdout=subprocess.PIPE,
            stderr=out,
            text=True,
        )  # fmt: skip
    assert proc.stdout is not None
    proc.stdout.readline()  # listening on ...
    join = proc.stdout.readline().removeprefix("join port on ").strip()
    if not join:
        proc.kill()
        raise SystemExit("serve did not open a join port")
    return proc, join


async def _main(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory(prefix="preauth-") as tmp:
        root, log = Path(tmp) / "ca", Path(tmp) / "serve.log"
        root.mkdir()
        _run(root, "lifeline", "init")
        _run(root, "lifeline_mesh", "init", "--new-mesh", "team")
        _run(root, "lifeline_mesh", "share", "ledger")
        ca_pem = NodeHome(root).ca_cert_path.read_bytes()
        proc, join = _start(root, log)
        try:
            time.sleep(1.0)  # let serve settle before the baseline (a bench, not a test)
            base = _rss_mb(proc.pid)
            peak = Peak(proc.pid)
            began = time.monotonic()
            streams, high = await _silent_streams(
                join, ca_pem, args.streams, args.channels, args.hold, peak
            )
            took = time.monotonic() - began
            print(f"serve RSS before: {base:.0f} MB")
            print(
                f"{args.streams} silent streams (Sync and Join) over {args.channels} "
                f"connections, held {args.hold:.0f} s: serve RSS peak {high:.0f} MB "
                f"(+{high - base:.0f}); ended: {dict(streams)} ({took:.1f} s)"
            )
            began = time.monotonic()
            hellos = await _hellos(join, ca_pem, args.hellos, args.hello_mib, args.parallel)
            took = time.monotonic() - began
            peak.stop()
            after = _rss_mb(proc.pid)
            print(
                f"{args.hellos} hellos naming a {args.hello_mib} MiB line: ended "
                f"{dict(hellos)} in {took:.1f} s"
            )
            print(
                f"serve RSS peak {peak.high:.0f} MB (+{peak.high - base:.0f}), after "
                f"{after:.0f} MB; log {log.stat().st_size / 1e6:.2f} MB"
            )
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--streams", type=int, default=20_000)
    parser.add_argument("--channels", type=int, default=20)
    parser.add_argument("--hold", type=float, default=5.0)
    parser.add_argument("--hellos", type=int, default=1000)
    parser.add_argument("--hello-mib", type=int, default=1)
    parser.add_argument("--parallel", type=int, default=8)
    args = parser.parse_args()
    if not 0 < args.streams <= 50_000 or not 0 < args.hellos <= 5_000:
        raise SystemExit("bounded: --streams 1..50000, --hellos 1..5000")
    asyncio.run(asyncio.wait_for(_main(args), timeout=900))


if __name__ == "__main__":
    main()
