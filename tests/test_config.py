import json
import re
from pathlib import Path

import pytest
import yaml

from harness.config import ConfigError, RunConfig, from_dict, model_slug, parse_overrides, resolve

pytestmark = pytest.mark.torchfree  # runs where torch is not installed (.ci/run)


def test_defaults_are_the_main_job():
    cfg = resolve()
    assert cfg.task.name == "ifollow"
    assert cfg.algo.name == "mrtpo"
    assert cfg.model.name == "smollm2-135m"
    assert cfg.backend.name == "local"
    assert cfg.seed == 0


@pytest.mark.parametrize(
    "pairs, check",
    [
        ([("algo.beta", "0.25")], lambda c: c.algo.params["beta"] == 0.25),  # warm-up sizing: test_warmup_sizing
        ([("algo", "gdpo")], lambda c: c.algo.name == "gdpo"),
        ([("seed", "3")], lambda c: c.seed == 3),
        ([("sampling.top_k", "100")], lambda c: c.sampling.top_k == 100),
        ([("sampling.top_k", "null")], lambda c: c.sampling.top_k is None),
        ([("optim.lr", "1e-6")], lambda c: c.optim.lr == 1e-6),
        ([("optim.lr", "1")], lambda c: c.optim.lr == 1.0 and isinstance(c.optim.lr, float)),
        ([("model.lora", "true")], lambda c: c.model.lora is True),
        ([("schedule.eval_benchmarks", "[ifeval, ifbench]")], lambda c: c.schedule.eval_benchmarks == ["ifeval", "ifbench"]),
        ([("model", "Qwen/Qwen2.5-1.5B-Instruct")], lambda c: c.model.name == "Qwen/Qwen2.5-1.5B-Instruct"),
    ],
)
def test_overrides(pairs, check):
    assert check(resolve(None, pairs))


@pytest.mark.parametrize(
    "pairs, message",
    [
        ([("optim.lr", "fast")], "optim.lr: expected a number, got 'fast'"),
        ([("optim.lrr", "1")], "optim.lrr: unknown field; known fields of optim: lr"),
        ([("sampling.group_size", "2.5")], "sampling.group_size: expected an integer"),
        ([("model.lora", "maybe")], "model.lora: expected true/false"),
        ([("nosuch", "1")], "nosuch: unknown field"),
    ],
)
def test_bad_values_name_the_field(pairs, message):
    with pytest.raises(ConfigError) as info:
        resolve(None, pairs)
    assert message in str(info.value)


def test_recipe_file_then_overrides(tmp_path):
    recipe = tmp_path / "r.yaml"
    recipe.write_text("task:\n  name: toolcall\nalgo:\n  name: mrtpo\n  params:\n    beta: 0.5\n    warmup_steps: 10\n"
                      "sampling:\n  group_size: 4\n")
    cfg = resolve(str(recipe), [("algo.beta", "0.3"), ("sampling.temperature", "1.1")])
    assert cfg.task.name == "toolcall"
    assert cfg.algo.params == {"beta": 0.3, "warmup_steps": 10}
    assert cfg.sampling.group_size == 4 and cfg.sampling.temperature == 1.1


def test_unknown_recipe_lists_shipped():
    with pytest.raises(ConfigError, match="not found"):
        resolve("no-such-recipe")


def test_resolved_config_round_trips_through_json():
    cfg = resolve(None, [("algo.beta", "0.1"), ("sampling.top_k", "50")])
    again = from_dict(json.loads(cfg.to_json()))
    assert again == cfg
    assert isinstance(again, RunConfig)


def test_parse_overrides_routes_algo_params():
    assert parse_overrides([("algo.beta", "0.25"), ("algo.name", "mrtpo")]) == {
        "algo": {"params": {"beta": 0.25}, "name": "mrtpo"}
    }


@pytest.mark.parametrize("name, slug", [("smollm2-135m", "smollm2-135m"),
                                         ("Qwen/Qwen2.5-1.5B-Instruct", "qwen2.5-1.5b-instruct"),
                                         ("/models/my model/", "my-model")])
def test_model_slug(name, slug):
    assert model_slug(name) == slug


def test_every_field_has_a_description():
    from harness.config_help import FieldDoc, config_fields

    docs = config_fields()
    assert {d.path for d in docs} >= {"optim.lr", "backend.local.threads", "backend.options", "seed"}
    assert [d.path for d in docs if not d.help] == []
    assert all(d.type for d in docs if isinstance(d, FieldDoc))


def test_local_backend_options_have_their_own_section():
    cfg = resolve(None, [("backend.local.threads", "1"), ("backend.local.generator", "transformers")])
    assert cfg.backend.local.threads == 1 and cfg.backend.local.generator == "transformers"
    assert cfg.backend.name == "local" and cfg.backend.options == {}


@pytest.mark.parametrize("old,new", [("threads", "backend.local.threads"), ("generator", "backend.local.generator"),
                                     ("replay_batch_size", "replay.batch_size"), ("share_prefix", "replay.share_prefix"),
                                     ("rollout_attention", "backend.local.rollout_attention")])
def test_old_backend_keys_name_their_new_place(old, new, tmp_path):
    with pytest.raises(ConfigError, match=rf"^backend\.{old}: moved to {re.escape(new)}$"):
        resolve(None, [(f"backend.{old}", "1")])
    recipe = tmp_path / "old.yaml"
    recipe.write_text(f"backend:\n  name: local\n  {old}: 1\n")
    with pytest.raises(ConfigError, match=rf"moved to {re.escape(new)}"):
        resolve(str(recipe))


@pytest.mark.parametrize("backend", ["local", "openrlhf"])
def test_the_replay_settings_are_one_section_and_their_old_places_read_through_the_resolver(backend, tmp_path):
    cfg = resolve(None, [("backend", backend), ("replay.batch_size", "3"), ("replay.share_prefix", "false")])
    assert (cfg.replay.batch_size, cfg.replay.chunk_size, cfg.replay.share_prefix) == (3, 128, False)
    # given at an old place on the command line: refused with the new place
    for old, new in (("replay_batch_size", "batch_size"), ("replay_chunk_size", "chunk_size"),
                     ("share_prefix", "share_prefix")):
        with pytest.raises(ConfigError, match=rf"^backend\.{backend}\.{old}: moved to replay\.{new}$"):
            resolve(None, [("backend", backend), (f"backend.{backend}.{old}", "2")])
    # a recipe or a record of an earlier release: the running backend's values, at their new place
    other = "openrlhf" if backend == "local" else "local"
    written = {"backend": {"name": backend, backend: {"replay_batch_size": 3, "replay_chunk_size": 64,
                                                      "share_prefix": False},
                           other: {"replay_batch_size": 8, "replay_chunk_size": 128, "share_prefix": True}}}
    recipe = tmp_path / "old.yaml"
    recipe.write_text(yaml.safe_dump(written))
    for old in (resolve(str(recipe)), from_dict(written)):
        assert (old.replay.batch_size, old.replay.chunk_size, old.replay.share_prefix) == (3, 64, False)
    assert written["backend"][backend]["replay_batch_size"] == 3  # read, not changed
    # the other backend's copy away from its default was refused by pre-flight then: still refused, by name
    written["backend"][other]["replay_batch_size"] = 4
    with pytest.raises(ConfigError, match=rf"backend\.{other}\.replay_batch_size: moved to replay\.batch_size"):
        from_dict(written)


def test_an_old_record_is_the_same_configuration_as_its_run_today():
    from harness.records import config_identity, same_configuration

    old = json.loads((Path(__file__).parent / "fixtures" / "old_records" / "old-finished" / "config.json").read_text())
    assert "replay_batch_size" in old["backend"]["local"] and "replay" not in old  # written before the section
    today = from_dict(old).to_dict()
    assert "replay_batch_size" not in today["backend"]["local"] and today["replay"]["batch_size"] == 8
    assert same_configuration(old, today) and config_identity(old) == config_identity(today)
    today["replay"]["batch_size"] = 4
    assert not same_configuration(old, today)


def test_plugin_backend_options_are_a_mapping_per_backend():
    cfg = resolve(None, [("backend", "remote"), ("backend.options.remote.workers", "4"),
                         ("backend.options.remote.queue", "fast"), ("backend.options.other", "{a: 1}")])
    assert cfg.backend.options == {"remote": {"workers": 4, "queue": "fast"}, "other": {"a": 1}}
    with pytest.raises(ConfigError, match=r"backend\.options\.remote: expected a mapping, got 4"):
        resolve(None, [("backend.options.remote", "4")])
    with pytest.raises(ConfigError, match=r"backend\.options\.local: the local backend's options are backend\.local"):
        resolve(None, [("backend.options.local.threads", "1")])


def test_yaml_is_the_recorded_config_and_a_valid_recipe(tmp_path):
    import yaml

    cfg = resolve("toolcall-paper", [("optim.lr", "2e-6"), ("backend.local.threads", "2"), ("algo.beta", "0.3")])
    text = cfg.to_yaml()
    assert "lr: 2.0e-06" in text.splitlines()[text.splitlines().index("optim:") + 1]
    assert yaml.safe_load(text) == json.loads(cfg.to_json())
    recipe = tmp_path / "shown.yaml"
    recipe.write_text(text)
    assert resolve(str(recipe)) == cfg
