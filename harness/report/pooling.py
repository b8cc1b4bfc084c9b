"""Which records a table may pool: each record's numerics identity, the pooling rule, and what to say.

A record's numerics identity is what decides its numbers beyond its configuration (issue 48,
:mod:`harness.numerics`): the commit and whether the tree was dirty, the torch, transformers and
vLLM versions, the device class and the numerics **fingerprint**, a hash of what a fixed, tiny,
seeded step computes with that code on that device class (docs/comparability.md).
:func:`read_numerics` reads it with :func:`harness.numerics.record_numerics` (the record's
``provenance.json``, or for a committed reference made before fingerprints the ``numerics.json``
beside its records, computed afterwards), and for a record older than both takes what it says of
itself (:func:`harness.numerics.from_provenance`: ``git``, ``versions``).

The rule (:attr:`Numerics.key`):

- records with a fingerprint pool with the records of the same fingerprint, whatever their commits;
- a record without one is *unknown*. Nothing is guessed: it pools only with unknown records whose
  commit, dirty flag, versions and device class (as far as the records name one) are the same, so
  two unknown records made at two commits are two rows, even where no code between them changed;
- ``--pool-across-versions`` (``mrbench report`` and ``mrbench leaderboard``) pools them on
  purpose, and the outputs say that they did and what the pooled rows mix.

:func:`split_labels` writes what sets apart rows of one configuration (``commit 311470f,
fingerprint unknown``); :func:`describe` writes a row's numerics in full; :func:`disagreement` says
whether two records of one seed agree.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.numerics import VERSIONED, from_provenance, record_numerics, what_differs

UNKNOWN = "unknown"


@dataclass(frozen=True)
class Numerics:
    """One record's numerics identity, as far as the record says it."""

    fingerprint: str | None
    source: str | None                         # "run" | "computed-afterwards" | None (no fingerprint)
    commit: str | None
    dirty: bool | None
    versions: tuple[tuple[str, str | None], ...]  # (package, version) for VERSIONED
    device_class: str | None                   # None: the record does not name one
    block: dict[str, Any] = field(default_factory=dict, compare=False, hash=False, repr=False)

    @property
    def known(self) -> bool:
        return bool(self.fingerprint)

    @property
    def key(self) -> tuple:
        """Records with equal keys may pool (the rule in the module's docstring)."""
        if self.fingerprint:
            return ("fingerprint", self.fingerprint)
        return (UNKNOWN, self.commit, self.dirty, self.versions, self.device_class)


def numerics_of(block: dict[str, Any]) -> Numerics:
    """The identity a numerics block (:mod:`harness.numerics`) states."""
    versions = block.get("versions") if isinstance(block.get("versions"), dict) else {}
    fingerprint = block.get("fingerprint") or None
    return Numerics(
        fingerprint=str(fingerprint) if fingerprint else None,
        source=block.get("fingerprint_source") if fingerprint else None,
        commit=str(block["commit"]) if block.get("commit") else None,
        dirty=bool(block["dirty"]) if block.get("dirty") is not None else None,
        versions=tuple((name, versions.get(name)) for name in VERSIONED),
        device_class=block.get("device_class") or None,
        block=block,
    )


def read_numerics(record_dir: Path, provenance: dict[str, Any]) -> Numerics:
    """The record's identity: its numerics block (provenance, else a reference's sidecar), else what
    its provenance says of its commit and versions (fingerprint unknown)."""
    block = record_numerics(Path(record_dir))
    return numerics_of(block if isinstance(block, dict) else from_provenance(provenance))


def apart(this: Numerics, kept: Numerics) -> str:
    """What sets two records' numerics apart, in a few words (:func:`harness.numerics.what_differs`)."""
    return what_differs(this.block, kept.block) or "nothing recorded"


def _commit(n: Numerics) -> str:
    if not n.commit:
        return "commit not recorded"
    return n.commit[:7] + (" (dirty)" if n.dirty else "")


def _ordered(values: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(values))


def _fields(numerics: list[Numerics]) -> dict[str, list[str]]:
    """Per identity field, the values a row's records hold, in record order."""
    return {
        "commit": _ordered(_commit(n) for n in numerics),
        "device": _ordered(n.device_class or "not recorded" for n in numerics),
        **{name: _ordered(str(dict(n.versions).get(name) or "none") for n in numerics) for name in VERSIONED},
        "fingerprint": _ordered((n.fingerprint[:8] if n.fingerprint else UNKNOWN) for n in numerics),
    }


def _text(field: str, values: list[str], most: int = 3) -> str:
    shown = ", ".join(values[:most]) + (f" and {len(values) - most} more" if len(values) > most else "")
    if field == "commit" and values == ["commit not recorded"]:
        return shown
    if field in ("commit", "fingerprint"):
        return f"{field}s {shown}" if len(values) > 1 else f"{field} {shown}"
    return f"{field} {shown}"


def split_labels(rows: list[list[Numerics]]) -> list[str]:
    """For rows of one configuration kept apart by their numerics: per row, the identity fields in
    which the rows differ, then its fingerprint (``unknown`` where it has none)."""
    fields = [_fields(r) for r in rows]
    names = [f for f in fields[0] if f != "fingerprint" and len({tuple(x[f]) for x in fields}) > 1]
    return [", ".join([*(_text(f, x[f]) for f in names), _text("fingerprint", x["fingerprint"])]) for x in fields]


def describe(numerics: list[Numerics]) -> str:
    """A row's numerics in full: fingerprint(s) and where they came from, commits, device, versions."""
    x = _fields(numerics)
    unknown = sum(not n.known for n in numerics)
    sources = _ordered(n.source for n in numerics if n.known and n.source)
    fingerprint = _text("fingerprint", x["fingerprint"])
    if unknown and unknown < len(numerics):
        fingerprint += f" ({unknown} of {len(numerics)} records without one)"
    if sources:
        fingerprint += " (" + ", ".join(s.replace("-", " ") for s in sources) + ")"
    versions = ", ".join(_text(name, x[name]) for name in VERSIONED)
    return f"{fingerprint}; {_text('commit', x['commit'], 6)}; {_text('device', x['device'])}; {versions}"


def mixes(numerics: list[Numerics]) -> bool:
    """Whether records of these identities would be kept apart without --pool-across-versions."""
    return len({n.key for n in numerics}) > 1


def disagreement(ours: dict[str, float], theirs: dict[str, float], most: int = 2) -> str:
    """Whether two records of one seed give the same numbers, in words: which numbers differ and by how much."""
    shared = sorted(set(ours) & set(theirs))
    differ = [k for k in shared if ours[k] != theirs[k]]
    if not shared:
        return "no number to compare them on"
    if not differ:
        return f"the two agree on all {len(shared)} numbers"
    shown = "; ".join(f"{k} {ours[k]:.4g} against {theirs[k]:.4g}" for k in differ[:most])
    more = f"; and {len(differ) - most} more" if len(differ) > most else ""
    return f"the two disagree on {len(differ)} of {len(shared)} numbers: {shown}{more}"
