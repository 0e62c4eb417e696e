"""check_spec: fields runc 1.1.5 / crun 1.8.1 would silently ignore."""

from __future__ import annotations

from pathlib import Path

from podkit import oci
from podkit.runtime import check_spec

DATA = Path(__file__).parent / "data"


def runc_features() -> oci.Features:
    return oci.Features.from_json((DATA / "runc-features.json").read_text())


def spec(**extra: object) -> oci.Spec:
    data: dict[str, object] = {"ociVersion": "1.0.2", "process": {"cwd": "/", "args": ["sh"]},
                               "root": {"path": "rootfs"}}
    data.update(extra)
    return oci.Spec.from_dict(data)


def test_plain_spec_is_clean() -> None:
    assert check_spec(spec(), runc_features()) == []
    assert check_spec(spec(), None, "1.0.0") == []


def test_newer_fields_against_runc_features() -> None:
    s = spec(
        domainname="example.org",
        linux={"memoryPolicy": {"mode": "MPOL_BIND", "nodes": "0"},
               "netDevices": {"dummy0": {}}},
        mounts=[{"destination": "/m", "source": "/tmp", "type": "bind", "options": ["bind"],
                 "uidMappings": [{"containerID": 0, "hostID": 1000, "size": 1}]}],
    )
    s.process = oci.Spec.from_dict(
        {"ociVersion": "1.2.1", "process": {"cwd": "/", "execCPUAffinity": {"initial": "0"}}}
    ).process
    problems = check_spec(s, runc_features())
    joined = "\n".join(problems)
    for path in ("domainname", "linux.memoryPolicy", "linux.netDevices", "mounts[0]",
                 "process.execCPUAffinity"):
        assert path in joined, joined


def test_unknown_top_level_key_reported() -> None:
    problems = check_spec(spec(fooUnknown=1), runc_features())
    assert problems == ["fooUnknown: unknown key, ignored by runtimes"]


def test_version_gate_without_features() -> None:
    s = spec(domainname="d")
    assert any("domainname" in p for p in check_spec(s, None, "1.0.0"))
    assert check_spec(s, None, "1.1.0") == []


def test_unsupported_hook_reported() -> None:
    f = runc_features()
    assert f.hooks is not None
    f.hooks = [h for h in f.hooks if h != "createRuntime"]
    s = spec(hooks={"createRuntime": [{"path": "/bin/true"}]})
    assert check_spec(s, f) == ["hooks.createRuntime: hook not supported by the runtime"]
