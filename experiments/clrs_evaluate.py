r"""Test saved CLRS checkpoints at any graph sizes, without training.

  python -m experiments.clrs_evaluate --workdir=runs/clrs --test_lengths=16,32,64,128

Writes `<workdir>/evaluation.json` and a score-versus-size PNG beside it.
"""

import os

from absl import app
from absl import flags

from relational_jax.training import cli
from relational_jax.training import errors
from relational_jax.training import reporting
from relational_jax.training.clrs import data as clrs_data
from relational_jax.training.clrs import loop as clrs_loop

flags.DEFINE_string(
    "workdir", None, "A clrs_train work directory.", required=True
)
flags.DEFINE_list(
    "test_lengths", ["16", "32", "64", "128"], "Graph sizes to test at."
)
flags.DEFINE_enum(
    "checkpoint", "best", ["best", "latest"], "Which checkpoint to test."
)
flags.DEFINE_string(
    "results_path",
    None,
    "Output JSON (default <workdir>/evaluation.json).",
)
flags.DEFINE_string(
    "config_json",
    None,
    "Read the run's config from this results JSON (default"
    " <workdir>/config.json).",
)
FLAGS = flags.FLAGS


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f"Unexpected arguments: {argv[1:]}")
  try:
    lengths = [int(n) for n in FLAGS.test_lengths]
  except ValueError as e:
    raise errors.UserError(
        f"--test_lengths must be integers, got {FLAGS.test_lengths}."
    ) from e
  # A missing work dir or an unreadable config: one line (cli.run), before
  # any checkpoint is opened.
  with errors.user_input((ValueError, FileNotFoundError)):
    clrs_data.check_lengths(lengths, "--test_lengths")
    config_path = FLAGS.config_json or os.path.join(
        FLAGS.workdir, "config.json"
    )
    if os.path.isfile(config_path):
      reporting.read_json(config_path)  # Names the file if unreadable.
    clrs_loop.load_config(FLAGS.workdir, FLAGS.config_json)
  results = clrs_loop.evaluate_checkpoints(
      FLAGS.workdir,
      lengths,
      FLAGS.results_path,
      FLAGS.checkpoint,
      config_json=FLAGS.config_json,
  )
  for algorithm, entry in results["algorithms"].items():
    print(
        algorithm,
        ", ".join(f"n={n}: {s:.4f}" for n, s in entry["mean_test"].items()),
    )


if __name__ == "__main__":
  cli.run(main)
