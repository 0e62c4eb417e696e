"""Tests for podkit.oci.enums: the loader's unknown-value check agrees with ``validate``."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings

from podkit import oci
from podkit.oci.enums import unknown_values

from .helpers import EVERYTHING, wire_docs

MANY_UNKNOWNS: dict[str, Any] = {
    "ociVersion": "1.3.0",
    "process": {
        "cwd": "/",
        "user": {"uid": 0, "gid": 0},
        "capabilities": {"bounding": ["CAP_NOPE"], "ambient": ["CAP_CHOWN", "CAP_ALSO_NOPE"]},
        "rlimits": [{"type": "RLIMIT_NOPE", "soft": 1, "hard": 1},
                    {"type": "nope", "soft": 1, "hard": 1}],
        "scheduler": {"policy": "SCHED_NOPE", "flags": ["SCHED_FLAG_NOPE"]},
        "ioPriority": {"class": "IOPRIO_CLASS_NOPE", "priority": 1},
    },
    "linux": {
        "namespaces": [{"type": "pid"}, {"type": "nope"}, {"type": "time"}],
        "timeOffsets": {"boottime": {"secs": 1}, "wallclock": {"secs": 1}},
        "resources": {"devices": [{"allow": False, "type": "z"}]},
        "seccomp": {
            "defaultAction": "SCMP_ACT_NOPE",
            "architectures": ["SCMP_ARCH_NOPE"],
            "flags": ["SECCOMP_FILTER_FLAG_NOPE"],
            "syscalls": [
                {"names": ["read"], "action": "SCMP_ACT_NOPE1",
                 "args": [{"index": 0, "value": 1, "op": "SCMP_CMP_NOPE1"}]},
                {"names": ["write"], "action": "SCMP_ACT_NOPE2",
                 "args": [{"index": 0, "value": 1, "op": "SCMP_CMP_NOPE2"}]},
            ],
        },
        "rootfsPropagation": "nope",
        "memoryPolicy": {"mode": "MPOL_NOPE", "flags": ["MPOL_F_NOPE"]},
        "personality": {"domain": "NOPE"},
    },
}


def _validate_unknowns(spec: oci.Spec) -> list[oci.Problem]:
    return [p for p in oci.validate(spec) if p.message.startswith("unknown ")]


def test_every_enum_field_is_reported_in_validate_order() -> None:
    spec = oci.Spec.from_dict(MANY_UNKNOWNS, strict=False)
    found = unknown_values(spec)
    assert found == _validate_unknowns(spec) == oci.enum_problems(spec)
    assert len(found) == 20  # one per field of the document above, per item of each list
    assert found[0].path == "$.process.capabilities.bounding[0]"
    assert "$.linux.timeOffsets.wallclock" in [p.path for p in found]


def test_known_values_have_no_problems() -> None:
    assert unknown_values(oci.Spec.from_dict(EVERYTHING)) == []
    assert unknown_values(oci.default_spec()) == []


@settings(max_examples=200, suppress_health_check=[HealthCheck.too_slow])
@given(wire_docs(oci.Spec, schema_values=True))
def test_agrees_with_validate_on_any_document(doc: dict[str, Any]) -> None:
    spec = oci.Spec.from_dict(doc, strict=False)
    assert unknown_values(spec) == oci.enum_problems(spec)
