"""The run config's fields as ``mrbench run --help`` lists them.

Every dotted field of :class:`harness.config.RunConfig` with its type, default and one-line
description, all read from the dataclass definitions (``setting(..., help=...)``), one line per
field so that ``mrbench run --help | grep lr`` finds a whole entry. Algorithm parameters
(``--algo.KEY``) belong to the algorithm's own config dataclass: :func:`algorithm_fields_help`
lists them for one named algorithm.
"""

from __future__ import annotations

import dataclasses
import inspect
import textwrap
import typing
from typing import Any

from harness.config import RunConfig
from harness.config_types import field_help, range_text, type_name


@dataclasses.dataclass(frozen=True)
class FieldDoc:
    """One leaf field: ``--optim.lr float = 1e-05  learning rate (AdamW)``."""

    path: str
    type: str
    default: Any
    help: str

    def signature(self) -> str:
        return f"--{self.path} {self.type} = {format_value(self.default)}"


@dataclasses.dataclass(frozen=True)
class SectionDoc:
    """A nested dataclass field (``backend.local``): a heading with its description."""

    path: str
    help: str


def format_value(value: Any) -> str:
    """A default as it would be written on the command line (YAML): null, true, [0.9, 0.999]."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(format_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {format_value(v)}" for k, v in value.items()) + "}"
    if isinstance(value, str):
        return value if value else '""'
    return repr(value)


def _default(f: dataclasses.Field) -> Any:
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return None


def config_fields(cls: type = RunConfig, prefix: str = "") -> list[FieldDoc | SectionDoc]:
    """Depth-first: a section's heading, then its fields; leaf fields only carry values."""
    hints = typing.get_type_hints(cls)
    out: list[FieldDoc | SectionDoc] = []
    for f in dataclasses.fields(cls):
        path = f"{prefix}{f.name}"
        tp = hints[f.name]
        if dataclasses.is_dataclass(tp):
            out.append(SectionDoc(path, field_help(f)))
            out.extend(config_fields(tp, f"{path}."))
        else:
            out.append(FieldDoc(path, type_name(tp), _default(f), described(f)))
    return out


def described(f: dataclasses.Field) -> str:
    """A field's help text followed by its allowed range, if it declares one: ``... [>= 2]``."""
    bounds = range_text(f)
    return f"{field_help(f)} [{bounds}]" if bounds else field_help(f)


def _rows(fields: list[FieldDoc], indent: str = "  ", max_column: int = 44) -> list[str]:
    column = min(max((len(d.signature()) for d in fields), default=0), max_column)
    return [f"{indent}{d.signature().ljust(column)}  {d.help}".rstrip() for d in fields]


def run_config_help() -> str:
    """Every run config field, grouped by section (a section's own fields, then its subsections),
    one line each."""
    headings = {"": "top level"}
    groups: dict[str, list[FieldDoc]] = {}
    for doc in config_fields():
        if isinstance(doc, SectionDoc):
            headings[doc.path] = f"{doc.path}: {doc.help}"
            groups.setdefault(doc.path, [])
        else:
            groups.setdefault(doc.path.rpartition(".")[0], []).append(doc)
    lines = textwrap.wrap("run config fields (defaults shown; --config RECIPE and --FIELD VALUE set them, values "
                          "in YAML syntax; --task, --algo, --model and --backend set the section's name):", 100)
    for path, docs in groups.items():
        if docs:
            lines += ["", headings[path], *_rows(docs)]
    return "\n".join(lines)


ALGORITHM_HINT = "\n".join(textwrap.wrap(
    "algorithm parameters: --algo.KEY VALUE sets a field of the algorithm's own config (algo.params), checked "
    "when the run starts. Name the algorithm to list its fields, e.g. mrbench run --algo gdpo --help; "
    "mrbench list names the algorithms.", 100))


def algorithm_fields_help(name: str) -> str:
    """The config fields of algorithm ``name``: type, default and help text (``setting(help=...)``);
    for a config whose fields carry no help (a plugin's), its docstring instead."""
    from algorithms import get_algorithm

    try:
        algo = get_algorithm(name)
    except (LookupError, ValueError) as exc:  # unknown name (lists the known ones) or no default config
        return f"algorithm {name!r}: parameters not listed: {exc}"
    configs = [algo.config]
    aggregator = getattr(algo, "aggregator", None)  # a composite (mrtpo+saw) also takes its aggregator's keys
    if aggregator is not None and {f.name for f in dataclasses.fields(aggregator.config)} <= set(algo.config_dict()):
        configs.append(aggregator.config)
    docs = []
    for config in configs:
        hints = typing.get_type_hints(type(config))
        docs += [FieldDoc(f"algo.{f.name}", type_name(hints[f.name]), getattr(config, f.name), described(f))
                 for f in dataclasses.fields(config)]
    lines = [f"algorithm {name} parameters (--algo.KEY VALUE; checked when the run starts):"]
    lines += _rows(docs) if docs else ["  (none)"]
    if all(d.help for d in docs):
        return "\n".join(lines)
    described_docs = []  # a config without per-field help (a plugin's): its docstrings say what the fields are
    for config in configs:
        for cls in reversed(type(config).__mro__):
            doc = inspect.getdoc(cls) if dataclasses.is_dataclass(cls) else None
            if doc and doc not in described_docs:
                described_docs.append(doc)
    for doc in described_docs:
        lines += textwrap.wrap(" ".join(doc.split()), width=100, initial_indent="  ", subsequent_indent="  ")
    return "\n".join(lines)
