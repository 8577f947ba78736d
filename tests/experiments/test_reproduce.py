"""experiments.reproduce: the list, and every named reproduction at the smoke
budget, end to end (the published number is stored beside ours)."""

import json
import os
import subprocess
import sys

import pytest

from experiments import reproduce
from experiments import reproductions

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
REQUIRED = ("rt_clrs_core8", "rt_clrs_all30", "mpnn_clrs_core8",
            "mpnn_clrs_all30", "triplet_gmpnn_clrs_all30",
            "scan_cutoff26_relative_universal",
            "scan_cutoff26_absolute_universal", "cogs_relative_transformer",
            "cogs_edge_transformer", "readme_main_job")


def test_list_names_every_reproduction_with_its_paper_and_number():
  proc = subprocess.run([sys.executable, "-m", "experiments.reproduce", "--list"],
                        cwd=REPO, capture_output=True, text=True, timeout=300)
  assert proc.returncode == 0, proc.stderr[-2000:]
  for name in REQUIRED:
    line = next(l for l in proc.stdout.splitlines() if l.startswith(name + " "))
    key, value = reproductions.get(name).headline()
    assert f"{key} {value}" in line and reproductions.get(name).where in line


def test_budgets_scale_only_length_evaluation_and_seeds():
  allowed = ("protocol.", "train.steps", "train.eval_every", "train.progress",
             "train.batch_size", "train.eval_batch_size",
             "data.max_eval_examples", "seeds", "algorithms")
  for r in reproductions.REPRODUCTIONS.values():
    for budget, overrides in r.budgets.items():
      for path in overrides:
        assert path.startswith(allowed), (r.name, budget, path)
      r.build(budget)  # every override names a real path
  with pytest.raises(ValueError, match=r"Unknown budget 'fast'; valid budgets are"):
    reproductions.get("rt_clrs_core8").build("fast")
  with pytest.raises(ValueError, match=r"Unknown reproduction 'rt'; valid names are"):
    reproductions.get("rt")


def test_paper_budgets_follow_the_papers():
  rt = reproductions.get("rt_clrs_core8").build("paper")
  assert rt.protocol.batch_size * rt.protocol.train_steps == 320_000
  assert rt.protocol.batch_size * rt.protocol.eval_every == 320
  assert len(rt.seeds) == 20 and rt.protocol.test_lengths == (64,)
  assert rt.rt.num_layers == 3 and rt.rt.num_heads * rt.rt.head_dim == 192
  assert len(reproductions.get("rt_clrs_all30").build("paper").algorithms) == 30
  scan = reproductions.get("scan_cutoff26_relative_universal").build("paper")
  assert scan.train.steps == 50_000 and scan.transformer.positions == "relative"


@pytest.fixture(scope="module")
def smoke_workdirs(tmp_path_factory):
  """One work dir per distinct smoke config: reproductions whose smoke runs
  are the same config (e.g. rt_clrs_core8 and rt_clrs_all30 both smoke-test
  activity_selector) share it, so the second resumes the finished run."""
  root, dirs = tmp_path_factory.mktemp("smoke"), {}
  def get(name):
    key = reproductions.get(name).build("smoke").to_json(sort_keys=True)
    return dirs.setdefault(key, str(root / name))
  return get


@pytest.mark.parametrize("name", sorted(reproductions.REPRODUCTIONS))
def test_every_reproduction_runs_at_smoke_budget(name, smoke_workdirs):
  workdir = smoke_workdirs(name)
  record = reproduce.run(name, "smoke", workdir, log=lambda m: None)
  assert record["published"] == dict(reproductions.get(name).published)
  key, _ = reproductions.get(name).headline()
  if reproductions.get(name).task == "clrs":
    assert 0.0 <= record["ours"]["mean"] <= 100.0
  else:
    assert set(record["ours"]) & {"gen", "iid"}
  with open(os.path.join(workdir, "reproduction.json")) as f:
    saved = json.load(f)
  assert saved["name"] == name and saved["published"] == record["published"]
  with open(record["results_path"]) as f:
    assert json.load(f)["reproduction"]["ours"] == record["ours"]
  # Resumed with the same work dir, a finished run continues (nothing to do)
  # and gives the same numbers.
  again = reproduce.run(name, "smoke", workdir, log=lambda m: None)
  assert again["ours"] == record["ours"]
