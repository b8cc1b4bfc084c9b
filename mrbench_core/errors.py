"""Errors shared by every layer."""

from __future__ import annotations


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
