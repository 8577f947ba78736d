"""experiments.seq2seq_train, the absl entry point: --config.* flags, the
flat flag aliases (the README's and older commands) and a
tiny run that resumes. The library is tested in tests/training/seq2seq."""

import json
import os
import shlex

from absl import flags
import pytest

from experiments import seq2seq_train
from relational_jax.training import config as config_lib
from relational_jax.training import seq2seq
from tests.training.seq2seq.common import TINY_FLAGS, flag_argv, tiny


def _parse(argv):
  """A config from argv on fresh flags (nothing leaks between tests)."""
  argv = ["seq2seq_train"] + list(argv)
  flag_values = flags.FlagValues()
  seq2seq_train.define_flags(flag_values, argv)
  flag_values(argv)
  return flag_values


def _config(argv):
  return seq2seq_train.config_from_flags(_parse(argv))


def test_aliases_give_the_config():
  config = config_lib.to_dict(_config(flag_argv(TINY_FLAGS)))
  expected = config_lib.to_dict(tiny())
  for section in ("data", "model", "transformer", "train", "results_path"):
    assert config[section] == expected[section], section
  # The section of the model not selected keeps its defaults.
  default = config_lib.to_dict(seq2seq.default_config())
  assert config["edge_transformer"] == default["edge_transformer"]
  et_flags = dict(TINY_FLAGS, model="edge_transformer")
  config = config_lib.to_dict(_config(flag_argv(et_flags)))
  assert config["transformer"] == default["transformer"]
  et = config["edge_transformer"]  # d_model, heads, ff, layers, dropout.
  assert (
      et["et"]["num_heads"] * et["et"]["head_dim"],
      et["et"]["num_heads"],
      et["et"]["ffn_dim"],
      et["et"]["num_layers"],
      et["num_decoder_layers"],
      et["et"]["dropout_rate"],
  ) == (16, 2, 32, 1, 1, 0.1)

  argv = [
      "--layers=4",
      "--decoder_layers=2",
      "--nouniversal",
      "--heads=4",
      "--config.train.steps=7",
      "--lr=0.5",
  ]
  c, e = _config(argv), _config(argv + ["--model=edge_transformer"])
  assert (
      c.transformer.num_encoder_layers,
      c.transformer.num_decoder_layers,
      e.edge_transformer.et.num_layers,
      e.edge_transformer.num_decoder_layers,
  ) == (4, 2, 4, 2)
  assert (c.transformer.tied, e.edge_transformer.et.tied) == (False, False)
  assert (
      c.transformer.num_heads,
      e.edge_transformer.et.num_heads,
      e.edge_transformer.et.head_dim,
  ) == (
      4,
      4,
      32,
  )  # Width 128.
  assert (c.train.steps, c.train.learning_rate) == (7, 0.5)
  with pytest.raises(ValueError, match=r"\['transformer.scaling'\] are read"):
    _config(["--model=edge_transformer", "--scaling=teu"])
  with pytest.raises(
      ValueError, match=r"--steps=2 and --config.train.steps=3 both set"
  ):
    _config(["--config.train.steps=3", "--steps=2"])
  assert _config(["--config.train.steps=3", "--steps=3"]).train.steps == 3
  c = _config(["--layers=2", "--decoder_layers=0"])  # 0: as --layers.
  assert c.transformer.num_decoder_layers == 2
  # An alias and --config.<path> that disagree: an error (below); neither
  # wins silently.


def test_readme_and_script_commands_parse():
  readme = [
      (
          "--dataset=scan --split=length_cutoff --cutoff=26"
          " --positions=relative --universal --steps=50000"
          " --checkpoint_path=runs/scan26_rel_uni"
      ),
      "--dataset=cogs --positions=absolute --scaling=ped",
      (
          "--dataset=cogs --model=edge_transformer --d_model=64 --heads=4 "
          "--ff=256 --layers=3 --universal --dropout=0.1 --batch=64"
      ),
  ]
  scan, cogs_abs, cogs_et = (_config(shlex.split(a)) for a in readme)
  assert (
      scan.data.cutoff,
      scan.transformer.positions,
      scan.transformer.tied,
      scan.train.steps,
  ) == (26, "relative", True, 50000)
  assert (
      cogs_abs.data.dataset,
      cogs_abs.transformer.positions,
      cogs_abs.transformer.scaling,
  ) == ("cogs", "absolute", "ped")
  e = cogs_et.edge_transformer.et
  assert cogs_et.model == "edge_transformer"
  assert (
      e.num_heads * e.head_dim,
      e.num_heads,
      e.ffn_dim,
      e.num_layers,
      cogs_et.edge_transformer.num_decoder_layers,
      e.tied,
      e.dropout_rate,
      cogs_et.train.batch_size,
  ) == (64, 4, 256, 3, 3, True, 0.1, 64)
  # Without --ff the Edge Transformer's FFN stays 256 wide, as before; --ff
  # is an absolute width for both models now (no longer a multiple of
  # d_model for the Edge Transformer).
  e = _config(["--model=edge_transformer", "--d_model=64"]).edge_transformer
  assert (e.et.num_heads, e.et.head_dim, e.et.ffn_dim) == (8, 8, 256)
  e = _config(
      ["--model=edge_transformer", "--d_model=16", "--ff=24"]
  ).edge_transformer
  assert (e.et.num_heads * e.et.head_dim, e.et.ffn_dim) == (16, 24)
  script = (
      "--dataset=scan --split=length_cutoff --cutoff=26 "
      "--model=transformer --universal --layers=3 --d_model=128 "
      "--heads=8 --ff=256 --dropout=0.5 --lr=1e-3 --schedule=constant "
      "--batch=256 --clip=5 --steps=300 --eval_every=100 "
      "--max_eval_examples=0 --seed=0 --select_on=last --noprogress "
      "--positions=absolute --scaling=ped --workdir=o/abs_uni "
      "--results_path=o/abs_uni.json"
  )
  c = _config(shlex.split(script))
  assert (
      c.train.clip,
      c.train.select_on,
      c.train.progress,
      c.results_path,
  ) == (5.0, "last", False, "o/abs_uni.json")


@pytest.mark.parametrize(
    "argv, message",
    [
        (
            ["--model=edge_transformer", "--positions=absolute"],
            (
                r"model='edge_transformer' takes the Edge Transformer's"
                r" relative positions \(eq. 10\): positions must be 'relative',"
                r" got 'absolute'"
            ),
        ),
        (
            ["--model=edge_transformer", "--d_model=16", "--heads=3"],
            r"heads \(3\) must divide d_model \(16\)",
        ),
        (["--dataset=mnist"], r"Unknown dataset 'mnist'"),
    ],
)
def test_bad_flags_are_a_clear_error(argv, message):
  with pytest.raises(ValueError, match=message):
    _config(argv)


@pytest.mark.slow
def test_run_resumes_from_the_command_line(tmp_path, capsys):
  workdir = str(tmp_path / "run")
  argv = flag_argv(TINY_FLAGS)
  # --checkpoint_path, the earlier name, is an alias of --workdir.
  first = _parse(argv + ["--stop_at_step=2", f"--checkpoint_path={workdir}"])
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
