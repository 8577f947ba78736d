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
from absl import logging
from ml_collections import config_flags

from relational_jax.training import clutrr

config_flags.DEFINE_config_dict(
    "config",
    clutrr.default_config(),
    "The run configuration (relational_jax.training.clutrr).",
)
flags.DEFINE_string(
    "workdir",
    "runs/clutrr",
    "Work directory: checkpoints, results; re-run to resume.",
)
FLAGS = flags.FLAGS


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f"Unexpected arguments: {argv[1:]}")
  if not FLAGS["verbosity"].present:
    logging.set_verbosity(logging.WARNING)  # orbax logs every save at INFO
  results = clutrr.train_and_evaluate(FLAGS.config, FLAGS.workdir)
  if "final" in results:
    print(
        "test accuracy by k: "
        + ", ".join(
            f"{k} {v:.4f}" for k, v in results["final"]["accuracies"].items()
        )
    )
    print(f"results: {clutrr.results_path(FLAGS.config, FLAGS.workdir)}")


if __name__ == "__main__":
  app.run(main)
