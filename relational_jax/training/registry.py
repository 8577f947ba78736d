"""Tasks by name: the module that defines each, whose `TASK` is its
`task.Task` (the contract: `relational_jax/training/task.py`). A new task is
one module and one line here (or a `register` call from outside the
library).
"""

import importlib
from typing import Dict

from relational_jax.training import task as task_lib

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


def get(name: str) -> task_lib.Task:
  """Task `name` (its module's `TASK`).

  Raises:
    ValueError: an unknown name, naming the valid ones; a module whose
      `TASK` is not a `task.Task`.
  """
  if name not in TASKS:
    raise ValueError(f"Unknown task {name!r}; valid tasks are {sorted(TASKS)}.")
  found = getattr(importlib.import_module(TASKS[name]), "TASK", None)
  if not isinstance(found, task_lib.Task):
    raise ValueError(
        f"task {name!r}: module {TASKS[name]!r} has no TASK that is a "
        "relational_jax.training.task.Task."
    )
  return found
