"""Small task, evaluator and backend used to test the generic harness plumbing."""

from __future__ import annotations

from evals.base import EvalCase, EvalReport, Evaluator
from tasks.base import DataError, Example, Task, Verdict


class ShoutTask(Task):
    """Rewards: 'upper' (response is upper case) and 'has_word' (contains meta['word'])."""

    name = "shout"
    version = "1"
    format_reward = None

    def load(self, split="train", data_dir=None):
        words = ["apple", "pear", "plum"]
        return [Example(f"s{i}", [{"role": "user", "content": f"Say {w} loudly"}], ["upper", "has_word"],
                        {"word": w}) for i, w in enumerate(words)]

    def example_from_row(self, row, *, where="", data_dir=None):
        if "word" not in row:
            raise DataError("row has no 'word'", path=where)
        return Example(str(row.get("id", "")), [{"role": "user", "content": row.get("prompt", "")}],
                       ["upper", "has_word"], {"word": row["word"]})

    def score(self, example, response):
        up = float(bool(response) and response == response.upper())
        has = float(example.meta["word"].lower() in response.lower())
        return [Verdict("upper", up, "all upper" if up else "not all upper", "Write in capitals.",
                        [(0, len(response))]),
                Verdict("has_word", has, "found" if has else "missing", f"Say {example.meta['word']}.")]


class ShoutEvaluator(Evaluator):
    name = "shout-bench"
    task = "shout"

    def cases(self, data_dir=None, categories=None):
        return [EvalCase("a", [{"role": "user", "content": "x"}], "cat1", {"word": "apple", "prompt": "pa"}),
                EvalCase("b", [{"role": "user", "content": "y"}], "cat2", {"word": "pear", "prompt": "pb"})]

    def score(self, cases, responses):
        rows = [{"id": c.id, "category": c.category,
                 "valid": c.meta["word"].upper() in responses.get(c.id, "")} for c in cases]
        acc = sum(r["valid"] for r in rows) / len(rows)
        return EvalReport(rows, {"accuracy": acc}, f"| accuracy |\n|---|\n| {acc:.2f} |")
