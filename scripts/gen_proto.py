"""Regenerate the committed gRPC/protobuf code from proto/ (the one pinned script).

    python scripts/gen_proto.py            # write lifeline_mesh/wire/*_pb2*.py(i)
    python scripts/gen_proto.py --out DIR  # write under DIR instead (the staleness test)

Every ``proto/lifeline_mesh/wire/*.proto`` becomes ``lifeline_mesh/wire/<name>_pb2.py``,
``_pb2.pyi`` and ``_pb2_grpc.py``. The generator is grpcio-tools, pinned in pyproject.toml.

A ``_pb2_grpc.py`` refuses at import a grpcio older than the grpcio-tools that made it
(``GRPC_GENERATED_VERSION``), and each patch release of grpcio-tools stamps its own
number: the code made by 1.85.4 would refuse the grpcio 1.85.1 that pyproject.toml allows,
and the staleness test failed on the day 1.85.4 came out. The stamp is set to the lowest
grpcio pyproject.toml allows, the promise the package makes; the code is otherwise the
same across a minor release.
"""

from __future__ import annotations

import argparse
import re
import sys
import tomllib
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
    made = sorted((out / "lifeline_mesh" / "wire").glob("*_pb2*"))
    floor = grpcio_floor()
    for path in made:
        if path.name.endswith("_pb2_grpc.py"):
            text = path.read_text(encoding="utf-8")
            stamped = _STAMP.sub(f"GRPC_GENERATED_VERSION = '{floor}'", text, count=1)
            if stamped == text and not _STAMP.search(text):
                raise SystemExit(f"{path.name}: no GRPC_GENERATED_VERSION line to set")
            path.write_text(stamped, encoding="utf-8")
    return made


_STAMP = re.compile(r"^GRPC_GENERATED_VERSION = '[^']*'$", re.MULTILINE)


def grpcio_floor() -> str:
    """The lowest grpcio pyproject.toml allows, in three numbers: grpcio>=1.85 gives 1.85.0."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    for requirement in project["project"]["dependencies"]:
        found = re.match(r"^grpcio\s*>=\s*([0-9.]+)", requirement)
        if found:
            parts = [*found.group(1).split("."), "0", "0"][:3]
            return ".".join(parts)
    raise SystemExit("pyproject.toml names no grpcio>=… dependency")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=REPO, help="output root (default: repo)")
    args = parser.parse_args()
    for path in generate(args.out):
        print(path.relative_to(args.out), file=sys.stderr)


if __name__ == "__main__":
    main()
