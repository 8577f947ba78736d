"""Every registered task has the one shape the mains and `reproduce` use."""

import pytest

from experiments import reproductions  # Registers the experiments' task.
from relational_jax.training import registry

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
def test_every_library_task_has_the_engines_shape(name):
  """The engine's parts: the resume check's rules, and a `build` for
  `engine.run` (CLRS, a run per algorithm and seed, runs the engine's
  `check_config` and `fit` itself)."""
  task = registry.get(name)
  assert all(isinstance(p, str) for p in task.RESUMABLE_CHANGES), name
  assert callable(getattr(task, "build", None)) == (name != "clrs"), name


def test_every_reproduction_names_a_registered_task():
  for r in reproductions.REPRODUCTIONS.values():
    assert r.task in registry.TASKS, r.name


def test_an_unknown_task_is_named_with_the_valid_ones():
  with pytest.raises(ValueError, match=r"Unknown task 'nope'; valid tasks"):
    registry.get("nope")
  with pytest.raises(ValueError, match="is registered as"):
    registry.register("clutrr", "somewhere.else")
