r"""Train and evaluate a CLUTRR graph classifier (Edge Transformer, RAT, RT).

  python -m experiments.clutrr_train --workdir=runs/clutrr_et
  python -m experiments.clutrr_train --config.model=rat --workdir=runs/clutrr_rat
  python -m experiments.clutrr_train --config.edge_transformer.ablation=value \
      --config.protocol.train_source=validation.csv --config.train.steps=400

The run configuration is `relational_jax.training.clutrr.default_config()`
(the ET authors' CLUTRR setting); every field is `--config.<path>=value`.
Re-running with the same --workdir resumes exactly. The work is
`relational_jax.training.clutrr.train_and_evaluate`; this file names the
task for `experiments.task_main`.
"""

from experiments import task_main

if __name__ == "__main__":
  task_main.run("clutrr", "runs/clutrr")
