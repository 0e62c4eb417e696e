"""A pod's own user namespace, without running anything: the rules (``pods.userns``), what the
builders make of it (``linux.uidMappings``, a ``user`` namespace joined at the pod's pin, no
mount mappings for the runtime), the pause's mount points, and the ID-mapped views' paths."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import attrs
import pytest

from podkit import idmap, oci
from podkit.container import ContainerConfigError, ImageDefaults, PodContext, build_container_spec
from podkit.pods import idmapped, userns
from podkit.pods.config import (
    ContainerConfig,
    ContainerMetadata,
    IDMapping,
    LinuxContainerConfig,
    LinuxContainerSecurityContext,
    LinuxPodSandboxConfig,
    LinuxSandboxSecurityContext,
    Mount,
    NamespaceMode,
    NamespaceOption,
    PodSandboxMetadata,
    SandboxConfig,
    UserNamespace,
)
from podkit.pods.pause import make_mountpoints
from podkit.sandbox import SandboxConfigError, SandboxFiles, build_sandbox_spec

H, N = 65536 * 7, 65536
FIELD = r"linux\.security_context\.namespace_options\.userns_options"
FILES = SandboxFiles.under("/run/pk/sb1")


def m(container_id: int = 0, host_id: int = H, length: int = N) -> IDMapping:
    return IDMapping(container_id=container_id, host_id=host_id, length=length)


def pod_userns(**kw: Any) -> UserNamespace:
    kw.setdefault("uids", [m()])
    kw.setdefault("gids", [m()])
    return UserNamespace(mode=kw.pop("mode", NamespaceMode.POD), **kw)


def pod(userns_options: UserNamespace | None = None, **sc: Any) -> SandboxConfig:
    ns = NamespaceOption(**{k: sc.pop(k) for k in ("network", "pid", "ipc") if k in sc},
                         userns_options=userns_options)
    return SandboxConfig(
        metadata=PodSandboxMetadata(name="web", uid="u1", namespace="ns"),
        linux=LinuxPodSandboxConfig(
            security_context=LinuxSandboxSecurityContext(namespace_options=ns, **sc)))


def build_pod(config: SandboxConfig) -> oci.Spec:
    return build_sandbox_spec(config, id="sb1", files=FILES, netns_path="/run/netns/p",
                              userns_path="/pk/sb1/ns/user")


@pytest.mark.parametrize(("options", "message"), [
    (pod_userns(mode=NamespaceMode.CONTAINER), rf"{FIELD}\.mode: CONTAINER is not supported"),
    (pod_userns(mode=NamespaceMode.TARGET), rf"{FIELD}\.mode: TARGET is not supported"),
    (pod_userns(mode=NamespaceMode.NODE), rf"{FIELD}: mode NODE .* got 1 uid and 1 gid"),
    (pod_userns(uids=[]), rf"{FIELD}\.uids: mode POD needs a mapping"),
    (pod_userns(gids=[]), rf"{FIELD}\.gids: mode POD needs a mapping"),
    (pod_userns(uids=[m(length=0)]), rf"{FIELD}\.uids\[0\]\.length 0: must be at least 1"),
    (pod_userns(gids=[m(), m(N, H + 2 * N, 10)]),
     rf"{FIELD}\.gids: 0 {H} {N}, {N} {H + 2 * N} 10: not one contiguous range"),
    (pod_userns(uids=[m(), m(10, H + 10, N)]), "not one contiguous range"),  # overlapping
    (pod_userns(uids=[m(1)], gids=[m(1)]), r"starts at container ID 1, not 0"),
    (pod_userns(gids=[m(host_id=H + N)]),
     rf"{FIELD}: the uid mapping \(0 {H} {N}\) and the gid mapping \(0 {H + N} {N}\) differ"),
    (pod_userns(uids=[m(host_id=2**32 - N)]),
     rf"{FIELD}\.uids\[0\]: host_id {2**32 - N} \+ length {N} leaves the 32-bit IDs"),
    (pod_userns(uids=[m(host_id=-1)]), r"host_id -1"),
])
def test_pod_refusals_name_the_field(options: UserNamespace, message: str) -> None:
    with pytest.raises(SandboxConfigError, match=message):
        build_pod(pod(options))


@pytest.mark.parametrize("kind", ["network", "pid", "ipc"])
def test_pod_user_namespace_refuses_host_namespaces(kind: str) -> None:
    config = pod(pod_userns(), **{kind: NamespaceMode.NODE})
    with pytest.raises(SandboxConfigError,
                       match=rf"{FIELD}: mode POD cannot go with namespace_options\.{kind} NODE"):
        build_sandbox_spec(config, id="sb1", files=FILES, netns_path="/run/netns/p")


@pytest.mark.parametrize(("sc", "field"), [
    ({"run_as_user": N}, "run_as_user"), ({"run_as_group": N + 1}, "run_as_group"),
    ({"supplemental_groups": (5, N)}, r"supplemental_groups\[1\]"),
])
def test_pod_ids_outside_the_map_are_refused(sc: dict[str, Any], field: str) -> None:
    with pytest.raises(SandboxConfigError,
                       match=rf"linux\.security_context\.{field} \d+: not mapped in the pod's "
                             rf"user namespace \(container IDs 0-{N - 1}\)"):
        build_pod(pod(pod_userns(), **sc))


def test_pod_spec_has_the_map_and_joins_the_pin() -> None:
    split = pod_userns(uids=[m(1000, H + 1000, N - 1000), m(0, H, 1000)])  # one range in two
    spec = build_pod(pod(split))
    assert spec.linux is not None and spec.linux.namespaces is not None
    assert {n.type: n.path for n in spec.linux.namespaces}["user"] == "/pk/sb1/ns/user"
    one = [oci.LinuxIDMapping(container_id=0, host_id=H, size=N)]
    assert spec.linux.uid_mappings == one and spec.linux.gid_mappings == one
    assert oci.validate(spec) == []
    assert userns.pod_id_map(pod(split)) == idmap.IDMap.single(H, N)


def test_host_users_make_no_user_namespace() -> None:
    for options in (None, UserNamespace(mode=NamespaceMode.NODE)):
        spec = build_pod(pod(options))
        assert spec.linux is not None and spec.linux.uid_mappings is None
        assert "user" not in {n.type for n in spec.linux.namespaces or []}
        assert userns.pod_id_map(pod(options)) is None


# --- containers ------------------------------------------------------------------------------


def ctx(config: SandboxConfig) -> PodContext:
    paths = {"network": "/proc/42/ns/net", "ipc": "/proc/42/ns/ipc", "uts": "/proc/42/ns/uts",
             "pid": "/proc/42/ns/pid", "user": "/pk/sb1/ns/user"}
    return PodContext(id="sb1", config=config, files=FILES, namespace_paths=paths)


def ctr(**kw: Any) -> ContainerConfig:
    sc = kw.pop("sc", {})
    return ContainerConfig(metadata=ContainerMetadata(name="app"), image="/img",
                           command=["sleep", "1"],
                           linux=LinuxContainerConfig(
                               security_context=LinuxContainerSecurityContext(**sc)), **kw)


@pytest.fixture
def rootfs(tmp_path: Path) -> Path:
    (tmp_path / "etc").mkdir()
    (tmp_path / "etc" / "passwd").write_text("root:x:0:0::/:/bin/sh\nfar:x:70000:70000::/:/\n")
    (tmp_path / "etc" / "group").write_text("root:x:0:\nfar:x:70000:\n")
    return tmp_path


def build(config: ContainerConfig, rootfs: Path, **kw: Any) -> oci.Spec:
    return build_container_spec(config, ctx(kw.pop("pod", pod(pod_userns()))), id="c1",
                                rootfs=str(rootfs), **kw)


def test_container_joins_the_pods_user_namespace_and_mounts_carry_no_maps(rootfs: Path) -> None:
    given = Mount(container_path="/v", host_path="/pk/mounts/c1/0", uid_mappings=[m()],
                  gid_mappings=[m()])
    spec = build(ctr(mounts=[given]), rootfs)
    assert spec.linux is not None and spec.linux.namespaces is not None
    assert {n.type: n.path for n in spec.linux.namespaces}["user"] == "/pk/sb1/ns/user"
    assert spec.linux.uid_mappings == [oci.LinuxIDMapping(container_id=0, host_id=H, size=N)]
    v = next(x for x in spec.mounts or [] if x.destination == "/v")
    assert v.uid_mappings is None and v.options == ["rbind", "rprivate", "rw"]


@pytest.mark.parametrize(("config", "message"), [
    (ctr(sc={"namespace_options": NamespaceOption(userns_options=pod_userns(
        uids=[m(host_id=H * 2)], gids=[m(host_id=H * 2)]))}),
     rf"{FIELD}: POD 0 {H * 2} {N}, 0 {H * 2} {N} differs from the pod's \(POD 0 {H} {N}, "),
    (ctr(sc={"namespace_options": NamespaceOption(userns_options=UserNamespace())}),
     rf"{FIELD}: NODE differs from the pod's"),
    (ctr(sc={"run_as_user": N}), rf"linux\.security_context\.run_as_user {N}: not mapped"),
    (ctr(sc={"run_as_user": 0, "run_as_group": N}), r"run_as_group \d+: not mapped"),
    (ctr(sc={"supplemental_groups": [N]}), r"supplemental_groups\[0\] \d+: not mapped"),
    (ctr(mounts=[Mount(container_path="/v", host_path="/x", gid_mappings=[m(host_id=1)])]),
     rf"mounts\[0\]\.gid_mappings: 0 1 {N} is not the pod's map \(0 {H} {N}\)"),
])
def test_container_refusals_name_the_field(config: ContainerConfig, message: str,
                                           rootfs: Path) -> None:
    with pytest.raises(ContainerConfigError, match=message):
        build(config, rootfs)


def test_a_container_option_equal_to_the_pods_or_none_is_fine(rootfs: Path) -> None:
    same = ctr(sc={"namespace_options": NamespaceOption(userns_options=pod_userns())})
    build(same, rootfs)
    with pytest.raises(ContainerConfigError, match=rf"{FIELD}: POD .* differs from the pod's "
                                                   r"\(none \(the host's users\)\)"):
        build(same, rootfs, pod=pod())
    build(ctr(sc={"namespace_options": NamespaceOption(userns_options=UserNamespace())}),
          rootfs, pod=pod())  # NODE without maps in a pod of host users


def test_an_image_user_outside_the_map_is_refused(rootfs: Path) -> None:
    with pytest.raises(ContainerConfigError, match=r"uid 70000 of the process user \(from the "
                                                   r"image's User 'far'\) is not mapped"):
        build(ctr(), rootfs, image=ImageDefaults(user="far"))
    spec = build(ctr(), rootfs, image=ImageDefaults(user="far"), pod=pod())  # host users: fine
    assert spec.process is not None and spec.process.user.uid == 70000


def test_staged_points_the_mounts_at_their_views() -> None:
    config = ctr(mounts=[Mount(container_path="/a", host_path="/srv/a"),
                         Mount(container_path="/b", host_path="/srv/b", readonly=True)])
    out = idmapped.staged(config, Path("/pk/mounts/c1"))
    assert [(x.host_path, x.readonly) for x in out.mounts] == [
        ("/pk/mounts/c1/0", False), ("/pk/mounts/c1/1", True)]
    assert config.mounts[0].host_path == "/srv/a" and attrs.evolve(out, mounts=()) == \
        attrs.evolve(config, mounts=())


# --- the pause's mount points ------------------------------------------------------------------


def test_make_mountpoints_makes_what_the_runtime_cannot_in_a_host_rootfs(tmp_path: Path) -> None:
    root = tmp_path / "rootfs"
    (root / "etc").mkdir(parents=True)
    (tmp_path / "outside").mkdir()
    (root / "sys").symlink_to(tmp_path / "outside")  # never followed
    source = tmp_path / "resolv.conf"
    source.write_text("")
    spec = oci.Spec(mounts=[
        oci.Mount(destination="/proc", type="proc", source="proc"),
        oci.Mount(destination="/dev", type="tmpfs", source="tmpfs"),
        oci.Mount(destination="/dev/shm", type="bind", source=str(tmp_path)),
        oci.Mount(destination="/sys/x", type="sysfs", source="sysfs"),
        oci.Mount(destination="/etc/resolv.conf", type="bind", source=str(source)),
        oci.Mount(destination="/data/deep", type="bind", source=str(tmp_path)),
    ])
    make_mountpoints(root, spec)
    assert (root / "proc").is_dir() and (root / "dev").is_dir()
    assert not (root / "dev" / "shm").exists()  # inside /dev: the runtime's tmpfs
    assert (root / "etc" / "resolv.conf").is_file()
    assert (root / "data" / "deep").is_dir()
    assert os.listdir(tmp_path / "outside") == []
    make_mountpoints(root, spec)  # again: nothing to do
