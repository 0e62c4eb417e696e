"""The CDI cache loads the spec models and parsers with its first spec file: none before, and
a failed import (out of file descriptors) is that file's error until a later refresh."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

_SCRIPT = """
import errno, json, sys
from podkit import cdi

class OutOfFds:
    def find_spec(self, name, path=None, target=None):
        if name == "podkit.cdi.spec":
            raise OSError(errno.EMFILE, "Too many open files")
        return None

empty = cdi.Cache([sys.argv[2]], auto_refresh=False)
out = {"empty": "podkit.cdi.spec" in sys.modules or "yaml" in sys.modules}
sys.meta_path.insert(0, OutOfFds())
c = cdi.Cache([sys.argv[1]], auto_refresh=False)
out["failing"] = [c.list_devices(), c.errors]
sys.meta_path.pop(0)
c.refresh()
out["after"] = [c.list_devices(), c.errors, "yaml" in sys.modules]
print(json.dumps(out))
"""


def test_the_first_spec_file_loads_the_parsers(tmp_path: Path) -> None:
    specs, empty = tmp_path / "cdi", tmp_path / "empty"
    specs.mkdir()
    empty.mkdir()
    (specs / "a.json").write_text(json.dumps({
        "cdiVersion": "0.3.0", "kind": "v.com/c",
        "devices": [{"name": "a", "containerEdits": {"env": ["A=1"]}}]}))
    proc = subprocess.run([sys.executable, "-c", _SCRIPT, str(specs), str(empty)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["empty"] is False
    devices, errors = out["failing"]
    assert devices == []
    assert errors == {str(specs / "a.json"): [
        f'failed to load CDI Spec: failed to read CDI Spec "{specs / "a.json"}": '
        "Too many open files"]}
    assert out["after"] == [["v.com/c=a"], {}, False]  # a JSON spec needs no PyYAML
