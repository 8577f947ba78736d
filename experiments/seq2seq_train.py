r"""Train an encoder-decoder (Transformer or Edge Transformer) on SCAN / COGS / TSV data.

  python -m experiments.seq2seq_train --dataset=scan --split=length_cutoff \
      --cutoff=26 --positions=relative --universal --steps=50000 \
      --workdir=runs/scan26_rel_uni
  python -m experiments.seq2seq_train --dataset=cogs --model=edge_transformer \
      --d_model=64 --heads=4 --ff=256 --layers=3 --universal --dropout=0.1
  python -m experiments.seq2seq_train --config.transformer.pre_norm=True \
      --config.train.steps=1000

The run configuration is `relational_jax.training.seq2seq.default_config()`;
every field is `--config.<path>=value`, and the flat flag names of earlier
versions are aliases of config paths (`FLAG_ALIASES`, listed by --helpfull;
applied after --config.*). Re-running with the same --workdir
(--checkpoint_path, its earlier name, is an alias) resumes exactly where the
run stopped. The work is
`relational_jax.training.seq2seq.train_and_evaluate`; this file holds flags
only.

Several processes (one per host), e.g. 2 hosts:

  host0$ python -m experiments.seq2seq_train ... --distributed \
      --coordinator_address=host0:1234 --num_processes=2 --process_id=0
  host1$ python -m experiments.seq2seq_train ... --distributed \
      --coordinator_address=host0:1234 --num_processes=2 --process_id=1

(`--distributed` alone reads the three from the cluster environment.)
"""

from typing import Optional, Sequence

from absl import app
from absl import flags

from relational_jax.training import cli
from relational_jax.training import config as config_lib
from relational_jax.training import errors
from relational_jax.parallel import distributed
from relational_jax.training import seq2seq


def define_flags(
    flag_values: flags.FlagValues = flags.FLAGS,
    argv: Optional[Sequence[str]] = None,
) -> None:
  """--config (a ConfigDict), its flat aliases, --workdir (alias
  --checkpoint_path) and the multi-process flags (`distributed.define_flags`),
  in `flag_values`.
  `argv` (default sys.argv) is the command line to be parsed: config_flags
  defines the --config.<path> flags it names. Called when the module runs as
  a script, so importing it beside other absl entry points (e.g.
  experiments.reproduce, which also has --workdir) defines no global flag."""
  cli.define_config_flag(
      "config",
      seq2seq.default_config(),
      "The run configuration (relational_jax.training.seq2seq.config).",
      flag_values=flag_values,
      argv=argv,
  )
  config_lib.define_aliases(
      seq2seq.config.FLAG_ALIASES, seq2seq.default_config(), flag_values
  )
  flags.DEFINE_string(
      "workdir",
      "runs/seq2seq",
      "Work directory: checkpoints, vocabularies, results; re-run to resume.",
      flag_values=flag_values,
  )
  # The earlier name.
  flags.DEFINE_alias("checkpoint_path", "workdir", flag_values=flag_values)
  distributed.define_flags(flag_values)


FLAGS = flags.FLAGS


def config_from_flags(flag_values: flags.FlagValues = FLAGS):
  """The run configuration from parsed flags (--config.*, then the aliases),
  validated."""
  config = seq2seq.config.apply_flag_aliases(flag_values.config, flag_values)
  seq2seq.validate(config)
  return config


def run(flag_values: flags.FlagValues = FLAGS) -> dict:
  """Trains (or resumes) the run of the parsed flags; prints a summary."""
  with errors.user_input():  # Bad values: one line, exit 2 (cli.run).
    distributed.initialize_from_flags(flag_values)
    config = config_from_flags(flag_values)
  workdir = flag_values.workdir
  results = seq2seq.train_and_evaluate(config, workdir)
  if "stopped_at" in results or not distributed.is_primary():
    return results  # A planned stop: the trainer said where.
  for key in ("final", "selection"):  # The run record's keys (trainer.py).
    entry = results.get(key)
    if entry:
      accs = ", ".join(f"{k} {v:.4f}" for k, v in entry["accuracies"].items())
      print(f"{key} (step {entry['step']}): {accs}")
  print(f"results: {seq2seq.config.results_path(config, workdir)}")
  return results


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f"Unexpected arguments: {argv[1:]}")
  run(FLAGS)


if __name__ == "__main__":
  define_flags()
  cli.run(main)
