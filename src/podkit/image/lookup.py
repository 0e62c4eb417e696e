"""Which stored images a string names: every form a CRI client or a user may hold, tried in
the order containerd's CRI plugin tries them (``LocalResolve``).

1. a full digest, ``sha256:<64 hex>`` or the 64 hex alone: the image ID (config digest), else
   the digest of a stored index or manifest;
2. a reference, normalised the docker way (``busybox`` is ``docker.io/library/busybox:latest``);
   ``REPO@DIGEST`` and ``REPO:TAG@DIGEST`` (the tag is ignored, as ``ParseDockerRef`` drops it)
   name the records of ``REPO`` whose index or manifest has that digest;
3. only when no name matched: a prefix of an image ID, ``[sha256:]<hex>``, of at least
   :data:`MIN_ID_PREFIX` hex digits; one matching image or :class:`AmbiguousImageError`.

A string none of these can ever match (not a reference, not hex) is a :class:`ReferenceError`
naming it. Pure: callers hand the records in (``ImageStore.resolve`` reads them).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Protocol, TypeVar

import attrs

from podkit.errors import quote
from podkit.image.descriptor import Descriptor
from podkit.image.reference import Reference, ReferenceError, parse_reference

__all__ = ["MIN_ID_PREFIX", "AmbiguousImageError", "ImageQuery"]

MIN_ID_PREFIX = 6
"""Fewest hex digits of an image ID prefix: the short identifier of the distribution
``reference`` grammar (``[a-f0-9]{6,64}``) that containerd and Docker share. A shorter prefix
names nothing (containerd's CRI accepts even one digit, a guess podkit does not make)."""

_ID_FORM = re.compile(r"(?:sha256:)?([0-9a-f]*)\Z")


class _Record(Protocol):
    """What a lookup reads of an image record (``podkit.image.Image``)."""

    @property
    def name(self) -> str: ...
    @property
    def target(self) -> Descriptor: ...
    @property
    def manifest(self) -> Descriptor: ...
    @property
    def config(self) -> Descriptor: ...


_R = TypeVar("_R", bound=_Record)


class AmbiguousImageError(ReferenceError):
    """An image ID prefix that several images' IDs start with; the message says how many."""


def _repository(name: str) -> str:
    """``domain/path`` of a stored (normalised) name with a tag and/or a digest."""
    base = name.partition("@")[0]
    colon = base.rfind(":")
    return base[:colon] if colon > base.rfind("/") else base


@attrs.frozen(slots=True)
class ImageQuery:
    """What ``text`` may name, each form ``None`` when it cannot be that: a full ``digest``, a
    normalised ``reference`` (tag dropped when a digest pins it), an image ``id_prefix``."""

    text: str
    digest: str | None = None
    reference: Reference | None = None
    id_prefix: str | None = None

    @classmethod
    def parse(cls, text: str | Reference) -> ImageQuery:
        """The forms ``text`` may take; :class:`ReferenceError` quoting it when it can name
        no image at all (empty, or neither a reference nor hex)."""
        if isinstance(text, Reference):
            return cls(str(text), reference=_pinned(text))
        if not isinstance(text, str) or not text:
            raise ReferenceError(f"invalid image reference {quote(text)}: must be a non-empty "
                                 "string (a name, a name@digest or an image ID)")
        id_form = _ID_FORM.match(text)
        hex_ = id_form.group(1) if id_form else ""
        if len(hex_) == 64:
            return cls(text, digest=f"sha256:{hex_}")
        try:
            reference: Reference | None = _pinned(parse_reference(text))
        except ReferenceError:
            if id_form is None:
                raise
            reference = None  # "sha256:" and the like: hex, but no name
        prefix = hex_ if id_form and MIN_ID_PREFIX <= len(hex_) < 64 else None
        return cls(text, reference=reference, id_prefix=prefix)

    def match(self, records: Iterable[_R]) -> list[_R]:
        """The image records (``Image``) this query names, sorted by name; ``[]`` when none.

        A digest names the records of that image ID, else those whose index or manifest it
        is; a name the records it is (a repository and digest: the repository's records with
        that digest); an ID prefix every record of the one image whose ID starts with it.
        """
        records = sorted(records, key=lambda r: r.name)
        if self.digest is not None:
            return ([r for r in records if r.config.digest == self.digest]
                    or [r for r in records if self.digest in (r.target.digest,
                                                              r.manifest.digest)])
        ref = self.reference
        if ref is not None:
            if ref.digest is None:
                found = [r for r in records if r.name == str(ref)]
            else:
                found = [r for r in records if r.name == str(ref) or (
                    _repository(r.name) == ref.name
                    and ref.digest in (r.target.digest, r.manifest.digest))]
            if found:
                return found
        if self.id_prefix is None:
            return []
        ids = sorted({r.config.digest for r in records
                      if r.config.digest.startswith("sha256:" + self.id_prefix)})
        if len(ids) > 1:
            raise AmbiguousImageError(
                f"image ID prefix {quote(self.text)} is ambiguous: {len(ids)} images have IDs "
                "starting with it (give more of the ID)")
        return [r for r in records if ids and r.config.digest == ids[0]]


def _pinned(ref: Reference) -> Reference:
    """``ref`` without its tag when a digest pins it (``ParseDockerRef`` does the same)."""
    return Reference(ref.domain, ref.path, None, ref.digest) if ref.digest else ref
