r"""Train a processor on CLRS algorithms and test it out of distribution.

  python -m experiments.clrs_train --config.algorithms='("bellman_ford",)' \
      --config.processor_type=rt --config.rt.num_layers=3
  python -m experiments.clrs_train --config.processor_type=mpnn \
      --config.train.steps=2000 --workdir=runs/clrs_bf

Every field of `relational_jax.training.clrs.default_config()` is a flag
`--config.<path>`. The work directory is --workdir; re-running with the same
one resumes. The work is `relational_jax.training.clrs.train_and_evaluate`.

Several processes (one per host): the same command on every host plus
`--distributed --coordinator_address=HOST0:PORT --num_processes=N
--process_id=I` (or `--distributed` alone, reading them from the cluster
environment); see the README's "Multi-host training".
"""

from absl import app
from absl import flags

from relational_jax.training import cli
from relational_jax.training import errors
from relational_jax.parallel import distributed
from relational_jax.training.clrs import config as clrs_config
from relational_jax.training.clrs import loop

cli.drop_foreign_flags()  # dm-clrs's own flags (--seeds, ...).
_CONFIG = cli.define_config_flag("config", clrs_config.default_config())
flags.DEFINE_string(
    "workdir",
    "runs/clrs",
    "Work directory: checkpoints, per-run results; re-run to resume.",
)
distributed.define_flags()
FLAGS = flags.FLAGS


def config_from_flags():
  return _CONFIG.value


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f"Unexpected arguments: {argv[1:]}")
  with errors.user_input():  # Bad values: one line, exit 2 (cli.run).
    distributed.initialize_from_flags(FLAGS)
    config = config_from_flags()
    clrs_config.validate(config)
  results = loop.train_and_evaluate(config, FLAGS.workdir)
  if "stopped_at" in results or not distributed.is_primary():
    return  # A planned stop: the loop said where.
  for algorithm, entry in results["algorithms"].items():
    tests = ", ".join(f"n={n}: {s:.4f}" for n, s in entry["mean_test"].items())
    print(
        f"{algorithm} ({config.processor_type}): best val "
        f"{entry['mean_best_val']:.4f}; OOD test {tests}"
    )


if __name__ == "__main__":
  cli.run(main)
