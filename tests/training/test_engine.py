"""The engine's resume check (`engine.check_config`) on a stand-in task."""

import json
import shutil

import pytest

from relational_jax.training import config as config_lib
from relational_jax.training import engine
from relational_jax.training import errors
from relational_jax.training import task as task_lib


class _Task(task_lib.Task):
  RESUMABLE_CHANGES = ("train.steps", "train.progress")

  def default_config(self):
    return _config("constant", 1)

  def validate(self, config):
    del config

  def headline(self, results):
    return {}

  def train_and_evaluate(self, config, workdir, log=print):
    raise NotImplementedError


def _task():
  return _Task()


def _config(schedule, steps):
  return config_lib.ConfigDict(
      dict(train=dict(schedule=schedule, steps=steps, progress=False))
  )


@pytest.mark.parametrize("schedule", ["linear", "cosine"])
def test_a_decaying_schedule_refuses_other_steps_on_resume(tmp_path, schedule):
  """A schedule that decays over train.steps: a resume with another count
  would follow neither schedule; refused, naming both counts, config.json
  kept."""
  engine.check_config(_task(), _config(schedule, 100), str(tmp_path))
  saved = (tmp_path / "config.json").read_text()
  with pytest.raises(
      errors.UserError,
      match=rf"train.steps: saved 100, now 200; schedule '{schedule}' decays",
  ):
    engine.check_config(_task(), _config(schedule, 200), str(tmp_path))
  assert (tmp_path / "config.json").read_text() == saved
  engine.check_config(_task(), _config(schedule, 100), str(tmp_path))


@pytest.mark.parametrize("schedule", ["constant", "noam"])
def test_a_flat_schedule_lets_a_resumed_run_grow(tmp_path, schedule):
  engine.check_config(_task(), _config(schedule, 100), str(tmp_path))
  engine.check_config(_task(), _config(schedule, 200), str(tmp_path))
  saved = json.loads((tmp_path / "config.json").read_text())
  assert saved["train"]["steps"] == 200


def test_check_without_save_writes_nothing(tmp_path):
  engine.check_config(
      _task(), _config("constant", 1), str(tmp_path), save=False
  )
  assert not (tmp_path / "config.json").exists()


@pytest.mark.parametrize("name", ["clutrr", "cogs_graph", "seq2seq"])
def test_every_task_refuses_another_data_dir_on_resume(tmp_path, name):
  """The training rows are read from data.data_dir: another directory on
  resume could train the rest of the run on other data."""
  from relational_jax.training import registry  # pylint: disable=g-import-not-at-top

  task = registry.get(name)
  config = task.default_config()
  engine.check_config(task, config, str(tmp_path))
  elsewhere = tmp_path / "elsewhere"  # Valid data, another directory.
  shutil.copytree(config.data.data_dir, elsewhere)
  config.data.data_dir = str(elsewhere)
  with pytest.raises(ValueError, match=r"data.data_dir: saved '.*', now '.*'"):
    engine.check_config(task, config, str(tmp_path))


@pytest.mark.parametrize("name", ["clrs", "clutrr", "cogs_graph", "seq2seq"])
def test_every_task_resumes_the_same_train_fields(name):
  """The common train fields a resume may change are written once
  (`trainer.RESUMABLE_TRAIN_CHANGES`) and every task reads that list."""
  from relational_jax.training import registry  # pylint: disable=g-import-not-at-top
  from relational_jax.training import trainer  # pylint: disable=g-import-not-at-top

  resumable = registry.get(name).RESUMABLE_CHANGES
  assert set(trainer.RESUMABLE_TRAIN_CHANGES) <= set(resumable)


@pytest.mark.parametrize("with_val", [True, False])
@pytest.mark.parametrize("eval_tests", [True, False])
def test_held_out_task_scores_val_and_the_evaluation_sets(with_val, eval_tests):
  """Selection on 'val' when there is one (else none: the last state);
  every other set's score in `tests` with train.eval_tests; an epoch
  stream over 'train'."""
  data = {"train": list(range(10)), "test": [1, 1], "gen": [0, 1]}
  if with_val:
    data["val"] = [1, 0, 0, 0]
  train = config_lib.ConfigDict(
      dict(batch_size=4, seed=3, eval_tests=eval_tests)
  )
  task = engine.held_out_task(
      init=None,
      train_step=None,
      batch_at=lambda idx: idx,
      score=lambda params, examples: {"all": sum(examples) / len(examples)},
      data=data,
      train=train,
      mesh=None,
  )
  assert task.score_key == ("val_accuracy" if with_val else None)
  expected = {}
  if with_val:
    expected["val_accuracy"] = 0.25
  if eval_tests:
    expected["tests"] = {"test": {"all": 1.0}, "gen": {"all": 0.5}}
  entry, score = task.evaluate({"params": None}, step=0)
  assert entry == expected
  assert score == (0.25 if with_val and entry else None)
  assert task.seed == 3
  epoch = [list(next(task.stream)) for _ in range(3)]  # ceil(10 / 4) batches
  assert sorted(i for b in epoch for i in b) == list(range(10))
  assert [len(b) for b in epoch] == [4, 4, 2]  # batch_at pads the last.
