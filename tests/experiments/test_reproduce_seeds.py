"""experiments.reproduce --seeds: one run per training seed, named as the
committed CLUTRR results are, each resumed on its own, their aggregate, the
results copies and the reproduction's figures; bad seeds named in one line.
Fast: a stand-in task (tests/experiments/seeded_task.py), no training."""

import json
import os
import re
import subprocess
import sys

import pytest

from experiments import reproduce
from experiments import reproductions
from relational_jax.training import registry
from tests.experiments import seeded_task

REPO = os.path.dirname(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
)


@pytest.fixture
def fake(tmp_path, monkeypatch):
  """Reproduction 'fake_seeded' of the stand-in task, its copies and its
  figure under tmp_path/results."""
  drawn = []

  def figures(budget):
    path = str(tmp_path / "results" / f"figure_{budget}.png")
    drawn.append(sorted(os.listdir(tmp_path / "results")))
    return (path,)

  monkeypatch.setitem(registry.TASKS, "seeded", "tests.experiments.seeded_task")
  monkeypatch.setitem(
      reproductions.REPRODUCTIONS,
      "fake_seeded",
      reproductions.Reproduction(
          "fake_seeded",
          "seeded",
          "A paper",
          "Table 1",
          "accuracy",
          {"accuracy": 0.5},
          seeded_task.default_config,
          {},
          results_copy={
              "cpu": str(tmp_path / "results" / "{name}{seed}.json"),
              "paper": str(tmp_path / "results" / "{name}_paper{seed}.json"),
          },
          figures=figures,
      ),
  )
  seeded_task.TRAINED.clear()
  return tmp_path, drawn


def test_parse_seeds_names_a_bad_value():
  assert reproduce.parse_seeds("42,43,44") == [42, 43, 44]
  assert reproduce.parse_seeds("7") == [7]
  for text, message in [
      ("a", "--seeds='a': 'a' is not a non-negative integer"),
      ("42,-1", "'-1' is not a non-negative integer"),
      ("42,", "'' is not a non-negative integer"),
      ("42,42", "seed 42 is given twice"),
  ]:
    with pytest.raises(ValueError, match=re.escape(message)):
      reproduce.parse_seeds(text)


def test_each_seed_is_a_run_named_as_the_committed_results(fake):
  tmp_path, drawn = fake
  workdir = str(tmp_path / "runs" / "fake")
  log = []
  sweep = reproduce.run_seeds(
      "fake_seeded", "paper", [42, 43, 44], workdir, log.append,
      copy_results=True,
  )  # fmt: skip
  # The config's own seed (42) untagged, the others __seed<S>.
  assert seeded_task.TRAINED == [
      workdir,
      workdir + "__seed43",
      workdir + "__seed44",
  ]
  assert sorted(os.listdir(tmp_path / "results")) == [
      "fake_seeded_paper.json",
      "fake_seeded_paper__seed43.json",
      "fake_seeded_paper__seed44.json",
  ]
  assert drawn == [sorted(os.listdir(tmp_path / "results"))]  # After all.
  with open(tmp_path / "results" / "fake_seeded_paper__seed43.json") as f:
    copied = json.load(f)
  assert copied["config"]["train"]["seed"] == 43
  assert copied["reproduction"]["overrides"] == {"train.seed": 43}
  assert copied["reproduction"]["command"] == (
      "python -m experiments.reproduce fake_seeded --budget=paper"
      " --set=train.seed=43"
  )
  with open(os.path.join(workdir, "reproduction.json")) as f:
    assert "overrides" not in json.load(f)  # The config's own seed.
  assert sweep["seeds"] == [42, 43, 44] and sweep["seed_path"] == "train.seed"
  assert sweep["ours"]["43"] == {"accuracy": 0.43, "label": "text"}
  assert sweep["mean"] == {"accuracy": pytest.approx(0.43)}
  assert sweep["sd"] == {"accuracy": pytest.approx(0.01)}
  assert sweep["aggregate"] == {"test_sums": [126, 129, 132]}
  assert sweep["command"].endswith("--budget=paper --seeds=42,43,44")
  with open(workdir + "__seeds.json") as f:
    assert json.load(f) == json.loads(json.dumps(sweep))
  assert any("drew" in m for m in log)
  # The same command again: every seed resumed, nothing trained.
  again = reproduce.run_seeds(
      "fake_seeded", "paper", [42, 43, 44], workdir, log.append,
      copy_results=True,
  )  # fmt: skip
  assert len(seeded_task.TRAINED) == 3 and again["mean"] == sweep["mean"]


def test_seeds_without_the_own_seed_and_variants(fake):
  tmp_path, drawn = fake
  workdir = str(tmp_path / "runs" / "fake")
  reproduce.run_seeds(
      "fake_seeded", "cpu", [43], workdir, lambda m: None, copy_results=True
  )
  assert seeded_task.TRAINED == [workdir + "__seed43"]
  assert os.listdir(tmp_path / "results") == ["fake_seeded__seed43.json"]
  # A --set variant is neither copied nor drawn.
  sweep = reproduce.run_seeds(
      "fake_seeded", "cpu", [42, 44], str(tmp_path / "v"), lambda m: None,
      {"train.steps": 5}, copy_results=True,
  )  # fmt: skip
  assert os.listdir(tmp_path / "results") == ["fake_seeded__seed43.json"]
  assert len(drawn) == 1 and sweep["overrides"] == {"train.steps": 5}
  assert os.path.isfile(tmp_path / "v__seed44" / "results.json")
  # One run, no --seeds: as before, plus its copy.
  reproduce.run(
      "fake_seeded", "cpu", workdir, lambda m: None, copy_results=True
  )
  assert "fake_seeded.json" in os.listdir(tmp_path / "results")


def test_seeds_need_a_task_with_one_training_seed(fake):
  with pytest.raises(ValueError, match=r"task 'clrs'\) has no single"):
    reproduce.check("rt_clrs_core8", "smoke", {}, [1, 2])
  reproduce.check("fake_seeded", "cpu", {}, [1, 2])
  with pytest.raises(ValueError, match="train.steps must be >= 1"):
    reproduce.check("fake_seeded", "cpu", {"train.steps": 0}, [1])


def test_clutrr_copies_keep_the_committed_results_names():
  """Every committed results/clutrr/<name>[_paper][__seed<S>].json is the
  results copy of its reproduction at its budget and seed."""
  names = os.listdir(os.path.join(REPO, "results", "clutrr"))
  pattern = re.compile(r"^(clutrr_.+?_k234?)(_paper)?(__seed\d+)?\.json$")
  matched = 0
  for name in names:
    m = pattern.match(name)
    if not m or m.group(1) not in reproductions.REPRODUCTIONS:
      continue  # Variants (__holdout02, __sound, __lr1e-3), figures, stats.
    r = reproductions.get(m.group(1))
    budget = "paper" if m.group(2) else "cpu"
    assert r.copy_path(budget, m.group(3) or "") == f"results/clutrr/{name}"
    assert r.figures is not None
    matched += 1
  assert matched >= 20


@pytest.mark.slow  # A subprocess importing every reproduction: ~25 s.
def test_a_bad_seed_is_one_line_and_exit_2():
  proc = subprocess.run(
      [sys.executable, "-m", "experiments.reproduce", "clutrr_et_k23",
       "--budget=smoke", "--seeds=42,a"],
      cwd=REPO, capture_output=True, text=True, timeout=300,
  )  # fmt: skip
  assert proc.returncode == 2, proc.stderr[-2000:]
  lines = proc.stderr.strip().splitlines()
  assert lines[-1] == (
      "reproduce: error: --seeds='42,a': 'a' is not a non-negative integer;"
      " give seeds as 42,43,44."
  ), proc.stderr[-2000:]
