"""CRI ``runtime.v1`` messages to podkit models and back.

The podkit models (``SandboxConfig``, ``ContainerConfig`` and their parts, see
``podkit.sandbox``/``podkit.container``) mirror the CRI field for field in snake_case, so most of
the work is mechanical; what is not:

- ``Int64Value`` wrappers become ``int | None``; unset sub-messages become ``None`` where the
  model has an optional field and the model's default where it does not (``linux``,
  ``security_context``, ``namespace_options``), and going back those are always sent, as the
  kubelet does.
- ``KeyValue.value`` is bytes on the wire and ``str`` in podkit (UTF-8); ``CDI_devices`` become
  the device names; ``ContainerConfig.image`` is the ``ImageSpec.image`` reference; enums map by
  number, except ``stop_signal``: the model holds the Linux signal number (``signal.SIGTERM``,
  0 for ``RUNTIME_DEFAULT``), the CRI its own ``Signal`` enum (``SIGTERM`` is 23 there); an empty
  ``masked_paths`` or ``readonly_paths`` means "the runtime's defaults" (``None``), as in
  containerd.
- The deprecated ``seccomp_profile_path``/``apparmor_profile`` strings are read when the newer
  ``SecurityProfile`` field is unset. Windows parts and the ``ImageSpec`` details other than the
  reference are ignored (a Linux runtime has no use for them); image volumes (``Mount.image``)
  are refused, since podkit cannot honour them.

Every error is a ``ConversionError`` naming the CRI field path, for example
``config.linux.security_context.namespace_options.pid``. Filters become the manager's
``SandboxFilter``/``ContainerFilter``; the manager's records (``Sandbox``, ``Container``) and
statistics go back as CRI statuses, list items and stats (one way: they hold more than the CRI).

The modules, one job each: ``fields`` (the error and field helpers), ``signals``, ``security``,
``resources``, ``sandbox`` and ``container`` (configs both ways), ``records`` (records and stats
to CRI), ``filters``.
"""

from podkit.cri.convert.container import container_config_from_cri, container_config_to_cri
from podkit.cri.convert.fields import ConversionError
from podkit.cri.convert.filters import (
    container_filter_from_cri,
    container_filter_to_cri,
    pod_sandbox_filter_from_cri,
    pod_sandbox_filter_to_cri,
)
from podkit.cri.convert.records import (
    container_stats_to_cri,
    container_status_to_cri,
    container_to_cri,
    pod_sandbox_stats_to_cri,
    pod_sandbox_status_to_cri,
    pod_sandbox_to_cri,
)
from podkit.cri.convert.resources import linux_resources_from_cri, linux_resources_to_cri
from podkit.cri.convert.sandbox import sandbox_config_from_cri, sandbox_config_to_cri
from podkit.cri.convert.signals import cri_signal, signal_number

__all__ = [
    "ConversionError",
    "container_config_from_cri",
    "container_config_to_cri",
    "container_filter_from_cri",
    "container_filter_to_cri",
    "container_stats_to_cri",
    "container_status_to_cri",
    "container_to_cri",
    "cri_signal",
    "linux_resources_from_cri",
    "linux_resources_to_cri",
    "pod_sandbox_filter_from_cri",
    "pod_sandbox_filter_to_cri",
    "pod_sandbox_stats_to_cri",
    "pod_sandbox_status_to_cri",
    "pod_sandbox_to_cri",
    "sandbox_config_from_cri",
    "sandbox_config_to_cri",
    "signal_number",
]
