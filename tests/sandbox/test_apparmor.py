"""Unit tests: ``podkit.apparmor`` (host side, with fake kernel files and a fake parser) and
AppArmor in ``build_container_spec`` (containerd's CRI rules).

Enabled host: unset or RuntimeDefault -> ``podkit-default`` (loaded first if the kernel does not
list it), none when privileged; Localhost -> the loaded profile named by ``localhost_ref``;
Unconfined -> none. Host without AppArmor: unset or Unconfined -> none, anything else refused.
The pause container never gets a profile.
"""

from __future__ import annotations

import os
import stat
import subprocess
import time
from pathlib import Path
from typing import Any

import attrs
import pytest
from google.protobuf import json_format

from podkit import apparmor, oci
from podkit.apparmor import DEFAULT_PROFILE, AppArmorError, AppArmorHost
from podkit.container import (
    ContainerConfigError,
    PodContext,
    build_container_spec,
    validate_container_config,
)
from podkit.cri import api_pb2 as pb
from podkit.cri import convert
from podkit.errors import InvalidArgumentError
from podkit.pods.config import (
    ContainerConfig,
    NamespaceMode,
    NamespaceOption,
    ProfileType,
    SandboxConfig,
    SecurityProfile,
)
from podkit.sandbox import SandboxConfigError, apparmor_opt, build_sandbox_spec
from support import require_binary

from . import _security as security
from ._security import (
    FILES,
    RUNTIME_DEFAULT,
    UNCONFINED,
    container_config,
    localhost,
    pod_config,
)

FIELD = "linux.security_context.apparmor"
DISABLED = f"^{FIELD}: AppArmor is not enabled on this host"

# A stand-in apparmor_parser: logs its arguments, keeps a copy of the profile it was given and
# "loads" it by listing the profile's name the way the kernel does.
FAKE_PARSER = """#!/bin/sh
echo "$@" >> {log}
[ "$1" = "-Kr" ] || exit 64
cp "$2" {saved}
name=$(sed -n 's/^profile \\([^ ]*\\) .*/\\1/p' "$2")
echo "$name (enforce)" >> {profiles}
"""


def script(path: Path, text: str) -> str:
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


@attrs.frozen
class Fake:
    """A fake AppArmor host under a temp dir, and the files to look at afterwards."""

    host: AppArmorHost
    dir: Path

    @property
    def parser_log(self) -> list[str]:
        log = self.dir / "parser.log"
        return log.read_text().splitlines() if log.exists() else []

    @property
    def saved(self) -> Path:
        return self.dir / "saved.profile"

    def profiles(self, *lines: str) -> None:
        (self.dir / "securityfs" / "profiles").write_text("".join(f"{x}\n" for x in lines))

    def with_parser(self, text: str) -> Fake:
        return attrs.evolve(self, host=attrs.evolve(
            self.host, parser=script(self.dir / "other-parser", text)))


def make_fake(tmp_path: Path, *, flag: str = "Y\n", profiles: tuple[str, ...] = ()) -> Fake:
    d = tmp_path / "aa"
    (d / "securityfs").mkdir(parents=True)
    (d / "policy").mkdir()
    (d / "tmp").mkdir()
    (d / "enabled").write_text(flag)
    (d / "current").write_text("unconfined\n")
    parser = script(d / "apparmor_parser", FAKE_PARSER.format(
        log=d / "parser.log", saved=d / "saved.profile", profiles=d / "securityfs" / "profiles"))
    host = AppArmorHost(
        enabled_file=str(d / "enabled"), profiles_file=str(d / "securityfs" / "profiles"),
        parser=parser, policy_dir=str(d / "policy"), current_file=str(d / "current"),
        tmp_dir=str(d / "tmp"), timeout=30,
    )
    fake = Fake(host, d)
    fake.profiles(*profiles)
    return fake


@pytest.fixture
def fake(tmp_path: Path) -> Fake:
    """An AppArmor host with a few profiles loaded (not podkit's default)."""
    return make_fake(tmp_path, profiles=("/usr/bin/man (enforce)", "k8s-nginx (enforce)",
                                         "my profile (complain)"))


@pytest.fixture
def disabled(tmp_path: Path) -> AppArmorHost:
    return make_fake(tmp_path, flag="N\n").host


# --- podkit.apparmor: the host ---------------------------------------------------------------


def test_enabled_needs_the_flag_and_securityfs(tmp_path: Path, fake: Fake) -> None:
    assert fake.host.enabled() and apparmor.enabled(fake.host)
    assert not make_fake(tmp_path / "n", flag="N\n").host.enabled()
    assert not make_fake(tmp_path / "e", flag="").host.enabled()
    assert not attrs.evolve(fake.host, enabled_file=str(tmp_path / "missing")).enabled()
    no_securityfs = attrs.evolve(fake.host, profiles_file=str(tmp_path / "none" / "profiles"))
    assert not no_securityfs.enabled()


def test_this_host_has_no_apparmor() -> None:
    """The machine the suite runs on has no AppArmor, which the builders rely on below."""
    if os.path.isdir("/sys/kernel/security/apparmor"):
        pytest.skip("this host has AppArmor")
    assert not apparmor.enabled()
    assert not apparmor.HOST.enabled()


def test_loaded_profiles_reads_the_kernel_list(fake: Fake) -> None:
    assert fake.host.loaded_profiles() == {"/usr/bin/man", "k8s-nginx", "my profile"}
    assert apparmor.loaded_profiles(fake.host) == fake.host.loaded_profiles()
    fake.profiles("", "podkit-default (enforce)", "odd (x) (kill)", "bare")
    assert fake.host.loaded_profiles() == {"podkit-default", "odd (x)", "bare"}
    assert fake.host.is_loaded("podkit-default") and not fake.host.is_loaded("podkit")


def test_loaded_profiles_unreadable_names_the_file(fake: Fake, tmp_path: Path) -> None:
    gone = attrs.evolve(fake.host, profiles_file=str(tmp_path / "aa" / "securityfs" / "nope"))
    with pytest.raises(AppArmorError, match=r"cannot read .* from .*securityfs/nope"):
        gone.loaded_profiles()


def test_default_profile_text_denies_what_docker_denies() -> None:
    text = apparmor.render_default_profile()
    assert f"profile {DEFAULT_PROFILE} flags=(attach_disconnected,mediate_deleted) {{" in text
    body = [line.strip() for line in text.splitlines()]
    for rule in ("deny mount,", "deny @{PROC}/* w,", "deny @{PROC}/sysrq-trigger rwklx,",
                 "deny @{PROC}/kcore rwklx,", "deny /sys/firmware/** rwklx,",
                 "deny /sys/kernel/security/** rwklx,", "deny /sys/fs/cg[^r]*/** wklx,",
                 "signal (receive) peer=unconfined,", "signal (receive) peer=runc,",
                 "signal (receive) peer=crun,",
                 f"signal (send,receive) peer={DEFAULT_PROFILE},",
                 f"ptrace (trace,tracedby,read,readby) peer={DEFAULT_PROFILE},",
                 "network,", "capability,", "file,", "umount,", "@{PROC}=/proc/"):
        assert rule in body, rule
    assert "abi <abi/3.0>," not in body and "#include <tunables/global>" not in body
    assert text.endswith("\n}\n")


def test_default_profile_text_follows_the_host(fake: Fake) -> None:
    policy = Path(fake.host.policy_dir)
    (policy / "abi").mkdir()
    (policy / "abi" / "3.0").write_text("")
    (policy / "tunables").mkdir()
    (policy / "tunables" / "global").write_text("")
    (policy / "abstractions").mkdir()
    (policy / "abstractions" / "base").write_text("")
    Path(fake.host.current_file).write_text("podkitd (enforce)\n")
    body = [line.strip() for line in fake.host.default_profile_text("pk-x").splitlines()]
    assert {"abi <abi/3.0>,", "#include <tunables/global>", "#include <abstractions/base>",
            "profile pk-x flags=(attach_disconnected,mediate_deleted) {",
            "signal (receive) peer=podkitd,", "signal (send,receive) peer=pk-x,"} <= set(body)
    assert "@{PROC}=/proc/" not in body
    Path(fake.host.current_file).unlink()  # unreadable: podkit is taken to run unconfined
    body = fake.host.default_profile_text().splitlines()
    assert not any("podkitd" in line for line in body)
    assert sum("signal (receive) peer=" in line for line in body) == 3


def test_default_profile_name_and_manager_peer_are_checked() -> None:
    with pytest.raises(InvalidArgumentError, match=r"profile name 'bad name'"):
        apparmor.render_default_profile("bad name")
    text = apparmor.render_default_profile(manager_profile='evil, deny" x')
    assert "evil" not in text
    assert "peer=/usr/bin/podkit//hat," in apparmor.render_default_profile(
        manager_profile="/usr/bin/podkit//hat")


def test_ensure_default_profile_loads_it_once(fake: Fake) -> None:
    assert fake.host.ensure_default_profile() is True
    assert fake.host.is_loaded(DEFAULT_PROFILE)
    [call] = fake.parser_log
    flag, path = call.split()
    assert flag == "-Kr" and Path(path).parent == Path(fake.host.tmp_dir or "")
    assert fake.saved.read_text() == fake.host.default_profile_text()
    assert not any(Path(fake.host.tmp_dir or "").iterdir())  # the temp file is gone
    assert apparmor.ensure_default_profile(host=fake.host) is False
    assert len(fake.parser_log) == 1


def test_ensure_default_profile_when_already_loaded_needs_no_parser(fake: Fake) -> None:
    fake.profiles(f"{DEFAULT_PROFILE} (enforce)")
    host = attrs.evolve(fake.host, parser=str(fake.dir / "no-such-parser"))
    assert host.ensure_default_profile() is False


def test_missing_parser_is_a_clear_error(fake: Fake) -> None:
    host = attrs.evolve(fake.host, parser=str(fake.dir / "no-such-parser"))
    with pytest.raises(AppArmorError,
                       match=r"parser '.*no-such-parser': not an executable file; .*install"):
        host.ensure_default_profile()
    by_name = attrs.evolve(fake.host, parser="pk-no-such-apparmor-parser")
    with pytest.raises(AppArmorError,
                       match=r"'pk-no-such-apparmor-parser': not found in /usr/local/sbin:"):
        by_name.find_parser()


def test_failing_parser_reports_status_and_output(fake: Fake) -> None:
    bad = fake.with_parser('#!/bin/sh\necho "AppArmor parser error at line 7" >&2\nexit 3\n')
    with pytest.raises(AppArmorError) as e:
        bad.host.ensure_default_profile()
    msg = str(e.value)
    assert f"loading AppArmor profile {DEFAULT_PROFILE!r}" in msg
    assert "-Kr" in msg and "status 3: AppArmor parser error at line 7" in msg
    assert not any(Path(fake.host.tmp_dir or "").iterdir())
    assert not bad.host.is_loaded(DEFAULT_PROFILE)


def test_parser_that_loads_nothing_is_caught(fake: Fake) -> None:
    silent = fake.with_parser("#!/bin/sh\nexit 0\n")
    with pytest.raises(AppArmorError, match=r"loaded by .* but is not listed in .*profiles"):
        silent.host.ensure_default_profile()


def _group_alive(pgid: int) -> list[int]:
    """Processes of process group ``pgid`` that are not (yet) dead."""
    alive = []
    for stat_file in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat_file.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[2]) == pgid and fields[0] not in ("Z", "X"):
            alive.append(int(stat_file.parent.name))
    return alive


def test_parser_timeout_kills_its_process_group(fake: Fake) -> None:
    pid_file = fake.dir / "parser.pid"
    slow = fake.with_parser(f"#!/bin/sh\necho $$ > {pid_file}\nsleep 600\necho done\n")
    host = attrs.evolve(slow.host, timeout=0.5)
    with pytest.raises(AppArmorError, match=r"did not finish within 0.5 s; its process group"):
        host.ensure_default_profile()
    pgid = int(pid_file.read_text())
    for _ in range(100):  # SIGKILL is delivered asynchronously; the sleep must go too
        if not _group_alive(pgid):
            break
        time.sleep(0.05)
    assert _group_alive(pgid) == []


@pytest.mark.integration
def test_default_profile_parses_with_the_real_apparmor_parser(tmp_path: Path) -> None:
    """The rendered profile is valid policy: apparmor_parser compiles it (-Q: no kernel load),
    with this host's includes and with none."""
    parser = require_binary("apparmor_parser")

    for host in (AppArmorHost(), AppArmorHost(policy_dir=str(tmp_path / "empty"))):
        path = tmp_path / "podkit-default"
        path.write_text(host.default_profile_text())
        out = subprocess.run([parser, "-Q", "-K", str(path)], capture_output=True, text=True,
                             timeout=120, check=False)
        assert out.returncode == 0, out.stderr


# --- apparmor_opt: containerd's rules --------------------------------------------------------


def applied(opt: oci.SpecOpt | None) -> str | None:
    if opt is None:
        return None
    spec = oci.generate(oci.default_spec("c1"), opt)
    return spec.process.apparmor_profile if spec.process else None


def test_apparmor_opt_on_an_apparmor_host(fake: Fake) -> None:
    h = fake.host
    assert applied(apparmor_opt(None, privileged=False, host=h)) == DEFAULT_PROFILE
    assert applied(apparmor_opt(RUNTIME_DEFAULT, privileged=False, host=h)) == DEFAULT_PROFILE
    assert len(fake.parser_log) == 1  # loaded by the first, listed for the second
    assert apparmor_opt(None, privileged=True, host=h) is None
    assert apparmor_opt(RUNTIME_DEFAULT, privileged=True, host=h) is None
    assert apparmor_opt(UNCONFINED, privileged=False, host=h) is None
    assert applied(apparmor_opt(localhost("k8s-nginx"), privileged=False, host=h)) == "k8s-nginx"
    assert applied(apparmor_opt(localhost("localhost/k8s-nginx"), privileged=False,
                                host=h)) == "k8s-nginx"
    assert applied(apparmor_opt(localhost("my profile"), privileged=True, host=h)) == "my profile"


def test_apparmor_opt_loads_the_default_only_when_applied(fake: Fake) -> None:
    opt = apparmor_opt(RUNTIME_DEFAULT, privileged=False, host=fake.host)
    assert opt is not None and fake.parser_log == []
    assert applied(opt) == DEFAULT_PROFILE and len(fake.parser_log) == 1


@pytest.mark.parametrize("profile, message", [
    (localhost("nginx"), rf"^{FIELD}.localhost_ref 'nginx': AppArmor profile 'nginx' is not "
                         r"loaded \(not listed in .*securityfs/profiles\)"),
    (localhost("localhost/nginx"), rf"^{FIELD}.localhost_ref 'localhost/nginx': AppArmor "
                                   "profile 'nginx' is not loaded"),
    (localhost(""), rf"^{FIELD}.localhost_ref: required for a Localhost profile"),
    (localhost("localhost/"), rf"^{FIELD}.localhost_ref: required"),
    (SecurityProfile(profile_type=ProfileType.RUNTIME_DEFAULT, localhost_ref="x"),
     rf"^{FIELD}.localhost_ref 'x': only valid with profile_type LOCALHOST"),
    (SecurityProfile(profile_type=ProfileType.UNCONFINED, localhost_ref="x"),
     rf"^{FIELD}.localhost_ref 'x': only valid"),
    (SecurityProfile(profile_type=7), rf"^{FIELD}.profile_type 7: unknown"),  # type: ignore[arg-type]
])
def test_apparmor_opt_bad_profiles_name_the_field(
    fake: Fake, profile: SecurityProfile, message: str
) -> None:
    with pytest.raises(ContainerConfigError, match=message):
        apparmor_opt(profile, privileged=False, host=fake.host, error=ContainerConfigError)
    with pytest.raises(SandboxConfigError, match=message):  # the default error kind
        apparmor_opt(profile, privileged=False, host=fake.host)


def test_apparmor_opt_on_a_host_without_apparmor(disabled: AppArmorHost) -> None:
    assert apparmor_opt(None, privileged=False, host=disabled) is None
    assert apparmor_opt(UNCONFINED, privileged=False, host=disabled) is None
    for profile in (RUNTIME_DEFAULT, localhost("k8s-nginx")):
        for privileged in (False, True):
            with pytest.raises(ContainerConfigError, match=DISABLED + r"; profile_type "
                               f"{profile.profile_type.name} needs it"):
                apparmor_opt(profile, privileged=privileged, host=disabled,
                             error=ContainerConfigError)


def test_apparmor_opt_refuses_early_when_the_default_cannot_be_loaded(fake: Fake) -> None:
    host = attrs.evolve(fake.host, parser=str(fake.dir / "no-such-parser"))
    with pytest.raises(AppArmorError, match="no-such-parser': not an executable file"):
        apparmor_opt(None, privileged=False, host=host)
    assert apparmor_opt(None, privileged=True, host=host) is None
    assert apparmor_opt(localhost("k8s-nginx"), privileged=False, host=host) is not None


# --- build_container_spec / validate_container_config ----------------------------------------


def pod(apparmor_profile: SecurityProfile | None = None, **sc: Any) -> SandboxConfig:
    return pod_config(apparmor=apparmor_profile, **sc)


def pod_context(privileged: bool = False) -> PodContext:
    return security.pod_context(pod(privileged=privileged))


def ctr(profile: SecurityProfile | None = None, **sc: Any) -> ContainerConfig:
    return container_config(apparmor=profile, **sc)


def container(config: ContainerConfig, tmp_path: Path, host: AppArmorHost | None,
              privileged_pod: bool = False) -> oci.Spec:
    return build_container_spec(config, pod_context(privileged_pod), id="c1",
                                rootfs=str(tmp_path), apparmor_host=host)


def wire_profile(spec: oci.Spec) -> str | None:
    process: dict[str, Any] = spec.to_dict()["process"]
    return process.get("apparmorProfile")


def test_container_gets_the_default_profile(fake: Fake, tmp_path: Path) -> None:
    for profile in (None, RUNTIME_DEFAULT):
        spec = container(ctr(profile), tmp_path, fake.host)
        assert wire_profile(spec) == DEFAULT_PROFILE
        assert oci.validate(spec) == []
    assert len(fake.parser_log) == 1 and fake.host.is_loaded(DEFAULT_PROFILE)


def test_container_privileged_gets_no_default_but_keeps_localhost(
    fake: Fake, tmp_path: Path
) -> None:
    for profile in (None, RUNTIME_DEFAULT, UNCONFINED):
        spec = container(ctr(profile, privileged=True), tmp_path, fake.host, privileged_pod=True)
        assert wire_profile(spec) is None
    spec = container(ctr(localhost("k8s-nginx"), privileged=True), tmp_path, fake.host,
                     privileged_pod=True)
    assert wire_profile(spec) == "k8s-nginx"  # after with_privileged, which clears it
    assert fake.parser_log == []


def test_container_localhost_and_unconfined(fake: Fake, tmp_path: Path) -> None:
    assert wire_profile(container(ctr(localhost("localhost/k8s-nginx")), tmp_path,
                                  fake.host)) == "k8s-nginx"
    assert wire_profile(container(ctr(UNCONFINED), tmp_path, fake.host)) is None
    assert fake.parser_log == []


def test_container_profile_is_independent_of_the_pods(fake: Fake, tmp_path: Path) -> None:
    context = PodContext(id="sb1", config=pod(localhost("k8s-nginx")), files=FILES,
                         namespace_paths={"pid": "/proc/42/ns/pid"})
    spec = build_container_spec(ctr(UNCONFINED), context, id="c1", rootfs=str(tmp_path),
                                apparmor_host=fake.host)
    assert wire_profile(spec) is None


def test_validate_refuses_a_profile_that_is_not_loaded(fake: Fake) -> None:
    with pytest.raises(ContainerConfigError,
                       match=rf"^{FIELD}.localhost_ref 'nginx': AppArmor profile 'nginx' is not"):
        validate_container_config(ctr(localhost("nginx")), pod_context(), apparmor_host=fake.host)
    validate_container_config(ctr(localhost("k8s-nginx")), pod_context(), apparmor_host=fake.host)
    assert fake.parser_log == []  # validating loads nothing


def test_validate_refuses_explicit_profiles_without_apparmor(
    disabled: AppArmorHost, tmp_path: Path
) -> None:
    for profile in (RUNTIME_DEFAULT, localhost("k8s-nginx")):
        with pytest.raises(ContainerConfigError, match=DISABLED):
            validate_container_config(ctr(profile), pod_context(), apparmor_host=disabled)
    for unset_or_unconfined in (None, UNCONFINED):
        spec = container(ctr(unset_or_unconfined), tmp_path, disabled)
        assert wire_profile(spec) is None


def test_failing_parser_fails_the_build(fake: Fake, tmp_path: Path) -> None:
    bad = fake.with_parser("#!/bin/sh\necho broken >&2\nexit 1\n")
    validate_container_config(ctr(), pod_context(), apparmor_host=bad.host)  # parser exists
    with pytest.raises(AppArmorError, match=r"exited with status 1: broken"):
        container(ctr(), tmp_path, bad.host)


def test_builders_default_to_this_host(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                       fake: Fake) -> None:
    monkeypatch.setattr(apparmor, "HOST", fake.host)
    assert wire_profile(container(ctr(), tmp_path, None)) == DEFAULT_PROFILE


def test_pause_never_gets_a_profile(fake: Fake, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(apparmor, "HOST", fake.host)
    for profile in (None, RUNTIME_DEFAULT, localhost("k8s-nginx"), localhost("missing")):
        config = pod(profile, namespace_options=NamespaceOption(network=NamespaceMode.NODE))
        spec = build_sandbox_spec(config, id="sb1", files=FILES)
        assert wire_profile(spec) is None
    assert fake.parser_log == []


# --- the CRI's fields reach the builders ------------------------------------------------------


def test_cri_apparmor_fields_feed_the_builders(fake: Fake, tmp_path: Path) -> None:
    def via_cri(sc: dict[str, Any]) -> oci.Spec:
        msg = json_format.ParseDict(
            {"metadata": {"name": "app"}, "image": {"image": "busybox"}, "command": ["true"],
             "linux": {"security_context": sc}},
            pb.ContainerConfig(),
        )
        config = convert.container_config_from_cri(msg)
        back = convert.container_config_to_cri(config)
        assert convert.container_config_from_cri(back) == config  # round trip keeps it
        return container(config, tmp_path, fake.host)

    assert wire_profile(via_cri({})) == DEFAULT_PROFILE
    assert wire_profile(via_cri({"apparmor": {"profile_type": "RuntimeDefault"}})) == \
        DEFAULT_PROFILE
    assert wire_profile(via_cri({"apparmor_profile": "runtime/default"})) == DEFAULT_PROFILE
    assert wire_profile(via_cri({"apparmor": {"profile_type": "Unconfined"}})) is None
    assert wire_profile(via_cri({"apparmor_profile": "unconfined"})) is None
    assert wire_profile(via_cri({"apparmor_profile": "localhost/k8s-nginx"})) == "k8s-nginx"
    assert wire_profile(via_cri({"apparmor": {"profile_type": "Localhost",
                                              "localhost_ref": "k8s-nginx"}})) == "k8s-nginx"
    with pytest.raises(ContainerConfigError, match=rf"^{FIELD}.localhost_ref 'nginx'"):
        via_cri({"apparmor_profile": "localhost/nginx"})
