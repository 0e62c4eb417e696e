"""``podkit image`` sub-commands driven through ``podkit.cli.main``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from image.imagebuild import BuiltImage, write_docker_save, write_layout
from podkit.cli import main


def test_import_ls_inspect_rm_prune(sample: BuiltImage, tmp_path: Path,
                                    capsys: pytest.CaptureFixture[str]) -> None:
    root = str(tmp_path / "state")
    layout = write_layout(tmp_path / "l", [(sample.descriptor, "v1")], sample.blobs)
    assert main(["image", "import", "--root", root, str(layout), "localhost/cli/app"]) == 0
    out = capsys.readouterr()
    assert out.out.split() == ["localhost/cli/app:v1", sample.descriptor["digest"]]
    save = write_docker_save(tmp_path / "s.tar", sample, ["cli/saved:1"])
    assert main(["image", "import", "--root", root, str(save)]) == 0
    # the progress line ends at its total (it stopped at 1/2 blobs for docker archives)
    assert capsys.readouterr().err.rstrip().endswith("3/3 blobs")
    assert main(["image", "ls", "--root", root]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["REFERENCE", "DIGEST", "PLATFORM", "SIZE"]
    assert [line.split()[0] for line in lines[1:]] == ["docker.io/cli/saved:1",
                                                        "localhost/cli/app:v1"]
    assert "linux/" in lines[2]
    assert main(["image", "inspect", "--root", root, "localhost/cli/app:v1"]) == 0
    [record] = json.loads(capsys.readouterr().out)
    assert record["image_config"]["cmd"] == ["/app/hello"]
    assert record["image_config"]["user"] == "app"
    assert len(record["chain_ids"]) == 3
    assert record["digest"] == sample.descriptor["digest"]
    assert main(["image", "ls", "-o", "json", "--root", root]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert [i["name"] for i in listed] == ["docker.io/cli/saved:1", "localhost/cli/app:v1"]
    assert set(listed[1]) == {"name", "id", "digest", "manifest_digest", "platform", "size",
                              "created"}
    assert listed[1]["id"] == record["id"] and listed[1]["size"] == record["size"]
    assert main(["--root", root, "image", "ls", "-q"]) == 0  # the global --root, before
    assert capsys.readouterr().out.split() == [i["name"] for i in listed]
    assert main(["image", "inspect", "-o", "yaml", "--root", root, "cli/saved:1"]) == 0
    assert "name: docker.io/cli/saved:1" in capsys.readouterr().out
    assert main(["image", "rm", "--root", root, "localhost/cli/app:v1"]) == 0
    assert capsys.readouterr().out.strip() == "localhost/cli/app:v1"
    assert main(["image", "rm", "--root", root, "localhost/cli/app:v1"]) == 3  # not found
    assert "localhost/cli/app:v1 not found" in capsys.readouterr().err
    assert main(["image", "rm", "--prune", "--root", root, "cli/saved:1"]) == 0
    assert "removed 8 blobs" in capsys.readouterr().out
    assert main(["image", "prune", "--root", root]) == 0
    assert "removed 0 blobs" in capsys.readouterr().out
    assert main(["image", "ls", "-q", "--root", root]) == 0
    assert capsys.readouterr().out == ""


def test_inspect_and_rm_take_every_form(sample: BuiltImage, tmp_path: Path,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    """The forms the store resolves (podkit.image.lookup), from the command line."""
    root = str(tmp_path / "state")
    layout = write_layout(tmp_path / "l", [(sample.descriptor, "v1")], sample.blobs)
    for name in ("localhost/cli/app:v1", "busybox:latest"):
        assert main(["image", "import", "-q", "--root", root, str(layout), name]) == 0
    capsys.readouterr()
    image_id = sample.manifest["config"]["digest"]
    digest = sample.descriptor["digest"]
    for form in (image_id, image_id[7:], image_id[7:19], f"localhost/cli/app@{digest}",
                 f"localhost/cli/app:v1@{digest}", "busybox", "docker.io/library/busybox"):
        assert main(["image", "inspect", "--root", root, form]) == 0, form
        [record] = json.loads(capsys.readouterr().out)
        assert record["id"] == image_id, form
    assert main(["image", "inspect", "--root", root, image_id[7:12]]) == 3  # 5 digits: no guess
    assert f"image docker.io/library/{image_id[7:12]}:latest not found" in \
        capsys.readouterr().err
    assert main(["image", "inspect", "--root", root, "Not A/Ref!!"]) == 2
    assert "invalid reference 'Not A/Ref!!'" in capsys.readouterr().err
    assert main(["image", "rm", "--root", root, f"busybox@{digest}"]) == 0
    assert capsys.readouterr().out.split() == ["docker.io/library/busybox:latest"]
    assert main(["image", "import", "-q", "--root", root, str(layout), "busybox:latest"]) == 0
    capsys.readouterr()
    assert main(["image", "rm", "--root", root, image_id[7:19]]) == 0  # the ID: every name
    assert capsys.readouterr().out.split() == ["docker.io/library/busybox:latest",
                                               "localhost/cli/app:v1"]
    assert main(["image", "rm", "--root", root, image_id[7:19]]) == 3
    assert f"nor an image ID starting with {image_id[7:19]}" in capsys.readouterr().err


def test_import_error_exit_code(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["image", "import", "--root", str(tmp_path), str(tmp_path / "nope")]) == 1
    err = capsys.readouterr().err
    assert "no such file" in err and len(err.splitlines()) == 1


@pytest.mark.integration
def test_pull_with_progress(registry: str, sample: BuiltImage, tmp_path: Path,
                            capsys: pytest.CaptureFixture[str]) -> None:
    from podkit.image import ImageStore, import_image, push

    src = ImageStore(tmp_path / "src")
    ref = f"{registry}/podkit/cli:v1"
    import_image(src, write_layout(tmp_path / "l", [(sample.descriptor, "v1")], sample.blobs),
                 ref)
    push(src, ref)
    assert main(["image", "pull", "--root", str(tmp_path / "dst"), ref]) == 0
    out = capsys.readouterr()
    assert out.out.split() == [ref, sample.descriptor["digest"]]
    assert f"pull {ref} [" in out.err and "4/4 blobs" in out.err


def test_listing_an_empty_root_makes_nothing(tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    root = tmp_path / "none"
    assert main(["image", "ls", "-o", "json", "--root", str(root)]) == 0
    assert json.loads(capsys.readouterr().out) == []
    assert main(["image", "inspect", "--root", str(root), "app:1"]) == 3
    assert capsys.readouterr().err == f"podkit: image 'app:1': not found (no image store in " \
        f"{root})\n"
    assert not root.exists()
