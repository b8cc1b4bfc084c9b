"""The ``example-echo`` task: reply with one given word.

Each prompt has two rewards, and each verifier returns the information it checks as a block, so
MRTPO can replay a response with and without each block (the default leave-one-out contexts of
:meth:`tasks.base.Task.replay_contexts`):

- ``echo`` {0, 1}: the word appears in the response (case-insensitive); block: the expected word;
- ``brief`` {0, 1}: the response has at most ``max_chars`` characters; block: the limit.

Data: eight built-in words (six for ``train``, two for ``test``), or a JSON-lines file of
``{"id": ..., "word": ...}`` rows given as ``data_dir``.
"""

from __future__ import annotations

from typing import Any

from mrbench_core.jsonio import iter_jsonl
from tasks.base import DataError, Example, RewardSpec, Task, Verdict

WORDS = {"train": ("apple", "river", "candle", "orbit", "meadow", "copper"), "test": ("lantern", "pebble")}
REWARDS = ("echo", "brief")


def echo_prompt(word: str) -> list[dict[str, str]]:
    """The chat a model is given for ``word`` (the benchmark uses the same prompt)."""
    return [{"role": "user", "content": f"Reply with the word '{word}' and nothing else."}]


class EchoTask(Task):
    """Echo a given word: rewards ``echo`` (the word is there) and ``brief`` (the reply is short)."""

    name = "example-echo"
    version = "1"
    format_reward = None  # no reward is logged as the format rate

    def __init__(self, max_chars: int = 20):
        if int(max_chars) < 1:
            raise ValueError(f"example-echo: max_chars must be >= 1, got {max_chars}")
        self.max_chars = int(max_chars)

    def reward_specs(self) -> list[RewardSpec]:
        return [RewardSpec("echo", 0.0, 1.0, "the word appears in the response"),
                RewardSpec("brief", 0.0, 1.0, f"at most {self.max_chars} characters")]

    def load(self, split: str = "train", data_dir: str | None = None) -> list[Example]:
        if data_dir is None:
            if split not in WORDS:
                raise DataError(f"example-echo has built-in splits {sorted(WORDS)}, not {split!r}")
            examples = [self.example_from_row({"id": f"{split}-{i}", "word": w}, where="built-in")
                        for i, w in enumerate(WORDS[split])]
        else:  # one file, whatever the split
            examples = [self.example_from_row(row, where=f"{data_dir}, row {n}") for n, row in iter_jsonl(data_dir)]
        return examples  # all of them, in file order: the harness keeps the run's seeded `limit`

    def example_from_row(self, row: dict[str, Any], *, where: str = "", data_dir: str | None = None) -> Example:
        word = row.get("word")
        if not isinstance(word, str) or not word.strip():
            raise DataError("the row needs a non-empty string 'word'", path=where)
        return Example(id=str(row.get("id", word)), messages=echo_prompt(word), reward_names=list(REWARDS),
                       meta={"word": word})

    def score(self, example: Example, response: str) -> list[Verdict]:
        text = response if isinstance(response, str) else ""  # a verifier never raises on model output
        word = example.meta["word"]
        start = text.lower().find(word.lower())
        echoed = Verdict("echo", float(start >= 0), "word found" if start >= 0 else "word missing",
                         block=f"The expected word is '{word}'.",
                         spans=[(start, start + len(word))] if start >= 0 else [])
        short = len(text) <= self.max_chars
        brief = Verdict("brief", float(short), f"{len(text)} characters (limit {self.max_chars})",
                        block=f"A reply longer than {self.max_chars} characters fails.", spans=[(0, len(text))])
        return [echoed, brief]

    def default_benchmarks(self, data_dir: str | None = None) -> dict[str, str | None]:
        return {"example-echo-bench": None}
