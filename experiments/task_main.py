"""The one main of the tasks that train through `engine.run` with their
config alone (CLUTRR, graph COGS): every config field a flag
`--config.<path>=value` of the task's `default_config()`, `--workdir` (rerun
to resume) and the multi-process flags (`distributed.define_flags`).

  python -m experiments.clutrr_train --config.model=rat --workdir=runs/rat

`experiments.clutrr_train` and `experiments.cogs_graph_train` are this main
for their task (`run(task name, default work directory)`).
"""

from absl import app
from absl import flags

from relational_jax.parallel import distributed
from relational_jax.training import cli
from relational_jax.training import errors
from relational_jax.training import registry


def run(name: str, default_workdir: str) -> None:
  """Defines the flags of task `name` and runs its main (`cli.run`)."""
  task = registry.get(name)
  cli.define_config_flag(
      "config", task.default_config(), f"The run configuration (task {name})."
  )
  flags.DEFINE_string(
      "workdir",
      default_workdir,
      "Work directory: checkpoints, results; re-run to resume.",
  )
  distributed.define_flags()
  values = flags.FLAGS

  def main(argv):
    if len(argv) > 1:
      raise app.UsageError(f"Unexpected arguments: {argv[1:]}")
    with errors.user_input():  # Bad values: one line, exit 2 (cli.run).
      distributed.initialize_from_flags(values)
      task.validate(values.config)
    results = task.train_and_evaluate(values.config, values.workdir)
    if distributed.is_primary() and "final" in results:
      print(f"results: {task.results_path(values.config, values.workdir)}")

  cli.run(main)
