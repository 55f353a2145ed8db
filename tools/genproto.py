"""Regenerate the Python stubs next to the .proto files under proto/."""

import pathlib
import sys

from grpc_tools import protoc

PROTO_ROOT = pathlib.Path(__file__).resolve().parent.parent / "proto"


def main() -> int:
    """Run protoc over every .proto file and mark generated directories as packages."""
    for stale in PROTO_ROOT.rglob("*_pb2*.py*"):
        stale.unlink()
    sources = sorted(str(p.relative_to(PROTO_ROOT)) for p in PROTO_ROOT.rglob("*.proto"))
    include = str(pathlib.Path(protoc.__file__).parent / "_proto")
    code = protoc.main(
        [
            "grpc_tools.protoc",
            f"-I{PROTO_ROOT}",
            f"-I{include}",
            f"--python_out={PROTO_ROOT}",
            f"--pyi_out={PROTO_ROOT}",
            f"--grpc_python_out={PROTO_ROOT}",
            *sources,
        ]
    )
    if code != 0:
        return int(code)
    # perdure/ stays a namespace package (no __init__.py) so the services can share it.
    namespace_root = PROTO_ROOT / "perdure"
    for directory in {p.parent for p in PROTO_ROOT.rglob("*_pb2.py")}:
        current = directory
        while current != namespace_root:
            (current / "__init__.py").touch()
            current = current.parent
    return 0


if __name__ == "__main__":
    sys.exit(main())
