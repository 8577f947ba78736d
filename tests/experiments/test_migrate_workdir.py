"""scripts/migrate_workdir.py: an earlier layout converted once to today's."""

import importlib.util
import json
import pathlib

import pytest

from experiments import reproductions
from relational_jax.training import config as config_lib

ROOT = pathlib.Path(__file__).resolve().parents[2]


def load_migrate():
  """scripts/migrate_workdir.py as a module (the library imports nothing
  of it)."""
  spec = importlib.util.spec_from_file_location(
      "migrate_workdir", ROOT / "scripts" / "migrate_workdir.py"
  )
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module


@pytest.fixture(scope="module")
def migrate():
  return load_migrate()


def old_protocol_workdir(root, processors=("floyd",), seeds=(0,)):
  """A work directory as the comparison harness's task clrs_rt_protocol
  wrote it: its config and `<processor>/<algorithm>/seed<s>/` runs."""
  config = {
      "algorithms": ["bellman_ford"],
      "processors": list(processors),
      "protocol": {
          "eval_every": 80,
          "max_eval_samples": 0,
          "steps": 80000,
          "test_points": "new_best",
          "train_size": 10000,
      },
      "results_path": "results/reproductions/x.json",
      "seeds": list(seeds),
      "stop_at_step": 0,
  }
  (root / "config.json").write_text(json.dumps(config))
  for p in processors:
    for s in seeds:
      run = root / p / "bellman_ford" / f"seed{s}"
      (run / "checkpoints" / "latest" / "80").mkdir(parents=True)
      (run / "metrics.jsonl").write_text('{"step": 1}\n')
  return config


def test_a_protocol_workdir_becomes_the_clrs_tasks(migrate, tmp_path):
  old = old_protocol_workdir(tmp_path)
  assert migrate.main([str(tmp_path)]) == 0
  run = tmp_path / "bellman_ford_seed42"
  assert (run / "checkpoints" / "latest" / "80").is_dir()
  assert (run / "metrics.jsonl").read_text() == '{"step": 1}\n'
  assert not (tmp_path / "floyd").exists()
  assert json.loads((tmp_path / migrate.OLD_CONFIG).read_text()) == old
  # The config is the one the reproduction's command builds, so that
  # command resumes the converted run.
  want = config_lib.override(
      reproductions.get("floyd_clrs_core8").build("paper"),
      {
          "algorithms": ("bellman_ford",),
          "seeds": (42,),
          "results_path": "results/reproductions/x.json",
      },
  )
  saved = json.loads((tmp_path / "config.json").read_text())
  assert saved == json.loads(json.dumps(config_lib.to_dict(want)))


def test_refusals_change_nothing(migrate, tmp_path, capsys):
  assert migrate.main([str(tmp_path)]) == 2
  assert "config.json not found" in capsys.readouterr().err
  pair = tmp_path / "pair"
  pair.mkdir()
  old_protocol_workdir(pair, processors=("floyd", "rt"))
  assert migrate.main([str(pair)]) == 2
  assert "a pair_models_clrs work directory" in capsys.readouterr().err
  assert (pair / "rt" / "bellman_ford" / "seed0").is_dir()
  one = tmp_path / "one"
  one.mkdir()
  old_protocol_workdir(one)
  (one / "bellman_ford_seed42").mkdir()
  assert migrate.main([str(one)]) == 2
  assert "exists already" in capsys.readouterr().err
  assert (one / "floyd" / "bellman_ford" / "seed0").is_dir()
  assert "processors" in json.loads((one / "config.json").read_text())
  (one / "bellman_ford_seed42").rmdir()
  assert migrate.main([str(one)]) == 0
  assert migrate.main([str(one)]) == 2
  assert "in this version's format already" in capsys.readouterr().err


def seed(test, best_val):
  """One seed of a harness results JSON."""
  return {
      "validation": [[80, 0.5], [160, best_val]],
      "ood_test": [[80, 0.1], [160, test]],
      "best_step": 160,
      "best_val": best_val,
      "test": test,
      "final_test": test,
      "train_seconds": 10.0,
      "num_params": 7,
  }


def test_a_protocol_results_json_in_the_tasks_layout(migrate, tmp_path):
  old = {
      "budget": {"steps": 160},
      "results": {"rt": {"bellman_ford": {"seeds": {"0": seed(0.25, 0.9)}}}},
      "reproduction": {"name": "rt_clrs_core8", "budget": "paper"},
  }
  path = tmp_path / "rt_clrs_core8_paper__bellman_ford_seed0.json"
  path.write_text(json.dumps(old))
  assert migrate.main(["--protocol_results", str(path)]) == 0
  new = tmp_path / "rt_clrs_core8_paper__bellman_ford_seed42.json"
  assert not path.exists() and new.exists()
  results = json.loads(new.read_text())
  (run,) = results["algorithms"]["bellman_ford"]["runs"]
  assert (run["seed"], run["test"], run["best_step"]) == (42, {"64": 0.25}, 160)
  assert results["config"]["seeds"] == [42]
  assert results["reproduction"]["ours"]["bellman_ford"] == 25.0
  assert "--set='seeds=(42,)'" in results["reproduction"]["command"]
  # Another processor's JSON under this name: refused, nothing written.
  old["results"] = {"mpnn": old["results"]["rt"]}
  path.write_text(json.dumps(old))
  assert migrate.main(["--protocol_results", str(path)]) == 2


def test_the_combined_pair_models_results_split_per_processor(
    migrate, tmp_path
):

  old = {
      "budget": {"steps": 160, "algorithms": ["bellman_ford"]},
      "results": {
          p: {
              "bellman_ford": {
                  "seeds": {"0": seed(0.2, 0.9), "1": seed(0.4, 0.8)}
              }
          }
          for p in ("floyd", "rt", "et")
      },
      "reproduction": {"budget": "cpu"},
  }
  path = tmp_path / "pair_models_clrs_cpu__results.json"
  path.write_text(json.dumps(old))
  (tmp_path / "pair_models_clrs_cpu__results.png").write_text("png")
  assert migrate.main(["--pair_models_results", str(path)]) == 0
  assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
      f"pair_models_clrs_{p}_cpu__results{end}"
      for p in ("floyd", "rt", "et")
      for end in (".json", "_validation.png", "_ood.png")
  )
  rt = json.loads(
      (tmp_path / "pair_models_clrs_rt_cpu__results.json").read_text()
  )
  first, second = rt["algorithms"]["bellman_ford"]["runs"]
  assert (first["seed"], second["seed"]) == (42, 43)
  assert first["history"] == [
      {"step": 80, "val": 0.5, "test": 0.1},
      {"step": 160, "val": 0.9, "test": 0.2},
  ]
  assert first["test"] == {"64": 0.2}
  assert rt["reproduction"]["ours"]["bellman_ford"] == pytest.approx(30.0)
  assert rt["config"]["processor_type"] == "rt"
  assert rt["reproduction"]["name"] == "pair_models_clrs_rt"
