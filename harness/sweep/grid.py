"""Grid files and their cells.

A grid file (YAML)::

    name: ifollow-smollm2            # optional; default: the file's stem
    recipe: ifollow-paper            # optional recipe: a shipped name or a YAML path (relative to
                                     # the grid file or the working directory); ``base: NAME`` is
                                     # the older spelling
    base: true                       # optional: also evaluate the untrained model once per task,
                                     # model and benchmark settings (base_cells below)
    root: results/sweeps/NAME        # where the cells' records go (default shown)
    set: {schedule.steps: 16}        # dotted overrides for every cell
    grid:                            # axes: the cartesian product of these values
      algo.name: [grpo, gdpo, mrtpo]
      seed: [0, 1, 2]
    when:                            # conditional overrides, applied in order
      - match: {algo.name: mrtpo}    # a value, or a list of values any of which matches
        set: {algo.warmup_steps: 10}
    exclude:                         # cells to leave out (all listed keys must match)
      - {algo.name: grpo, seed: 2}
    resources: {cpus: 1, gpus: 0}    # per cell, for the ray executor (default: derived per cell)

Keys are the dotted config paths of ``mrbench run`` (``task``, ``algo``, ``model`` and
``backend`` stand for their ``.name``; ``algo.KEY`` is an algorithm parameter). Each cell is
resolved exactly as ``mrbench run`` resolves its flags, and gets its own record directory:
``ROOT/<task>/<algo>/<model-slug>/seed<N>``, with a variant directory before ``seed<N>`` naming
the cell's other axis values (``beta=0.25``), so that cells differing only in an algorithm
parameter never share a directory. Errors name the grid file and the key.
"""

from __future__ import annotations

import hashlib
import itertools
import json
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import yaml

from harness.config import SHORTCUTS, ConfigError, RunConfig, model_slug, resolve
from harness.resolved import resolved_task_options
from mrbench_core.errors import DataError
from mrbench_core.jsonio import read_text

GRID_KEYS = ("name", "base", "recipe", "root", "set", "grid", "when", "exclude", "resources")
#: axes that are already part of the record path (every other axis names a variant directory)
PATH_KEYS = ("task.name", "algo.name", "model.name", "seed")
VARIANT_MAX = 80
#: what a sweep's cells get unless the grid sets it: no saved model per cell (a grid may set it)
SWEEP_DEFAULTS = (("output.save_model", False),)


class GridError(ValueError):
    """A bad grid file; the message names the file and the key."""


@dataclass(frozen=True)
class Resources:
    """What one cell asks of a Ray cluster (None: derived from the cell's config)."""

    cpus: int | None = None
    gpus: float | None = None


@dataclass(frozen=True)
class Rule:
    """``when`` entry: where every ``match`` key has one of its values, apply ``set``."""

    match: dict[str, list[Any]]
    set: dict[str, Any]


@dataclass
class GridSpec:
    path: Path
    name: str
    base: str | None
    root: str
    set: dict[str, Any] = field(default_factory=dict)
    axes: dict[str, list[Any]] = field(default_factory=dict)
    when: list[Rule] = field(default_factory=list)
    exclude: list[dict[str, list[Any]]] = field(default_factory=list)
    resources: Resources = field(default_factory=Resources)
    base_model: bool = False   # ``base: true``: a base-model cell per task, model and benchmark settings


@dataclass
class Cell:
    """One task x algorithm x model x seed (x variant) run of a grid."""

    id: str                    # the record directory relative to the grid's root
    values: dict[str, Any]     # this cell's axis values (canonical keys)
    overrides: dict[str, Any]  # every dotted override applied to the base recipe
    cfg: RunConfig             # resolved, with output.dir set to the record directory
    resources: Resources
    kind: str = "train"        # "base": the untrained model's evaluation (mrbench run --base-model)

    @property
    def run_args(self) -> tuple[str, ...]:
        """What ``mrbench run --config <record>/cell.yaml`` adds to run this cell."""
        return ("--base-model",) if self.kind == "base" else ()

    def record_config(self) -> dict[str, Any]:
        """What the cell's ``config.json`` holds once it ran."""
        if self.kind == "base":
            from harness.base_model import base_identity

            return base_identity(self.cfg.to_dict())
        return self.cfg.to_dict()

    @property
    def record_dir(self) -> Path:
        return Path(self.cfg.output.dir or "")


def canonical(key: str) -> str:
    """``algo`` -> ``algo.name``, ``algo.beta`` -> ``algo.params.beta`` (as ``mrbench run`` reads them)."""
    key = SHORTCUTS.get(key, key)
    parts = key.split(".")
    if parts[0] == "algo" and len(parts) >= 2 and parts[1] not in ("name", "params"):
        parts = ["algo", "params"] + parts[1:]
    return ".".join(parts)


# ---------------------------------------------------------------------------------------------
# loading


def _mapping(value: Any, where: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise GridError(f"{where}: expected a mapping of dotted config keys, got {value!r}")
    return value


def _dotted(value: Any, where: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, v in _mapping(value, where).items():
        key = canonical(str(key))
        if key in ("output.dir", "output.root"):
            raise GridError(f"{where}.{key}: each cell gets its own record directory; set the grid's 'root'")
        out[key] = v
    return out


def _choices(value: Any) -> list[Any]:
    return list(value) if isinstance(value, list) else [value]


#: what a grid's values may be: JSON's types (a YAML tag such as ``!!binary``, ``!!timestamp`` or
#: ``!!set`` gives bytes, dates or sets, which no setting takes and no record can store)
PLAIN_TYPES = (dict, list, str, int, float, bool, type(None))


def _plain_values(node: Any, path: str, where: str) -> None:
    """Refuse (:class:`GridError`, naming the file and key) a value of any other type than JSON's."""
    if not isinstance(node, PLAIN_TYPES):
        raise GridError(f"{path}: {where or 'the file'}: {type(node).__name__} value {node!r} (a YAML tag such as "
                        f"!!binary or a date); a grid holds strings, numbers, booleans, lists and mappings")
    if isinstance(node, dict):
        for key, value in node.items():
            _plain_values(key, path, f"{where}.{key}".strip(".") if isinstance(key, str) else where)
            _plain_values(value, path, f"{where}.{key}".strip("."))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            _plain_values(value, path, f"{where}[{i}]")


def load_grid(path: str | Path) -> GridSpec:
    path = Path(path)
    if not path.is_file():
        raise GridError(f"{path}: no such grid file")
    try:
        data = yaml.safe_load(read_text(path)) or {}
    except yaml.YAMLError as exc:
        raise GridError(f"{path}: not valid YAML: {exc}") from exc
    except DataError as exc:  # not UTF-8: names the file, line and byte
        raise GridError(str(exc)) from exc
    if not isinstance(data, dict):
        raise GridError(f"{path}: a grid file is a mapping (keys: {', '.join(GRID_KEYS)})")
    _plain_values(data, str(path), "")
    for key in data:
        if key not in GRID_KEYS:
            raise GridError(f"{path}: unknown key {key!r}; known keys: {', '.join(GRID_KEYS)}")
    name = str(data.get("name") or path.stem)
    axes: dict[str, list[Any]] = {}
    for key, values in _dotted(data.get("grid"), f"{path}: grid").items():
        if not isinstance(values, list) or not values:
            raise GridError(f"{path}: grid.{key}: expected a non-empty list of values, got {values!r}")
        seen = [json.dumps(v, sort_keys=True) for v in values]
        dup = next((v for v, s in zip(values, seen) if seen.count(s) > 1), None)
        if dup is not None:
            raise GridError(f"{path}: grid.{key}: lists {dup!r} twice")
        axes[key] = values
    rules = []
    for i, item in enumerate(data.get("when") or []):
        where = f"{path}: when[{i}]"
        if not isinstance(item, dict) or set(item) != {"match", "set"}:
            raise GridError(f"{where}: expected {{match: {{KEY: VALUE}}, set: {{KEY: VALUE}}}}, got {item!r}")
        rules.append(Rule({k: _choices(v) for k, v in _dotted(item["match"], f"{where}.match").items()},
                          _dotted(item["set"], f"{where}.set")))
    exclude = [{k: _choices(v) for k, v in _dotted(item, f"{path}: exclude[{i}]").items()}
               for i, item in enumerate(data.get("exclude") or [])]
    res = _mapping(data.get("resources"), f"{path}: resources")
    unknown = set(res) - {"cpus", "gpus"}
    if unknown:
        raise GridError(f"{path}: resources.{min(unknown)}: unknown; known: cpus, gpus")
    base, base_model = data.get("recipe"), False
    if isinstance(data.get("base"), bool):
        base_model = data["base"]
    elif data.get("base") is not None:
        if base is not None:
            raise GridError(f"{path}: 'base: {data['base']}' names a recipe, and so does 'recipe'; keep one "
                            f"('base: true' asks for the base model's evaluation)")
        base = data["base"]
    if base is not None:
        base = str(base)
        local = path.parent / base
        if base.endswith((".yaml", ".yml")) and local.is_file():
            base = str(local)
    spec = GridSpec(path=path, name=name, base=base, root=str(data.get("root") or f"results/sweeps/{name}"),
                    set=_dotted(data.get("set"), f"{path}: set"), axes=axes, when=rules, exclude=exclude,
                    resources=Resources(res.get("cpus"), res.get("gpus")), base_model=base_model)
    _check_keys(spec)
    return spec


def _check_keys(spec: GridSpec) -> None:
    """``when``/``exclude`` keys must be axes or set keys, or (for ``when``) set by an earlier rule:
    a typo would silently match nothing."""
    known = set(spec.axes) | set(spec.set)
    checks = [("exclude", i, m, known) for i, m in enumerate(spec.exclude)]
    seen = set(known)
    for i, rule in enumerate(spec.when):
        checks.append(("when", i, rule.match, set(seen)))
        seen |= set(rule.set)
    for what, i, match, allowed in checks:
        for key in match:
            if key not in allowed:
                raise GridError(f"{spec.path}: {what}[{i}]: {key!r} is neither an axis nor a 'set' key "
                                f"(axes: {', '.join(spec.axes) or 'none'})")


# ---------------------------------------------------------------------------------------------
# expansion


def _same(a: Any, b: Any) -> bool:
    return a == b or str(a) == str(b)


def _matches(match: dict[str, list[Any]], values: dict[str, Any]) -> bool:
    return all(key in values and any(_same(values[key], v) for v in allowed) for key, allowed in match.items())


def _slug(value: Any) -> str:
    text = "-".join(map(str, value)) if isinstance(value, list) else str(value)
    return "".join(c if (c.isalnum() or c in "._-") else "-" for c in text) or "none"


def variant_name(values: dict[str, Any]) -> str:
    """``beta=0.25,optim.lr=1e-06`` from the axis values that the record path does not already name;
    a short hash when that would be long."""
    parts = []
    for key, value in values.items():
        if key in PATH_KEYS:
            continue
        short = key.removeprefix("algo.params.")
        parts.append(f"{short}={_slug(value)}")
    name = ",".join(parts)
    if len(name) > VARIANT_MAX:
        digest = hashlib.sha1(json.dumps({k: values[k] for k in sorted(values) if k not in PATH_KEYS},
                                         sort_keys=True, default=str).encode()).hexdigest()[:12]
        name = f"v-{digest}"
    return name


def _pairs(overrides: dict[str, Any]) -> list[tuple[str, Any]]:
    """Overrides for :func:`harness.config.resolve`: strings quoted so that YAML keeps them strings."""
    return [(k, json.dumps(v) if isinstance(v, str) else v) for k, v in overrides.items()]


def expand(spec: GridSpec) -> list[Cell]:
    """Every cell of the grid, in axis order; raises :class:`GridError` naming the file and the cell."""
    cells: list[Cell] = []
    used = [0] * len(spec.exclude)
    keys = list(spec.axes)
    for combo in itertools.product(*(spec.axes[k] for k in keys)):
        values = dict(zip(keys, combo))
        effective = {**spec.set, **values}
        hit = [i for i, ex in enumerate(spec.exclude) if _matches(ex, effective)]
        for i in hit:
            used[i] += 1
        if hit:
            continue
        overrides = dict(effective)
        for rule in spec.when:
            if _matches(rule.match, overrides):
                overrides.update(rule.set)
        label = _label(values)
        try:
            cfg = resolve(spec.base, list(SWEEP_DEFAULTS) + _pairs(overrides))
        except ConfigError as exc:
            raise GridError(f"{spec.path}: cell {label}: {exc}") from exc
        rel = Path(cfg.task.name) / cfg.algo.name / model_slug(cfg.model.name)
        variant = variant_name(values)
        if variant:
            rel = rel / variant
        rel = rel / f"seed{cfg.seed}"
        cfg = replace(cfg, output=replace(cfg.output, root=spec.root, dir=str(Path(spec.root) / rel)))
        cells.append(Cell(id=rel.as_posix(), values=values, overrides=overrides, cfg=cfg, resources=spec.resources))
    unused = [i for i, n in enumerate(used) if n == 0]
    if unused:
        raise GridError(f"{spec.path}: exclude[{unused[0]}] matches no cell (check its values)")
    _refuse_equal_configs(spec, cells)
    if spec.base_model:
        cells = base_cells(spec.root, cells) + cells
    ids: dict[str, Cell] = {}
    for cell in cells:
        if cell.id in ids:
            raise GridError(f"{spec.path}: cells {ids[cell.id].values} and {cell.values} share the record "
                            f"directory {cell.id} (two model names with the same slug?)")
        ids[cell.id] = cell
    return cells


def _label(values: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in values.items()) or "the only cell"


def _refuse_equal_configs(spec: GridSpec, cells: list[Cell]) -> None:
    """Two cells whose configs resolve to the same thing (``temperature: [1, 1.0]``) would train the
    same run twice under two names: refused, naming both cells' grid values."""
    from harness.records import config_identity

    seen: dict[str, Cell] = {}
    for cell in cells:
        ident = config_identity(cell.cfg.to_dict())
        ident.pop("output", None)  # the record directory differs by construction
        key = json.dumps(ident, sort_keys=True, default=str)
        if key in seen:
            a, b = seen[key].values, cell.values
            differ = [k for k in a if a[k] != b.get(k) or str(a[k]) != str(b.get(k))] or list(a)
            raise GridError(f"{spec.path}: grid values {_label({k: a[k] for k in differ})} and "
                            f"{_label({k: b[k] for k in differ})} resolve to one configuration (cells "
                            f"{Path(seen[key].id).parent} and {Path(cell.id).parent}); list each value once")
        seen[key] = cell


def check_cells(spec: GridSpec, cells: list[Cell]) -> None:
    """Pre-flight every distinct cell configuration before anything runs (names resolve, the
    algorithm's parameters validate, task/algorithm/backend fit); errors name the cell. Two cells
    that compute the same run once the algorithm's parameters are resolved (``algo.beta: [0.5]``
    next to mrtpo's default, ``temperature: [1, 1.0]``) are an error naming both."""
    from harness.preflight import PreflightError, preflight

    resolved: dict[str, dict] = {}
    runs: dict[str, str] = {}
    for cell in cells:
        config = {k: v for k, v in cell.cfg.to_dict().items() if k != "output"}
        config["kind"] = getattr(cell, "kind", "train")  # a base cell evaluates the config a training cell trains
        key = json.dumps({k: v for k, v in config.items() if k != "seed"}, sort_keys=True)
        if key not in resolved:
            try:
                plan = preflight(cell.cfg)
            except PreflightError as exc:
                raise GridError(f"{spec.path}: cell {cell.id}: {exc}") from exc
            resolved[key] = plan.algorithm.config_dict()
        config["algo"] = {**config["algo"], "params": resolved[key]}
        config["task"] = {**config["task"], "options": resolved_task_options(cell.cfg.task.name,
                                                                             cell.cfg.task.options)}
        run = json.dumps(config, sort_keys=True, default=str)
        if run in runs:
            raise GridError(f"{spec.path}: cells {runs[run]} and {cell.id} are the same run once defaults are "
                            f"filled in; drop one of the values")
        runs[run] = cell.id


def base_cells(root: str, cells: list[Cell]) -> list[Cell]:
    """The base-model cells of a grid that says ``base: true``: one per distinct base identity
    among ``cells`` (:func:`harness.base_model.base_identity`: task, model, benchmarks and their
    settings), so a grid of 3 algorithms x 4 seeds on one task and model gets one. Its record
    directory is ``ROOT/<task>/base/<model-slug>/eval-<hash>``; it runs as ``mrbench run --config
    <record>/cell.yaml --base-model`` with the configuration of the first cell that shares its
    identity (the evaluation reads only the identity's fields), through the same executors as the
    training cells, before them. Finished, it is never rerun."""
    from harness.base_model import base_identity, base_record_dir, digest

    out: dict[str, Cell] = {}
    for cell in cells:
        config = cell.cfg.to_dict()
        key = digest(base_identity(config))
        if key in out:
            continue
        path = base_record_dir(root, config)
        cfg = replace(cell.cfg, output=replace(cell.cfg.output, dir=str(path)))
        rel = path.relative_to(root).as_posix()
        values = {"task.name": cell.cfg.task.name, "model.name": cell.cfg.model.name}
        out[key] = replace(cell, id=rel, values=values, overrides=dict(cell.overrides), cfg=cfg, kind="base")
    return list(out.values())
