"""Image references (``name[:tag][@digest]``) parsed and normalised like containerd and Docker.

``busybox`` becomes ``docker.io/library/busybox:latest``; ``localhost:5000/x:t`` keeps its
registry; ``name@sha256:...`` pins content. The grammar is the one of the distribution
``reference`` package: lowercase path components joined by ``/`` with an optional registry
domain first, tags of at most 128 word characters, digests ``algorithm:hex``.
"""

from __future__ import annotations

import re

import attrs

from podkit.errors import InvalidArgumentError, quote
from podkit.image.errors import ImageError

__all__ = [
    "DEFAULT_DOMAIN",
    "Reference",
    "ReferenceError",
    "parse_digest",
    "parse_reference",
]

DEFAULT_DOMAIN = "docker.io"
_LEGACY_DOMAIN = "index.docker.io"
_OFFICIAL_PREFIX = "library/"
_NAME_MAX = 255

_DOMAIN_COMPONENT = r"(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])"
_HOST = rf"(?:{_DOMAIN_COMPONENT}(?:\.{_DOMAIN_COMPONENT})*|\[[a-fA-F0-9:]+\])"
_DOMAIN = rf"{_HOST}(?::[0-9]+)?"
_PATH_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_PATH = rf"{_PATH_COMPONENT}(?:/{_PATH_COMPONENT})*"
_TAG = r"[\w][\w.-]{0,127}"
_DIGEST = r"[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}"

_DOMAIN_RE = re.compile(rf"{_DOMAIN}\Z")
_PATH_RE = re.compile(rf"{_PATH}\Z")
_TAG_RE = re.compile(rf"{_TAG}\Z")
_DIGEST_RE = re.compile(rf"{_DIGEST}\Z")
_HEX64_RE = re.compile(r"[a-f0-9]{64}\Z")
_DIGEST_LENGTHS = {"sha256": 64, "sha384": 96, "sha512": 128}


class ReferenceError(ImageError, InvalidArgumentError):
    """A string that is not a valid image reference; the message quotes it."""


def parse_digest(value: str, where: str = "digest") -> str:
    """Return ``value`` if it is a well-formed ``algorithm:hex`` digest, else raise.

    Known algorithms (sha256, sha384, sha512) must have lowercase hex of the exact length.
    """
    if not isinstance(value, str) or not _DIGEST_RE.match(value):
        raise ReferenceError(f"invalid {where} {quote(value)}: must be algorithm:hex")
    algorithm, _, hex_ = value.partition(":")
    length = _DIGEST_LENGTHS.get(algorithm)
    if length is None:
        raise ReferenceError(f"invalid {where} {quote(value)}: unsupported algorithm {algorithm!r}")
    if len(hex_) != length or hex_ != hex_.lower():
        raise ReferenceError(
            f"invalid {where} {quote(value)}: {algorithm} needs {length} lowercase hex digits"
        )
    return value


@attrs.frozen(slots=True)
class Reference:
    """A normalised image reference: registry ``domain``, repository ``path``, tag, digest.

    ``str(ref)`` is the full form (``docker.io/library/busybox:latest``); ``name`` is the
    repository without tag or digest.
    """

    domain: str
    path: str
    tag: str | None = None
    digest: str | None = None

    @property
    def name(self) -> str:
        """``domain/path``: the repository, without tag or digest."""
        return f"{self.domain}/{self.path}"

    @property
    def object(self) -> str:
        """What a registry resolves: the digest if pinned, else the tag."""
        return self.digest or self.tag or "latest"

    def with_tag(self, tag: str) -> Reference:
        """The same repository with ``tag`` and no digest."""
        if not _TAG_RE.match(tag):
            raise ReferenceError(f"invalid tag {quote(tag)} for {self.name}")
        return Reference(self.domain, self.path, tag, None)

    def familiar(self) -> str:
        """The short form Docker shows (``busybox:latest`` for the official image)."""
        path = self.path
        if self.domain == DEFAULT_DOMAIN:
            short = path.removeprefix(_OFFICIAL_PREFIX)
            text = short
        else:
            text = self.name
        return text + self._suffix()

    def _suffix(self) -> str:
        text = ""
        if self.tag is not None:
            text += f":{self.tag}"
        if self.digest is not None:
            text += f"@{self.digest}"
        return text

    def __str__(self) -> str:
        return self.name + self._suffix()


def _split_domain(name: str) -> tuple[str, str]:
    first, sep, rest = name.partition("/")
    if not sep or (
        "." not in first and ":" not in first and first != "localhost" and first == first.lower()
    ):
        domain, remainder = DEFAULT_DOMAIN, name
    else:
        domain, remainder = first, rest
    if domain == _LEGACY_DOMAIN:
        domain = DEFAULT_DOMAIN
    if domain == DEFAULT_DOMAIN and "/" not in remainder:
        remainder = _OFFICIAL_PREFIX + remainder
    return domain, remainder


def parse_reference(text: str, *, default_tag: bool = True) -> Reference:
    """Parse and normalise ``text`` the way ``docker pull`` and containerd's ``ctr`` do.

    Short names gain ``docker.io`` (and ``library/`` for official images); a reference with
    neither tag nor digest gains ``:latest`` unless ``default_tag`` is false. Raises
    :class:`ReferenceError` naming ``text`` when it does not follow the grammar.
    """
    if not isinstance(text, str) or not text:
        raise ReferenceError(f"invalid reference {quote(text)}: must be a non-empty string")
    if _HEX64_RE.match(text):
        raise ReferenceError(
            f"invalid reference {quote(text)}: a 64-hex string is an ID, not a repository name"
        )
    rest, at, digest = text.partition("@")
    if at:
        parse_digest(digest, where=f"digest in reference {quote(text)}")
    tag: str | None = None
    # A ':' after the last '/' separates the tag (a ':' before it belongs to a port).
    slash = rest.rfind("/")
    colon = rest.rfind(":")
    if colon > slash:
        rest, tag = rest[:colon], rest[colon + 1 :]
        if not _TAG_RE.match(tag):
            raise ReferenceError(f"invalid reference {quote(text)}: bad tag {quote(tag)}")
    if not rest:
        raise ReferenceError(f"invalid reference {quote(text)}: empty repository name")
    domain, path = _split_domain(rest)
    if path != path.lower() and _PATH_RE.match(path.lower()):
        raise ReferenceError(f"invalid reference {quote(text)}: repository name must be lowercase")
    if not _DOMAIN_RE.match(domain):
        raise ReferenceError(f"invalid reference {quote(text)}: bad registry domain {domain!r}")
    if not _PATH_RE.match(path):
        raise ReferenceError(
            f"invalid reference {quote(text)}: repository path {path!r} must be lowercase "
            "components of [a-z0-9] joined by '.', '_', '__' or '-', separated by '/'"
        )
    name = f"{domain}/{path}"
    if len(name) > _NAME_MAX:
        raise ReferenceError(
            f"invalid reference {text[:64]!r}...: repository name longer than {_NAME_MAX}"
        )
    if tag is None and not at and default_tag:
        tag = "latest"
    return Reference(domain, path, tag, digest if at else None)
