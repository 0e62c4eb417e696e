"""teamcri: a team's own CRI server on podkit, with three policies (docs/cri-extending.md).

- Refuse privileged containers, containers adding CAP_SYS_ADMIN (or ALL) and host-network
  pods: PERMISSION_DENIED with the reason.
- Inject the CDI devices the pod annotation ``example.com/cdi-devices`` names (comma
  separated, e.g. ``vendor.com/gpu=0,vendor.com/gpu=1``) into every container of the pod.
- Set ``POD_IP`` in every container.

    python examples/policy_cri.py --pause-image localhost/pause:3.10 --root /var/lib/teamcri
    crictl --runtime-endpoint unix:///run/teamcri/cri.sock version    # RuntimeName: teamcri
"""

from __future__ import annotations

import argparse
import signal
from pathlib import Path

import attrs

from podkit import cdi, cni, oci
from podkit.container import ContainerConfig, KeyValue
from podkit.cri import CRIService, serve
from podkit.errors import PermissionDeniedError
from podkit.image import ImageStore
from podkit.runtime import Runc
from podkit.sandbox import NamespaceMode, PauseConfig, Sandbox, SandboxConfig, SandboxManager

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
    p.add_argument("--socket", default="/run/teamcri/cri.sock")
    p.add_argument("--root", default="/var/lib/teamcri", type=Path)
    p.add_argument("--pause-image", required=True, help="an image in the root's store")
    p.add_argument("--cni-conf-dir", default="/etc/cni/net.d")
    p.add_argument("--cni-bin-dir", default="/usr/lib/cni")
    p.add_argument("--cdi-spec-dir", default="/etc/cdi")
    args = p.parse_args()
    state, store = args.root / "state", ImageStore(args.root)
    client = cni.CNI(plugin_dirs=[args.cni_bin_dir], cache_dir=str(state / "cni"))
    manager = SandboxManager(
        args.root / "pods", state, Runc(root=state / "runc"),
        cni.Networks.from_dir(client, args.cni_conf_dir, loopback=True),
        cdi=cdi.Cache([args.cdi_spec_dir]), pause=PauseConfig(image=args.pause_image),
        images=store, netns_prefix="teamcri-")
    manager.recover()
    service = CRIService(manager, store, pause_image=args.pause_image, runtime_name="teamcri",
                         admit_pod=[no_host_network], admit_container=[no_privileges],
                         mutate_container=[pod_cdi_devices, pod_ip])
    server = serve(args.socket, service)
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: server.stop())
    print(f"teamcri: serving on {server.address}", flush=True)
    server.wait()
    manager.close()


if __name__ == "__main__":
    main()
