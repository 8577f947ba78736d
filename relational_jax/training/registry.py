"""Tasks by name: the module that trains each.

Every task module has one shape (`engine`'s docstring): `default_config()`,
`validate(config)`, `RESUMABLE_CHANGES` (or its own
`resume_conflicts(saved, config)`), `build(config, mesh, workdir, log)`
returning an `engine.Built`, `results_path(config, workdir)`,
`headline(results)` (the numbers a reproduction compares with the published
ones), and `train_and_evaluate(config, workdir, log=...)`: `engine.run` of the
module, which does the rest (resume check, mesh, `trainer.fit`, best state,
final evaluation, results JSON and plot). CLRS, whose config holds one run
per algorithm and seed with results of their own, has no `build`: its
`train_and_evaluate` runs the engine's parts, `engine.check_config` once
and `engine.fit` per run. Optional: `SEED_PATH`, the config path of its one
training seed (`experiments.reproduce --seeds` runs the config once per
seed; a task without it, such as CLRS whose config holds several seeds,
takes no --seeds), and `aggregate(results_list)`, its own summary of those
runs beside the mean and sd of the headline numbers. A new task is one
module and one line here (or a `register` call from outside the library).
"""

import importlib
from types import ModuleType
from typing import Dict

TASKS: Dict[str, str] = {
    "clrs": "relational_jax.training.clrs.loop",
    "seq2seq": "relational_jax.training.seq2seq.loop",
    "clutrr": "relational_jax.training.clutrr",
    "cogs_graph": "relational_jax.training.cogs_graph",
}


def register(name: str, module: str) -> None:
  """Adds task `name`, trained by the module named `module`."""
  if TASKS.get(name, module) != module:
    raise ValueError(f"task {name!r} is registered as {TASKS[name]!r}.")
  TASKS[name] = module


def get(name: str) -> ModuleType:
  """The module of task `name`.

  Raises:
    ValueError: an unknown name, naming the valid ones.
  """
  if name not in TASKS:
    raise ValueError(f"Unknown task {name!r}; valid tasks are {sorted(TASKS)}.")
  return importlib.import_module(TASKS[name])
