"""TensorBoard: event files under ``<record>/tb/`` (a resumed run appends to the same directory).

Scalars under their metrics names (``reward/format``, ``adv/format/abs_mean``, ...), the resolved
config as hyper-parameters (the HParams tab) and as text, the tags as text, a few sampled responses
per step as a text table and the end-of-run benchmarks as ``eval/<benchmark>/<metric>``.
"""

from __future__ import annotations

import json
from typing import Any

from harness.loggers.base import Logger, RunInfo, flat_config


def _hparam(value: Any) -> Any:
    return value if isinstance(value, (bool, int, float, str)) else json.dumps(value)


class TensorBoardLogger(Logger):
    name = "tensorboard"
    extra = "tensorboard"

    @classmethod
    def missing(cls, cfg: Any) -> str | None:
        try:
            import tensorboard  # noqa: F401
            from torch.utils.tensorboard import SummaryWriter  # noqa: F401
        except ImportError:
            return "logger tensorboard needs the tensorboard package: pip install 'mrbench[tensorboard]'"
        return None

    def start(self, info: RunInfo, run_id: str | None) -> str | None:
        from torch.utils.tensorboard import SummaryWriter
        from torch.utils.tensorboard.summary import hparams

        directory = info.record / "tb"
        self.writer = SummaryWriter(log_dir=str(directory))
        if run_id is None:  # the first process of this run writes what does not change
            flat = {k: _hparam(v) for k, v in flat_config(info.config).items()}
            for summary in hparams({**flat, **{f"tag.{k}": v for k, v in info.tags.items()}}, {}):
                self.writer.file_writer.add_summary(summary)
            self.writer.add_text("config", "```\n" + json.dumps(info.config, indent=2) + "\n```", 0)
            self.writer.add_text("tags", ", ".join(f"{k}: {v}" for k, v in info.tags.items()), 0)
        return info.name

    def log_scalars(self, step: int, values: dict[str, float]) -> None:
        for key, value in values.items():
            self.writer.add_scalar(key, value, step)
        self.writer.flush()

    def log_samples(self, step: int, rows: list[dict[str, Any]]) -> None:
        lines = ["| example | rewards | response |", "|---|---|---|"]
        for r in rows:
            text = str(r.get("response", "")).replace("|", "\\|").replace("\n", " ")[:500]
            lines.append(f"| {r.get('example')} | {json.dumps(r.get('rewards'))} | {text} |")
        self.writer.add_text("samples", "\n".join(lines), step)

    def close(self, summary: dict[str, Any] | None) -> None:
        self.writer.flush()
        self.writer.close()
