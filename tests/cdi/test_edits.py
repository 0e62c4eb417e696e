"""Applying container edits to an OCI spec (reference/cdi.md d.2-d.9)."""

from __future__ import annotations

import errno
import os
import stat
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from podkit import cdi, oci
from podkit.cdi.edits import apply_edits, merge_edits


class FakeHost:
    """An injectable ``lstat``: path -> (type, major, minor, perm)."""

    def __init__(self, **nodes: tuple[str, int, int, int]) -> None:
        self.nodes = {k.replace("_", "/"): v for k, v in nodes.items()}
        self.calls: list[str] = []

    def add(self, path: str, kind: str, major: int = 0, minor: int = 0, perm: int = 0o666) -> None:
        self.nodes[path] = (kind, major, minor, perm)

    def __call__(self, path: str) -> Any:
        self.calls.append(path)
        if path not in self.nodes:
            raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), path)
        kind, major, minor, perm = self.nodes[path]
        fmt = {"c": stat.S_IFCHR, "b": stat.S_IFBLK, "p": stat.S_IFIFO, "f": stat.S_IFREG,
               "l": stat.S_IFLNK}[kind]
        return SimpleNamespace(st_mode=fmt | perm, st_rdev=os.makedev(major, minor))


@pytest.fixture
def host() -> FakeHost:
    h = FakeHost()
    h.add("/dev/null", "c", 1, 3)
    h.add("/dev/zero", "c", 1, 5, 0o644)
    h.add("/dev/sda", "b", 8, 0, 0o660)
    h.add("/dev/fifo", "p", 0, 0, 0o600)
    h.add("/dev/file", "f")
    h.add("/dev/link", "l")
    return h


def E(**kw: Any) -> cdi.ContainerEdits:
    return cdi.ContainerEdits(**kw)


def N(path: str, **kw: Any) -> cdi.DeviceNode:
    return cdi.DeviceNode(path=path, **kw)


def apply(spec: oci.Spec, edits: cdi.ContainerEdits, host: FakeHost) -> oci.Spec:
    apply_edits(spec, edits, stat=host)
    return spec


# --- merge -----------------------------------------------------------------------------------

def test_merge_concatenates_and_last_intel_rdt_wins() -> None:
    a = E(env=["A=1"], additional_gids=[1], intel_rdt=cdi.IntelRdt(clos_id="a"))
    b = E(env=["B=2"], additional_gids=[1], mounts=[cdi.Mount(host_path="/a", container_path="/b")])
    c = E(intel_rdt=cdi.IntelRdt(clos_id="c"))
    m = merge_edits([a, None, b, c, E()])
    assert m.env == ("A=1", "B=2")
    assert m.additional_gids == (1, 1)
    assert m.intel_rdt == cdi.IntelRdt(clos_id="c")
    assert m.mounts is not None and len(m.mounts) == 1
    assert merge_edits([]).is_empty()


# --- env (d.3) -------------------------------------------------------------------------------

def test_env_replace_in_place_and_append(host: FakeHost) -> None:
    spec = oci.Spec(process=oci.Process(env=["PATH=/bin", "A=orig", "B=orig"]))
    apply(spec, E(env=["A=spec", "C=spec", "A=dev", "C=dev", "D="]), host)
    assert spec.process is not None
    assert spec.process.env == ["PATH=/bin", "A=dev", "B=orig", "C=dev", "D="]


def test_env_creates_process(host: FakeHost) -> None:
    spec = apply(oci.Spec(), E(env=["A=1"]), host)
    assert spec.process is not None and spec.process.env == ["A=1"]
    spec = apply(oci.Spec(), E(mounts=[cdi.Mount(host_path="/a", container_path="/b")]), host)
    assert spec.process is None


# --- device nodes (d.4) ----------------------------------------------------------------------

def test_device_node_completed_from_host(host: FakeHost) -> None:
    spec = apply(oci.Spec(), E(device_nodes=[N("/dev/null")]), host)
    assert spec.linux is not None and spec.linux.devices is not None
    d = spec.linux.devices[0]
    assert (d.path, d.type, d.major, d.minor, d.file_mode) == ("/dev/null", "c", 1, 3, 0o666)
    assert d.uid is None and d.gid is None
    assert spec.linux.resources is not None
    rule = spec.linux.resources.devices[0]  # type: ignore[index]
    assert (rule.allow, rule.type, rule.major, rule.minor, rule.access) == (True, "c", 1, 3, "rwm")


def test_host_path_is_looked_up_and_container_path_kept(host: FakeHost) -> None:
    spec = apply(oci.Spec(), E(device_nodes=[N("/dev/pk-zero", host_path="/dev/zero")]), host)
    assert host.calls == ["/dev/zero"]
    d = spec.linux.devices[0]  # type: ignore[union-attr,index]
    assert (d.path, d.major, d.minor, d.file_mode) == ("/dev/pk-zero", 1, 5, 0o644)


def test_explicit_values_are_kept(host: FakeHost) -> None:
    node = N("/dev/null", file_mode=0o600, uid=5, gid=6, minor=9)
    spec = apply(oci.Spec(), E(device_nodes=[node]), host)
    d = spec.linux.devices[0]  # type: ignore[union-attr,index]
    # major 0 -> host major AND minor (a given minor is overwritten)
    assert (d.major, d.minor, d.file_mode, d.uid, d.gid) == (1, 3, 0o600, 5, 6)


def test_minimally_specified_node_skips_host_numbers(host: FakeHost) -> None:
    node = N("/dev/null", type="c", major=10, minor=200)
    spec = apply(oci.Spec(), E(device_nodes=[node]), host)
    d = spec.linux.devices[0]  # type: ignore[union-attr,index]
    assert (d.type, d.major, d.minor, d.file_mode) == ("c", 10, 200, 0o666)
    # missing on the host: used as given, without a file mode
    spec = apply(oci.Spec(), E(device_nodes=[N("/dev/gone", type="c", major=10, minor=1)]), host)
    d = spec.linux.devices[0]  # type: ignore[union-attr,index]
    assert (d.type, d.major, d.minor, d.file_mode) == ("c", 10, 1, None)
    spec = apply(oci.Spec(), E(device_nodes=[N("/dev/gone", type="p")]), host)
    d = spec.linux.devices[0]  # type: ignore[union-attr,index]
    assert (d.type, d.major, d.minor) == ("p", 0, 0)


def test_block_and_fifo(host: FakeHost) -> None:
    spec = apply(oci.Spec(), E(device_nodes=[N("/dev/sda"), N("/dev/fifo")]), host)
    devs = spec.linux.devices  # type: ignore[union-attr]
    assert [(d.type, d.major, d.minor) for d in devs] == [("b", 8, 0), ("p", 0, 0)]
    rules = spec.linux.resources.devices  # type: ignore[union-attr]
    assert [(r.type, r.major, r.minor) for r in rules] == [("b", 8, 0)]  # no rule for p


@pytest.mark.parametrize(
    ("node", "message"),
    [
        (N("/dev/gone"), 'failed to stat CDI host device "/dev/gone": No such file or directory'),
        (N("/dev/x", host_path="/dev/file"),
         'failed to stat CDI host device "/dev/file": not a device node'),
        (N("/dev/link"), 'failed to stat CDI host device "/dev/link": not a device node'),
        (N("/dev/null", type="b"), 'CDI device ("/dev/null", "/dev/null"), host type mismatch '
                                   "(b, c)"),
        (N("/dev/null", type="u"), "host type mismatch (u, c)"),
        (N("/dev/gone", type="c"), 'failed to stat CDI host device "/dev/gone"'),
    ],
)
def test_host_device_errors_leave_spec_unchanged(
    host: FakeHost, node: cdi.DeviceNode, message: str
) -> None:
    spec = oci.Spec(process=oci.Process(env=["A=1"]), linux=oci.Linux(devices=[]))
    before = spec.to_dict()
    edits = E(env=["A=2", "B=1"], device_nodes=[N("/dev/zero"), node],
              mounts=[cdi.Mount(host_path="/a", container_path="/b")])
    with pytest.raises(cdi.EditError) as exc:
        apply_edits(spec, edits, stat=host)
    assert message in str(exc.value)
    assert spec.to_dict() == before


def test_replace_by_path_moves_to_end(host: FakeHost) -> None:
    spec = oci.Spec(linux=oci.Linux(devices=[
        oci.LinuxDevice(path="/dev/null", type="c", major=9, minor=9),
        oci.LinuxDevice(path="/dev/other", type="c", major=2, minor=2),
    ]))
    apply(spec, E(device_nodes=[N("/dev/null"), N("/dev/zero"), N("/dev/null")]), host)
    devs = spec.linux.devices  # type: ignore[union-attr]
    assert [(d.path, d.major) for d in devs] == [("/dev/other", 2), ("/dev/zero", 1),
                                                 ("/dev/null", 1)]
    # cgroup rules are not de-duplicated
    assert len(spec.linux.resources.devices) == 3  # type: ignore[union-attr,arg-type]


def test_cgroup_permissions(host: FakeHost) -> None:
    edits = E(device_nodes=[N("/dev/null", permissions="r"), N("/dev/zero", permissions="none"),
                            N("/dev/sda")])
    spec = apply(oci.Spec(linux=oci.Linux(resources=oci.LinuxResources(devices=[
        oci.LinuxDeviceCgroup(allow=False, access="rwm")]))), edits, host)
    rules = spec.linux.resources.devices  # type: ignore[union-attr]
    # "none": the node is created but no allow rule is added (Go adds one with an empty
    # access string, which grants nothing and which runc 1.1 rejects)
    assert [(r.allow, r.access, r.minor) for r in rules] == [
        (False, "rwm", None), (True, "r", 3), (True, "rwm", 0)]
    assert [d.path for d in spec.linux.devices or []] == [  # type: ignore[union-attr]
        "/dev/null", "/dev/zero", "/dev/sda"]


def test_uid_gid_default_from_process_user(host: FakeHost) -> None:
    spec = oci.Spec(process=oci.Process(user=oci.User(uid=1000, gid=2000)))
    apply(spec, E(device_nodes=[N("/dev/null"), N("/dev/zero", uid=0, gid=0)]), host)
    devs = spec.linux.devices  # type: ignore[union-attr]
    assert [(d.uid, d.gid) for d in devs] == [(1000, 2000), (0, 0)]
    spec = oci.Spec(process=oci.Process(user=oci.User(uid=0, gid=0)))
    apply(spec, E(device_nodes=[N("/dev/null")]), host)
    assert spec.linux.devices[0].uid is None  # type: ignore[union-attr,index]


# --- mounts (d.5) ----------------------------------------------------------------------------

def M(host_path: str, container_path: str, **kw: Any) -> cdi.Mount:
    return cdi.Mount(host_path=host_path, container_path=container_path, **kw)


def test_mounts_replace_and_stable_depth_sort(host: FakeHost) -> None:
    spec = oci.Spec(mounts=[
        oci.Mount(destination="/proc", type="proc", source="proc"),
        oci.Mount(destination="/dev/pts", type="devpts", source="devpts"),
        oci.Mount(destination="/dev", type="tmpfs", source="tmpfs"),
        oci.Mount(destination="/data", type="tmpfs", source="old"),
    ])
    edits = E(mounts=[
        M("/h/lib", "/usr/lib/x", options=["ro", "bind"]),
        M("/h/data", "/data", type="bind"),
        M("/h/a", "/a"),
        M("/h/rel", "rel"),
        M("/h/deep", "//dev//x/"),
    ])
    apply(spec, edits, host)
    got = [(m.destination, m.source) for m in spec.mounts or []]
    assert got == [
        ("rel", "/h/rel"),
        ("/proc", "proc"), ("/dev", "tmpfs"), ("/data", "/h/data"), ("/a", "/h/a"),
        ("/dev/pts", "devpts"), ("//dev//x/", "/h/deep"),
        ("/usr/lib/x", "/h/lib"),
    ]
    m = next(m for m in spec.mounts or [] if m.destination == "/usr/lib/x")
    assert m.options == ["ro", "bind"] and m.type is None


def test_mounts_without_user_namespace_get_no_idmap(host: FakeHost) -> None:
    spec = apply(oci.Spec(), E(mounts=[M("/a", "/b", type="bind")]), host)
    assert spec.mounts[0].options is None  # type: ignore[index]


@pytest.mark.parametrize(
    ("mtype", "options", "expected"),
    [
        ("bind", None, ["idmap"]),
        ("bind", ["ro"], ["ro", "idmap"]),
        (None, ["bind"], ["bind", "idmap"]),
        (None, ["rbind", "ro"], ["rbind", "ro", "ridmap"]),
        (None, ["bind", "rbind"], ["bind", "rbind", "ridmap"]),
        ("bind", ["rbind"], ["rbind", "ridmap"]),
        (None, ["rbind", "idmap"], ["rbind", "idmap"]),
        (None, ["ridmap", "bind"], ["ridmap", "bind"]),
        ("tmpfs", ["nosuid"], ["nosuid"]),
        (None, None, None),
    ],
)
def test_idmap_for_bind_mounts_with_user_namespace(
    host: FakeHost, mtype: str | None, options: list[str] | None, expected: list[str] | None
) -> None:
    spec = oci.Spec(linux=oci.Linux(namespaces=[oci.LinuxNamespace(type="mount"),
                                                oci.LinuxNamespace(type="user")]))
    apply(spec, E(mounts=[M("/a", "/b", type=mtype, options=options)]), host)
    assert spec.mounts[0].options == expected  # type: ignore[index]


# --- hooks (d.6), intelRdt (d.7), netDevices (d.8), GIDs (d.9) -------------------------------

def test_hooks_mapped_to_stages_and_appended(host: FakeHost) -> None:
    spec = oci.Spec(hooks=oci.Hooks(poststart=[oci.Hook(path="/existing")]))
    hooks = [cdi.Hook(hook_name=n, path=f"/h/{n}", args=["a"], env=["E=1"], timeout=3)
             for n in cdi.HOOK_NAMES]
    hooks.append(cdi.Hook(hook_name="poststart", path="/h/second"))
    apply(spec, E(hooks=hooks), host)
    h = spec.hooks
    assert h is not None
    assert [x.path for x in h.prestart or []] == ["/h/prestart"]
    assert [x.path for x in h.create_runtime or []] == ["/h/createRuntime"]
    assert [x.path for x in h.create_container or []] == ["/h/createContainer"]
    assert [x.path for x in h.start_container or []] == ["/h/startContainer"]
    assert [x.path for x in h.poststart or []] == ["/existing", "/h/poststart", "/h/second"]
    assert [x.path for x in h.poststop or []] == ["/h/poststop"]
    first = (h.prestart or [])[0]
    assert (first.args, first.env, first.timeout) == (["a"], ["E=1"], 3)


def test_intel_rdt_replaced_wholesale(host: FakeHost) -> None:
    spec = oci.Spec(linux=oci.Linux(intel_rdt=oci.LinuxIntelRdt(
        clos_id="old", l3_cache_schema="L3:0=f", enable_cmt=True)))
    apply(spec, E(intel_rdt=cdi.IntelRdt(clos_id="gold", schemata=["L3:0=ff"],
                                         enable_monitoring=True)), host)
    assert spec.to_dict()["linux"]["intelRdt"] == {
        "closID": "gold", "schemata": ["L3:0=ff"], "enableMonitoring": True}
    apply(spec, E(intel_rdt=cdi.IntelRdt()), host)
    assert spec.to_dict()["linux"]["intelRdt"] == {}


def test_net_devices_map(host: FakeHost) -> None:
    spec = oci.Spec(linux=oci.Linux(net_devices={"eth0": oci.LinuxNetDevice(name="old")}))
    apply(spec, E(net_devices=[cdi.NetDevice(host_interface_name="eth0", name="net0"),
                               cdi.NetDevice(host_interface_name="eth1", name="net1"),
                               cdi.NetDevice(host_interface_name="eth1", name="net9")]), host)
    assert spec.to_dict()["linux"]["netDevices"] == {"eth0": {"name": "net0"},
                                                     "eth1": {"name": "net9"}}


def test_additional_gids_dedup_and_skip_zero(host: FakeHost) -> None:
    spec = oci.Spec(process=oci.Process(user=oci.User(uid=1, gid=1, additional_gids=[5])))
    apply(spec, E(additional_gids=[0, 5, 7, 7, 8]), host)
    assert spec.process.user.additional_gids == [5, 7, 8]  # type: ignore[union-attr]
    spec = apply(oci.Spec(), E(additional_gids=[0]), host)
    assert spec.process is None
    spec = apply(oci.Spec(), E(additional_gids=[3]), host)
    assert spec.process.user.additional_gids == [3]  # type: ignore[union-attr]


# --- whole-apply behaviour -------------------------------------------------------------------

def test_nil_and_wrong_oci_spec() -> None:
    with pytest.raises(ValueError, match="can't edit nil OCI Spec"):
        apply_edits(None, E(env=["A=1"]))
    with pytest.raises(ValueError, match=r"expected podkit\.oci\.Spec"):
        apply_edits({"ociVersion": "1.0.0"}, E(env=["A=1"]))  # type: ignore[arg-type]


def test_empty_edits_are_a_no_op(host: FakeHost) -> None:
    spec = oci.Spec()
    apply(spec, E(), host)
    assert spec == oci.Spec()


def test_apply_does_not_alias_original_objects(host: FakeHost) -> None:
    env = ["A=1"]
    original_process = oci.Process(env=env)
    spec = oci.Spec(process=original_process)
    apply(spec, E(env=["B=2"]), host)
    assert env == ["A=1"] and original_process.env == ["A=1"]
    edits = E(mounts=[M("/a", "/b", options=["ro"])])
    apply(spec, edits, host)
    spec.mounts[0].options.append("x")  # type: ignore[index,union-attr]
    assert edits.mounts is not None and edits.mounts[0].options == ("ro",)


def test_apply_order_and_json_output(host: FakeHost) -> None:
    spec = oci.Spec(process=oci.Process(env=["A=0"], user=oci.User(uid=0, gid=0)))
    edits = E(env=["A=1"], device_nodes=[N("/dev/null")], additional_gids=[44],
              hooks=[cdi.Hook(hook_name="createContainer", path="/bin/h")],
              mounts=[M("/h", "/c", options=["rbind"])],
              net_devices=[cdi.NetDevice(host_interface_name="e", name="n")])
    apply(spec, edits, host)
    d = spec.to_dict()
    assert d["process"]["env"] == ["A=1"]
    assert d["process"]["user"]["additionalGids"] == [44]
    assert d["linux"]["devices"] == [{"path": "/dev/null", "type": "c", "major": 1, "minor": 3,
                                      "fileMode": 438}]
    assert d["hooks"] == {"createContainer": [{"path": "/bin/h"}]}
    assert d["mounts"] == [{"destination": "/c", "source": "/h", "options": ["rbind"]}]
    assert oci.Spec.from_dict(d) == spec


_keys = st.sampled_from(["A", "B", "C", "PATH", "X_Y"])
_envs = st.lists(st.builds(lambda k, v: f"{k}={v}", _keys, st.text("abc=", max_size=3)),
                 max_size=6)


@given(original=_envs, cdi_env=_envs)
def test_env_property_last_writer_wins_first_position_kept(
    original: list[str], cdi_env: list[str]
) -> None:
    spec = oci.Spec(process=oci.Process(env=list(original)))
    apply_edits(spec, E(env=cdi_env), stat=FakeHost())
    assert spec.process is not None
    result = spec.process.env or []
    last = {e.partition("=")[0]: e for e in cdi_env}
    # every CDI key ends with its last CDI value, exactly where the key first appeared
    first_keys = list(dict.fromkeys(e.partition("=")[0] for e in [*original, *cdi_env]))
    result_keys = [e.partition("=")[0] for e in result]
    assert len(result) == len(original) + len(
        [k for k in dict.fromkeys(e.partition("=")[0] for e in cdi_env)
         if k not in {o.partition("=")[0] for o in original}])
    for k, v in last.items():
        assert result[result_keys.index(k)] == v
    assert [k for k in dict.fromkeys(result_keys)] == first_keys
