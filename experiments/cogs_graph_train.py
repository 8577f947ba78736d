r"""Train and evaluate the Edge Transformer on the graph form of COGS.

  python -m experiments.cogs_graph_train --workdir=runs/cogs_graph
  python -m experiments.cogs_graph_train --config.train.steps=600 \
      --config.data.max_eval_examples=1000 --workdir=runs/cogs_graph_cpu

The run configuration is `relational_jax.training.cogs_graph.default_config()`
(the ET authors' COGS setting); every field is `--config.<path>=value`.
Re-running with the same --workdir resumes exactly. The work is
`relational_jax.training.cogs_graph.train_and_evaluate`; this file holds
flags only.
"""

from absl import app
from absl import flags

from relational_jax.parallel import distributed
from relational_jax.training import cli
from relational_jax.training import cogs_graph
from relational_jax.training import errors

cli.define_config_flag(
    "config",
    cogs_graph.default_config(),
    "The run configuration (relational_jax.training.cogs_graph).",
)
flags.DEFINE_string(
    "workdir",
    "runs/cogs_graph",
    "Work directory: checkpoints, results; re-run to resume.",
)
distributed.define_flags()
FLAGS = flags.FLAGS


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f"Unexpected arguments: {argv[1:]}")
  with errors.user_input():  # Bad values: one line, exit 2 (cli.run).
    distributed.initialize_from_flags(FLAGS)
    cogs_graph.validate(FLAGS.config)
  results = cogs_graph.train_and_evaluate(FLAGS.config, FLAGS.workdir)
  if not distributed.is_primary():
    return
  if "final" in results:
    print(f"results: {cogs_graph.results_path(FLAGS.config, FLAGS.workdir)}")


if __name__ == "__main__":
  cli.run(main)
