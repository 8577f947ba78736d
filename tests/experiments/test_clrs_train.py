"""experiments.clrs_train, the absl entry point: --config.* flags, the older
flat flag names as aliases, and resuming a library run from the command line."""

import json
import os
import subprocess
import sys

import pytest

from relational_jax.training.clrs import config as clrs_config
from relational_jax.training.clrs import loop as clrs_loop
from tests.training.clrs.test_loop import tiny

REPO = os.path.dirname(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
)


def test_flat_names_set_the_config_paths_they_alias():
  """The older flat names the command line below passes set their config
  fields (in-process, no training: this module's fast-tier test)."""
  default = clrs_config.default_config()
  config = clrs_config.apply_legacy(
      default,
      {
          "processor_type": "rt",
          "hidden_size": 16,
          "nb_heads": 2,
          "num_layers": 1,
          "train_steps": 3,
      },
  )
  assert config.model.hidden_dim == 16
  assert config.processor.nb_heads == 2  # Heads: one field, every kind.
  assert (config.rt.num_layers, config.train.steps) == (1, 3)
  # A name shared by the model sections sets only the one in use.
  assert config.et.num_layers == default.et.num_layers


def test_old_config_paths_set_todays_fields(monkeypatch):
  """--config.<path> of earlier versions (compat.CLRS_RENAMED_PATHS: the
  model sections' num_heads / use_ln, the paths moved into `train`) set
  today's fields (in-process, no training)."""
  from absl import flags  # pylint: disable=g-import-not-at-top
  from relational_jax.training import cli  # pylint: disable=g-import-not-at-top
  from relational_jax.training import compat  # pylint: disable=g-import-not-at-top

  old = ["--config.et.num_heads=3", "--noconfig.rt.use_ln"]
  monkeypatch.setattr(
      sys, "argv", ["clrs_train", *old, "--config.protocol.train_steps=5"]
  )
  flag_values = flags.FlagValues()
  holder = cli.define_config_flag(
      "config",
      clrs_config.default_config(),
      flag_values=flag_values,
      renamed=compat.CLRS_RENAMED_PATHS,
  )
  assert sys.argv[1:] == [
      "--config.processor.nb_heads=3",
      "--noconfig.processor.use_ln",
      "--config.train.steps=5",
  ]
  flag_values(sys.argv)
  config = holder.value
  assert (config.processor.nb_heads, config.processor.use_ln) == (3, False)
  assert config.train.steps == 5


@pytest.mark.slow
def test_command_line_resumes_a_library_run(tmp_path):
  workdir = str(tmp_path / "run")
  results = clrs_loop.train_and_evaluate(tiny(), workdir)
  run = results["algorithms"]["bellman_ford"]["runs"][0]
  # The command line, on the same directory with more steps, resumes at step
  # 2; old flat names, config paths renamed since (--config.protocol.*,
  # --config.rt.num_heads for processor.nb_heads) and today's --config.*
  # paths mix.
  cmd = [
      sys.executable,
      "-m",
      "experiments.clrs_train",
      f"--workdir={workdir}",
      "--algorithms=bellman_ford",
      "--train_lengths=5",
      "--test_lengths=5",
      "--batch_size=4",
      "--eval_batch_size=4",
      "--config.protocol.train_steps=4",
      "--eval_every=1",
      "--max_eval_samples=4",
      "--hidden_size=16",
      "--config.rt.num_heads=2",
      "--config.rt.head_dim=4",
      "--num_layers=1",
      "--node_hidden_size=4",
      "--edge_hidden_size1=4",
      "--config.rt.edge_ffn_dim=4",
      "--noprogress",
  ]
  # A planned stop (step 3 of 4) ends cleanly, saying where it stopped ...
  proc = subprocess.run(
      cmd + ["--config.train.stop_at_step=3"],
      cwd=REPO,
      capture_output=True,
      text=True,
      timeout=600,
  )
  assert proc.returncode == 0, proc.stderr[-3000:]
  assert "resumed at step 2" in proc.stdout
  assert "stopped at step 3 (train.stop_at_step)" in proc.stdout
  assert "OOD test" not in proc.stdout
  # ... and the same command without it resumes there and finishes.
  proc = subprocess.run(
      cmd, cwd=REPO, capture_output=True, text=True, timeout=600
  )
  assert proc.returncode == 0, proc.stderr[-3000:]
  assert "resumed at step 3" in proc.stdout
  assert "OOD test n=5" in proc.stdout
  with open(os.path.join(workdir, "results.json")) as f:
    resumed = json.load(f)["algorithms"]["bellman_ford"]["runs"][0]
  assert resumed["steps"] == 4
  assert [h["step"] for h in resumed["history"]] == [1, 2, 3, 4]
  assert resumed["history"][:2] == run["history"]


def test_plot_ood_refuses_other_json_in_one_line(tmp_path):
  """A missing file, or a JSON that is not a clrs_train / clrs_evaluate
  results file (a reproduction's, say): a UserError naming it, which the
  main prints as one line with exit status 2 (`cli.run`)."""
  from relational_jax.training import errors  # pylint: disable=g-import-not-at-top
  from relational_jax.training.clrs import evaluation  # pylint: disable=g-import-not-at-top

  with pytest.raises(errors.UserError, match=r"results JSON .*nope.json not"):
    evaluation.read_results(str(tmp_path / "nope.json"))
  other = tmp_path / "reproduction.json"
  other.write_text(json.dumps({"config": {"algorithms": ["bfs"]}}))
  with pytest.raises(errors.UserError, match=r"reproduction.json is not a"):
    evaluation.read_results(str(other))
  ours = {"config": {"processor_type": "rt"}, "algorithms": {}}
  other.write_text(json.dumps(ours))
  assert evaluation.read_results(str(other)) == ours


def test_a_flat_name_and_a_config_flag_that_disagree_are_refused():
  """`--config.train.steps=3 --train_steps=2` (either order): neither wins
  silently; the same value twice is fine."""
  config = clrs_config.get_config({"train.steps": 3})
  with pytest.raises(
      ValueError,
      match=r"--train_steps=2 and --config.train.steps=3 both set train.steps",
  ):
    clrs_config.apply_legacy(config, {"train_steps": 2})
  assert clrs_config.apply_legacy(config, {"train_steps": 3}).train.steps == 3
  # A flat name over a path left at its default sets it.
  assert (
      clrs_config.apply_legacy(config, {"eval_every": 7}).train.eval_every == 7
  )
