"""experiments.seq2seq_train, the absl entry point: --config.* flags only
and a tiny run that resumes. The library is tested in tests/training/seq2seq."""

import json
import os
import shlex

from absl import flags
import pytest

from experiments import seq2seq_train
from relational_jax.training import config as config_lib
from relational_jax.training import seq2seq
from tests.training.seq2seq.common import TINY, flag_argv, tiny


def _parse(argv):
  """A config from argv on fresh flags (nothing leaks between tests)."""
  argv = ["seq2seq_train"] + list(argv)
  flag_values = flags.FlagValues()
  seq2seq_train.define_flags(flag_values, argv)
  flag_values(argv)
  return flag_values


def _config(argv):
  return seq2seq_train.config_from_flags(_parse(argv))


def test_config_flags_give_the_config():
  config = config_lib.to_dict(_config(flag_argv(TINY)))
  assert config == config_lib.to_dict(tiny())


def test_flat_names_are_unknown_flags():
  """Only `--config.<path>` sets the config."""
  with pytest.raises(flags.UnrecognizedFlagError, match="steps"):
    _parse(["--steps=3"])


def test_readme_and_script_commands_parse():
  scan = _config(
      shlex.split(
          "--config.data.dataset=scan --config.data.split=length_cutoff "
          "--config.data.cutoff=26 --config.transformer.positions=relative "
          "--config.transformer.tied=True --config.train.steps=50000 "
          "--workdir=runs/scan26_rel_uni"
      )
  )
  assert (
      scan.data.cutoff,
      scan.transformer.positions,
      scan.transformer.tied,
      scan.train.steps,
  ) == (26, "relative", True, 50000)
  cogs = _config(
      shlex.split(
          "--config.data.dataset=cogs --config.model=edge_transformer "
          "--config.train.steps=1000"
      )
  )
  assert (cogs.model, cogs.train.steps) == ("edge_transformer", 1000)


@pytest.mark.parametrize(
    "argv, message",
    [
        (
            [
                "--config.model=edge_transformer",
                "--config.transformer.scaling=teu",
            ],
            r"\['transformer.scaling'\] are read",
        ),
        (["--config.data.dataset=mnist"], r"Unknown dataset 'mnist'"),
    ],
)
def test_bad_flags_are_a_clear_error(argv, message):
  with pytest.raises(ValueError, match=message):
    _config(argv)


@pytest.mark.slow
def test_run_resumes_from_the_command_line(tmp_path, capsys):
  workdir = str(tmp_path / "run")
  argv = flag_argv(TINY)
  first = _parse(
      argv + ["--config.train.stop_at_step=2", f"--workdir={workdir}"]
  )
  assert first.workdir == workdir
  assert seq2seq_train.run(first) == {"stopped_at": 2}
  assert "results:" not in capsys.readouterr().out  # None written yet.
  results = seq2seq_train.run(_parse(argv + [f"--workdir={workdir}"]))
  out = capsys.readouterr().out
  assert "resumed at step 2" in out and "final (step 4): iid" in out
  assert f"results: {workdir}/results.json" in out
  with open(os.path.join(workdir, "results.json")) as f:
    saved = json.load(f)
  assert saved["complete"] and saved["losses"] == results["losses"]
  assert saved["config"]["train"]["steps"] == 4
