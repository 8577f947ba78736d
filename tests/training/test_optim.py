"""relational_jax.training.optim: the schedules and their warmup conventions
against their formulas."""

import numpy as np
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


def test_bad_choices_are_named():
  with pytest.raises(ValueError, match="'step'.*constant"):
    optim.make_schedule(1.0, "step", 0, 10)
  with pytest.raises(ValueError, match="'first'.*count_plus_one"):
    optim.make_schedule(1.0, "constant", 0, 10, warmup="first")
  with pytest.raises(ValueError, match="warmup='count'"):
    optim.make_schedule(1.0, "linear", 2, 10, warmup="count_plus_one")
  with pytest.raises(ValueError, match="noam.*warmup_steps >= 1"):
    optim.make_schedule(1.0, "noam", 0, 10)
