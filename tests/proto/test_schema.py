"""The committed wire schema matches its generated code and mirrors the domain type field for field."""

from __future__ import annotations

import dataclasses
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from gaml.policy import model
from gaml.policy.model import ASSET_FIELDS, ENUM_FIELDS
from gaml.v1 import asset_pb2

ROOT = Path(__file__).resolve().parents[2]
# Each proto and the files generated from it (a proto with a service also gets its _pb2_grpc.py).
PROTOS = {
    "proto/gaml/v1/asset.proto": ("asset_pb2.py", "asset_pb2.pyi"),
    "proto/gaml/v1/memory.proto": ("memory_pb2.py", "memory_pb2.pyi", "memory_pb2_grpc.py"),
}


def upper_snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).upper()


@pytest.mark.parametrize("proto", sorted(PROTOS))
def test_generated_code_is_current(tmp_path: Path, proto: str) -> None:
    """Regenerating a proto with the pinned grpcio-tools gives byte-identical committed generated files.

    As `make proto` does (and as any protoc user would), the include root is proto/, so the schema is
    gaml/v1/*.proto and the generated code imports ``gaml.v1``."""
    out = tmp_path / "out"
    out.mkdir()
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "grpc_tools.protoc",
            f"-I{ROOT / 'proto'}",
            f"--python_out={out}",
            f"--pyi_out={out}",
            f"--grpc_python_out={out}",
            str(ROOT / proto),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, f"protoc failed: {result.stderr}"
    for name in PROTOS[proto]:
        fresh = (out / "gaml/v1" / name).read_bytes()
        committed = (ROOT / "proto/gaml/v1" / name).read_bytes()
        assert fresh == committed, f"proto/gaml/v1/{name} is stale: run `make proto` and commit the result"


@pytest.mark.parametrize("field", sorted(ENUM_FIELDS))
def test_enum_values_mirror_python_enum(field: str) -> None:
    """Each Python enum maps to a proto enum of the same name: UNSPECIFIED = 0, then PREFIX_MEMBER in the same order."""
    cls = ENUM_FIELDS[field]
    enum_desc: Any = asset_pb2.Asset.DESCRIPTOR.fields_by_name[field].enum_type
    assert enum_desc is not None
    assert enum_desc.name == cls.__name__
    assert enum_desc.full_name == f"gaml.v1.{cls.__name__}"
    prefix = upper_snake(cls.__name__)
    values = sorted(enum_desc.values, key=lambda v: v.number)
    assert [(v.name, v.number) for v in values[:1]] == [(f"{prefix}_UNSPECIFIED", 0)]
    expected = [(f"{prefix}_{m.name}", i) for i, m in enumerate(cls, start=1)]
    assert [(v.name, v.number) for v in values[1:]] == expected


def test_every_domain_enum_class_has_a_field() -> None:
    """Every enum class defined in policy.model is the type of some Asset field (so none escapes the mirror check)."""
    classes = {
        obj
        for obj in vars(model).values()
        if isinstance(obj, type) and issubclass(obj, model._Named) and obj is not model._Named
    }
    assert classes == set(ENUM_FIELDS.values())


def test_asset_fields_mirror_dataclass() -> None:
    """The proto Asset message has exactly the dataclass fields of policy.model.Asset, in the same order."""
    proto_fields = [f.name for f in asset_pb2.Asset.DESCRIPTOR.fields]
    domain_fields = [f.name for f in ASSET_FIELDS]
    assert set(proto_fields) - set(domain_fields) == set(), "proto fields missing from the domain type"
    assert set(domain_fields) - set(proto_fields) == set(), "domain fields missing from the proto message"
    assert proto_fields == domain_fields


@pytest.mark.parametrize(
    ("domain_cls", "message"),
    [
        (model.SourcePointer, asset_pb2.SourcePointer),
        (model.Retention, asset_pb2.Retention),
        (model.Heat, asset_pb2.Heat),
    ],
)
def test_nested_messages_mirror_dataclasses(domain_cls: type, message: Any) -> None:
    """SourcePointer, Retention and Heat have exactly the fields of their domain dataclasses, in the same order."""
    assert [f.name for f in message.DESCRIPTOR.fields] == [f.name for f in dataclasses.fields(domain_cls)]


def test_the_status_answer_mirrors_the_domain_status() -> None:
    """StatusResponse carries every field of gaml.node.core.api.Status by the same name (the client builds one from
    the other by name), and PartitionStatus every field of a partition's status."""
    import dataclasses

    from gaml.node.core.api import Status
    from gaml.v1 import memory_pb2
    from tests.node.conftest import NOW, fact, memory_world

    assert {f.name for f in dataclasses.fields(Status)} == set(memory_pb2.StatusResponse.DESCRIPTOR.fields_by_name)
    node = memory_world().open_node()
    node.put([fact("a fact in a partition")], NOW)
    (part,) = node.store.stats().partitions.values()
    assert set(part) == {f.name for f in memory_pb2.PartitionStatus.DESCRIPTOR.fields}
