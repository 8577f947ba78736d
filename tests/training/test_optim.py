"""relational_jax.training.optim: the schedules and their warmup conventions
against their formulas."""

import numpy as np
import optax
import pytest

from relational_jax.training import optim


def _rates(fn, n):
  return np.asarray([float(fn(c)) for c in range(n)])


def test_warmup_conventions():
  hf = optim.make_schedule(1.0, "constant", 4, 10, warmup="count")
  cs = optim.make_schedule(1.0, "constant", 4, 10, warmup="count_plus_one")
  np.testing.assert_allclose(_rates(hf, 6), [0, 0.25, 0.5, 0.75, 1, 1])
  np.testing.assert_allclose(_rates(cs, 6), [0.25, 0.5, 0.75, 1, 1, 1])


def test_linear_is_huggingface_warmup_then_decay_to_zero():
  fn = optim.make_schedule(2.0, "linear", 2, 6, warmup="count")
  # warmup c / w, then (T - c) / (T - w).
  np.testing.assert_allclose(_rates(fn, 7), [0, 1, 2, 1.5, 1, 0.5, 0])


def test_noam_peaks_at_the_warmup_step():
  fn = optim.make_schedule(1.0, "noam", 4, 100)
  rates = _rates(fn, 10)
  assert rates.argmax() == 3 and rates[3] == pytest.approx(1.0)
  # s = c + 1, or c with 'count': one step later, and rate 0 first.
  counted = _rates(optim.make_schedule(1.0, "noam", 4, 100, warmup="count"), 11)
  np.testing.assert_allclose(counted[1:], rates)
  assert counted[0] == 0.0


def test_cosine_warms_up_by_the_convention_then_decays_to_zero():
  hf = optim.make_schedule(1.0, "cosine", 4, 12, warmup="count")
  cs = optim.make_schedule(1.0, "cosine", 4, 12, warmup="count_plus_one")
  decay = 0.5 * (1 + np.cos(np.pi * np.arange(9) / 8))  # c = 4 .. 12
  np.testing.assert_allclose(
      _rates(hf, 13), [0, 0.25, 0.5, 0.75, *decay], atol=1e-6
  )
  np.testing.assert_allclose(
      _rates(cs, 13), [0.25, 0.5, 0.75, 1, *decay], atol=1e-6
  )


def test_bad_choices_are_named():
  with pytest.raises(ValueError, match="'step'.*constant"):
    optim.make_schedule(1.0, "step", 0, 10)
  with pytest.raises(ValueError, match="'first'.*count_plus_one"):
    optim.make_schedule(1.0, "constant", 0, 10, warmup="first")
  with pytest.raises(ValueError, match="warmup='count'"):
    optim.make_schedule(1.0, "linear", 2, 10, warmup="count_plus_one")
  with pytest.raises(ValueError, match="noam.*warmup_steps >= 1"):
    optim.make_schedule(1.0, "noam", 0, 10)
  with pytest.raises(ValueError, match="warmup_steps must be >= 0, got -5"):
    optim.make_schedule(1.0, "constant", -5, 10)


def test_every_task_builds_its_optimiser_from_its_train_section():
  """One make_optimizer: the same fields in every task's `train`."""
  from relational_jax.training import registry  # pylint: disable=g-import-not-at-top

  for name in ("clrs", "clutrr", "cogs_graph", "seq2seq"):
    train = registry.get(name).default_config().train
    assert optim.settings_of(train)._fields == optim.Settings._fields
    optim.make_optimizer(train)  # Builds.


@pytest.mark.parametrize(
    "field, value, message",
    [
        ("optimizer", "sgd", r"Unknown train.optimizer 'sgd'; valid choices"),
        ("warmup", "first", r"Unknown train.warmup 'first'; valid choices"),
        ("clip", -1.0, r"train.clip must be >= 0, got -1.0"),
        (
            "weight_decay",
            0.1,
            r"weight_decay=0.1 needs train.optimizer='adamw'",
        ),
        ("learning_rate", 0.0, r"train.learning_rate must be positive"),
    ],
)
def test_bad_optimiser_fields_are_named(field, value, message):
  s = optim.Settings(1e-3, "constant", 0, 10, 1.0, "count", "adam", 0.0)
  with pytest.raises(ValueError, match=message):
    optim.make_optimizer(s._replace(**{field: value}))


def test_adamw_decays_and_adam_with_clipping_matches_optax():
  params, grads = {"w": np.ones(2, np.float32)}, {"w": np.full(2, 3.0)}
  s = optim.Settings(0.1, "constant", 0, 10, 1.0, "count", "adam", 0.0)
  want = optax.chain(optax.clip_by_global_norm(1.0), optax.adam(0.1))
  got = optim.make_optimizer(s)
  np.testing.assert_array_equal(
      got.update(grads, got.init(params), params)[0]["w"],
      want.update(grads, want.init(params), params)[0]["w"],
  )
  decayed = optim.make_optimizer(
      s._replace(optimizer="adamw", weight_decay=1.0)
  )
  zero = {"w": np.zeros(2, np.float32)}
  update, _ = decayed.update(zero, decayed.init(params), params)
  assert np.all(np.asarray(update["w"]) < 0)  # Decay pulls w toward 0.
