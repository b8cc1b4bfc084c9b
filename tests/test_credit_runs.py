"""Credit records written during training, ``mrbench credit`` and ``mrbench localize`` on the tiny model."""

from __future__ import annotations

import json

import pytest
from text2sql_fixtures import answer, make_db
from torch_fixtures import one_torch_thread  # noqa: F401  (a fixture)
from toy_task import tiny_config, train_run

from harness import cli
from harness.training import credit_store

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _train(cfg):
    return train_run(cfg)[1]


def test_training_appends_one_group_per_step(tmp_path, monkeypatch):
    seen: list[str] = []
    append = credit_store.append_rows

    def watched(directory, rows):
        path = credit_store.credit_path(directory)
        seen.append(path.read_text(encoding="utf-8") if path.exists() else "")
        return append(directory, rows)

    monkeypatch.setattr("harness.training.credit_log.append_rows", watched)
    monkeypatch.setattr(credit_store, "atomic_write_text", lambda *a: pytest.fail("credit.jsonl rewritten"))
    rec = _train(tiny_config(str(tmp_path / "m"), "mrtpo"))
    text = credit_store.credit_path(rec.path).read_text(encoding="utf-8")
    assert len(seen) == 2 and seen[0] == "" and text.startswith(seen[1]) and len(text) > len(seen[1])
    rows = credit_store.read_rows(rec.path)
    assert [(r["step"], r["group"]) for r in rows] == [(1, 0)] * 4 + [(2, 0)] * 4  # G = 4, one group
    samples = [json.loads(line) for line in (rec.path / "samples.jsonl").read_text().splitlines()]
    by = {(r["step"], r["index"]): r for r in rows}
    for step in (1, 2):  # the samples are the step's first responses, the logged group's
        for i, s in enumerate(x for x in samples if x["step"] == step):
            row = by[(step, i)]
            assert "".join(row["tokens"]) == s["response"]
            assert len(row["tokens"]) == len(row["advantage"]) == s["tokens"]
    replayed = [e for r in rows for e in r["rewards"] if e["q"] is not None]
    assert replayed, "no replayed pair recorded"
    for e in replayed:
        assert len(e["q"]) == len(e["w"]) and all(0 <= v <= 1 for v in e["q"])
        assert sum(e["w"]) / len(e["w"]) == pytest.approx(1.0, abs=2e-3)  # Eq. 6 weights average to 1
    assert all(m["time_credit"] >= 0 for m in rec.metrics())


def test_resume_drops_rows_after_the_checkpoint_and_zero_turns_logging_off(tmp_path):
    cfg = tiny_config(str(tmp_path / "m"), "gdpo")
    rec = _train(cfg)
    credit_store.append_rows(rec.path, [{"step": 3, "rewards": [], "tokens": []}])  # logged, then killed before its checkpoint
    _train(cfg)  # resumes at the step-2 checkpoint
    rows = credit_store.read_rows(rec.path)
    assert [r["step"] for r in rows] == [1] * 4 + [2] * 4
    assert all(e["q"] is None and e["w"] is None for r in rows for e in r["rewards"])  # GDPO: no relevance
    off = _train(tiny_config(str(tmp_path / "off"), "gdpo", output__credit_groups=0))
    assert not credit_store.credit_path(off.path).exists()
    with pytest.raises(ValueError, match="credit_groups: must be >= 0"):
        _train(tiny_config(str(tmp_path / "bad"), "gdpo", output__credit_groups=-1))


def test_store_skips_a_truncated_last_line(tmp_path):
    path = credit_store.credit_path(tmp_path)
    path.write_text('{"step": 1}\n{"step": 2}\n{"step": 3, "tok')
    assert [r["step"] for r in credit_store.read_rows(tmp_path)] == [1, 2]
    credit_store.append_rows(tmp_path, [{"step": 3}])
    assert [r["step"] for r in credit_store.read_rows(tmp_path)] == [1, 2, 3]
    path.write_text('{"step": 1}\nnot json\n{"step": 2}\n')
    with pytest.raises(Exception, match="line 2|row 2"):
        credit_store.read_rows(tmp_path)


def test_credit_page_from_a_record(tmp_path, capsys, trained):
    rec = trained("mrtpo", steps=2).record
    page = tmp_path / "page.html"
    assert cli.main(["credit", str(rec.path), "--step", "1", "--out", str(page)]) == 0
    text = page.read_text(encoding="utf-8")
    assert "<script" in text and "http" not in text.split("<body", 1)[1]  # nothing fetched
    data = json.loads(text.split('type="application/json">', 1)[1].split("</script>", 1)[0])
    assert [r["step"] for r in data] == [1] * 4
    assert cli.main(["credit", str(rec.path), "--step", "9", "--out", str(page)]) == 2
    assert "logged steps: 1, 2" in capsys.readouterr().err
    assert cli.main(["credit", str(rec.path), "--model", "tiny-random", "--out", str(page)]) == 2


def _localize(tmp_path, *args):
    out = tmp_path / "loc"
    assert cli.main(["localize", "--model", "tiny-random", "--dtype", "float32", "--max-new-tokens", "24", *args,
                     "--out", str(out)]) == 0
    return out, json.loads((out / "localize.json").read_text())


def test_localize_instruction_following_writes_every_output(tmp_path):
    out, result = _localize(tmp_path, "--n", "3")
    for name in ("table4.md", "table4.csv", "localize.json", "concentration.png", "credit.jsonl", "responses.jsonl"):
        assert (out / name).stat().st_size > 0, name
    assert result["counts"]["responses"] == 3 and result["counts"]["replayed"] == result["counts"]["pairs"] > 0
    md = (out / "table4.md").read_text()
    assert "**all satisfied**" in md and "**all violated**" in md and "80% of the distance" in md
    assert result["correlation"]["pairs"] > 0
    assert (out / "concentration.png").read_bytes()[:4] == b"\x89PNG"
    page = tmp_path / "replayed.html"  # the saved responses replay to the same texts and verdicts
    assert cli.main(["credit", "--model", "tiny-random", "--task", "ifollow", "--data", str(out / "responses.jsonl"),
                     "--out", str(page)]) == 0
    again = json.loads(page.read_text().split('type="application/json">', 1)[1].split("</script>", 1)[0])
    first = credit_store.read_rows(out)
    assert ["".join(r["tokens"]) for r in again] == ["".join(r["tokens"]) for r in first]
    assert [[e["value"] for e in r["rewards"]] for r in again] == [[e["value"] for e in r["rewards"]] for r in first]


def test_localize_text_to_sql_reads_clause_spans(tmp_path):
    db = make_db(tmp_path)
    example = {"id": "q1", "messages": [{"role": "user", "content": "Names of employees over 30?"}],
               "reward_names": ["format", "executable", "execution"],
               "meta": {"db_path": str(db), "query": "SELECT name FROM emp WHERE age > 30"}}
    responses = tmp_path / "rows.jsonl"
    rows = [answer("SELECT name FROM emp WHERE age > 30"), answer("SELECT name FROM emp WHERE age >= 30"),
            answer("SELECT nom FROM telefone")]
    responses.write_text("".join(json.dumps({"example": example, "response": r}) + "\n" for r in rows))
    out, result = _localize(tmp_path, "--task", "text2sql", "--responses", str(responses))
    credit = credit_store.read_rows(out)
    execution = [next(e for e in r["rewards"] if e["name"] == "execution") for r in credit]
    assert [e["value"] for e in execution] == [1.0, 0.0, 0.0]
    first = credit[0]
    read = "".join(first["tokens"][i] for a, b in execution[0]["read"] for i in range(a, b))
    assert read == "nameage > 30"  # the select list and the condition
    assert {r["type"] for r in result["table4"]} == {"format", "executable", "execution"}


def test_localize_tool_calling_on_the_demo_set(tmp_path):
    _, result = _localize(tmp_path, "--task", "toolcall", "--n", "2")
    assert result["counts"]["responses"] == 2 and result["counts"]["replayed"] > 0
