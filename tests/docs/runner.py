"""Run the examples of one docs page as a reader would, in a private net, mount and PID
namespace: ``unshare ... python tests/docs/runner.py PAGE``.

The runner mounts its private dirs (fixtures.TMPFS, OVERLAYS, TMPFS_INSIDE), makes the
fixtures the page's blocks need, runs the blocks in order (Python ones in one interpreter,
shell ones in ``sh -e``), force-deletes the containers the page left and prints
``RESULTS {block id: error text or null}`` as its last line (its /tmp hides the caller's).
Everything else it made vanishes with its namespaces.
"""

from __future__ import annotations

import contextlib
import json
import linecache
import os
import shutil
import signal
import subprocess
import sys
import traceback
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(TESTS))

from docs import fixtures  # noqa: E402
from docs.blocks import REPO, Block, page_blocks  # noqa: E402

RESULTS = "RESULTS "
# Seconds; a block still running then fails, and the cleanup still runs.
BLOCK_TIMEOUT = int(os.environ.get("PODKIT_DOCS_BLOCK_TIMEOUT", "90"))
ENV_PATH = f"{REPO}/.venv/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def _mount(*args: str) -> None:
    subprocess.run(["mount", *args], check=True)


def private_dirs() -> None:
    """tmpfs over fixtures.TMPFS, tmpfs-backed overlays over fixtures.OVERLAYS."""
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
    # a checkout under one of them (a CI clone in /tmp) is bound back over its tmpfs
    hidden = any(Path(d) in Path(REPO).parents for d in fixtures.TMPFS)
    holder = Path("/dev/shm/.podkit-docs-repo")
    if hidden:
        holder.mkdir(exist_ok=True)
        _mount("--bind", str(REPO), str(holder))
    for d in fixtures.TMPFS:
        _mount("-t", "tmpfs", "-o", "mode=755", "podkit-docs", d)
    if hidden:
        Path(REPO).mkdir(parents=True)
        _mount("--bind", str(holder), str(REPO))
        subprocess.run(["umount", str(holder)], check=True)
        holder.rmdir()
    uppers = Path("/run/.docs-overlays")
    for d in fixtures.OVERLAYS:
        upper, work = uppers / d.strip("/") / "upper", uppers / d.strip("/") / "work"
        upper.mkdir(parents=True)
        work.mkdir()
        _mount("-t", "overlay", "-o", f"lowerdir={d},upperdir={upper},workdir={work}",
               "podkit-docs", d)
    for d in fixtures.TMPFS_INSIDE:
        Path(d).mkdir(parents=True, exist_ok=True)
        _mount("-t", "tmpfs", "-o", "mode=755", "podkit-docs", d)
    Path("/tmp").chmod(0o1777)
    fixtures.CWD.mkdir()


def _timeout(block: Block) -> int:
    """Seconds the block may run: a whole example script twice a block's."""
    return BLOCK_TIMEOUT * 2 if block.script else BLOCK_TIMEOUT


def _too_long(signum: int, frame: object) -> None:
    raise TimeoutError(f"the block ran longer than {_running_limit[0]} s")


_running_limit = [BLOCK_TIMEOUT]  # the time limit of the block running now


def run_python(block: Block, scope: dict[str, object]) -> None:
    name = f"<{block.id}>"
    linecache.cache[name] = (len(block.code), None, block.code.splitlines(True), name)
    exec(compile(block.code, name, "exec"), scope)


def run_shell(block: Block) -> None:
    """A sh/console block in ``sh -e``; an example script as a file, in a copy of its
    directory at the same place under the working directory."""
    argv = ["sh", "-e", "-c", block.shell_script()]
    if block.script:
        shutil.copytree(REPO / block.page.rpartition("/")[0], block.page.rpartition("/")[0])
        argv = ["sh", "-e", block.page]
    out = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                         timeout=_timeout(block))
    sys.stdout.write(out.stdout + out.stderr)
    if out.returncode:
        raise RuntimeError(f"exit status {out.returncode}:\n{out.stderr[-3000:]}")
    printed = {" ".join(line.split()) for line in out.stdout.splitlines()}
    if missing := [line for line in block.expected_output() if line not in printed]:
        raise AssertionError(f"the commands did not print {missing}")


def _example_traceback(block: Block) -> str:
    """The traceback from the example's own frames on (the runner's are noise)."""
    text = traceback.format_exc()
    start = text.find(f'File "<{block.id}>"')
    return text if start < 0 else "Traceback (from the example):\n  " + text[start:]


def container_cgroups() -> set[str]:
    """The pids (v1) or unified (v2) cgroup dirs of the processes in this PID namespace that
    are not the runner's own: where the page's containers live (all of them are ours)."""
    own = Path("/proc/self/cgroup").read_text()
    unified = Path("/sys/fs/cgroup/cgroup.controllers").exists()
    found = set()
    for proc in Path("/proc").iterdir():
        try:
            text = (proc / "cgroup").read_text() if proc.name.isdigit() else own
        except OSError:
            continue
        for line in set(text.splitlines()) - set(own.splitlines()):
            _, controllers, path = line.split(":", 2)
            if "pids" in controllers.split(","):
                found.add(f"/sys/fs/cgroup/pids{path}")
            elif unified and not controllers:
                found.add(f"/sys/fs/cgroup{path}")
    return found


def force_delete_containers() -> list[str]:
    """``runc``/``crun delete --force`` every container left in a runtime root (a dir named
    runc or crun) under the private dirs: that removes its cgroup, which is the host's."""
    left = []
    for top in ("/run", "/tmp", "/var/lib/podkit", "/var/lib/mycri"):
        for dirpath, dirnames, _ in os.walk(top):
            if os.path.basename(dirpath) not in ("runc", "crun"):
                continue
            for cid in dirnames:
                left.append(cid)
                subprocess.run([os.path.basename(dirpath), "--root", dirpath, "delete",
                                "--force", cid], capture_output=True)
            dirnames.clear()
    return left


def main(page: str) -> int:
    """Run ``page`` (a path in the repository, or any absolute path: read before the private
    dirs hide it)."""
    blocks = page_blocks(REPO / page)
    page = blocks[0].page if blocks else page
    signal.signal(signal.SIGALRM, _too_long)
    os.environ["PATH"] = ENV_PATH
    os.umask(0o022)
    private_dirs()
    ctx = fixtures.Context()
    results: dict[str, str | None] = {}
    try:
        for fixture in fixtures.for_page(page):
            print(f"=== fixture: {fixture.name}", flush=True)
            fixture.make(ctx)
        os.chdir(ctx.cwd)
        scope: dict[str, object] = {"__name__": "__main__"}
        cgroups: set[str] = set()
        for block in blocks:
            if not block.runs:
                continue
            print(f"=== {block.id}", flush=True)
            _running_limit[0] = _timeout(block)
            signal.alarm(_running_limit[0])
            try:
                with contextlib.redirect_stderr(sys.stdout):
                    if block.lang == "python":
                        run_python(block, scope)
                    else:
                        run_shell(block)
                results[block.id] = None
            except BaseException:
                results[block.id] = _example_traceback(block)
            finally:
                signal.alarm(0)
            sys.stdout.flush()
            cgroups |= container_cgroups()
    finally:
        os.chdir("/")
        print(f"=== container cgroups seen: {len(cgroups)}", flush=True)
        left = force_delete_containers()
        if left:
            print(f"=== force-deleted containers left by the page: {left}", flush=True)
        results[page + "#cleanup"] = "\n".join(
            f"cgroup left behind: {d}" for d in sorted(cgroups) if os.path.isdir(d)) or None
        for stop, proc in ctx.procs:
            stop(proc)
        print(RESULTS + json.dumps(results), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
