r"""Train an encoder-decoder (Transformer or Edge Transformer) on SCAN / COGS / TSV data.

  python -m experiments.seq2seq_train --config.data.dataset=scan \
      --config.data.split=length_cutoff --config.data.cutoff=26 \
      --config.transformer.positions=relative --config.transformer.tied=True \
      --config.train.steps=50000 --workdir=runs/scan26_rel_uni
  python -m experiments.seq2seq_train --config.data.dataset=cogs \
      --config.model=edge_transformer --config.train.steps=1000

The run configuration is `relational_jax.training.seq2seq.default_config()`;
every field is `--config.<path>=value`. Re-running with the same --workdir
resumes exactly where the run stopped. The work is
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
from relational_jax.training import errors
from relational_jax.parallel import distributed
from relational_jax.training import seq2seq


def define_flags(
    flag_values: flags.FlagValues = flags.FLAGS,
    argv: Optional[Sequence[str]] = None,
) -> None:
  """--config (a ConfigDict), --workdir and the multi-process flags (`distributed.define_flags`),
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
  flags.DEFINE_string(
      "workdir",
      "runs/seq2seq",
      "Work directory: checkpoints, vocabularies, results; re-run to resume.",
      flag_values=flag_values,
  )
  distributed.define_flags(flag_values)


FLAGS = flags.FLAGS


def config_from_flags(flag_values: flags.FlagValues = FLAGS):
  """The run configuration from parsed flags (--config.*), validated."""
  config = flag_values.config
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
