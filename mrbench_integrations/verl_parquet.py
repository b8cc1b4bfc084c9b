"""Write a task's prompts as the parquet files verl's trainer reads (``data.train_files``, ``data.val_files``).

    python -m mrbench_integrations.verl_parquet ifollow --out verl-data --limit 256 --val-limit 64

writes ``verl-data/train.parquet`` (the prompts ``mrbench run`` trains on for the same split,
limit and seed) and ``verl-data/val.parquet`` (the task's held-out split), in the row form of
verl's own data preparation scripts: ``data_source`` (``mrbench/<task>``), ``prompt`` (chat
messages), ``ability`` (the task), ``reward_model`` (``{"style": "rule", "ground_truth": ...}``:
what :func:`mrbench_integrations.verl.compute_score` reads) and ``extra_info`` (split, index,
the example's id). Both files carry the reward keys of both, so every response verl scores has
the same keys. It then prints the verl settings that use them. Text-to-SQL rows name their
database files by path (``--data-dir``): train where those paths hold.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from mrbench_core.errors import DataError
from mrbench_core.registry import UnknownNameError
from mrbench_integrations.task_rewards import keys_of, resolve_task
from mrbench_integrations.verl import encode_ground_truth, source_name
from tasks.base import Example, Task
from tasks.data_source import load_examples

#: the task's held-out split for val.parquet (``--val-split``)
DEFAULT_VAL_SPLIT = {"ifollow": "test", "text2sql": "dev", "toolcall": "test"}


def verl_rows(task: Task, examples: Sequence[Example], split: str, keys: Sequence[str],
              options: Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
    """One verl row per example (module docstring)."""
    return [{"data_source": source_name(task), "prompt": [dict(m) for m in ex.messages], "ability": task.name,
             "reward_model": {"style": "rule", "ground_truth": encode_ground_truth(task, ex, keys, options)},
             "extra_info": {"split": split, "index": i, "id": ex.id}}
            for i, ex in enumerate(examples)]


def write_parquet(rows: list[dict[str, Any]], path: Path) -> None:
    import pandas as pd

    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    pd.DataFrame(rows).to_parquet(tmp, index=False)
    tmp.replace(path)


def write_task(task: Task, out: Path, *, train_split: str, val_split: str | None, data_dir: str | None,
               limit: int | None, val_limit: int | None, seed: int,
               options: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Write ``out/train.parquet`` (and ``out/val.parquet`` unless ``val_split`` is None); returns
    what was written: paths, row counts and the reward keys."""
    splits = {"train": (train_split, limit)}
    if val_split is not None:
        splits["val"] = (val_split, val_limit)
    examples = {name: load_examples(task, split, data_dir, n, seed) for name, (split, n) in splits.items()}
    keys = keys_of(task, [ex for exs in examples.values() for ex in exs])
    written = {}
    for name, exs in examples.items():
        path = out / f"{name}.parquet"
        write_parquet(verl_rows(task, exs, splits[name][0], keys, options), path)
        written[name] = {"path": str(path), "rows": len(exs)}
    return {"files": written, "keys": keys}


def _option(text: str) -> tuple[str, Any]:
    name, sep, value = text.partition("=")
    if not sep or not name:
        raise argparse.ArgumentTypeError(f"--option takes KEY=VALUE, got {text!r}")
    return name, yaml.safe_load(value)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m mrbench_integrations.verl_parquet",
                                     description="write a task's prompts as verl's train/val parquet files")
    parser.add_argument("task", help="the task (mrbench list): ifollow, text2sql, toolcall or a plugin's")
    parser.add_argument("--out", required=True, help="folder for train.parquet and val.parquet")
    parser.add_argument("--data-dir", help="the task's data (as mrbench run's --task.data_dir); default: its own")
    parser.add_argument("--split", default="train", help="the training split (default train)")
    parser.add_argument("--val-split", help="the validation split (default: the task's held-out split; 'none': "
                                            "no val.parquet)")
    parser.add_argument("--limit", type=int, help="training prompts (default: the task's own number)")
    parser.add_argument("--val-limit", type=int, default=64, help="validation prompts (default 64)")
    parser.add_argument("--seed", type=int, default=0, help="the seed of the prompts' sample (as mrbench run's)")
    parser.add_argument("--option", action="append", type=_option, default=[], metavar="KEY=VALUE",
                        help="a task option (as mrbench run's --task.options.KEY), repeatable")
    args = parser.parse_args(argv)
    options = dict(args.option)
    try:
        task = resolve_task(args.task, options)
        val_split = args.val_split or DEFAULT_VAL_SPLIT.get(task.name, "test")
        result = write_task(task, Path(args.out), train_split=args.split,
                            val_split=None if val_split == "none" else val_split, data_dir=args.data_dir,
                            limit=args.limit, val_limit=args.val_limit, seed=args.seed, options=options)
    except (DataError, UnknownNameError, ValueError, TypeError, FileNotFoundError) as exc:
        print(f"verl_parquet: {exc}", file=sys.stderr)
        return 2
    for name, info in result["files"].items():
        print(f"{info['rows']} {name} rows -> {info['path']}")
    print(print_settings(result))
    return 0


def print_settings(result: Mapping[str, Any]) -> str:
    """The verl overrides that train on the written files with mrbench's rewards."""
    from mrbench_integrations import verl

    files = result["files"]
    keys = ",".join(f'"{k}"' for k in result["keys"])
    lines = [f"data.train_files={files['train']['path']}"]
    if "val" in files:
        lines.append(f"data.val_files={files['val']['path']}")
    lines += [f"reward.custom_reward_function.path={verl.__file__}", "reward.custom_reward_function.name=compute_score",
              f"+algorithm.gdpo_reward_keys='[{keys}]'  # with algorithm.adv_estimator=gdpo"]
    return "verl settings:\n  " + "\n  ".join(lines)


if __name__ == "__main__":
    sys.exit(main())
