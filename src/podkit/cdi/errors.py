"""``SpecError``: a CDI spec that cannot be parsed or is invalid, with the JSON path and file.
"""

from __future__ import annotations

from podkit.errors import InvalidArgumentError

__all__ = ["SpecError"]


class SpecError(InvalidArgumentError):
    """A CDI spec that cannot be parsed or is invalid.

    ``message`` keeps the Go library's wording; ``field`` is the JSON path of the offending value
    (``devices[0].containerEdits.env[1]``) and ``source`` the file, when known.
    """

    def __init__(self, message: str, *, field: str | None = None, source: str | None = None):
        self.message = message
        self.field = field
        self.source = source
        where = ", ".join(x for x in (field, f"in {source}" if source else None) if x)
        super().__init__(f"{message} ({where})" if where else message)

    def with_source(self, source: str) -> SpecError:
        """The same error, naming the file it came from."""
        return SpecError(self.message, field=self.field, source=source)
