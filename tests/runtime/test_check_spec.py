"""check_spec: fields runc 1.1.5 / crun 1.8.1 would silently ignore (via oci.unsupported_fields)."""

from __future__ import annotations

from pathlib import Path

from podkit import oci
from podkit.runtime import UnsupportedFieldWarning, check_spec

DATA = Path(__file__).parent / "data"


def runc_features() -> oci.Features:
    return oci.Features.from_json((DATA / "runc-features.json").read_text())


def spec(**extra: object) -> oci.Spec:
    data: dict[str, object] = {"ociVersion": "1.0.2", "process": {"cwd": "/", "args": ["sh"]},
                               "root": {"path": "rootfs"}}
    data.update(extra)
    return oci.Spec.from_dict(data)


def paths(problems: list[oci.Problem]) -> list[str]:
    return [p.path for p in problems]


def test_plain_spec_is_clean() -> None:
    assert check_spec(spec(), runc_features()) == []
    assert check_spec(spec(), None, "1.0.0") == []
    assert check_spec(oci.default_spec(), None, "1.0.0") == []
    assert check_spec(oci.runc_spec(), runc_features()) == []


def test_same_problems_as_oci_unsupported_fields() -> None:
    s = spec(domainname="example.org", linux={"memoryPolicy": {"mode": "MPOL_BIND"}})
    features = runc_features()
    assert check_spec(s, features) == oci.unsupported_fields(s, features)


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
    assert all(isinstance(p, oci.Problem) for p in problems)
    assert set(paths(problems)) == {"$.domainname", "$.linux.memoryPolicy", "$.linux.netDevices",
                                    "$.mounts[0]", "$.process.execCPUAffinity"}
    by_path = {p.path: str(p) for p in problems}
    assert by_path["$.domainname"].startswith("$.domainname: domainname (runtime-spec 1.1.0)")
    assert "ociVersionMax 1.0.2-dev" in by_path["$.domainname"]


def test_unknown_top_level_keys_reported() -> None:
    problems = check_spec(spec(fooUnknown=1, **{"a.b": 2}), runc_features())
    assert [str(p) for p in problems] == [
        '$["a.b"]: unknown key, ignored by runtimes',
        "$.fooUnknown: unknown key, ignored by runtimes",
    ]
    # without features or a version, unknown keys are still reported
    assert paths(check_spec(spec(fooUnknown=1))) == ["$.fooUnknown"]


def test_explicit_null_of_a_known_key_is_not_unknown() -> None:
    s = spec(hostname=None)
    assert check_spec(s, runc_features()) == []


def test_version_gate_without_features() -> None:
    s = spec(domainname="d", process={"cwd": "/", "args": ["sh"],
                                      "user": {"uid": 0, "gid": 0, "umask": 18}})
    assert paths(check_spec(s, None, "1.0.0")) == ["$.domainname", "$.process.user.umask"]
    assert paths(check_spec(s, None, "1.0.2")) == ["$.domainname"]
    assert check_spec(s, None, "1.1.0") == []
    problem = check_spec(s, None, "1.0.2")[0]
    assert "ociVersionMax 1.0.2" in problem.message


def test_no_version_check_when_the_runtime_reports_none() -> None:
    s = spec(domainname="d")
    assert check_spec(s) == []
    assert check_spec(s, None, "") == []
    assert check_spec(s, None, "unknown") == []


def test_features_win_over_a_reported_version() -> None:
    s = spec(linux={"memoryPolicy": {"mode": "MPOL_BIND"}})
    assert paths(check_spec(s, runc_features(), "1.3.0")) == ["$.linux.memoryPolicy"]


def test_known_applied_fields_are_not_reported() -> None:
    s = spec(domainname="d", process={"cwd": "/", "args": ["sh"],
                                      "scheduler": {"policy": "SCHED_BATCH"}})
    assert paths(check_spec(s, None, "1.0.0", applied={"$.domainname"})) == [
        "$.process.scheduler"
    ]
    # unknown keys are never excused
    assert paths(check_spec(spec(fooUnknown=1), None, "1.0.0", applied={"$.fooUnknown"})) == [
        "$.fooUnknown"
    ]


def test_known_applied_list_fields_match_any_index() -> None:
    s = spec(linux={"seccomp": {"defaultAction": "SCMP_ACT_ERRNO", "defaultErrnoRet": 1,
                                "syscalls": [{"names": ["a"], "action": "SCMP_ACT_ALLOW"},
                                             {"names": ["b"], "action": "SCMP_ACT_ERRNO",
                                              "errnoRet": 38}]}})
    assert paths(check_spec(s, runc_features())) == [
        "$.linux.seccomp.defaultErrnoRet", "$.linux.seccomp.syscalls[1].errnoRet"]
    assert check_spec(s, runc_features(), applied={
        "$.linux.seccomp.defaultErrnoRet", "$.linux.seccomp.syscalls[].errnoRet"}) == []


def test_unsupported_hook_reported() -> None:
    f = runc_features()
    assert f.hooks is not None
    f.hooks = [h for h in f.hooks if h != "createRuntime"]
    s = spec(hooks={"createRuntime": [{"path": "/bin/true"}]})
    assert [str(p) for p in check_spec(s, f)] == [
        "$.hooks.createRuntime: createRuntime hooks are not supported by the runtime"
    ]


def test_warning_carries_the_problems() -> None:
    problems = check_spec(spec(fooUnknown=1))
    w = UnsupportedFieldWarning("runc will ignore: $.fooUnknown", problems)
    assert str(w) == "runc will ignore: $.fooUnknown"
    assert w.problems == problems
    assert UnsupportedFieldWarning("x").problems == []
