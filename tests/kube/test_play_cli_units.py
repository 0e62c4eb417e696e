"""``kube play`` CLI pieces without a pod: the host DNS it passes to the mapping (the kubelet's
``--resolv-conf``) and how a Default/ClusterFirst pod's DNS comes out of it; SIGTERM as
Ctrl-C."""

from __future__ import annotations

import argparse
import os
import signal
import time
from pathlib import Path

import pytest

from podkit._cli.dirs import node_config
from podkit._cli.kube import RESOLV_CONF, host_dns, plans, sigterm_interrupts
from podkit.errors import InvalidArgumentError
from podkit.sandbox import DNSConfig

POD = """\
apiVersion: v1
kind: Pod
metadata: {name: dns}
spec:
  dnsPolicy: %s
  dnsConfig:
    nameservers: [192.0.2.53]
    searches: [pod.test]
    options: [{name: ndots, value: "2"}]
  containers: [{name: a, image: busybox:1}]
"""


def _args(tmp_path: Path, policy: str, resolv: str) -> argparse.Namespace:
    (tmp_path / "pod.yaml").write_text(POD % policy)
    return argparse.Namespace(files=[str(tmp_path / "pod.yaml")], configmap=[], secret=[],
                              log_root=str(tmp_path / "logs"), resolv_conf=resolv,
                              root=str(tmp_path / "root"))


def test_host_dns_reads_a_resolv_conf(tmp_path: Path) -> None:
    f = tmp_path / "resolv.conf"
    f.write_text("nameserver 192.0.2.1\nsearch host.test\noptions ndots:1 edns0\n")
    assert host_dns(str(f)) == DNSConfig(servers=("192.0.2.1",), searches=("host.test",),
                                         options=("ndots:1", "edns0"))
    assert host_dns("") is None


def test_a_missing_resolv_conf_is_an_error_naming_it(tmp_path: Path) -> None:
    with pytest.raises(InvalidArgumentError, match=r"--resolv-conf .*/nope: no such file"):
        host_dns(str(tmp_path / "nope"))
    with pytest.raises(InvalidArgumentError, match=r"--resolv-conf .*: cannot read it"):
        host_dns(str(tmp_path))  # a directory


def test_the_default_resolv_conf_is_the_hosts() -> None:
    assert RESOLV_CONF == "/etc/resolv.conf"


@pytest.mark.parametrize("policy", ["Default", "ClusterFirst"])
def test_default_and_cluster_first_merge_the_hosts_dns(tmp_path: Path, policy: str) -> None:
    f = tmp_path / "resolv.conf"
    f.write_text("nameserver 192.0.2.1\nsearch host.test\noptions ndots:1 edns0\n")
    args = _args(tmp_path, policy, str(f))
    (plan,) = plans(args, node_config(args))
    dns = plan.sandbox.dns_config
    assert dns is not None
    assert list(dns.servers) == ["192.0.2.1", "192.0.2.53"]
    assert list(dns.searches) == ["host.test", "pod.test"]
    assert sorted(dns.options) == ["edns0", "ndots:2"]


def test_policy_none_ignores_the_host(tmp_path: Path) -> None:
    f = tmp_path / "resolv.conf"
    f.write_text("nameserver 192.0.2.1\n")
    args = _args(tmp_path, "None", str(f))
    (plan,) = plans(args, node_config(args))
    assert plan.sandbox.dns_config is not None
    assert list(plan.sandbox.dns_config.servers) == ["192.0.2.53"]


def test_sigterm_interrupts_once_then_lets_the_clean_up_finish() -> None:
    before = signal.getsignal(signal.SIGTERM)
    cleaned = False
    with pytest.raises(KeyboardInterrupt), sigterm_interrupts():
        try:
            os.kill(os.getpid(), signal.SIGTERM)
            for _ in range(1000):  # the handler runs between bytecodes, at the latest here
                time.sleep(0)
            pytest.fail("SIGTERM did not interrupt")
        finally:  # the clean-up play runs: a second SIGTERM does not cut it short
            os.kill(os.getpid(), signal.SIGTERM)
            for _ in range(1000):
                time.sleep(0)
            cleaned = True
    assert cleaned and signal.getsignal(signal.SIGTERM) is before


def test_strict_and_lenient_exclude_each_other() -> None:
    from podkit.cli import build_parser

    parser = build_parser()
    args = parser.parse_args(["kube", "play", "a.yaml"])
    assert (args.strict, args.lenient) == (False, False)  # strict names by default
    assert parser.parse_args(["kube", "play", "a.yaml", "--lenient"]).lenient
    with pytest.raises(SystemExit) as err:
        parser.parse_args(["kube", "play", "a.yaml", "--strict", "--lenient"])
    assert err.value.code == 2


def test_plans_warns_of_each_unknown_field_when_lenient(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = _args(tmp_path, "Default", "")
    Path(args.files[0]).write_text((POD % "Default").replace("dnsConfig", "dnsConfg"))
    config = node_config(args)
    with pytest.raises(InvalidArgumentError, match="did you mean 'dnsConfig'"):
        plans(args, config)
    (plan,) = plans(args, config, lenient=True)
    assert capsys.readouterr().err == (
        f"podkit: warning: {args.files[0]}:6:3: spec.dnsConfg: unknown field, did you mean "
        "'dnsConfig'?\n")
    assert plan.sandbox.dns_config is None  # the misspelt dnsConfig was ignored
