"""The `lifeline-mesh` command line."""

from __future__ import annotations

import os

# gRPC's C core logs handshake failures at INFO on stderr; our own error line says what
# happened and what to do. Must be set before grpc is first imported.
os.environ.setdefault("GRPC_VERBOSITY", "ERROR")
