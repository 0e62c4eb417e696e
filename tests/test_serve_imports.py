"""``podkit cri serve`` starts without what it needs only later (issue 16): PyYAML and the CDI
spec models load with the first spec file, the registry client (http.client, email, urllib)
with the first pull, tomllib with the first hosts.toml; every public name stays importable."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from support import require_isolated

# What a CRI server over spec-less CDI dirs and no hosts.toml must not load before it serves.
LATER = ("yaml", "http.client", "urllib.request", "email.parser", "tomllib",
         "podkit.cdi.models", "podkit.cdi.spec", "podkit.cdi.edits", "podkit.cdi.yamldoc",
         "podkit.image.registry", "podkit.image.transport", "podkit.image.layout")

_SERVE_IMPORTS = """
import json, sys
from podkit import cli
from podkit._cli import cri, dirs
from podkit import cdi, cgroups, cni
from podkit.cri import build_service
from podkit.cri.service import claim_socket, manager_streaming, serve
from podkit.sandbox import pause_config
from podkit.image import AuthFile, ImageStore, RegistryHosts
from podkit.node import build_manager, load_config
from podkit.runtime import Runc
from podkit.sandbox import SandboxManager
import podkit.cri.service.adapter
load_config(env={})
print(json.dumps(sorted(sys.modules)))
"""


def _loaded(script: str) -> set[str]:
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         check=True).stdout
    return set(json.loads(out.splitlines()[-1]))


def test_the_imports_of_cri_serve_leave_out_what_comes_later() -> None:
    mods = _loaded(_SERVE_IMPORTS)
    assert {"podkit.cdi.cache", "podkit.image.store", "podkit.image.hosts"} <= mods
    assert sorted(set(LATER) & mods) == []


_FIRST_USE = """
import json, sys
from podkit import cdi, image
before = [m for m in ("podkit.cdi.spec", "podkit.image.registry") if m in sys.modules]
from podkit.cdi import spec
from podkit.image import registry
same = [cdi.Spec is spec.Spec, cdi.parse_spec is spec.parse_spec, image.pull is registry.pull,
        image.Registry is registry.Registry, "Spec" in dir(cdi), "pull" in dir(image)]
print(json.dumps([before, same]))
"""


def test_a_lazy_name_is_its_module_s_object_on_first_use() -> None:
    out = subprocess.run([sys.executable, "-c", _FIRST_USE], capture_output=True, text=True,
                         check=True).stdout
    before, same = json.loads(out)
    assert before == []
    assert same == [True] * 6


_REGISTRY = """
import json, sys
from podkit.image import Registry
r = Registry(retries=5, timeout=7.0)
before = "podkit.image.transport" in sys.modules or "http.client" in sys.modules
first = r.transport
print(json.dumps([before, "http.client" in sys.modules, first is r.transport,
                  [r.retries, r.timeout, first.retries]]))
"""


def test_a_registry_makes_its_transport_on_first_use() -> None:
    out = subprocess.run([sys.executable, "-c", _REGISTRY], capture_output=True, text=True,
                         check=True).stdout
    assert json.loads(out) == [False, True, True, [5, 7.0, 5]]


@pytest.mark.parametrize("package", ["podkit.cdi", "podkit.image"])
def test_no_lazy_name_is_also_a_submodule(package: str) -> None:
    """A submodule imported later would shadow a lazy name of the same spelling."""
    module = __import__(package, fromlist=["_"])
    here = Path(module.__file__).parent
    assert sorted(n for n in module._LAZY if (here / f"{n}.py").exists()) == []


def test_image_unpack_is_the_function_after_its_module_loads() -> None:
    out = subprocess.run([sys.executable, "-c", "import podkit.image.unpack, podkit.image.store\n"
                          "from podkit.image import unpack, ImageStore\n"
                          "print(callable(unpack), type(unpack).__name__, ImageStore.__name__)"],
                         capture_output=True, text=True, check=True).stdout
    assert out.split() == ["True", "function", "ImageStore"]


@pytest.mark.parametrize("package", ["podkit.cdi", "podkit.image"])
def test_an_unknown_name_is_an_attribute_error(package: str) -> None:
    module = __import__(package, fromlist=["_"])
    with pytest.raises(AttributeError, match=rf"module '{package}' has no attribute 'Nope'"):
        module.Nope  # noqa: B018
    with pytest.raises(ImportError, match="cannot import name 'Nope'"):
        exec(f"from {package} import Nope")


def test_a_yaml_spec_still_loads_and_refuses_duplicate_keys(tmp_path: Path) -> None:
    from podkit import cdi

    text = "cdiVersion: 0.5.0\nkind: v.com/c\ndevices:\n- name: a\n  containerEdits:\n" \
           "    env: [A=1]\n"
    spec = cdi.parse_spec(text)
    assert spec.devices[0].container_edits.env == ("A=1",)
    assert cdi.parse_spec(spec.to_yaml()) == spec
    with pytest.raises(cdi.SpecError, match="duplicate key 'kind'"):
        cdi.parse_spec(text + "kind: v.com/d\n")
    with pytest.raises(cdi.SpecError, match="failed to parse CDI Spec"):
        cdi.parse_spec("devices: [")


@pytest.mark.integration
def test_the_real_server_serves_before_loading_them(busybox_rootfs: Path,
                                                    tmp_path: Path) -> None:
    """Every module the real server imported up to "serving on" (``-X importtime`` prints
    each as it finishes), with a pod network config, CDI dirs and the streaming server on."""
    require_isolated()
    (tmp_path / "net.d").mkdir()
    (tmp_path / "net.d" / "10-lo.conflist").write_text(json.dumps(
        {"cniVersion": "1.0.0", "name": "lo", "plugins": [{"type": "loopback"}]}))
    (tmp_path / "cdi").mkdir()
    argv = [sys.executable, "-X", "importtime", "-m", "podkit.cli", "cri", "serve",
            "--socket", str(tmp_path / "cri.sock"), "--root", str(tmp_path / "root"),
            "--cni-conf-dir", str(tmp_path / "net.d"), "--cdi-spec-dir", str(tmp_path / "cdi"),
            "--registry-config-dir", str(tmp_path / "certs.d"),
            "--pause-image", str(busybox_rootfs)]
    proc = subprocess.Popen(argv, stderr=subprocess.PIPE, text=True)
    mods: set[str] = set()
    seen: list[str] = []
    try:
        assert proc.stderr is not None
        for line in proc.stderr:
            seen.append(line)
            if line.startswith("import time:"):
                mods.add(line.rsplit("|", 1)[1].strip())
            if "serving on" in line:
                break
    finally:
        proc.terminate()
        rest = proc.communicate(timeout=60)[1]
    assert any("serving on" in line for line in seen), "".join(seen[-20:]) + rest
    assert proc.returncode == 0, rest
    assert {"grpc", "podkit.cdi.cache", "podkit.cri.streaming"} <= mods
    assert sorted(set(LATER) & mods) == []
