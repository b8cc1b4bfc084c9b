"""Text a tokenizer cannot take, found at data load (reliability probe 4, B5).

JSON may escape a lone UTF-16 surrogate (``"\\ud800"``); Python keeps it in a ``str``, but such a
string is not Unicode text: it has no UTF-8 form, and a fast tokenizer raises a ``TypeError`` on
it, deep inside training. Data loaders refuse it instead, with a :class:`DataError` naming the
file, the row, the field and the character (:func:`check_text`); nothing is replaced silently.
"""

from __future__ import annotations

import re
from typing import Any

from mrbench_core.errors import DataError

_SURROGATE = re.compile("[\ud800-\udfff]")


def lone_surrogate(text: str) -> int | None:
    """The index of the first surrogate code point in ``text`` (None when there is none)."""
    found = _SURROGATE.search(text)
    return None if found is None else found.start()


def check_text(value: Any, field: str, *, path: str | None, row: int | str | None) -> None:
    """Raise :class:`DataError` if ``value`` (a string, or a list / dict of them) holds a lone
    surrogate; ``field`` names where it sits in the row (``prompt[1].content``)."""
    if isinstance(value, str):
        at = lone_surrogate(value)
        if at is not None:
            raise DataError(f"{field} holds a lone surrogate U+{ord(value[at]):04X} at character {at} (a JSON "
                            f"\\u{ord(value[at]):04x} escape), which is not text any tokenizer can encode; "
                            f"fix or remove that row", path=path, row=row)
    elif isinstance(value, dict):
        for key, item in value.items():
            check_text(item, f"{field}.{key}", path=path, row=row)
    elif isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            check_text(item, f"{field}[{i}]", path=path, row=row)


def check_examples(examples: Any, source: str | None) -> None:
    """Every example's messages free of lone surrogates (the loaders of the built-in tasks check
    their rows; this catches a plugin task's), else a :class:`DataError` naming ``source`` and the
    example's id."""
    for example in examples:
        check_text([m.get("content") for m in example.messages], "messages", path=source or "the task's data",
                   row=f"example {example.id!r}")
