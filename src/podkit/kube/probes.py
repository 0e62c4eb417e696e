"""Container probes as the kubelet runs them: a pure state machine per probe (when it is due,
what consecutive results add up to) and the I/O edge that runs one probe (exec, httpGet,
tcpSocket) and says whether it passed.
"""

from __future__ import annotations

import enum
import http.client
import socket
import ssl
import urllib.parse
from collections.abc import Callable, Sequence

import attrs

from podkit.kube.plan import ProbeSpec

__all__ = [
    "ContainerProbes",
    "ExecFn",
    "Health",
    "Outcome",
    "ProbeResult",
    "ProbeState",
    "run_probe",
]

USER_AGENT = "kube-probe/1.31"
MAX_REDIRECTS = 10


class Outcome(enum.Enum):
    """What a probe's results add up to (the kubelet's ``results.Result``)."""

    UNKNOWN = "Unknown"
    SUCCESS = "Success"
    FAILURE = "Failure"


class Health(enum.Enum):
    """A running container as its probes see it."""

    READY = "Ready"  # started, and ready (its readiness probe passes, or it has none)
    NOT_READY = "NotReady"  # starting up, or its readiness probe does not pass (yet)
    FAILED = "Failed"  # its liveness or startup probe failed: the kubelet restarts it


@attrs.frozen
class ProbeResult:
    """One run of a probe: passed or not, and why (shown when a wait times out)."""

    ok: bool
    message: str = ""


# the kubelet's first value before any run: readiness fails, liveness passes, startup unknown
_INITIAL = {"readiness": Outcome.FAILURE, "liveness": Outcome.SUCCESS,
            "startup": Outcome.UNKNOWN}


@attrs.define(slots=True)
class ProbeState:
    """One probe of one container: due ``initial_delay_seconds`` after the start, then every
    ``period_seconds``; the outcome flips after ``success_threshold`` consecutive passes or
    ``failure_threshold`` consecutive failures."""

    kind: str  # "readiness" | "liveness" | "startup"
    spec: ProbeSpec
    next_at: float
    outcome: Outcome = Outcome.UNKNOWN
    streak: int = 0
    last: ProbeResult | None = None

    @classmethod
    def start(cls, kind: str, spec: ProbeSpec, started: float) -> ProbeState:
        """The state right after the container (re)started at ``started``."""
        return cls(kind=kind, spec=spec, next_at=started + spec.initial_delay_seconds,
                   outcome=_INITIAL[kind])

    def due(self, now: float) -> bool:
        return now >= self.next_at

    def record(self, result: ProbeResult, now: float) -> Outcome:
        """Count one result; the outcome after it."""
        passed = Outcome.SUCCESS if result.ok else Outcome.FAILURE
        previous = self.last is not None and self.last.ok == result.ok
        self.streak = self.streak + 1 if previous else 1
        self.last = result
        need = self.spec.success_threshold if result.ok else self.spec.failure_threshold
        if self.streak >= max(need, 1):
            self.outcome = passed
        self.next_at = now + max(self.spec.period_seconds, 1)
        return self.outcome


@attrs.define(slots=True)
class ContainerProbes:
    """The probes of one running container and what they add up to.

    Liveness and readiness run only once the startup probe (if any) has passed, as in the
    kubelet; a startup or liveness failure means a restart (:attr:`Health.FAILED`).
    """

    startup: ProbeState | None = None
    liveness: ProbeState | None = None
    readiness: ProbeState | None = None

    @classmethod
    def start(cls, started: float, *, startup: ProbeSpec | None = None,
              liveness: ProbeSpec | None = None,
              readiness: ProbeSpec | None = None) -> ContainerProbes:
        def one(kind: str, spec: ProbeSpec | None) -> ProbeState | None:
            return None if spec is None else ProbeState.start(kind, spec, started)
        return cls(startup=one("startup", startup), liveness=one("liveness", liveness),
                   readiness=one("readiness", readiness))

    def started(self) -> bool:
        return self.startup is None or self.startup.outcome == Outcome.SUCCESS

    def due(self, now: float) -> list[ProbeState]:
        """The probes to run now, startup first (the others wait until it has passed)."""
        if not self.started():
            return [self.startup] if self.startup and self.startup.due(now) else []
        return [p for p in (self.liveness, self.readiness) if p is not None and p.due(now)]

    def health(self) -> Health:
        failed = [p for p in (self.startup, self.liveness)
                  if p is not None and p.outcome == Outcome.FAILURE]
        if failed:
            return Health.FAILED
        if not self.started():
            return Health.NOT_READY
        if self.readiness is None or self.readiness.outcome == Outcome.SUCCESS:
            return Health.READY
        return Health.NOT_READY

    def describe(self) -> str:
        """The last result of each probe that ran, for a timeout message."""
        parts = [f"{p.kind} probe {p.outcome.value}"
                 + (f" ({p.last.message})" if p.last and p.last.message else "")
                 for p in (self.startup, self.liveness, self.readiness) if p is not None]
        return ", ".join(parts)


ExecFn = Callable[[Sequence[str], float], tuple[int, bytes]]
"""Runs a command in the container with a timeout; its exit code and output."""


def run_probe(spec: ProbeSpec, *, pod_ip: str, exec_fn: ExecFn) -> ProbeResult:
    """Run one probe once: exec (exit code 0), httpGet (status 200-399) or tcpSocket (a
    connection); any error, or the timeout, is a failure naming what happened."""
    timeout = float(max(spec.timeout_seconds, 1))
    if spec.kind == "exec":
        try:
            code, out = exec_fn(spec.command, timeout)
        except Exception as exc:  # a probe that cannot run has failed
            return ProbeResult(False, f"exec {list(spec.command)}: {exc}")
        text = out.decode(errors="replace").strip()[-200:]
        return ProbeResult(code == 0, f"exit code {code}" + (f": {text}" if text else ""))
    host = spec.host or pod_ip or "127.0.0.1"
    if spec.kind == "tcpSocket":
        try:
            socket.create_connection((host, spec.port), timeout=timeout).close()
        except OSError as exc:
            return ProbeResult(False, f"tcp {host}:{spec.port}: {exc}")
        return ProbeResult(True, f"tcp {host}:{spec.port} connected")
    if spec.kind == "httpGet":
        return _http_get(spec, host, timeout)
    return ProbeResult(False, f"unknown probe kind {spec.kind!r}")


def _http_get(spec: ProbeSpec, host: str, timeout: float) -> ProbeResult:
    """GET with the kubelet's rules: its User-Agent and Accept unless the probe sets them,
    redirects followed only to the same host (to another: the redirect itself counts)."""
    scheme = spec.scheme.lower()
    url = f"{scheme}://{_host_port(host, spec.port)}{spec.path or '/'}"
    for _ in range(MAX_REDIRECTS + 1):
        try:
            status, location = _get_once(url, spec.http_headers, timeout)
        except (OSError, http.client.HTTPException) as exc:
            return ProbeResult(False, f"GET {url}: {exc or type(exc).__name__}")
        if 300 <= status < 400 and location:
            target = urllib.parse.urljoin(url, location)
            if urllib.parse.urlsplit(target).hostname != urllib.parse.urlsplit(url).hostname:
                return ProbeResult(True, f"GET {url}: {status}, redirect to another host "
                                   f"{target} not followed")
            url = target
            continue
        return ProbeResult(200 <= status < 400, f"GET {url}: HTTP {status}")
    return ProbeResult(False, f"GET {url}: more than {MAX_REDIRECTS} redirects")


def _host_port(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _get_once(url: str, headers: tuple[tuple[str, str], ...],
              timeout: float) -> tuple[int, str]:
    parts = urllib.parse.urlsplit(url)
    conn: http.client.HTTPConnection
    if parts.scheme == "https":  # the kubelet does not verify probe certificates
        ctx = ssl.create_default_context()
        ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE
        conn = http.client.HTTPSConnection(parts.hostname or "", parts.port, timeout=timeout,
                                           context=ctx)
    else:
        conn = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=timeout)
    names = {k.lower() for k, _ in headers}
    sent = [*headers]
    if "user-agent" not in names:
        sent.append(("User-Agent", USER_AGENT))
    if "accept" not in names:
        sent.append(("Accept", "*/*"))
    try:
        conn.putrequest("GET", parts.path + (f"?{parts.query}" if parts.query else ""),
                        skip_host="host" in names)
        for k, v in sent:
            conn.putheader(k, v)
        conn.endheaders()
        resp = conn.getresponse()
        resp.read(10 * 1024)
        return resp.status, resp.getheader("Location") or ""
    finally:
        conn.close()
