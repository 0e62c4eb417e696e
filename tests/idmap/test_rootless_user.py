"""podkit.idmap.user_holder as a real unprivileged user: real newuidmap/newgidmap (Debian's
``uidmap``), the real kernel, a user made for the test.

Each test makes a user ``pkrl<random>`` (``useradd``, no home, its own group, no subordinate
IDs from useradd itself), and for the subordinate-ID case appends one 65536-ID range to
``/etc/subuid`` (by name) and ``/etc/subgid`` (by uid, so both ways of matching are used),
chosen not to overlap any line already there. It runs a small Python program as that user
(``setpriv --reuid --regid --init-groups``, an empty environment) which starts the holder,
prints its ``uid_map``/``gid_map``, joins the namespace with ``nsenter`` and runs ``id`` there.
Afterwards (also when the test fails): every process of the user is looked for (asserted to be
none) and SIGKILLed by PID, the user and its group are deleted (``userdel``), and
``/etc/subuid`` and ``/etc/subgid`` are written back byte for byte as they were.

Which Python runs as the user: the checkout's venv may sit on an interpreter under a root-only
home (pyenv in ``/root``), which the user cannot execute. The module makes a venv of its own
under ``/var/tmp`` (mode 0755) from the first interpreter that runs as the user as it runs as
root, of ``/usr/bin/python3`` and this process's (``sys.executable``; a pyenv one under
``/root`` fails the check: it starts as the user, but on the system's libpython). The venv is
made ``--without-pip`` (no network needed) and holds copies of what ``podkit.idmap`` imports:
``src/podkit`` from the checkout (the checkout itself may not be readable by the user) and
``attrs``/``attr`` from this process's site-packages. ``podkit.idmap`` imports nothing else;
the test asserts the program ran.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import pwd
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from podkit import idmap
from support import REPO, require, require_binary, require_root

pytestmark = pytest.mark.integration

SUBUID, SUBGID = Path("/etc/subuid"), Path("/etc/subgid")
SIZE = 65536
_ENV = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL": "C"}


def _runs_as(python: str, uid: int) -> bool:
    """Whether ``uid`` runs ``python`` as root does (a Python >= 3.11). Not just "it runs": a
    pyenv interpreter whose ``lib`` the user cannot read starts with the system's libpython
    instead, a different Python."""
    probe = "import sys; assert sys.version_info >= (3, 11); print(sys.version, sys.prefix)"
    as_root = subprocess.run([python, "-c", probe], capture_output=True, env=_ENV, timeout=30)
    as_user = subprocess.run(["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups",
                              python, "-c", probe], capture_output=True, env=_ENV, timeout=30)
    return as_root.returncode == as_user.returncode == 0 and as_root.stdout == as_user.stdout


@pytest.fixture(scope="module")
def user_python() -> Iterator[str]:
    """A Python interpreter any user can run, with podkit (this checkout's) and attrs."""
    require_root()
    require_binary("setpriv")
    nobody = pwd.getpwnam("nobody").pw_uid
    bases = [p for p in ("/usr/bin/python3", os.path.realpath(sys.executable))
             if os.path.exists(p) and _runs_as(p, nobody)]
    require(bases, f"no Python >= 3.11 that uid {nobody} may execute ({sys.executable}, "
                   f"/usr/bin/python3)")
    top = Path(tempfile.mkdtemp(prefix="podkit-rootless-py-", dir="/var/tmp"))
    try:
        top.chmod(0o755)
        venv = top / "venv"
        subprocess.run([bases[0], "-m", "venv", "--without-pip", str(venv)], check=True,
                       env=_ENV, timeout=120)
        python = str(venv / "bin" / "python")
        site = subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()"
                               "['purelib'])"], check=True, capture_output=True, text=True,
                              env=_ENV).stdout.strip()
        ignore = shutil.ignore_patterns("__pycache__")
        shutil.copytree(REPO / "src" / "podkit", Path(site) / "podkit", ignore=ignore)
        for name in ("attr", "attrs"):
            spec = importlib.util.find_spec(name)
            assert spec is not None and spec.submodule_search_locations
            shutil.copytree(spec.submodule_search_locations[0], Path(site) / name, ignore=ignore)
        subprocess.run(["chmod", "-R", "a+rX", str(top)], check=True, env=_ENV)
        yield python
    finally:
        shutil.rmtree(top, ignore_errors=True)


@dataclass
class User:
    name: str
    uid: int
    gid: int
    start: int | None  # its subordinate range (uids and gids alike), or None
    work: Path  # a directory of the user's own


def _taken() -> list[tuple[int, int]]:
    spans = []
    for f in (SUBUID, SUBGID):
        spans += [(s.start, s.end) for s in idmap.read_subids(f)]
    return spans


def _free_range(uid: int, gid: int) -> int:
    taken = _taken()
    for _ in range(1000):
        start = secrets.randbelow(2**31 // SIZE - 16) * SIZE + 2**30
        end = start + SIZE
        if all(end <= a or b <= start for a, b in taken) and not (
                start <= uid < end or start <= gid < end):
            return start
    raise AssertionError("no free subordinate range")


def _processes_of(uids: range) -> dict[int, str]:
    """PID -> command of every process whose real, effective or saved uid is in ``uids``."""
    found = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        with contextlib.suppress(OSError):
            status = Path(f"/proc/{entry}/status").read_text()
            ids = next(line for line in status.splitlines() if line.startswith("Uid:"))
            if any(int(v) in uids for v in ids.split()[1:]):
                found[int(entry)] = Path(f"/proc/{entry}/comm").read_text().strip()
    return found


@contextlib.contextmanager
def made_user(subordinate: bool) -> Iterator[User]:
    require_root()
    for tool in ("useradd", "userdel", "setpriv", "nsenter"):
        require_binary(tool)
    saved = {f: f.read_bytes() if f.exists() else None for f in (SUBUID, SUBGID)}
    name = f"pkrl{secrets.token_hex(4)}"
    subprocess.run(["useradd", "--no-create-home", "--home-dir", "/nonexistent", "--shell",
                    "/usr/sbin/nologin", "--user-group", "-K", "SUB_UID_COUNT=0", "-K",
                    "SUB_GID_COUNT=0", name], check=True, env=_ENV, timeout=60)
    entry = pwd.getpwnam(name)
    user = User(name, entry.pw_uid, entry.pw_gid, None, Path())
    work = Path(tempfile.mkdtemp(prefix=f"podkit-{name}-", dir="/var/tmp"))
    left: dict[int, str] = {}
    try:
        work.chmod(0o700)
        os.chown(work, user.uid, user.gid)
        user.work = work
        if subordinate:
            user.start = _free_range(user.uid, user.gid)
            with SUBUID.open("a") as out:
                out.write(f"{name}:{user.start}:{SIZE}\n")
            with SUBGID.open("a") as out:
                out.write(f"{user.uid}:{user.start}:{SIZE}\n")
        yield user
    finally:
        ids = range(user.uid, user.uid + 1)
        left = _processes_of(ids)
        if user.start is not None:
            left |= _processes_of(range(user.start, user.start + SIZE))
        for pid in left:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        shutil.rmtree(work, ignore_errors=True)
        subprocess.run(["userdel", name], env=_ENV, timeout=60, capture_output=True)
        for f, data in saved.items():
            if data is None:
                f.unlink(missing_ok=True)
            else:
                f.write_bytes(data)
        for f, data in saved.items():
            assert (f.read_bytes() if f.exists() else None) == data, f"{f} not restored"
        with pytest.raises(KeyError):
            pwd.getpwnam(name)
    assert left == {}, f"processes of {name} left running: {left}"


# What runs as the user: start the holder, read its maps, join the namespace with nsenter.
PROGRAM = textwrap.dedent("""
    import json, os, subprocess, sys
    from podkit import idmap

    work, nsenter_args = sys.argv[1], sys.argv[2].split()
    m = idmap.user_map()
    out = {"note": m.note, "describe": m.describe(), "me": os.getuid()}
    with idmap.user_holder(m) as h:
        out["pid"] = h.pid
        for name in ("uid_map", "gid_map", "setgroups"):
            with open(f"/proc/{h.pid}/{name}") as f:
                out[name] = f.read()
        script = f"id -u; id -g; touch {work}/f; chown 1000:1000 {work}/f && echo chowned"
        joined = subprocess.run(["nsenter", "--user", *nsenter_args, "--target", str(h.pid),
                                 "--", "sh", "-c", script],
                                capture_output=True, text=True, timeout=30)
        out["inside"], out["inside_err"] = joined.stdout.split(), joined.stderr
        os.close(idmap.open_user_namespace(h.path("user")))
    out["holder_gone"] = not os.path.exists(f"/proc/{out['pid']}")
    out["dirs"] = str(idmap.default_dirs(env={"HOME": "/nonexistent", "TMPDIR": work}))
    print(json.dumps(out))
""")

# As the user, a map with a range /etc/subuid does not give it: newuidmap refuses.
REFUSED = textwrap.dedent("""
    import json, os
    from podkit import idmap

    m = idmap.user_map()
    bad = idmap.rootless_map(m.user, m.uid, m.gid,
                             idmap.parse_subids(f"{m.user}:3000000000:10", "/etc/subuid"), ())
    before = set(os.listdir("/proc"))
    try:
        idmap.user_holder(bad)
    except idmap.IDMapError as e:
        print(json.dumps({"error": str(e), "children": [
            p for p in set(os.listdir("/proc")) - before
            if p.isdigit() and os.path.exists(f"/proc/{p}/status")
            and f"PPid:\\t{os.getpid()}\\n" in open(f"/proc/{p}/status").read()]}))
""")


def run_as(user: User, python: str, program: str, *args: str) -> dict[str, object]:
    env = {"PATH": "/usr/bin:/bin:/usr/sbin:/sbin", "HOME": "/nonexistent", "LC_ALL": "C"}
    done = subprocess.run(["setpriv", f"--reuid={user.uid}", f"--regid={user.gid}",
                           "--init-groups", "--", "env", "-i", *(f"{k}={v}" for k, v in
                                                                 env.items()),
                           python, "-c", program, *args],
                          capture_output=True, text=True, timeout=120, env=_ENV,
                          stdin=subprocess.DEVNULL)
    assert done.returncode == 0 and done.stdout.strip(), \
        f"exit {done.returncode}\nstdout: {done.stdout}\nstderr: {done.stderr}"
    result: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def _map(text: object) -> list[list[int]]:
    assert isinstance(text, str)
    return [[int(v) for v in line.split()] for line in text.splitlines()]


def test_a_user_with_subordinate_ids_gets_them_through_newuidmap_and_newgidmap(
        user_python: str) -> None:
    require_binary("newuidmap")
    require_binary("newgidmap")
    with made_user(subordinate=True) as user:
        out = run_as(user, user_python, PROGRAM, str(user.work), "")
        assert out["me"] == user.uid and out["note"] == ""
        assert _map(out["uid_map"]) == [[0, user.uid, 1], [1, user.start, SIZE]]
        assert _map(out["gid_map"]) == [[0, user.gid, 1], [1, user.start, SIZE]]
        assert out["setgroups"] == "allow\n"
        # nsenter becomes the namespace's root; a chown to container ID 1000 is a
        # subordinate host ID
        assert out["inside"] == ["0", "0", "chowned"], out["inside_err"]
        st = os.stat(user.work / "f")
        assert user.start is not None
        assert (st.st_uid, st.st_gid) == (user.start + 999, user.start + 999)
        assert out["holder_gone"] is True
        assert f"runtime='{user.work}/podkit-run-{user.uid}'" in str(out["dirs"])
        assert os.stat(user.work / f"podkit-run-{user.uid}").st_uid == user.uid


def test_a_user_without_subordinate_ids_gets_only_its_own_id_and_the_note(
        user_python: str) -> None:
    with made_user(subordinate=False) as user:
        # setgroups is denied, so nsenter keeps the caller's credentials (its own ID, root
        # inside) instead of calling setgroups/setuid
        out = run_as(user, user_python, PROGRAM, str(user.work), "--preserve-credentials")
        assert _map(out["uid_map"]) == [[0, user.uid, 1]]
        assert _map(out["gid_map"]) == [[0, user.gid, 1]]
        assert out["setgroups"] == "deny\n"
        assert out["inside"] == ["0", "0"]  # no "chowned": container ID 1000 is not mapped
        assert "Invalid argument" in str(out["inside_err"])
        assert f"{user.name} has no subordinate uids and gids" in str(out["note"])
        assert "chown to other users" in str(out["note"]) and out["holder_gone"] is True


def test_a_range_newuidmap_refuses_names_the_tool_exit_user_and_ranges_and_leaves_nothing(
        user_python: str) -> None:
    require_binary("newuidmap")
    with made_user(subordinate=True) as user:
        out = run_as(user, user_python, REFUSED)
        error = str(out["error"])
        assert error.startswith("newuidmap ") and " 0 " in error, error
        assert f"0 {user.uid} 1 1 3000000000 10 for user {user.name} (uid {user.uid}, gid " \
               f"{user.gid}); subordinate uids 3000000000:10 (/etc/subuid:1)" in error
        assert ": exited 1: newuidmap: " in error, error
        assert out["children"] == []
