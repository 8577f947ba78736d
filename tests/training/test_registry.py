"""Every registered task has the one shape the mains and `reproduce` use."""

import pytest

from experiments import reproductions  # Registers the experiments' task.
from relational_jax.training import registry
from relational_jax.training import task as task_lib

ENTRY_POINTS = (
    "default_config",
    "validate",
    "train_and_evaluate",
    "results_path",
    "headline",
)


@pytest.mark.parametrize("name", sorted(registry.TASKS))
def test_every_task_has_the_entry_points_and_a_valid_default(name):
  task = registry.get(name)
  for entry in ENTRY_POINTS:
    assert callable(getattr(task, entry)), (name, entry)
  task.validate(task.default_config())


# Fields a task adds to the common `train` section (trainer.TRAIN_FIELDS).
TASK_TRAIN_FIELDS = {
    "clrs": (),
    "seq2seq": ("seed", "dropout_prng", "csordas_batch_size"),
    "clutrr": ("seed", "eval_tests"),
    "cogs_graph": ("seed", "eval_tests"),
}


@pytest.mark.parametrize("name", sorted(TASK_TRAIN_FIELDS))
def test_every_library_task_has_the_one_train_section(name):
  from relational_jax.training import trainer  # pylint: disable=g-import-not-at-top

  train = registry.get(name).default_config().train
  assert sorted(train.keys()) == sorted(
      trainer.TRAIN_FIELDS + TASK_TRAIN_FIELDS[name]
  )


@pytest.mark.parametrize("name", sorted(TASK_TRAIN_FIELDS))
def test_every_library_task_is_a_typed_task(name):
  """A `task.Task` with the resume check's rules; every task but CLRS (a
  run per algorithm and seed: the engine's `check_config` and `fit`) builds
  for `engine.run`."""
  task = registry.get(name)
  assert isinstance(task, task_lib.Task), name
  assert all(isinstance(p, str) for p in task.RESUMABLE_CHANGES), name
  builds = type(task).build is not task_lib.Task.build
  assert builds == (name != "clrs"), name


def test_a_module_without_a_task_is_refused(monkeypatch):
  monkeypatch.setitem(
      registry.TASKS, "not_a_task", "relational_jax.training.optim"
  )
  with pytest.raises(ValueError, match="has no TASK that is a"):
    registry.get("not_a_task")


def test_the_task_contract_is_abstract():
  with pytest.raises(TypeError, match="abstract"):
    task_lib.Task()  # pylint: disable=abstract-class-instantiated


def test_every_reproduction_names_a_registered_task():
  for r in reproductions.REPRODUCTIONS.values():
    assert r.task in registry.TASKS, r.name


def test_an_unknown_task_is_named_with_the_valid_ones():
  with pytest.raises(ValueError, match=r"Unknown task 'nope'; valid tasks"):
    registry.get("nope")
  with pytest.raises(ValueError, match="is registered as"):
    registry.register("clutrr", "somewhere.else")
