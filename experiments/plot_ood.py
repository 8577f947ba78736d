r"""One plot of test score versus graph size for several results JSONs.

python -m experiments.plot_ood runs/rt/evaluation.json runs/mpnn/evaluation.json --output=ood.png
"""

import json
import os

from absl import app
from absl import flags

from relational_jax.training.clrs import evaluation

flags.DEFINE_string("output", "ood.png", "PNG path.")
FLAGS = flags.FLAGS


def main(argv):
  paths = argv[1:]
  if not paths:
    raise app.UsageError(
        "Give one or more results JSONs (clrs_train or clrs_evaluate)."
    )
  missing = [p for p in paths if not os.path.exists(p)]
  if missing:
    raise FileNotFoundError(f"Results JSON(s) not found: {missing}")
  results = []
  for p in paths:
    with open(p) as f:
      results.append(json.load(f))
  evaluation.plot_ood(results, FLAGS.output)
  print(f"wrote {FLAGS.output}")


if __name__ == "__main__":
  app.run(main)
