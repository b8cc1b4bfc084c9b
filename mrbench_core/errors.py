"""Errors shared by every layer, and the one coercion of model output to text."""

from __future__ import annotations


def response_text(response: object) -> str:
    """A model response as text, whatever a file or a caller passed: None is the empty response, a
    non-string is its ``str``. Verifiers use it so that they never raise on model output."""
    if isinstance(response, str):
        return response
    return "" if response is None else str(response)


class DataError(ValueError):
    """Malformed data: the message names the file and the row."""

    def __init__(self, message: str, *, path: str | None = None, row: int | str | None = None):
        where = ""
        if path is not None:
            where = f"{path}"
            if row is not None:
                where += f", row {row}"
            where += ": "
        super().__init__(where + message)
        self.path = path
        self.row = row
