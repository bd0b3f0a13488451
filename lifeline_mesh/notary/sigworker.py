"""A signature worker process: ``python -m lifeline_mesh.notary.sigworker``.

Started by :mod:`lifeline_mesh.notary.verifier`; answers its requests on stdin/stdout
until stdin closes.
"""

from __future__ import annotations

import contextlib
import signal
import sys

from lifeline_mesh.notary.verifier import serve_requests


def main() -> None:
    # Ctrl-C reaches the whole process group; the node closes our stdin when it stops.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    with contextlib.suppress(EOFError):
        serve_requests(sys.stdin.buffer, sys.stdout.buffer)


if __name__ == "__main__":
    main()
