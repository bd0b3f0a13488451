"""Regenerate the committed gRPC/protobuf code from proto/ (the one pinned script).

    python scripts/gen_proto.py            # write lifeline_mesh/wire/*_pb2*.py(i)
    python scripts/gen_proto.py --out DIR  # write under DIR instead (the staleness test)

Every ``proto/lifeline_mesh/wire/*.proto`` becomes ``lifeline_mesh/wire/<name>_pb2.py``,
``_pb2.pyi`` and ``_pb2_grpc.py``. The generator is grpcio-tools, pinned in pyproject.toml.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PROTO_ROOT = REPO / "proto"


def generate(out: Path) -> list[Path]:
    from grpc_tools import protoc  # dev dependency

    sources = sorted(PROTO_ROOT.glob("lifeline_mesh/wire/*.proto"))
    out.mkdir(parents=True, exist_ok=True)
    for source in sources:
        rel = source.relative_to(PROTO_ROOT)
        code = protoc.main(
            [
                "grpc_tools.protoc",
                f"-I{PROTO_ROOT}",
                f"--python_out={out}",
                f"--pyi_out={out}",
                f"--grpc_python_out={out}",
                str(rel),
            ]
        )
        if code != 0:
            raise SystemExit(f"protoc failed on {rel} (exit {code})")
    return sorted((out / "lifeline_mesh" / "wire").glob("*_pb2*"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=REPO, help="output root (default: repo)")
    args = parser.parse_args()
    for path in generate(args.out):
        print(path.relative_to(args.out), file=sys.stderr)


if __name__ == "__main__":
    main()
