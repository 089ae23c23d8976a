"""The checked-in setup_pb2.py must match proto/setup.proto (regenerated with the pinned
compiler), and the protobuf runtime must accept it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def test_generated_module_is_fresh(tmp_path: Path) -> None:
    pytest.importorskip("grpc_tools")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "grpc_tools.protoc",
            f"-I{ROOT / 'proto'}",
            f"--python_out={tmp_path}",
            f"--pyi_out={tmp_path}",
            str(ROOT / "proto" / "setup.proto"),
        ],
        check=True,
    )
    for name in ("setup_pb2.py", "setup_pb2.pyi"):
        fresh = (tmp_path / name).read_text()
        committed = (ROOT / "schema" / name).read_text()
        assert fresh == committed, f"schema/{name} is stale: regenerate it (see README)"


def test_runtime_accepts_generated_code() -> None:
    # local: the import is what is tested (the runtime checks the gencode version on import)
    from schema import setup_pb2

    assert setup_pb2.Setup.DESCRIPTOR.fields_by_name["dataflow_graph"]
