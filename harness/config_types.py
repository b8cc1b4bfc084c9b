"""Typed dataclasses from nested mappings, with errors that name the field.

``setting(default, help=..., gt=...)`` (from :mod:`mrbench_core.fields`) declares a config field,
its one-line description (shown by ``mrbench run --help``) and its allowed range or ``choices``
(checked by :func:`checked` in the section's ``__post_init__``); ``build(cls, data)`` checks every value against the field's annotation
(``optim.lr: expected a number, got 'fast'``) and rejects unknown fields with the list of known
ones, or with the field's new place for a field that moved (``moved``).
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Mapping
from typing import Any

from mrbench_core.fields import check_bounds, field_help, range_text, setting

__all__ = ["ConfigError", "build", "checked", "coerce", "field_help", "range_text", "setting", "type_name"]


class ConfigError(ValueError):
    """A bad configuration value; the message names the field."""


def checked(obj: Any, section: str) -> None:
    """Every bounded field of run-config section ``obj`` within its declared range or choices, else
    a :class:`ConfigError` naming ``section.field`` and what it allows (called from ``__post_init__``)."""
    check_bounds(obj, section, ConfigError)


def coerce(value: Any, tp: Any, where: str, moved: Mapping[str, str] | None = None) -> Any:
    origin = typing.get_origin(tp)
    if tp is Any:
        return value
    if origin in (typing.Union, types.UnionType):
        args = typing.get_args(tp)
        if value is None and type(None) in args:
            return None
        errors = []
        for arg in args:
            if arg is type(None):
                continue
            try:
                return coerce(value, arg, where, moved)
            except ConfigError as exc:
                errors.append(str(exc))
        raise ConfigError(errors[0] if errors else f"{where}: bad value {value!r}")
    if origin is list:
        (item_tp,) = typing.get_args(tp) or (Any,)
        if isinstance(value, tuple):
            value = list(value)
        if not isinstance(value, list):
            raise ConfigError(f"{where}: expected a list, got {value!r}")
        return [coerce(v, item_tp, f"{where}[{i}]", moved) for i, v in enumerate(value)]
    if origin is dict:
        if not isinstance(value, dict):
            raise ConfigError(f"{where}: expected a mapping, got {value!r}")
        _, value_tp = typing.get_args(tp) or (str, Any)
        return {k: coerce(v, value_tp, f"{where}.{k}", moved) for k, v in value.items()}
    if tp is bool:
        if isinstance(value, bool):
            return value
        raise ConfigError(f"{where}: expected true/false, got {value!r}")
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"{where}: expected an integer, got {value!r}")
        return value
    if tp is float:
        if isinstance(value, str):
            try:  # YAML 1.1 reads "1e-6" as a string
                return float(value)
            except ValueError:
                pass
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(f"{where}: expected a number, got {value!r}")
        return float(value)
    if tp is str:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return str(value)  # a name such as a model path "1" or a split "2024"
        if not isinstance(value, str):
            raise ConfigError(f"{where}: expected a string, got {value!r}")
        return value
    if dataclasses.is_dataclass(tp):
        return build(tp, value, where, moved)
    return value


def build(cls: type, data: Any, where: str = "", moved: Mapping[str, str] | None = None) -> Any:
    """``cls(**data)`` with every value checked; ``moved`` maps old dotted paths to their new place."""
    if isinstance(data, cls):
        return data
    if not isinstance(data, dict):
        raise ConfigError(f"{where or 'config'}: expected a mapping, got {data!r}")
    hints = typing.get_type_hints(cls)
    known = [f.name for f in dataclasses.fields(cls)]
    kwargs = {}
    for key, value in data.items():
        path = f"{where}.{key}" if where else str(key)
        if key not in known:
            if moved and path in moved:
                raise ConfigError(f"{path}: moved to {moved[path]}")
            raise ConfigError(f"{path}: unknown field; known fields of {where or 'the run'}: {', '.join(known)}")
        kwargs[key] = coerce(value, hints[key], path, moved)
    return cls(**kwargs)


def type_name(tp: Any) -> str:
    """How ``--help`` writes a field's type: ``int``, ``float|null``, ``list[str]``, ``mapping``."""
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        return "|".join("null" if a is type(None) else type_name(a) for a in typing.get_args(tp))
    if origin is list:
        (item_tp,) = typing.get_args(tp) or (Any,)
        return f"list[{type_name(item_tp)}]"
    if origin is dict:
        return "mapping"
    return getattr(tp, "__name__", str(tp))
