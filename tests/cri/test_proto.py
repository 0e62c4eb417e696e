"""podkit's runtime.v1 descriptor against the wire inventory of cri-api v0.36.3.

The facts come from ``reference/cri-api.md`` (shared dir), parsed here from its markdown: the
compact list of all messages (section 5), the field tables (section 3), the enums (section 4),
the two services (sections 1 and 2) and the field options line. The descriptor is the one the
generated module registers, so this also checks that the committed ``api_pb2.py`` is the proto.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import NamedTuple

import pytest
from google.protobuf import descriptor_pb2
from google.protobuf.descriptor import Descriptor, EnumDescriptor, FieldDescriptor

from podkit.cri import api_pb2

REPO = Path(__file__).resolve().parents[2]
GENERATED = ("api_pb2.py", "api_pb2.pyi", "api_pb2_grpc.py", "api_pb2_grpc.pyi")

SCALARS = {
    "string": FieldDescriptor.TYPE_STRING,
    "bytes": FieldDescriptor.TYPE_BYTES,
    "bool": FieldDescriptor.TYPE_BOOL,
    "int32": FieldDescriptor.TYPE_INT32,
    "int64": FieldDescriptor.TYPE_INT64,
    "uint32": FieldDescriptor.TYPE_UINT32,
    "uint64": FieldDescriptor.TYPE_UINT64,
    "double": FieldDescriptor.TYPE_DOUBLE,
}


class Field(NamedTuple):
    number: int
    name: str
    type: str  # as written in the markdown: "repeated IDMapping", "map<string,string>", ...


class Rpc(NamedTuple):
    name: str
    request: str
    response: str
    server_streaming: bool


class Facts(NamedTuple):
    messages: dict[str, list[Field]]
    tables: dict[str, list[Field]]
    enums: dict[str, tuple[dict[str, int], int | None]]  # values, total count when elided
    services: dict[str, list[Rpc]]
    deprecated: set[tuple[str, str]]
    redacted: set[tuple[str, str]]
    counts: tuple[int, int]  # messages, enums


def _section(text: str, heading: str) -> str:
    start = text.index(heading)
    end = text.find("\n## ", start + len(heading))
    return text[start : end if end >= 0 else None]


def _compact_fields(body: str) -> list[Field]:
    if body.strip() == "(empty)":
        return []
    fields = []
    for part in body.split("; "):
        number, name, type_ = part.split(" ", 2)
        fields.append(Field(int(number), name, type_))
    return fields


def parse_facts(text: str) -> Facts:
    """Every wire fact cri-api.md states about v0.36.3, as plain data."""
    compact = _section(text, "## 5. All messages")
    messages = {
        name: _compact_fields(body)
        for name, body in re.findall(r"^- \*\*(\w+)\*\*: (.*)$", compact, re.M)
    }
    tables: dict[str, list[Field]] = {}
    for block in _section(text, "## 3. Key messages").split("\n### ")[1:]:
        name = block.split("\n", 1)[0].strip()
        rows = re.findall(r"^\| (\d+) \| `(\w+)` \| `([^`]+)`[^|]*\|", block, re.M)
        tables[name] = [Field(int(n), f, t) for n, f, t in rows]
    enums: dict[str, tuple[dict[str, int], int | None]] = {}
    for line in _section(text, "## 4. Enums").splitlines():
        m = re.match(r"^- `([\w.]+)`: (.*)$", line)
        if not m:
            continue
        values = {k: int(v) for k, v in re.findall(r"`(\w+) = (\d+)`", m.group(2))}
        total = re.search(r"(\d+) values", m.group(2))
        enums[m.group(1)] = (values, int(total.group(1)) if total else None)
    services = {}
    headings = (("RuntimeService", "## 1. service"), ("ImageService", "## 2. service"))
    for service, heading in headings:
        rows = re.findall(
            r"^\| `(\w+)` \| `(\w+)` \| `(stream )?(\w+)` \|$", _section(text, heading), re.M
        )
        services[service] = [Rpc(n, req, resp, bool(s)) for n, req, s, resp in rows]
    options = re.search(r"^Field options present in v0\.36\.3: (.*)$", text, re.M)
    assert options, "cri-api.md lost its field options line"
    deprecated: set[tuple[str, str]] = set()
    redacted: set[tuple[str, str]] = set()
    for clause in options.group(1).split("`[")[1:]:
        option, targets = clause.split("]`", 1)
        found = _option_targets(targets)
        (deprecated if option.startswith("deprecated") else redacted).update(found)
    counts = re.search(r"(\d+) messages, (\d+) enums in v0\.36\.3", text)
    assert counts, "cri-api.md lost its message/enum counts"
    return Facts(messages, tables, enums, services, deprecated, redacted,
                 (int(counts.group(1)), int(counts.group(2))))


def _option_targets(text: str) -> set[tuple[str, str]]:
    """``A.x (7), B.y (9) and .z (10)`` / ``A.p/q/r``: (message, field) pairs."""
    out: set[tuple[str, str]] = set()
    message = ""
    for m in re.finditer(r"(\w+)?\.([\w/]+)", text.split(";")[0]):
        message = m.group(1) or message
        out.update((message, field) for field in m.group(2).split("/"))
    return out


@pytest.fixture(scope="module")
def facts(shared: Path) -> Facts:
    return parse_facts((shared / "reference" / "cri-api.md").read_text())


def _message(name: str) -> Descriptor:
    pool_name = "runtime.v1." + name
    return api_pb2.DESCRIPTOR.pool.FindMessageTypeByName(pool_name)


def _type_matches(field: FieldDescriptor, written: str) -> bool:
    repeated = written.startswith("repeated ")
    base = written.removeprefix("repeated ")
    if base == "map<string,string>":
        entry = field.message_type
        return (
            field.is_repeated
            and entry is not None
            and entry.GetOptions().map_entry
            and [(f.name, f.type) for f in entry.fields]
            == [("key", FieldDescriptor.TYPE_STRING), ("value", FieldDescriptor.TYPE_STRING)]
        )
    if (field.is_repeated) != repeated:
        return False
    if base in SCALARS:
        return field.type == SCALARS[base]
    message, enum = field.message_type, field.enum_type
    if field.type == FieldDescriptor.TYPE_MESSAGE and message is not None:
        return message.name == base and not message.GetOptions().map_entry
    if field.type == FieldDescriptor.TYPE_ENUM and enum is not None:
        return enum.name == base
    return False


def _check_fields(name: str, expected: list[Field]) -> list[str]:
    desc = _message(name)
    problems = []
    got = {f.number: f for f in desc.fields}
    if sorted(got) != sorted(f.number for f in expected):
        problems.append(f"{name}: numbers {sorted(got)} != {sorted(f.number for f in expected)}")
    for want in expected:
        field = got.get(want.number)
        if field is None:
            continue
        if field.name != want.name:
            problems.append(f"{name}.{want.number}: name {field.name!r} != {want.name!r}")
        if not _type_matches(field, want.type):
            problems.append(f"{name}.{want.name}: type is not {want.type!r}")
        if field.has_presence and field.type != FieldDescriptor.TYPE_MESSAGE:
            problems.append(f"{name}.{want.name}: proto3 'optional' is not in the CRI")
    return problems


def test_markdown_parse_is_complete(facts: Facts) -> None:
    n_messages, n_enums = facts.counts
    assert len(facts.messages) == n_messages == 170
    assert len(facts.enums) == n_enums == 11
    assert len(facts.tables) >= 50
    assert len(facts.services["RuntimeService"]) == 35
    assert len(facts.services["ImageService"]) == 6
    assert ("LinuxContainerSecurityContext", "apparmor_profile") in facts.deprecated
    assert len(facts.deprecated) == 3
    assert ("AuthConfig", "registry_token") in facts.redacted
    assert len(facts.redacted) == 4


def test_file_identity() -> None:
    proto = descriptor_pb2.FileDescriptorProto()
    api_pb2.DESCRIPTOR.CopyToProto(proto)
    assert proto.package == "runtime.v1"
    assert proto.syntax == "proto3"
    assert list(proto.dependency) == []


def test_every_message_and_nothing_else(facts: Facts) -> None:
    assert set(api_pb2.DESCRIPTOR.message_types_by_name) == set(facts.messages)


def test_every_message_field_by_field(facts: Facts) -> None:
    problems = [p for name, fields in facts.messages.items() for p in _check_fields(name, fields)]
    assert problems == []


def test_key_message_tables_agree(facts: Facts) -> None:
    """Section 3 restates some messages as tables: the descriptor matches those too."""
    problems = [p for name, fields in facts.tables.items() for p in _check_fields(name, fields)]
    assert problems == []


def _enum(name: str) -> EnumDescriptor:
    return api_pb2.DESCRIPTOR.pool.FindEnumTypeByName("runtime.v1." + name)


def test_enums(facts: Facts) -> None:
    top = set(api_pb2.DESCRIPTOR.enum_types_by_name)
    nested = {
        f"{m.name}.{e.name}"
        for m in api_pb2.DESCRIPTOR.message_types_by_name.values()
        for e in m.enum_types
    }
    assert top | nested == set(facts.enums)
    for name, (values, total) in facts.enums.items():
        got = {v.name: v.number for v in _enum(name).values}
        if total is None:
            assert got == values, name
        else:
            assert len(got) == total, name
            assert values.items() <= got.items(), name
            assert sorted(got.values()) == list(range(total)), name


def test_signal_enum_spelled_out() -> None:
    """The markdown elides most signals; check the whole enum against the Linux naming."""
    got = {v.number: v.name for v in _enum("Signal").values}
    assert got[0] == "RUNTIME_DEFAULT"
    assert [got[n] for n in (13, 23, 35, 36, 50, 51, 64, 65)] == [
        "SIGKILL", "SIGTERM", "SIGRTMIN", "SIGRTMINPLUS1", "SIGRTMINPLUS15",
        "SIGRTMAXMINUS14", "SIGRTMAXMINUS1", "SIGRTMAX",
    ]
    classic = [got[n] for n in range(1, 35)]
    assert classic == sorted(classic)  # SIGABRT..SIGXFSZ, alphabetical


def test_services(facts: Facts) -> None:
    assert set(api_pb2.DESCRIPTOR.services_by_name) == set(facts.services)
    for service, rpcs in facts.services.items():
        desc = api_pb2.DESCRIPTOR.services_by_name[service]
        assert desc.full_name == f"runtime.v1.{service}"
        got = [
            Rpc(m.name, m.input_type.name, m.output_type.name, m.server_streaming)
            for m in desc.methods
        ]
        assert got == rpcs
        assert not any(m.client_streaming for m in desc.methods)


def test_field_options(facts: Facts) -> None:
    deprecated, redacted = set(), set()
    for message in api_pb2.DESCRIPTOR.message_types_by_name.values():
        for field in message.fields:
            options = field.GetOptions()
            if options.deprecated:
                deprecated.add((message.name, field.name))
            if options.debug_redact:
                redacted.add((message.name, field.name))
    assert deprecated == facts.deprecated
    assert redacted == facts.redacted


def test_no_oneofs_or_head_only_additions() -> None:
    """v0.36.3 has no oneofs; HEAD's Mount.mount_options and CheckpointPod must not leak in."""
    for message in api_pb2.DESCRIPTOR.message_types_by_name.values():
        assert not message.oneofs, message.name
    assert "mount_options" not in _message("Mount").fields_by_name
    runtime_service = api_pb2.DESCRIPTOR.services_by_name["RuntimeService"]
    assert "CheckpointPod" not in runtime_service.methods_by_name


def test_json_names_of_odd_fields() -> None:
    """The CRI's three non-snake_case fields keep protoc's JSON names (kubelet logs use them)."""
    assert _message("ContainerConfig").fields_by_name["CDI_devices"].json_name == "CDIDevices"
    assert _message("Mount").fields_by_name["uidMappings"].json_name == "uidMappings"
    assert _message("PsiData").fields_by_name["Avg10"].json_name == "Avg10"


def test_generated_modules_are_fresh(tmp_path: Path) -> None:
    """Regenerating from api.proto reproduces the committed modules byte for byte."""
    proc = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "gen_proto.py"), "--out", str(tmp_path)],
        capture_output=True, text=True, timeout=120, check=False,
    )
    assert proc.returncode == 0, proc.stderr
    stale = [
        name for name in GENERATED
        if (tmp_path / name).read_bytes() != (REPO / "src/podkit/cri" / name).read_bytes()
    ]
    assert stale == [], f"stale generated files {stale}: run `make proto`"


def test_generated_modules_are_marked() -> None:
    for name in GENERATED:
        first = (REPO / "src/podkit/cri" / name).read_text().splitlines()[0]
        assert first.startswith("# @generated by scripts/gen_proto.py"), name


def test_grpc_module_imports_the_package_module() -> None:
    text = (REPO / "src/podkit/cri/api_pb2_grpc.py").read_text()
    assert "from podkit.cri import api_pb2" in text
    assert not re.search(r"^import api_pb2", text, re.M)
