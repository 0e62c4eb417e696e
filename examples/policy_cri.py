"""teamcri: a team's own CRI server on podkit, with three policies (docs/cri-extending.md).

- Refuse privileged containers, containers adding CAP_SYS_ADMIN (or ALL) and host-network
  pods: PERMISSION_DENIED with the reason.
- Inject the CDI devices the pod annotation ``example.com/cdi-devices`` names (comma
  separated, e.g. ``vendor.com/gpu=0,vendor.com/gpu=1``) into every container of the pod.
- Set ``POD_IP`` in every container.

    python examples/policy_cri.py --config teamcri.toml    # a podkit node config (docs/config.md)
    crictl --runtime-endpoint unix:///run/teamcri/cri.sock version    # RuntimeName: teamcri
"""

from __future__ import annotations

import argparse
import signal

import attrs

from podkit import oci
from podkit.container import ContainerConfig, KeyValue
from podkit.cri import CRI_MANAGER, build_service, serve
from podkit.errors import PermissionDeniedError
from podkit.node import build_manager, load_config
from podkit.sandbox import NamespaceMode, Sandbox, SandboxConfig

CDI_ANNOTATION = "example.com/cdi-devices"


def no_host_network(pod: SandboxConfig) -> None:
    if pod.linux.security_context.namespace_options.network == NamespaceMode.NODE:
        raise PermissionDeniedError(f"pod {pod.metadata.name}: host network is not allowed")


def no_privileges(ctr: ContainerConfig, pod: Sandbox) -> None:
    sc, name = ctr.linux.security_context, ctr.metadata.name
    if sc.privileged:
        raise PermissionDeniedError(f"container {name}: privileged is not allowed")
    caps = sc.capabilities
    added = [*caps.add_capabilities, *caps.add_ambient_capabilities] if caps else []
    # podkit's own rule for names (CAP_ optional, any case): what the policy sees is granted
    if {oci.capability_name(c) for c in added if c.strip()} & {"CAP_SYS_ADMIN", "CAP_ALL"}:
        raise PermissionDeniedError(f"container {name}: CAP_SYS_ADMIN is not allowed")


def pod_cdi_devices(ctr: ContainerConfig, pod: Sandbox) -> ContainerConfig:
    named = [n.strip() for n in pod.config.annotations.get(CDI_ANNOTATION, "").split(",")]
    return attrs.evolve(ctr, cdi_devices=[*ctr.cdi_devices, *filter(None, named)])


def pod_ip(ctr: ContainerConfig, pod: Sandbox) -> ContainerConfig:
    return attrs.evolve(ctr, envs=[*ctr.envs, KeyValue(key="POD_IP", value=pod.ip)])


def main() -> None:
    p = argparse.ArgumentParser(description="teamcri: a CRI server with the team's policies")
    p.add_argument("--config", help="a podkit node config file (TOML)")
    config = load_config(p.parse_args().config, defaults={
        "root": "/var/lib/teamcri", "cri.socket": "/run/teamcri/cri.sock",
        "netns_prefix": "teamcri-", "network.conf_dir": "/etc/cni/net.d",
    }, overrides={"cri.runtime_name": "teamcri"})
    manager = build_manager(config, name=CRI_MANAGER, watch_cdi=True)
    manager.recover()
    service = build_service(config, manager, admit_pod=[no_host_network],
                            admit_container=[no_privileges],
                            mutate_container=[pod_cdi_devices, pod_ip])
    service.closers.append(manager.close)  # Server.stop() closes the service, and so this
    server = serve(config.cri.socket, service)
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: server.stop())
    print(f"teamcri: serving on {server.address}", flush=True)
    server.wait()


if __name__ == "__main__":
    main()
