"""ALL-capabilities and privileged containers under a reduced bounding set, with real runc.

A helper process drops CAP_SYS_TIME and CAP_SYSLOG from its bounding set
(``prctl(PR_CAPBSET_DROP)``; its effective set keeps them) and then runs a pod through
SandboxManager with the shared test bridge: a container adding ALL and a privileged one
must start, and their pid 1 must hold exactly what the helper can grant.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from podkit import oci

from ._pods import leaked, leftovers, make_manager, snapshot

pytestmark = pytest.mark.integration

DROPPED = ("CAP_SYS_TIME", "CAP_SYSLOG")  # needed by none of runc, conmon, the CNI plugins
TESTS = Path(__file__).resolve().parents[1]

CHILD = textwrap.dedent("""
    import ctypes, json, sys
    from pathlib import Path

    import attrs

    base, rootfs, dropped = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3:]
    libc = ctypes.CDLL(None, use_errno=True)
    from podkit import oci
    for name in dropped:
        if libc.prctl(24, oci.KNOWN_CAPABILITIES.index(name), 0, 0, 0) != 0:  # PR_CAPBSET_DROP
            sys.exit(f"prctl(PR_CAPBSET_DROP, {name}): errno {ctypes.get_errno()}")

    from podkit.pods.config import (Capability, LinuxContainerConfig,
        LinuxContainerSecurityContext, NamespaceMode, NamespaceOption)
    from sandbox._pods import ctr_config, make_manager, pod_config

    def security(**kw):
        return LinuxContainerConfig(security_context=LinuxContainerSecurityContext(
            namespace_options=NamespaceOption(pid=NamespaceMode.CONTAINER), **kw))

    def caps(text):
        return {k: v.strip() for k, _, v in (ln.partition(":") for ln in text.splitlines())
                if k in ("CapBnd", "CapEff", "CapPrm")}

    m = make_manager(base, rootfs)
    out = {"current": oci.current_capabilities(),
           "self": caps(Path("/proc/self/status").read_text())}
    try:
        cfg = pod_config()
        sb = m.run_sandbox(attrs.evolve(cfg, linux=attrs.evolve(cfg.linux, security_context=(
            attrs.evolve(cfg.linux.security_context, privileged=True)))))
        for name, linux in (
            ("all", security(capabilities=Capability(add_capabilities=["ALL"]))),
            ("privileged", security(privileged=True)),
        ):
            cid = m.create_container(sb.id, ctr_config(rootfs, name, ["sleep", "600"], linux=linux))
            m.start_container(cid)
            res = m.exec_sync(cid, ["cat", "/proc/1/status"], timeout=20)
            out[name] = caps(res.stdout.decode())
    finally:
        m.remove_all()
        m.close()
    print(json.dumps(out))
""")


def _mask(names: list[str]) -> str:
    return f"{sum(1 << oci.KNOWN_CAPABILITIES.index(n) for n in names):016x}"


def test_all_and_privileged_containers_get_what_a_reduced_bounding_set_allows(
    bridge: None, rootfs: Path, tmp_path: Path
) -> None:
    base = tmp_path / "m"
    before = snapshot()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(TESTS), *sys.path])}
    try:
        proc = subprocess.run([sys.executable, "-c", CHILD, str(base), str(rootfs), *DROPPED],
                              capture_output=True, text=True, timeout=180, env=env)
    finally:  # whatever the helper left, a manager on the same dirs removes it
        m = make_manager(base, rootfs)
        cgroups = [s.cgroups_path for s in m.list_sandboxes()] + [
            c.cgroups_path for c in m.list_containers()]
        m.remove_all()
        m.close()
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    expected = [c for c in oci.current_capabilities() if c not in DROPPED]
    assert out["current"] == expected
    assert set(DROPPED).isdisjoint(out["current"])
    assert int(out["self"]["CapEff"], 16) != int(_mask(expected), 16)  # prctl kept CapEff
    for name in ("all", "privileged"):
        assert out[name] == {"CapBnd": _mask(expected), "CapEff": _mask(expected),
                             "CapPrm": _mask(expected)}, name
    assert leftovers(base, m, cgroups) == []
    assert leaked(before) == []
