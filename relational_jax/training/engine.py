"""The engine above the trainer: `run(task, config, workdir)`, once for every
task.

A task is a module of one shape (its registry name in `TASKS`):

  default_config()                 the run config, with a `train` section;
  validate(config)                 ValueError naming a bad value;
  RESUMABLE_CHANGES                config paths a resumed run may change;
  saved_defaults()                 what a run saved before a field existed
                                   did (the resume check's defaults; None:
                                   `default_config()`);
  build(config, mesh, workdir, log) -> `Built`: the trainer's `Task` and the
                                   task's final evaluation;
  results_path(config, workdir)    where the results JSON goes.

`run` owns the rest: the config.json resume check, the mesh and the batch
divisibility checks, `trainer.fit` (metrics.jsonl as it goes), the
best-state selection, the final evaluation, the results JSON and plot, files
from process 0 only.
"""

import dataclasses
import os
import time
from typing import Any, Callable, Dict, Optional

from relational_jax.parallel import distributed
from relational_jax.parallel import mesh as mesh_lib
from relational_jax.training import config as config_lib
from relational_jax.training import reporting
from relational_jax.training import trainer

ConfigDict = config_lib.ConfigDict


@dataclasses.dataclass
class Built:
  """What a task's `build` hands the engine.

  task: the trainer's `Task` (state, checkpointed stream, step, evaluation).
  description: the progress bar's label.
  header: the results' first fields (e.g. model name, data sizes).
  final: (params, run record, selected) -> the results' evaluation fields,
    `final` among them (`final['accuracies']`: the headline numbers).
  summary: results -> the one line logged at the end.
  plot: (results, results path) -> None, a figure beside the results.
  """

  task: trainer.Task
  description: str
  header: Dict[str, Any]
  final: Callable[[Any, trainer.RunRecord, Any], Dict[str, Any]]
  summary: Callable[[Dict[str, Any]], str]
  plot: Optional[Callable[[Dict[str, Any], str], None]] = None


def run(task, config: ConfigDict, workdir: str, log=None) -> Dict[str, Any]:
  """Trains (or resumes) `config` of task module `task` in `workdir`; the
  results (written to `task.results_path`), or {'stopped_at': step} after a
  planned stop (`train.stop_at_step`; rerun to resume)."""
  task.validate(config)
  t = config.train
  if log is None:
    log = print if t.progress else (lambda message: None)
  os.makedirs(workdir, exist_ok=True)
  config_lib.check_and_save(
      config, workdir, task.RESUMABLE_CHANGES, defaults=task.saved_defaults()
  )
  mesh = mesh_lib.mesh_of_first(t.devices)
  num_devices = mesh_lib.num_data_shards(mesh)
  mesh_lib.check_divisible(t.batch_size, num_devices)
  mesh_lib.check_divisible(
      t.eval_batch_size or t.batch_size, num_devices, "eval batch size"
  )
  built = task.build(config, mesh, workdir, log)
  ckpt_dir = trainer.checkpoint_dir(workdir)
  done = trainer.fit(
      built.task,
      trainer.loop_of(t, built.description),
      ckpt_dir,
      log,
      metrics_dir=workdir,
  )
  if not done.complete:
    return {"stopped_at": done.step}
  state, selected = trainer.selected_state(
      done, built.task.abstract_state(), ckpt_dir, t.select_on
  )
  started = time.time()
  evaluation = built.final(state["params"], done, selected)
  results = {
      **built.header,
      "config": config_lib.to_dict(config),
      **done.to_json(),
      **evaluation,
      "eval_seconds": time.time() - started,
      "devices": [str(d) for d in mesh.devices.flat],
  }
  path = task.results_path(config, workdir)
  if distributed.is_primary():
    reporting.write_json(path, results)
    if built.plot is not None:
      built.plot(results, path)
  log(built.summary(results))
  return results
