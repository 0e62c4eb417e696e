"""Stop signals: the CRI ``Signal`` enum and Linux signal numbers."""

from __future__ import annotations

import signal

from podkit.cri import api_pb2 as pb
from podkit.cri.convert.fields import ConversionError
from podkit.errors import quote

__all__ = ["cri_signal", "signal_number"]


def _signal(value: object, path: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value not in pb.Signal.values():
        raise ConversionError(path, f"unknown Signal value {value} (0..{max(pb.Signal.values())})")
    return int(value)


def signal_number(stop_signal: int, *, path: str = "stop_signal") -> int | None:
    """The Linux signal number of a CRI ``Signal`` value; ``None`` for ``RUNTIME_DEFAULT``.

    The CRI enum numbers its own way (``SIGTERM`` is 23 there, 15 on Linux);
    ``ContainerConfig.stop_signal`` holds the Linux number, what a runtime sends.
    ``SIGRTMINPLUSn``/``SIGRTMAXMINUSn`` count from the C library's ``SIGRTMIN``/``SIGRTMAX``
    (34 and 64 with glibc). An unknown value is a ``ConversionError`` naming ``path``.
    """
    name = pb.Signal.Name(_signal(stop_signal, path))
    if name == "RUNTIME_DEFAULT":
        return None
    if name.startswith("SIGRTMINPLUS"):
        return int(signal.SIGRTMIN) + int(name.removeprefix("SIGRTMINPLUS"))
    if name.startswith("SIGRTMAXMINUS"):
        return int(signal.SIGRTMAX) - int(name.removeprefix("SIGRTMAXMINUS"))
    return int(getattr(signal, name))


def _cri_signals() -> dict[int, int]:
    """Linux signal number -> CRI ``Signal`` value; aliases (``SIGCLD``, ``SIGIOT``,
    ``SIGPOLL``) give way to the names Python uses (``SIGCHLD``, ``SIGABRT``, ``SIGIO``)."""
    out: dict[int, int] = {0: pb.RUNTIME_DEFAULT}
    for value in sorted(pb.Signal.values()):
        number = signal_number(value)
        if number is not None:
            out.setdefault(number, value)
    return out


_CRI_SIGNALS = _cri_signals()


def cri_signal(linux_number: int, *, path: str = "stop_signal") -> int:
    """The CRI ``Signal`` value of a Linux signal number (0 gives ``RUNTIME_DEFAULT``).

    The inverse of ``signal_number``. A number the CRI has no name for (32 and 33, which glibc
    keeps for itself, or anything out of range) is a ``ConversionError`` naming ``path``.
    """
    if isinstance(linux_number, bool) or not isinstance(linux_number, int):
        raise ConversionError(path, f"not a signal number: {quote(linux_number)}")
    try:
        return _CRI_SIGNALS[int(linux_number)]
    except KeyError:
        raise ConversionError(
            path, f"Linux signal {linux_number} has no CRI Signal name "
            f"(1..31, {int(signal.SIGRTMIN)}..{int(signal.SIGRTMAX)})"
        ) from None
