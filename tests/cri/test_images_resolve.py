"""Every form a client may name an image in, through the real CRI server (real runc under
conmon, real CNI) and a real gRPC client, for images pulled from a real docker-registry on
127.0.0.1: ImageStatus, ListImages filters, CreateContainer's image and RemoveImage agree, as
containerd's CRI plugin resolves them (``LocalResolve``): ``REPO:TAG``, ``REPO@DIGEST``,
``REPO:TAG@DIGEST``, the image ID with and without ``sha256:``, a unique ID prefix, short names
the docker way (``busybox``, ``user/x``, through a ``docker.io`` mirror); after a remove and a
re-pull too. Removal is idempotent in every form; what can name no image is INVALID_ARGUMENT.
"""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest

from cri.helpers import BUSYBOX, BUSYBOX_CONFIG, PAUSE, Harness, container_config, pod_config
from image.imagebuild import BuiltImage, Layer, build_image
from image.registries import mirror_hosts, push_image, start_registry, stop_registry
from podkit.cri import api_pb2 as pb
from podkit.image import RegistryHosts
from podkit.image.lookup import MIN_ID_PREFIX
from support import require_binary, require_isolated

pytestmark = pytest.mark.integration


def _runnable(layer: bytes, name: str) -> BuiltImage:
    """A busybox image whose config (so ID) is its own: ``PK_IMAGE=<name>`` in its env."""
    config = dict(BUSYBOX_CONFIG, Env=[*BUSYBOX_CONFIG["Env"], f"PK_IMAGE={name}"])
    return build_image([layer], [""], config)


def _sharing_an_id_prefix() -> tuple[BuiltImage, BuiltImage]:
    """Two tiny images whose IDs start with the same MIN_ID_PREFIX hex digits (a birthday
    search: a few thousand configs)."""
    layer = Layer().file("f", b"ambiguous").bytes()
    seen: dict[str, BuiltImage] = {}
    for n in itertools.count():
        img = build_image([layer], [""], {"Env": [f"N={n}"]})
        key = img.manifest["config"]["digest"][7:7 + MIN_ID_PREFIX]
        if key in seen:
            return seen[key], img
        seen[key] = img
    raise AssertionError("unreachable")


class Rig:
    """The served harness (pulls through a ``docker.io`` mirror on the local registry), the
    registry's ``host`` and the images pushed there."""

    def __init__(self, harness: Harness, host: str, images: dict[str, BuiltImage]) -> None:
        self.h = harness
        self.host = host
        self.images = images

    def id(self, key: str) -> str:
        return str(self.images[key].manifest["config"]["digest"])

    def digest(self, key: str) -> str:
        return str(self.images[key].descriptor["digest"])

    def pull(self, ref: str) -> str:
        req = pb.PullImageRequest(image=pb.ImageSpec(image=ref))
        return str(self.h.img.PullImage(req, timeout=120).image_ref)

    def status(self, ref: str) -> Any:
        return self.h.img.ImageStatus(pb.ImageStatusRequest(image=pb.ImageSpec(image=ref)),
                                      timeout=30).image

    def listed(self, ref: str = "") -> list[str]:
        req = pb.ListImagesRequest()
        if ref:
            req.filter.image.image = ref
        return [i.id for i in self.h.img.ListImages(req, timeout=30).images]

    def remove(self, ref: str) -> None:
        self.h.img.RemoveImage(pb.RemoveImageRequest(image=pb.ImageSpec(image=ref)), timeout=60)

    def forms(self, key: str) -> dict[str, str]:
        """Every form of image ``key`` pulled by its tag (the app image: by its full name)."""
        image_id, digest = self.id(key), self.digest(key)
        short = {"app": f"{self.host}/pk/resolve", "busybox": "busybox", "user": "user/x"}[key]
        named = {
            "app": {"REPO:TAG": f"{short}:v1", "REPO@DIGEST": f"{short}@{digest}",
                    "REPO:TAG@DIGEST": f"{short}:v1@{digest}",
                    "REPO:OTHERTAG@DIGEST": f"{short}:nosuch@{digest}"},
            "busybox": {"busybox": "busybox", "busybox:latest": "busybox:latest",
                        "library/busybox": "library/busybox",
                        "docker.io/busybox": "docker.io/busybox",
                        "docker.io/library/busybox:latest": "docker.io/library/busybox:latest",
                        "index.docker.io/library/busybox": "index.docker.io/library/busybox",
                        "busybox@DIGEST": f"busybox@{digest}"},
            "user": {"user/x": "user/x", "docker.io/user/x:latest": "docker.io/user/x:latest",
                     "user/x@DIGEST": f"user/x@{digest}"},
        }[key]
        return {**named, "ID": image_id, "ID hex": image_id[7:], "ID prefix": image_id[7:19],
                "sha256:ID prefix": image_id[:19],
                "shortest prefix": image_id[7:7 + MIN_ID_PREFIX]}


PULLED_AS = {"app": "{host}/pk/resolve:v1", "busybox": "busybox", "user": "user/x"}


@pytest.fixture(scope="module")
def rig(bridge: None, image_layouts: dict[str, Path], busybox_rootfs: Path,
        tmp_path_factory: pytest.TempPathFactory) -> Iterator[Rig]:
    require_isolated()
    require_binary("runc")
    require_binary("conmon")
    tmp = tmp_path_factory.mktemp("resolve")
    (tmp / "registry").mkdir()
    proc, host = start_registry(tmp / "registry")
    harness = None
    try:
        layer = Layer().tree(busybox_rootfs).bytes()
        images = {key: _runnable(layer, key) for key in PULLED_AS}
        images["amb1"], images["amb2"] = _sharing_an_id_prefix()
        for key, path in (("app", "pk/resolve:v1"), ("busybox", "library/busybox:latest"),
                          ("user", "user/x:latest"), ("amb1", "pk/amb:1"),
                          ("amb2", "pk/amb:2")):
            push_image(tmp, images[key], f"{host}/{path}")
        hosts = RegistryHosts.load(mirror_hosts(tmp / "certs.d", host, ("docker.io",)))
        harness = Harness(tmp / "cri", image_layouts, registry_hosts=hosts)
        yield Rig(harness, host, images)
    finally:
        if harness is not None:
            harness.close()
        stop_registry(proc)


@pytest.fixture
def pulled(rig: Rig) -> Iterator[Rig]:
    """The app, busybox and user/x images pulled; the store as the harness made it after."""
    for key, ref in PULLED_AS.items():
        assert rig.pull(ref.format(host=rig.host)) == rig.id(key)
    yield rig
    for key in (*PULLED_AS, "amb1", "amb2"):
        rig.remove(rig.id(key))
    assert sorted(rig.listed()) == sorted(rig.h.store.get(n).config.digest
                                          for n in (BUSYBOX, PAUSE))


@pytest.fixture
def pod(rig: Rig) -> Iterator[tuple[str, Any]]:
    cfg = pod_config()
    sid = rig.h.rt.RunPodSandbox(pb.RunPodSandboxRequest(config=cfg)).pod_sandbox_id
    yield sid, cfg
    rig.h.rt.RemovePodSandbox(pb.RemovePodSandboxRequest(pod_sandbox_id=sid))


def _code(call: Any) -> tuple[grpc.StatusCode, str]:
    with pytest.raises(grpc.RpcError) as info:
        call()
    return info.value.code(), info.value.details()


def _create(rig: Rig, pod: tuple[str, Any], image: str) -> str:
    sid, cfg = pod
    ccfg = container_config(f"c-{uuid.uuid4().hex[:8]}", image=image)
    return str(rig.h.rt.CreateContainer(pb.CreateContainerRequest(
        pod_sandbox_id=sid, config=ccfg, sandbox_config=cfg), timeout=60).container_id)


def test_the_repo_digest_imagestatus_reports_finds_the_image(pulled: Rig) -> None:
    """The issue as seen from outside: the string in repo_digests resolves."""
    rig = pulled
    by_tag = rig.status(f"{rig.host}/pk/resolve:v1")
    repo_digest = f"{rig.host}/pk/resolve@{rig.digest('app')}"
    assert list(by_tag.repo_digests) == [repo_digest]
    listed = {i.id: i for i in rig.h.img.ListImages(pb.ListImagesRequest()).images}
    assert list(listed[rig.id("app")].repo_digests) == [repo_digest]
    assert rig.status(repo_digest).id == rig.id("app")
    assert list(rig.status("busybox").repo_digests) == [
        f"docker.io/library/busybox@{rig.digest('busybox')}"]


@pytest.mark.parametrize("key", ["app", "busybox", "user"])
def test_every_form_resolves_on_every_path(pulled: Rig, pod: tuple[str, Any], key: str) -> None:
    rig = pulled
    image_id = rig.id(key)
    created = []
    for form, text in rig.forms(key).items():
        status = rig.status(text)
        assert status.id == image_id, form
        assert len(status.repo_digests) == 1 and status.repo_digests[0].endswith(
            "@" + rig.digest(key)), form
        assert rig.listed(text) == [image_id], form
        cid = _create(rig, pod, text)
        created.append(cid)
        st = rig.h.rt.ContainerStatus(pb.ContainerStatusRequest(container_id=cid)).status
        assert (st.state, st.image_id) == (pb.CONTAINER_CREATED, image_id), form
    # the container runs the image the form named
    rig.h.rt.StartContainer(pb.StartContainerRequest(container_id=created[0]))
    res = rig.h.rt.ExecSync(pb.ExecSyncRequest(container_id=created[0],
                                               cmd=["sh", "-c", "echo $PK_IMAGE"], timeout=10))
    assert (res.exit_code, res.stdout) == (0, f"{key}\n".encode())
    for cid in created:
        rig.h.rt.RemoveContainer(pb.RemoveContainerRequest(container_id=cid))


@pytest.mark.parametrize("form", ["REPO:TAG", "REPO@DIGEST", "REPO:TAG@DIGEST", "ID", "ID hex",
                                  "ID prefix", "sha256:ID prefix", "shortest prefix"])
def test_remove_in_every_form_is_idempotent_and_a_repull_finds_it_again(pulled: Rig,
                                                                        form: str) -> None:
    rig = pulled
    forms = rig.forms("app")
    others = sorted(set(rig.listed()) - {rig.id("app")})
    rig.remove(forms[form])
    assert sorted(rig.listed()) == others  # that image only, every name of it
    for text in forms.values():
        assert not rig.status(text).id, text
        assert rig.listed(text) == [], text
        rig.remove(text)  # already gone: success in every form
    rig.remove(forms[form])
    assert rig.pull(forms["REPO:TAG"]) == rig.id("app")
    for text in forms.values():
        assert rig.status(text).id == rig.id("app"), text


def test_removing_the_short_name_form(pulled: Rig) -> None:
    rig = pulled
    rig.remove("busybox")
    assert not rig.status(f"docker.io/library/busybox@{rig.digest('busybox')}").id
    assert rig.status("user/x").id == rig.id("user")
    rig.remove("busybox")
    assert rig.pull("docker.io/library/busybox") == rig.id("busybox")
    assert rig.status(rig.id("busybox")[7:19]).repo_tags == ["docker.io/library/busybox:latest"]


def test_what_names_no_image(pulled: Rig, pod: tuple[str, Any]) -> None:
    """Absent images: ImageStatus empty, ListImages empty, RemoveImage succeeds (and removes
    nothing), CreateContainer NOT_FOUND naming the field."""
    rig = pulled
    before = sorted(rig.listed())
    app_id = rig.id("app")
    for text in ("0" * 64, "sha256:" + "0" * 64, "0" * MIN_ID_PREFIX, f"sha256:{'0' * 12}",
                 f"{rig.host}/pk/resolve:nosuch", f"{rig.host}/pk/nothing@sha256:{'0' * 64}",
                 f"{rig.host}/other/repo@{rig.digest('app')}",  # the digest, another repo
                 app_id[7:7 + MIN_ID_PREFIX - 1], app_id[:7 + MIN_ID_PREFIX - 1],  # too short
                 "sha256:"):
        assert not rig.status(text).id, text
        assert rig.listed(text) == [], text
        rig.remove(text)
        code, details = _code(lambda t=text: _create(rig, pod, t))
        assert code == grpc.StatusCode.NOT_FOUND, text
        assert details.startswith(f"config.image.image {text!r}"), details
    assert sorted(rig.listed()) == before


@pytest.mark.parametrize("text", ["Not A/Ref!!", "{host}/pk/resolve@sha256:abc",
                                  "docker.io/UPPER/case", "busybox@{id}"])
def test_what_can_name_no_image_is_invalid_argument(pulled: Rig, pod: tuple[str, Any],
                                                    text: str) -> None:
    rig = pulled
    text = text.format(host=rig.host, id=rig.id("app")[7:])
    before = sorted(rig.listed())
    spec = pb.ImageSpec(image=text)
    for call in (lambda: rig.h.img.ImageStatus(pb.ImageStatusRequest(image=spec)),
                 lambda: rig.h.img.RemoveImage(pb.RemoveImageRequest(image=spec)),
                 lambda: rig.h.img.ListImages(pb.ListImagesRequest(
                     filter=pb.ImageFilter(image=spec))),
                 lambda: rig.h.img.PullImage(pb.PullImageRequest(image=spec)),
                 lambda: _create(rig, pod, text)):
        code, details = _code(call)
        assert code == grpc.StatusCode.INVALID_ARGUMENT, details
        assert repr(text) in details and "invalid" in details, details
    assert sorted(rig.listed()) == before
    containers = rig.h.rt.ListContainers(pb.ListContainersRequest(
        filter=pb.ContainerFilter(pod_sandbox_id=pod[0]))).containers
    assert list(containers) == []


def test_pull_of_an_id_is_invalid_argument(rig: Rig) -> None:
    code, details = _code(lambda: rig.pull("0" * 64))
    assert code == grpc.StatusCode.INVALID_ARGUMENT
    assert "a 64-hex string is an ID, not a repository name" in details


def test_an_ambiguous_prefix_is_refused_with_the_count(pulled: Rig, pod: tuple[str, Any],
                                                      ) -> None:
    rig = pulled
    ids = [rig.id("amb1"), rig.id("amb2")]
    for n, key in enumerate(("amb1", "amb2"), 1):
        assert rig.pull(f"{rig.host}/pk/amb:{n}") == rig.id(key)
    prefix = ids[0][7:7 + MIN_ID_PREFIX]
    assert ids[1].startswith("sha256:" + prefix)
    spec = pb.ImageSpec(image=prefix)
    for call in (lambda: rig.h.img.ImageStatus(pb.ImageStatusRequest(image=spec)),
                 lambda: rig.h.img.RemoveImage(pb.RemoveImageRequest(image=spec)),
                 lambda: rig.h.img.ListImages(pb.ListImagesRequest(
                     filter=pb.ImageFilter(image=spec))),
                 lambda: _create(rig, pod, prefix)):
        code, details = _code(call)
        assert code == grpc.StatusCode.INVALID_ARGUMENT, details
        assert f"image ID prefix {prefix!r} is ambiguous: 2 images" in details, details
    assert set(ids) <= set(rig.listed())  # nothing removed
    # one digit past the common part names one image
    common = next(i for i in range(64) if ids[0][7 + i] != ids[1][7 + i])
    for image_id in ids:
        assert rig.status(image_id[7:8 + common]).id == image_id
        assert rig.status("sha256:" + image_id[7:8 + common]).id == image_id
