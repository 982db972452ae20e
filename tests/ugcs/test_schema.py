"""Our .proto files against the fact table, and the committed generated modules against protoc."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from google.protobuf.descriptor import Descriptor, EnumDescriptor, FieldDescriptor

from robowire.protocols.ugcs.proto import ucs_vsm_defs_pb2, ucs_vsm_pb2

DATA = Path(__file__).resolve().parents[1] / "data" / "ugcs"
TABLE = DATA / "ugcs-proto-table.md"
SRC = Path(__file__).resolve().parents[2] / "src"
PROTO_DIR = SRC / "robowire" / "protocols" / "ugcs" / "proto"

_SCALARS = {
    FieldDescriptor.TYPE_UINT32: "uint32",
    FieldDescriptor.TYPE_UINT64: "uint64",
    FieldDescriptor.TYPE_INT32: "int32",
    FieldDescriptor.TYPE_SINT64: "sint64",
    FieldDescriptor.TYPE_BOOL: "bool",
    FieldDescriptor.TYPE_STRING: "string",
    FieldDescriptor.TYPE_BYTES: "bytes",
    FieldDescriptor.TYPE_FLOAT: "float",
    FieldDescriptor.TYPE_DOUBLE: "double",
}


Rows = dict[str, list[tuple[int, str, str, str]]]
Enums = dict[str, dict[int, str]]


def _parse_table(text: str) -> tuple[Rows, Enums]:
    """{message: [(number, field, label, type)]}, {enum: {value: name}} from the markdown."""
    messages: dict[str, list[tuple[int, str, str, str]]] = {}
    enums: dict[str, dict[int, str]] = {}
    current: tuple[str, str] | None = None
    for line in text.splitlines():
        heading = re.match(r"^### (message|enum) (\w+)", line)
        if heading:
            kind, name = heading.groups()
            current = (kind, name)
            if kind == "message":
                messages[name] = []
            else:
                enums[name] = {}
            continue
        if line.startswith("## "):
            current = None
            continue
        if current is None or not line.startswith("|"):
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if not cells[0].isdigit():
            continue  # the header and the --- row
        if current[0] == "message":
            number, name, label, kind = cells
            messages[current[1]].append((int(number), name, label, kind))
        else:
            enums[current[1]][int(cells[0])] = cells[1]
    return messages, enums


def _table() -> tuple[Rows, Enums]:
    return _parse_table(TABLE.read_text(encoding="utf-8"))


def _type_name(f: FieldDescriptor) -> str:
    if f.type == FieldDescriptor.TYPE_MESSAGE:
        return f.message_type.name
    if f.type == FieldDescriptor.TYPE_ENUM:
        return f"enum {f.enum_type.name}"
    return _SCALARS[f.type]


def _label(f: FieldDescriptor) -> str:
    if f.is_required:
        return "required"
    return "repeated" if f.is_repeated else "optional"


def test_the_table_is_complete_enough_to_mean_something() -> None:
    messages, enums = _table()
    assert len(messages) == 18
    assert len(enums) == 24
    assert messages["Vsm_message"][0] == (1, "device_id", "required", "uint32")
    assert enums["Field_semantic"][108] == "FIELD_SEMANTIC_BINARY"


def test_every_message_and_field_matches_the_table() -> None:
    messages, _ = _table()
    ours: dict[str, Descriptor] = dict(ucs_vsm_pb2.DESCRIPTOR.message_types_by_name)
    assert sorted(ours) == sorted(messages)
    for name, rows in messages.items():
        descriptor = ours[name]
        got = sorted((f.number, f.name, _label(f), _type_name(f)) for f in descriptor.fields)
        assert got == sorted(rows), name


def test_every_enum_and_value_matches_the_table() -> None:
    _, enums = _table()
    ours: dict[str, EnumDescriptor] = dict(ucs_vsm_defs_pb2.DESCRIPTOR.enum_types_by_name)
    assert sorted(ours) == sorted(enums)
    assert not ucs_vsm_pb2.DESCRIPTOR.enum_types_by_name  # enums live in the defs file only
    for name, values in enums.items():
        got = {v.number: v.name for v in ours[name].values}
        assert got == values, name


def test_file_level_facts() -> None:
    for module in (ucs_vsm_pb2, ucs_vsm_defs_pb2):
        assert module.DESCRIPTOR.package == "ugcs.vsm.proto"
    # proto2: repeated enums are not packed (one tag per element on the wire)
    status = ucs_vsm_pb2.Device_status(messages_severity=[0, 1, 2])
    assert status.SerializeToString() == bytes.fromhex("200020012002")


def test_the_generated_modules_are_not_stale(tmp_path: Path) -> None:
    """`make proto` into a temporary tree gives exactly the committed files."""
    plugin = Path(sys.executable).parent / "protoc-gen-mypy"
    if not plugin.exists():
        found = shutil.which("protoc-gen-mypy")
        assert found, "protoc-gen-mypy (mypy-protobuf, a dev dependency) is not installed"
        plugin = Path(found)
    rel = PROTO_DIR.relative_to(SRC)
    protos = [str(rel / n) for n in ("ucs_vsm_defs.proto", "ucs_vsm.proto", "frames.proto")]
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "grpc_tools.protoc",
            "-I.",
            f"--python_out={tmp_path}",
            f"--mypy_out={tmp_path}",
            f"--plugin=protoc-gen-mypy={plugin}",
            *protos,
        ],
        cwd=SRC,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    for name in [
        f"{m}_pb2.{ext}" for m in ("ucs_vsm", "ucs_vsm_defs", "frames") for ext in ("py", "pyi")
    ]:
        fresh = (tmp_path / rel / name).read_text(encoding="utf-8")
        committed = (PROTO_DIR / name).read_text(encoding="utf-8")
        assert committed == fresh, f"{name} is stale: run `make proto`"


@pytest.mark.parametrize("name", ["ucs_vsm.proto", "ucs_vsm_defs.proto"])
def test_the_schema_is_proto2(name: str) -> None:
    assert 'syntax = "proto2";' in (PROTO_DIR / name).read_text(encoding="utf-8")
