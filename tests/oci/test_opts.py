"""Unit tests for podkit.oci.opts: every option, its effect, and its bad input."""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from podkit import oci
from podkit.errors import InvalidArgumentError, NotFoundError
from podkit.oci import Spec


def gen(*opts: oci.SpecOpt, base: Spec | None = None) -> Spec:
    return oci.generate(base if base is not None else oci.default_spec("t"), *opts)


@pytest.fixture
def rootfs(tmp_path: Path) -> Path:
    etc = tmp_path / "rootfs" / "etc"
    etc.mkdir(parents=True)
    (etc / "passwd").write_text(
        "# comment\n"
        "root:x:0:0:root:/root:/bin/sh\n"
        "app:x:1000:1000:app:/home/app:/bin/sh\n"
        "broken line\n"
        "svc:x:1001:2000::/:/bin/false\n"
    )
    (etc / "group").write_text(
        "root:x:0:\nwheel:x:10:app,svc\napp:x:1000:app\nextra:x:2000:app\nempty:x:3000:\n"
    )
    return tmp_path / "rootfs"


# --- generate / compose ------------------------------------------------------------------


def test_generate_applies_in_order_to_a_copy() -> None:
    base = oci.default_spec("t")
    before = base.to_dict()
    spec = oci.generate(base, oci.with_hostname("a"), oci.with_hostname("b"))
    assert spec.hostname == "b"
    assert base.to_dict() == before and base.hostname is None


def test_generate_returns_nothing_when_an_option_fails() -> None:
    base = oci.default_spec("t")
    before = base.to_dict()

    def boom(s: Spec) -> None:
        raise oci.SpecOptError("boom")

    with pytest.raises(oci.SpecOptError, match="boom"):
        oci.generate(base, oci.with_hostname("x"), boom)
    assert base.to_dict() == before


def test_compose_applies_in_order() -> None:
    both = oci.compose(oci.with_env(["A=1"]), oci.with_env(["A=2", "B=3"]))
    assert gen(both).process.env == ["A=2", "B=3"]  # type: ignore[union-attr]
    assert gen(oci.compose()) == oci.default_spec("t")


def test_options_create_missing_sections() -> None:
    spec = oci.generate(
        Spec(), oci.with_env(["A=1"]), oci.with_memory_limit(1), oci.with_added_capabilities(
            ["CAP_KILL"]), oci.with_uid_gid(1, 2)
    )
    assert spec.process is not None and spec.process.env == ["A=1"]
    assert spec.linux.resources.memory.limit == 1  # type: ignore[union-attr]
    assert spec.process.capabilities.bounding == ["CAP_KILL"]  # type: ignore[union-attr]
    assert spec.process.user.uid == 1  # type: ignore[union-attr]


# --- process -------------------------------------------------------------------------------


def test_with_env_replaces_by_key_appends_and_unsets() -> None:
    spec = gen(oci.with_env(["A=1", "B=2", "C=3"]), oci.with_env(["B=x", "D=4", "C", "A=="]))
    assert spec.process.env == ["A==", "B=x", "D=4"]  # type: ignore[union-attr]
    spec = gen(oci.with_env({"K": "v", "E": ""}))
    assert spec.process.env == ["K=v", "E="]  # type: ignore[union-attr]


@pytest.mark.parametrize("bad", ["A=1", [1], ["=x"], {"": "x"}, {"K": 1}, ["A\0=1"]])
def test_with_env_rejects(bad: Any) -> None:
    with pytest.raises(InvalidArgumentError) as e:
        oci.with_env(bad)
    assert "environment variable" in str(e.value)


def test_with_default_path_env_sets_path() -> None:
    spec = gen(oci.with_env(["PATH=/x", "A=1"]), oci.with_default_path_env())
    assert spec.process.env == [oci.DEFAULT_PATH_ENV, "A=1"]  # type: ignore[union-attr]


def test_with_process_args_and_cwd() -> None:
    base = oci.default_spec()
    base.process.command_line = "cmd.exe"  # type: ignore[union-attr]
    spec = gen(oci.with_process_args("sh", "-c", "id"), oci.with_process_cwd("/tmp"), base=base)
    assert spec.process.args == ["sh", "-c", "id"]  # type: ignore[union-attr]
    assert spec.process.command_line is None and spec.process.cwd == "/tmp"  # type: ignore[union-attr]
    with pytest.raises(InvalidArgumentError, match="at least one"):
        oci.with_process_args()
    with pytest.raises(InvalidArgumentError, match="3"):
        oci.with_process_args("sh", 3)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError, match=r"'tmp'.*absolute"):
        oci.with_process_cwd("tmp")


def test_with_tty_and_size() -> None:
    spec = gen(oci.with_tty(), oci.with_tty(), oci.with_tty_size(80, 24))
    p = spec.process
    assert p is not None and p.terminal is True and p.env == ["TERM=xterm"]
    assert p.console_size == oci.Box(width=80, height=24)
    with pytest.raises(InvalidArgumentError, match="console width -1"):
        oci.with_tty_size(-1, 24)
    with pytest.raises(InvalidArgumentError, match="console height"):
        oci.with_tty_size(80, "24")  # type: ignore[arg-type]


def test_with_hostname_and_domainname() -> None:
    spec = gen(oci.with_hostname("web-1"), oci.with_domainname("example.org"))
    assert (spec.hostname, spec.domainname) == ("web-1", "example.org")
    for f in (oci.with_hostname, oci.with_domainname):
        with pytest.raises(InvalidArgumentError, match="longer than 64"):
            f("h" * 65)
        with pytest.raises(InvalidArgumentError, match="empty"):
            f("")
        with pytest.raises(InvalidArgumentError, match="5"):
            f(5)  # type: ignore[arg-type]


# --- mounts -------------------------------------------------------------------------------


def test_with_mounts_appends_copies() -> None:
    m = oci.Mount(destination="/data", type="tmpfs", source="tmpfs", options=["size=1m"])
    spec = gen(oci.with_mounts([m]))
    assert spec.mounts[-1] == m and spec.mounts[-1] is not m  # type: ignore[index]
    assert gen(oci.with_mounts([m]), base=Spec()).mounts == [m]
    with pytest.raises(InvalidArgumentError, match=r"expected an oci.Mount"):
        oci.with_mounts([{"destination": "/x"}])  # type: ignore[list-item]


def test_without_mounts_and_run_mount() -> None:
    spec = gen(oci.without_mounts("/dev/shm/", "/nothing"), oci.without_run_mount())
    dests = [m.destination for m in spec.mounts or []]
    assert "/dev/shm" not in dests and "/run" not in dests and "/proc" in dests
    assert gen(oci.without_mounts("/x"), base=Spec()).mounts is None
    with pytest.raises(InvalidArgumentError):
        oci.without_mounts("")


@pytest.mark.parametrize(
    ("opt", "dest"),
    [
        (oci.with_host_hosts_file, "/etc/hosts"),
        (oci.with_host_resolvconf, "/etc/resolv.conf"),
        (oci.with_host_localtime, "/etc/localtime"),
    ],
)
def test_host_etc_files_are_read_only_binds(opt: Callable[[], oci.SpecOpt], dest: str) -> None:
    m = gen(opt()).mounts[-1]  # type: ignore[index]
    assert m == oci.Mount(destination=dest, type="bind", source=dest, options=["rbind", "ro"])


def test_with_dev_shm_size() -> None:
    spec = gen(oci.with_dev_shm_size(1024))
    shm = next(m for m in spec.mounts or [] if m.destination == "/dev/shm")
    assert shm.options == ["nosuid", "noexec", "nodev", "mode=1777", "size=1024k"]
    with pytest.raises(oci.SpecOptError, match="no /dev/shm"):
        gen(oci.without_mounts("/dev/shm"), oci.with_dev_shm_size(1))
    with pytest.raises(InvalidArgumentError, match=r"size.*0"):
        oci.with_dev_shm_size(0)


def test_writeable_sysfs_and_cgroupfs() -> None:
    spec = gen(oci.with_writeable_sysfs(), base=oci.runc_spec())
    sys_, cg = (next(m for m in spec.mounts or [] if m.type == t) for t in ("sysfs", "cgroup"))
    assert "rw" in sys_.options and "ro" not in sys_.options  # type: ignore[operator]
    assert "ro" in cg.options  # type: ignore[operator]
    spec = gen(oci.with_writeable_cgroupfs(), base=spec)
    cg = next(m for m in spec.mounts or [] if m.type == "cgroup")
    assert cg.options == ["nosuid", "noexec", "nodev", "relatime", "rw"]


# --- root ---------------------------------------------------------------------------------


def test_rootfs_path_and_readonly() -> None:
    spec = gen(oci.with_rootfs_path("/srv/root"), oci.with_rootfs_readonly())
    assert spec.root == oci.Root(path="/srv/root", readonly=True)
    assert gen(oci.with_rootfs_path("r"), base=Spec()).root == oci.Root(path="r")
    with pytest.raises(oci.SpecOptError, match="no root"):
        gen(oci.with_rootfs_readonly(), base=Spec())
    with pytest.raises(InvalidArgumentError, match="rootfs path"):
        oci.with_rootfs_path("")


# --- namespaces -----------------------------------------------------------------------------


def _ns(spec: Spec) -> list[tuple[str, str | None]]:
    return [(n.type, n.path) for n in (spec.linux.namespaces if spec.linux else None) or []]


def test_namespace_options() -> None:
    spec = gen(oci.with_host_namespace("network"))
    assert ("network", None) not in _ns(spec)
    spec = gen(oci.without_namespace("ipc"), oci.with_linux_namespace("cgroup"))
    assert _ns(spec) == [("pid", None), ("uts", None), ("mount", None), ("network", None),
                         ("cgroup", None)]
    spec = gen(oci.with_linux_namespace("network", "/run/netns/x"))
    assert ("network", "/run/netns/x") in _ns(spec) and len(_ns(spec)) == 5
    spec = gen(oci.with_namespace_path("ipc", "/proc/1/ns/ipc"))
    assert _ns(spec)[1] == ("ipc", "/proc/1/ns/ipc")


def test_namespace_bad_input() -> None:
    with pytest.raises(InvalidArgumentError, match="unknown namespace type 'net'"):
        oci.with_host_namespace("net")
    with pytest.raises(InvalidArgumentError, match=r"'ns/x'.*absolute"):
        oci.with_linux_namespace("network", "ns/x")
    with pytest.raises(oci.SpecOptError, match="no user namespace"):
        gen(oci.with_namespace_path("user", "/proc/1/ns/user"))
    with pytest.raises(oci.SpecOptError, match="no pid namespace"):
        gen(oci.with_namespace_path("pid", "/proc/1/ns/pid"), base=Spec())


def test_with_user_namespace() -> None:
    m = oci.LinuxIDMapping(container_id=0, host_id=100000, size=65536)
    spec = gen(oci.with_user_namespace([m], [(0, 200000, 1)]),
               oci.with_user_namespace([(65536, 1, 1)], []))
    lx = spec.linux
    assert lx is not None and [n.type for n in lx.namespaces or []].count("user") == 1
    assert lx.uid_mappings == [m, oci.LinuxIDMapping(container_id=65536, host_id=1, size=1)]
    assert lx.gid_mappings == [oci.LinuxIDMapping(container_id=0, host_id=200000, size=1)]
    with pytest.raises(InvalidArgumentError, match="uid mapping -1"):
        oci.with_user_namespace([(0, -1, 1)], [])
    with pytest.raises(InvalidArgumentError, match="gid mapping"):
        oci.with_user_namespace([], [(0, 1)])  # type: ignore[list-item]


# --- users and groups -----------------------------------------------------------------------


def _user(spec: Spec) -> tuple[int | None, int | None, list[int] | None]:
    u = spec.process.user  # type: ignore[union-attr]
    assert u is not None
    return u.uid, u.gid, u.additional_gids


def test_with_uid_gid_numeric() -> None:
    assert _user(gen(oci.with_uid_gid(5, 6))) == (5, 6, [6])
    with pytest.raises(InvalidArgumentError, match="uid 2147483648"):
        oci.with_uid_gid(2**31, 0)
    with pytest.raises(InvalidArgumentError, match="gid -1"):
        oci.with_uid_gid(0, -1)


@pytest.mark.parametrize(
    ("user", "expected"),
    [
        ("app", (1000, 1000, [1000])),
        ("1000", (1000, 1000, [1000])),
        ("4242", (4242, 0, [0])),  # uid not in /etc/passwd: gid 0, like containerd
        ("app:extra", (1000, 2000, [2000])),
        ("1001:wheel", (1001, 10, [10])),
        ("svc:7", (1001, 7, [7])),
        ("12:34", (12, 34, [34])),
    ],
)
def test_with_user_forms(rootfs: Path, user: str, expected: tuple[int, int, list[int]]) -> None:
    assert _user(gen(oci.with_user(user, rootfs=rootfs))) == expected


def test_with_user_uses_absolute_root_path(rootfs: Path) -> None:
    spec = gen(oci.with_rootfs_path(str(rootfs)), oci.with_user("app"))
    assert _user(spec)[:2] == (1000, 1000)


def test_with_user_errors_name_the_file_and_the_name(rootfs: Path) -> None:
    with pytest.raises(oci.UserLookupError) as e:
        gen(oci.with_user("nobody", rootfs=rootfs))
    assert "'nobody'" in str(e.value) and str(rootfs / "etc" / "passwd") in str(e.value)
    assert isinstance(e.value, NotFoundError) and isinstance(e.value, InvalidArgumentError)
    with pytest.raises(oci.UserLookupError, match=r"group 'staff' not found in .*etc/group"):
        gen(oci.with_user("app:staff", rootfs=rootfs))
    (rootfs / "etc" / "group").unlink()
    with pytest.raises(oci.UserLookupError, match=r"group 'staff'.*etc/group does not exist"):
        gen(oci.with_user("0:staff", rootfs=rootfs))
    with pytest.raises(oci.SpecOptError, match=r"root.path 'rootfs' is not absolute"):
        gen(oci.with_user("app"))


@pytest.mark.parametrize("bad", ["", "a:b:c", ":1", "1:", "99999999999"])
def test_with_user_rejects_malformed(bad: str) -> None:
    with pytest.raises(InvalidArgumentError, match="user"):
        oci.with_user(bad, rootfs="/nonexistent")


def test_with_user_id_and_username(rootfs: Path) -> None:
    assert _user(gen(oci.with_user_id(1001, rootfs=rootfs))) == (1001, 2000, [2000])
    assert _user(gen(oci.with_username("root", rootfs=rootfs))) == (0, 0, [0])
    with pytest.raises(oci.UserLookupError, match="'ghost'"):
        gen(oci.with_username("ghost", rootfs=rootfs))
    (rootfs / "etc" / "passwd").unlink()
    assert _user(gen(oci.with_user_id(7, rootfs=rootfs))) == (7, 0, [0])
    with pytest.raises(oci.UserLookupError, match="passwd does not exist"):
        gen(oci.with_username("app", rootfs=rootfs))


def test_passwd_symlink_is_resolved_inside_the_rootfs(rootfs: Path) -> None:
    etc = rootfs / "etc"
    (rootfs / "store").mkdir()
    (etc / "passwd").rename(rootfs / "store" / "passwd")
    (etc / "passwd").symlink_to("/store/passwd")  # absolute: must be re-anchored at rootfs
    assert _user(gen(oci.with_username("app", rootfs=rootfs)))[:2] == (1000, 1000)
    (etc / "passwd").unlink()
    (etc / "passwd").symlink_to("../../../../../../etc/shadow-nope")
    with pytest.raises(oci.UserLookupError, match="does not exist"):
        gen(oci.with_username("app", rootfs=rootfs))


def test_with_additional_gids(rootfs: Path) -> None:
    spec = gen(oci.with_uid_gid(1000, 1000), oci.with_additional_gids("app", rootfs=rootfs))
    assert _user(spec) == (1000, 1000, [1000, 10, 2000])  # not the group named like the user
    spec = gen(oci.with_uid_gid(1001, 2000), oci.with_additional_gids("1001", rootfs=rootfs))
    assert _user(spec) == (1001, 2000, [2000, 10])  # uid -> name 'svc'
    spec = gen(oci.with_uid_gid(5, 5), oci.with_additional_gids("5", rootfs=rootfs))
    assert _user(spec) == (5, 5, [5])


def test_with_append_additional_groups(rootfs: Path) -> None:
    spec = gen(oci.with_uid_gid(1, 1), oci.with_append_additional_groups("extra", "42",
                                                                         rootfs=rootfs))
    assert _user(spec) == (1, 1, [1, 2000, 42])
    assert _user(gen(oci.with_uid_gid(1, 1), oci.with_append_additional_groups("9")))[2] == [1, 9]
    with pytest.raises(oci.UserLookupError, match="group 'staff' not found"):
        gen(oci.with_append_additional_groups("staff", rootfs=rootfs))
    with pytest.raises(InvalidArgumentError, match="gid 4294967296"):
        oci.with_append_additional_groups(str(2**32))


def test_with_umask() -> None:
    assert gen(oci.with_umask(0o022)).process.user.umask == 0o022  # type: ignore[union-attr]
    with pytest.raises(InvalidArgumentError, match="umask 512"):
        oci.with_umask(0o1000)


# --- capabilities and security --------------------------------------------------------------


def _caps(spec: Spec) -> oci.LinuxCapabilities:
    c = spec.process.capabilities  # type: ignore[union-attr]
    assert c is not None
    return c


def test_with_capabilities_sets_and_filters_inheritable() -> None:
    base = gen(oci.with_ambient_capabilities(["CAP_KILL", "CAP_CHOWN"]))
    c = _caps(gen(oci.with_capabilities(["CAP_KILL", "CAP_KILL"]), base=base))
    assert c.bounding == c.effective == c.permitted == ["CAP_KILL"]
    assert c.inheritable == ["CAP_KILL"] and c.ambient == ["CAP_KILL", "CAP_CHOWN"]
    c = _caps(gen(oci.with_capabilities([]), base=base))
    assert c.bounding == [] and c.inheritable is None


def test_added_dropped_ambient_capabilities() -> None:
    c = _caps(gen(oci.with_added_capabilities(["CAP_SYS_ADMIN", "CAP_KILL"])))
    assert c.bounding is not None and c.bounding[-1] == "CAP_SYS_ADMIN"
    assert c.bounding.count("CAP_KILL") == 1 and c.effective == c.permitted == c.bounding
    c = _caps(gen(oci.with_ambient_capabilities(["CAP_KILL"]),
                  oci.with_dropped_capabilities(["CAP_KILL", "CAP_CHOWN"])))
    assert "CAP_KILL" not in (c.bounding or []) and "CAP_CHOWN" not in (c.effective or [])
    assert c.inheritable == [] and c.ambient == ["CAP_KILL"]


def test_all_known_and_current_capabilities(tmp_path: Path) -> None:
    c = _caps(gen(oci.with_all_known_capabilities()))
    assert c.bounding == list(oci.KNOWN_CAPABILITIES)
    status = tmp_path / "status"
    status.write_text("Name:\tx\nCapInh:\t0000000000000000\nCapEff:\t0000000000200421\n")
    c = _caps(gen(oci.with_all_current_capabilities(str(status))))
    assert c.effective == ["CAP_CHOWN", "CAP_KILL", "CAP_NET_BIND_SERVICE", "CAP_SYS_ADMIN"]
    status.write_text("CapEff:\tzz\n")
    with pytest.raises(oci.SpecOptError, match="no valid CapEff"):
        gen(oci.with_all_current_capabilities(str(status)))
    with pytest.raises(oci.SpecOptError, match="cannot read capabilities from /nonexistent"):
        gen(oci.with_all_current_capabilities("/nonexistent"))


def test_current_capabilities_of_this_process() -> None:
    c = _caps(gen(oci.with_all_current_capabilities()))
    text = Path("/proc/self/status").read_text()
    mask = int(next(ln.split()[1] for ln in text.splitlines() if ln.startswith("CapEff")), 16)
    assert len(c.effective or []) == bin(mask & (2**41 - 1)).count("1")


@pytest.mark.parametrize(
    "factory",
    [oci.with_capabilities, oci.with_added_capabilities, oci.with_dropped_capabilities,
     oci.with_ambient_capabilities],
)
def test_capability_options_reject_unknown_names(factory: Callable[[Any], oci.SpecOpt]) -> None:
    with pytest.raises(InvalidArgumentError, match="unknown capability 'KILL'"):
        factory(["KILL"])
    with pytest.raises(InvalidArgumentError, match="not a string"):
        factory("CAP_KILL")


def test_masked_and_readonly_paths() -> None:
    spec = gen(oci.with_masked_paths(["/proc/x"]), oci.with_readonly_paths([]))
    assert spec.linux.masked_paths == ["/proc/x"]  # type: ignore[union-attr]
    assert spec.linux.readonly_paths == []  # type: ignore[union-attr]
    spec = gen(oci.with_masked_paths(None), oci.with_readonly_paths(None))
    assert spec.linux.masked_paths is None and spec.linux.readonly_paths is None  # type: ignore[union-attr]
    with pytest.raises(InvalidArgumentError, match="masked path 'proc'"):
        oci.with_masked_paths(["proc"])
    with pytest.raises(InvalidArgumentError, match="readonly path"):
        oci.with_readonly_paths(["rel"])


def test_lsm_labels_and_seccomp() -> None:
    base = gen(oci.with_selinux_label("system_u:system_r:container_t:s0"),
               oci.with_apparmor_profile("podkit-default"))
    base.linux.seccomp = oci.LinuxSeccomp(default_action="SCMP_ACT_ERRNO")  # type: ignore[union-attr]
    assert base.process.selinux_label == "system_u:system_r:container_t:s0"  # type: ignore[union-attr]
    spec = gen(oci.with_selinux_label(""), oci.with_apparmor_profile(""),
               oci.with_seccomp_unconfined(), base=base)
    assert spec.process.selinux_label is None and spec.process.apparmor_profile is None  # type: ignore[union-attr]
    assert spec.linux.seccomp is None  # type: ignore[union-attr]
    with pytest.raises(InvalidArgumentError):
        oci.with_selinux_label(None)  # type: ignore[arg-type]


def test_with_privileged(tmp_path: Path) -> None:
    status = tmp_path / "status"
    status.write_text("CapEff:\t000001ffffffffff\n")
    base = oci.runc_spec()
    base.process.apparmor_profile = "x"  # type: ignore[union-attr]
    spec = gen(oci.with_privileged(str(status)), base=base)
    assert _caps(spec).bounding == list(oci.KNOWN_CAPABILITIES)
    assert spec.linux.masked_paths is None and spec.linux.readonly_paths is None  # type: ignore[union-attr]
    assert spec.process.apparmor_profile is None  # type: ignore[union-attr]
    assert all("ro" not in (m.options or []) for m in spec.mounts or [] if m.type in
               ("sysfs", "cgroup"))


def test_new_privileges_and_oom_score() -> None:
    assert gen(oci.with_new_privileges()).process.no_new_privileges is False  # type: ignore[union-attr]
    assert gen(oci.with_new_privileges(), oci.with_no_new_privileges()).process.no_new_privileges  # type: ignore[union-attr]
    assert gen(oci.with_oom_score_adj(0)).process.oom_score_adj == 0  # type: ignore[union-attr]
    assert gen(oci.with_oom_score_adj(-1000)).to_dict()["process"]["oomScoreAdj"] == -1000
    with pytest.raises(InvalidArgumentError, match="oomScoreAdj 1001"):
        oci.with_oom_score_adj(1001)


def test_rlimits_replace_by_type() -> None:
    spec = gen(oci.with_rlimit("RLIMIT_NOFILE", 10, 20),
               oci.with_rlimits([("RLIMIT_NPROC", 1, 1),
                                 oci.POSIXRlimit(type="RLIMIT_CORE", soft=0, hard=0)]))
    assert [(r.type, r.soft, r.hard) for r in spec.process.rlimits or []] == [  # type: ignore[union-attr]
        ("RLIMIT_NOFILE", 10, 20), ("RLIMIT_NPROC", 1, 1), ("RLIMIT_CORE", 0, 0)]
    with pytest.raises(InvalidArgumentError, match="unknown rlimit type 'NOFILE'"):
        oci.with_rlimit("NOFILE", 1, 1)
    with pytest.raises(InvalidArgumentError, match="soft limit 5 is above hard limit 1"):
        oci.with_rlimit("RLIMIT_NOFILE", 5, 1)
    with pytest.raises(InvalidArgumentError, match="RLIMIT_NOFILE hard limit 18446744073709551616"):
        oci.with_rlimit("RLIMIT_NOFILE", 1, 2**64)


def test_sysctls_and_annotations_merge() -> None:
    spec = gen(oci.with_sysctls({"a.b": "1"}), oci.with_sysctls({"a.b": "2", "c": "3"}),
               oci.with_annotations({"k": "v"}), oci.with_annotations({"k2": ""}))
    assert spec.linux.sysctl == {"a.b": "2", "c": "3"}  # type: ignore[union-attr]
    assert spec.annotations == {"k": "v", "k2": ""}
    with pytest.raises(InvalidArgumentError, match="annotation key"):
        oci.with_annotations({"": "v"})
    with pytest.raises(InvalidArgumentError, match="sysctl value for 'x'"):
        oci.with_sysctls({"x": 1})  # type: ignore[dict-item]
    with pytest.raises(InvalidArgumentError, match="mapping"):
        oci.with_sysctls([("x", "1")])  # type: ignore[arg-type]


# --- devices --------------------------------------------------------------------------------


class FakeFS:
    """A host /dev made of a dict: path -> (mode, major, minor) or a list of names for dirs."""

    def __init__(self, tree: dict[str, Any], links: dict[str, str] | None = None) -> None:
        self.tree = tree
        self.links = links or {}

    def stat(self, path: str, *, follow_symlinks: bool) -> Any:
        if path in self.links:
            if not follow_symlinks:
                return SimpleNamespace(st_mode=stat.S_IFLNK | 0o777, st_rdev=0, st_uid=0, st_gid=0)
            path = self.links[path]
        if path not in self.tree:
            raise FileNotFoundError(2, "No such file or directory", path)
        node = self.tree[path]
        if isinstance(node, list):
            return SimpleNamespace(st_mode=stat.S_IFDIR | 0o755, st_rdev=0, st_uid=0, st_gid=0)
        mode, major, minor = node
        return SimpleNamespace(st_mode=mode, st_rdev=os.makedev(major, minor), st_uid=0, st_gid=5)

    def listdir(self, path: str) -> list[str]:
        return list(self.tree[path])


HOST = FakeFS(
    {
        "/dev": ["null", "console", "fifo", "file", "pts", "dri", "sda"],
        "/dev/null": (stat.S_IFCHR | 0o666, 1, 3),
        "/dev/console": (stat.S_IFCHR | 0o600, 5, 1),
        "/dev/fifo": (stat.S_IFIFO | 0o600, 0, 0),
        "/dev/file": (stat.S_IFREG | 0o600, 0, 0),
        "/dev/pts": ["0"],
        "/dev/pts/0": (stat.S_IFCHR | 0o620, 136, 0),
        "/dev/dri": ["card0", "renderD128"],
        "/dev/dri/card0": (stat.S_IFCHR | 0o660, 226, 0),
        "/dev/dri/renderD128": (stat.S_IFCHR | 0o660, 226, 128),
        "/dev/sda": (stat.S_IFBLK | 0o660, 8, 0),
    },
    links={"/dev/disk/by-id/x": "/dev/sda"},
)


def _devs(spec: Spec) -> list[tuple[str, str, int | None, int | None]]:
    return [(d.path, d.type, d.major, d.minor) for d in spec.linux.devices or []]  # type: ignore[union-attr]


def test_with_devices_walks_a_directory() -> None:
    spec = gen(oci.with_devices("/dev", permissions="rw", fs=HOST))
    assert _devs(spec) == [("/dev/null", "c", 1, 3), ("/dev/dri/card0", "c", 226, 0),
                           ("/dev/dri/renderD128", "c", 226, 128), ("/dev/sda", "b", 8, 0)]
    rules = spec.linux.resources.devices  # type: ignore[union-attr]
    assert rules[0] == oci.LinuxDeviceCgroup(allow=False, access="rwm")  # type: ignore[index]
    assert rules[1:] == [oci.LinuxDeviceCgroup(allow=True, type=t, major=ma, minor=mi, access="rw")  # type: ignore[index]
                         for _, t, ma, mi in _devs(spec)]
    d = spec.linux.devices[0]  # type: ignore[union-attr,index]
    assert (d.file_mode, d.uid, d.gid) == (0o666, 0, 5)


def test_with_devices_renames_and_follows_a_symlinked_path() -> None:
    spec = gen(oci.with_devices("/dev/dri", "/dev/gpu", fs=HOST),
               oci.with_devices("/dev/disk/by-id/x", "/dev/xvda", "r", fs=HOST))
    assert _devs(spec) == [("/dev/gpu/card0", "c", 226, 0), ("/dev/gpu/renderD128", "c", 226, 128),
                           ("/dev/xvda", "b", 8, 0)]


def test_with_devices_errors() -> None:
    with pytest.raises(oci.SpecOptError, match="cannot stat device path '/dev/nope'"):
        gen(oci.with_devices("/dev/nope", fs=HOST))
    with pytest.raises(oci.SpecOptError, match="'/dev/file' is not a device node"):
        gen(oci.with_devices("/dev/file", fs=HOST))
    with pytest.raises(InvalidArgumentError, match="device permissions 'rwx'"):
        oci.with_devices("/dev/null", permissions="rwx")
    with pytest.raises(InvalidArgumentError, match="device permissions 'rr'"):
        oci.with_linux_device("/dev/null", "rr")
    with pytest.raises(InvalidArgumentError, match=r"'dev/null'.*absolute"):
        oci.with_devices("dev/null")


def test_with_linux_device_does_not_follow_symlinks() -> None:
    spec = gen(oci.with_linux_device("/dev/sda", "rw", fs=HOST))
    assert _devs(spec) == [("/dev/sda", "b", 8, 0)]
    with pytest.raises(oci.SpecOptError, match="is not a device node"):
        gen(oci.with_linux_device("/dev/disk/by-id/x", fs=HOST))
    with pytest.raises(oci.SpecOptError, match="cannot stat"):
        gen(oci.with_linux_device("/dev/none", fs=HOST))


def test_with_linux_device_on_the_real_host() -> None:
    spec = gen(oci.with_linux_device("/dev/null"))
    assert _devs(spec) == [("/dev/null", "c", 1, 3)]


def test_device_cgroup_defaults() -> None:
    spec = gen(oci.with_all_devices_allowed())
    assert spec.linux.resources.devices == [oci.LinuxDeviceCgroup(allow=True, access="rwm")]  # type: ignore[union-attr]
    rules = gen(oci.with_default_unix_devices()).linux.resources.devices  # type: ignore[union-attr]
    assert rules is not None and len(rules) == 10
    assert rules[8] == oci.LinuxDeviceCgroup(allow=True, type="c", major=136, access="rwm")
    assert {(r.major, r.minor) for r in rules[1:]} >= {(1, 3), (1, 9), (5, 2)}


# --- resources ------------------------------------------------------------------------------


def test_resource_options() -> None:
    spec = gen(
        oci.with_memory_limit(64 << 20), oci.with_memory_swap(-1), oci.with_cpu_shares(512),
        oci.with_cpus("0-1,3"), oci.with_cpus_mems("0"), oci.with_cpu_cfs(50000, 100000),
        oci.with_cpu_burst(1000), oci.with_cpu_rt(950000, 1000000), oci.with_pids_limit(64),
        oci.with_hugepage_limits({"2MB": 0}), oci.with_hugepage_limits({"1GB": 1 << 30}),
        oci.with_unified({"memory.high": "max"}),
        oci.with_blockio(oci.LinuxBlockIO(weight=100)),
    )
    r = spec.to_dict()["linux"]["resources"]
    assert r["memory"] == {"limit": 64 << 20, "swap": -1}
    assert r["cpu"] == {"shares": 512, "quota": 50000, "burst": 1000, "period": 100000,
                        "realtimeRuntime": 950000, "realtimePeriod": 1000000, "cpus": "0-1,3",
                        "mems": "0"}
    assert r["pids"] == {"limit": 64}
    assert r["hugepageLimits"] == [{"pageSize": "2MB", "limit": 0},
                                   {"pageSize": "1GB", "limit": 1 << 30}]
    assert r["unified"] == {"memory.high": "max"} and r["blockIO"] == {"weight": 100}
    assert gen(oci.with_blockio(None), base=spec).linux.resources.block_io is None  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("make", "match"),
    [
        (lambda: oci.with_memory_limit(-2), "memory limit -2"),
        (lambda: oci.with_memory_limit(2**63), "memory limit"),
        (lambda: oci.with_memory_swap(1.5), "memory swap 1.5"),
        (lambda: oci.with_cpu_shares(-1), "cpu shares -1"),
        (lambda: oci.with_cpus("0-"), "cpuset cpus '0-'"),
        (lambda: oci.with_cpus_mems("a"), "cpuset mems 'a'"),
        (lambda: oci.with_cpu_cfs(1, -1), "cpu period -1"),
        (lambda: oci.with_cpu_burst(True), "cpu burst True"),
        (lambda: oci.with_cpu_rt(1, -5), "realtime period -5"),
        (lambda: oci.with_pids_limit(-3), "pids limit -3"),
        (lambda: oci.with_hugepage_limits({"64kB": 1}), "hugepage size '64kB'"),
        (lambda: oci.with_hugepage_limits({"2MB": -1}), "2MB hugepage limit -1"),
        (lambda: oci.with_unified({"memory/high": "1"}), "unified cgroup key 'memory/high'"),
        (lambda: oci.with_blockio({"weight": 1}), "expected an oci.LinuxBlockIO"),
        (lambda: oci.with_resources({"memory": {}}), "expected an oci.LinuxResources"),
        (lambda: oci.with_cgroup("/a/../b"), "cgroups path '/a/../b'"),
        (lambda: oci.with_cgroup(""), "cgroups path"),
        (lambda: oci.with_rdt("c", "", "L3:0=f"), "memBwSchema 'L3:0=f'"),
    ],
)
def test_resource_bad_input(make: Callable[[], oci.SpecOpt], match: str) -> None:
    with pytest.raises(InvalidArgumentError, match=match):
        make()


def test_with_resources_sets_only_given_fields() -> None:
    res = oci.LinuxResources(memory=oci.LinuxMemory(limit=1), pids=oci.LinuxPids(limit=5))
    spec = gen(oci.with_cpu_shares(2), oci.with_resources(res))
    r = spec.linux.resources  # type: ignore[union-attr]
    assert r is not None and r.memory == oci.LinuxMemory(limit=1) and r.cpu.shares == 2  # type: ignore[union-attr]
    assert r.devices == [oci.LinuxDeviceCgroup(allow=False, access="rwm")]
    res.memory.limit = 9  # type: ignore[union-attr]
    assert r.memory.limit == 1  # type: ignore[union-attr]


def test_cgroup_and_rdt() -> None:
    spec = gen(oci.with_cgroup("system.slice:podkit:abc"), oci.with_rdt("gold", "L3:0=ff", ""))
    assert spec.linux.cgroups_path == "system.slice:podkit:abc"  # type: ignore[union-attr]
    assert spec.to_dict()["linux"]["intelRdt"] == {"closID": "gold", "l3CacheSchema": "L3:0=ff"}


def test_every_public_option_has_a_docstring() -> None:
    names = [n for n in oci.opts.__all__ if n.startswith("with")]
    assert len(names) >= 65
    for n in names:
        assert getattr(oci, n).__doc__, n
