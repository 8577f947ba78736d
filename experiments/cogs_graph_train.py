r"""Train and evaluate the Edge Transformer on the graph form of COGS.

  python -m experiments.cogs_graph_train --workdir=runs/cogs_graph
  python -m experiments.cogs_graph_train --config.train.steps=600 \
      --config.data.max_eval_examples=1000 --workdir=runs/cogs_graph_cpu

The run configuration is `relational_jax.training.cogs_graph.default_config()`
(the ET authors' COGS setting); every field is `--config.<path>=value`.
Re-running with the same --workdir resumes exactly. The work is
`relational_jax.training.cogs_graph.train_and_evaluate`; this file names the
task for `experiments.task_main`.
"""

from experiments import task_main

if __name__ == "__main__":
  task_main.run("cogs_graph", "runs/cogs_graph")
