"""Drive OCI runtimes (runc, crun): lifecycle, IO, exit supervision, typed errors.

``Runc(binary="crun")`` drives crun through the same API; differences between the runtimes
(JSON shapes, error texts, missing commands) are normalised here.
"""

from podkit.runtime.errors import (
    AlreadyExistsError,
    NotFoundError,
    NotRunningError,
    OCIRuntimeError,
    RuntimeTimeoutError,
    UnsupportedOperationError,
    parse_runtime_error,
)

# The issue names the base ``RuntimeError``; it shadows the builtin only inside this package.
RuntimeError = OCIRuntimeError

__all__ = [
    "AlreadyExistsError",
    "NotFoundError",
    "NotRunningError",
    "OCIRuntimeError",
    "RuntimeError",
    "RuntimeTimeoutError",
    "UnsupportedOperationError",
    "parse_runtime_error",
]
