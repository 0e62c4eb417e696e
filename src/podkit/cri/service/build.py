"""``build_service``: the CRI service of a node config (what ``podkit cri serve`` runs).

The manager is ``podkit.node.build_manager(config, name="cri", watch_cdi=True)`` (pod files in
``ROOT/cri``, records and runtime state in ``STATE/cri``; CNI configs of ``network.conf_dir``,
``/etc/cni/net.d`` for ``cri serve``, loaded again while missing; CDI specs watched), the
image store the one under ``image_root``, the streaming server on ``cri.streaming_address``,
pulls through ``[registry]``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from podkit import image
from podkit.cri.service.adapter import manager_streaming
from podkit.cri.service.core import CRIService
from podkit.errors import InvalidArgumentError
from podkit.node import NodeConfig, build_manager
from podkit.sandbox import SandboxManager

__all__ = ["CRI_MANAGER", "build_service"]

CRI_MANAGER = "cri"
"""The name of the CRI server's manager: its dirs are ``ROOT/cri`` and ``STATE/cri``."""


def _address(text: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    if not host or not port.isdigit():
        raise InvalidArgumentError(f"cri.streaming_address {text!r}: want HOST:PORT")
    return host.strip("[]"), int(port)


def build_service(config: NodeConfig, manager: SandboxManager | None = None, *,
                  service: type[CRIService] = CRIService, **kw: Any) -> CRIService:
    """The CRI service of ``config``, over ``manager`` (default: the node's ``cri`` manager,
    made here): a ``service`` (a subclass of yours) made with the config's settings and ``kw``
    (hooks, ``status_codes``, ...: see :class:`CRIService`). Not started: recover the manager
    (``manager.recover()``), then ``serve(config.cri.socket, service)``. What was made here
    goes with the service: its ``close()`` (which ``Server.stop()`` calls) stops the streaming
    server and closes the manager it made (not a ``manager`` given).
    """
    if config.network.name == "host":
        raise InvalidArgumentError(
            "network.name 'host': a CRI pod asks for the node's network itself "
            "(hostNetwork); want builtin, none, a network of network.conf_dir, or ''")
    hosts = image.RegistryHosts.load(config.registry.hosts_dir)  # a bad file fails first
    auth = image.AuthFile(config.registry.auth_file or None)
    made = manager is None
    mgr = build_manager(config, name=CRI_MANAGER, watch_cdi=True) if manager is None \
        else manager
    streaming = None
    try:
        if mgr.images is None:
            raise InvalidArgumentError("the manager has no image store (build it with pause)")
        if config.cri.streaming_address:
            streaming = manager_streaming(mgr, _address(config.cri.streaming_address))
        pause = mgr.pause
        made_service = service(
            mgr, mgr.images, streaming=streaming,
            pause_image=pause.image if pause is not None else "",
            runtime_handler=Path(config.runtime.name).name, registry_hosts=hosts, auth=auth,
            runtime_name=config.cri.runtime_name, **kw)
        if made:
            made_service.closers.append(mgr.close)
        if streaming is not None:
            made_service.closers.append(streaming.stop)
    except BaseException:
        if streaming is not None:
            streaming.stop()
        if made:
            mgr.close()
        raise
    return made_service
