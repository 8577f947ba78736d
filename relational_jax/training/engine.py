"""The engine above the trainer: `run(task, config, workdir)`, once for every
task (a `task.Task`).

`run` owns what every task shares: the config.json resume check
(`check_config`: `task.validate`, `task.resume_conflicts`), the mesh and the
batch divisibility checks, `trainer.fit` (metrics.jsonl as it goes), the
best-state selection, the final evaluation (`task.build`'s `Built`), the
results JSON and plot, files from process 0 only, the work directory's lock.
A task whose config holds several runs (CLRS: one per algorithm and seed,
each in its own directory, each with its own results) uses the two parts of
`run` that it repeats: `check_config` once, and `fit` (train, then the
selected state) per run. `held_out_task` is the trainer's task of the tasks
whose data are named sets of examples (CLUTRR, graph COGS: train, an
optional val, evaluation sets).
"""

import dataclasses
import os
import time
from typing import Any, Callable, Dict, Optional, Tuple

from relational_jax.parallel import distributed
from relational_jax.parallel import mesh as mesh_lib
from relational_jax.training import config as config_lib
from relational_jax.training import optim
from relational_jax.training import reporting
from relational_jax.training import task as task_lib
from relational_jax.training import trainer
from relational_jax.training import workdir_lock

ConfigDict = config_lib.ConfigDict


def held_out_task(
    *,
    init: Callable,
    train_step: Callable,
    batch_at: Callable,
    score: Callable[[Any, Any], Dict],
    data: Dict[str, Any],
    train: ConfigDict,
    mesh,
) -> trainer.FunctionalTrainee:
  """The trainer's task of a task whose `data` maps set names to examples:
  'train' (trained on in epochs, `trainer.EpochStream` of `batch_at`), an
  optional 'val' and evaluation sets (CLUTRR's test files, graph COGS's
  dev/test/gen). Each evaluation holds `val_accuracy` (`score(params,
  data['val'])['all']`, the selection score) when there is a 'val' set
  (else nothing is selected: the run keeps its last state) and, with
  `train.eval_tests`, `tests`: every evaluation set's `score`."""

  def evaluate(params) -> Dict:
    entry = {}
    if "val" in data:
      entry["val_accuracy"] = score(params, data["val"])["all"]
    if train.eval_tests:
      entry["tests"] = {
          name: score(params, examples)
          for name, examples in data.items()
          if name not in ("train", "val")
      }
    return entry

  return trainer.FunctionalTrainee(
      init=init,
      train_step=train_step,
      stream=trainer.EpochStream(
          len(data["train"]), train.batch_size, train.seed, batch_at
      ),
      evaluate=evaluate,
      mesh=mesh,
      seed=train.seed,
      score_key="val_accuracy" if "val" in data else None,
  )


def check_config(
    task: task_lib.Task,
    config: ConfigDict,
    workdir: str,
    *,
    save: bool = True,
    **options,
) -> None:
  """Validates `config` (`task.validate`), refuses a `workdir` whose
  config.json differs from it in a field a resumed run may not change
  (`task.resume_conflicts`; and `train.steps` under a schedule that decays
  over them: `optim.check_resumed_steps`), and, with `save`, saves it there
  (process 0)."""
  task.validate(config, **options)
  os.makedirs(workdir, exist_ok=True)
  resumable = tuple(task.RESUMABLE_CHANGES)

  def conflicts(saved: Dict) -> Dict:
    if "schedule" in config.get("train", {}):  # `optim`'s train fields.
      optim.check_resumed_steps(saved.get("train", {}), config.train)
    return task.resume_conflicts(saved, config, **options)

  config_lib.check_and_save(
      config, workdir, resumable, conflicts=conflicts, save=save
  )


def fit(
    task: trainer.Trainee,
    loop: trainer.LoopSettings,
    workdir: str,
    log: Callable[[str], None],
    select_on: str,
    select: bool = True,
) -> Tuple[trainer.RunRecord, Any, Optional[str]]:
  """Trains (or resumes) `task` (`trainer.fit`; checkpoints in
  `<workdir>/checkpoints`, metrics in `workdir`): (run record, state,
  selected). Once the run is complete, the state that `select_on` picks and
  its description (`trainer.selected_state`); (run record, None, None) after a planned stop or
  without `select`."""
  ckpt_dir = trainer.checkpoint_dir(workdir)
  done = trainer.fit(task, loop, ckpt_dir, log, metrics_dir=workdir)
  if not (done.complete and select):
    return done, None, None
  state, selected = trainer.selected_state(
      done,
      task.abstract_state(),
      ckpt_dir,
      select_on,
  )
  return done, state, selected


def run(
    task: task_lib.Task, config: ConfigDict, workdir: str, log=print, **options
) -> Dict[str, Any]:
  """Trains (or resumes) `config` of task module `task` in `workdir`; the
  results (written to `task.results_path`), or {'stopped_at': step} after a
  planned stop (`train.stop_at_step`; rerun to resume; nothing written but
  the checkpoints, config and metrics.jsonl).
  `log` takes the run's messages whatever `train.progress` (which draws
  the progress bar only); None: print. `options`: the task's run options
  (module docstring). The work directory is locked for the whole run
  (`workdir_lock`: a second run on it is refused)."""
  task.validate(config, **options)  # Before the work directory is touched.
  with workdir_lock.hold(workdir):
    return _run(task, config, workdir, log, **options)


def _run(task, config, workdir, log, **options) -> Dict[str, Any]:
  t = config.train
  if log is None:
    log = print
  check_config(task, config, workdir, save=False, **options)
  mesh = mesh_lib.mesh_of_first(t.devices)
  num_devices = mesh_lib.num_data_shards(mesh)
  mesh_lib.check_divisible(t.batch_size, num_devices)
  mesh_lib.check_divisible(
      t.eval_batch_size or t.batch_size, num_devices, "eval batch size"
  )
  built = task.build(config, mesh, workdir, log, **options)
  config_lib.save_config(config, workdir)  # Once the data and model built.
  done, state, selected = fit(
      built.task,
      trainer.loop_of(t, built.description),
      workdir,
      log,
      t.select_on,
      select=not built.record_only,
  )
  if not done.complete:
    return {"stopped_at": done.step}
  started = time.time()
  evaluation = built.final(
      None if state is None else state["params"], done, selected
  )
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
