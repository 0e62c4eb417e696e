"""Drive OCI runtimes (runc, crun): lifecycle, IO, exit supervision, typed errors.

``Runc(binary="crun")`` drives crun through the same API; differences between the runtimes
(JSON shapes, error texts, missing commands) are normalised here.
"""

from podkit.runtime.base import (
    ExecResult,
    ExitStatus,
    Runtime,
    RuntimeState,
    Status,
    signal_number,
)
from podkit.runtime.bundle import Bundle
from podkit.runtime.conmon import Attachment, Conmon, ConmonContainer, parse_detach_keys
from podkit.runtime.console import Console, ConsoleSocket
from podkit.runtime.errors import (
    AlreadyExistsError,
    NotFoundError,
    NotRunningError,
    OCIRuntimeError,
    RuntimeTimeoutError,
    UnsupportedOperationError,
    parse_runtime_error,
)
from podkit.runtime.io import IO, FileIO, InheritIO, NullIO, PipeIO
from podkit.runtime.logs import (
    CRILogEntry,
    CRILogLine,
    CRILogWriter,
    parse_cri_log_line,
    read_cri_log,
)
from podkit.runtime.monitor import Monitor, Subscription, default_monitor
from podkit.runtime.resource_check import (
    UnavailableResourceError,
    check_bundle_resources,
    check_resources,
    resource_problems,
)
from podkit.runtime.runc import (
    Event,
    ExecProcess,
    Runc,
    RuntimeVersion,
    Stats,
    StopResult,
    TopResults,
    UnsupportedFieldWarning,
    check_spec,
)
from podkit.runtime.supervise import (
    AttachStream,
    ConmonSupervisor,
    InProcessAttachment,
    InProcessSupervisor,
    Supervisor,
)

# The issue names the base ``RuntimeError``; it shadows the builtin only inside this package.
RuntimeError = OCIRuntimeError

__all__ = [
    "IO",
    "AlreadyExistsError",
    "AttachStream",
    "Attachment",
    "Bundle",
    "CRILogEntry",
    "CRILogLine",
    "CRILogWriter",
    "Conmon",
    "ConmonContainer",
    "ConmonSupervisor",
    "Console",
    "ConsoleSocket",
    "Event",
    "ExecProcess",
    "ExecResult",
    "ExitStatus",
    "FileIO",
    "InProcessAttachment",
    "InProcessSupervisor",
    "InheritIO",
    "Monitor",
    "NotFoundError",
    "NotRunningError",
    "NullIO",
    "OCIRuntimeError",
    "PipeIO",
    "Runc",
    "Runtime",
    "RuntimeError",
    "RuntimeState",
    "RuntimeTimeoutError",
    "RuntimeVersion",
    "Stats",
    "Status",
    "StopResult",
    "Subscription",
    "Supervisor",
    "TopResults",
    "UnavailableResourceError",
    "UnsupportedFieldWarning",
    "UnsupportedOperationError",
    "check_bundle_resources",
    "check_resources",
    "check_spec",
    "default_monitor",
    "parse_cri_log_line",
    "parse_detach_keys",
    "parse_runtime_error",
    "read_cri_log",
    "resource_problems",
    "signal_number",
]
