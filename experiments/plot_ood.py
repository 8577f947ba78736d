r"""One plot of test score versus graph size for several results JSONs.

python -m experiments.plot_ood runs/rt/evaluation.json runs/mpnn/evaluation.json --output=ood.png

Each JSON is one `clrs_train` results file or one `clrs_evaluate`
evaluation file; anything else is refused in one line (exit 2).
"""

from absl import app
from absl import flags

from relational_jax.training import cli
from relational_jax.training.clrs import evaluation

flags.DEFINE_string("output", "ood.png", "PNG path.")
FLAGS = flags.FLAGS


def main(argv):
  paths = argv[1:]
  if not paths:
    raise app.UsageError(
        "Give one or more results JSONs (clrs_train or clrs_evaluate)."
    )
  evaluation.plot_ood([evaluation.read_results(p) for p in paths], FLAGS.output)
  print(f"wrote {FLAGS.output}")


if __name__ == "__main__":
  cli.run(main)
