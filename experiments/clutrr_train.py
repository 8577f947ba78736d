r"""Train and evaluate a CLUTRR graph classifier (Edge Transformer, RAT, RT).

  python -m experiments.clutrr_train --workdir=runs/clutrr_et
  python -m experiments.clutrr_train --config.model=rat --workdir=runs/clutrr_rat
  python -m experiments.clutrr_train --config.edge_transformer.ablation=value \
      --config.protocol.train_source=validation.csv --config.train.steps=400

The run configuration is `relational_jax.training.clutrr.default_config()`
(the ET authors' CLUTRR setting); every field is `--config.<path>=value`.
Re-running with the same --workdir resumes exactly. The work is
`relational_jax.training.clutrr.train_and_evaluate`; this file holds flags
only.
"""

from absl import app
from absl import flags

from relational_jax.parallel import distributed
from relational_jax.training import cli
from relational_jax.training import clutrr
from relational_jax.training import errors

cli.define_config_flag(
    "config",
    clutrr.default_config(),
    "The run configuration (relational_jax.training.clutrr).",
)
flags.DEFINE_string(
    "workdir",
    "runs/clutrr",
    "Work directory: checkpoints, results; re-run to resume.",
)
distributed.define_flags()
FLAGS = flags.FLAGS


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f"Unexpected arguments: {argv[1:]}")
  with errors.user_input():  # Bad values: one line, exit 2 (cli.run).
    distributed.initialize_from_flags(FLAGS)
    clutrr.validate(FLAGS.config)
  results = clutrr.train_and_evaluate(FLAGS.config, FLAGS.workdir)
  if not distributed.is_primary():
    return
  if "final" in results:  # Its accuracies: the run's last log line.
    print(f"results: {clutrr.results_path(FLAGS.config, FLAGS.workdir)}")


if __name__ == "__main__":
  cli.run(main)
