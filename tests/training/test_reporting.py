"""relational_jax.training.reporting: a results JSON is never half-written."""

import os

import pytest

from relational_jax.training import reporting


def test_write_json_replaces_the_file_whole_or_not_at_all(
    tmp_path, monkeypatch
):
  path = str(tmp_path / "results.json")
  reporting.write_json(path, {"step": 1})
  real_fdopen = os.fdopen

  class HalfWritten:  # A crash halfway through the write.

    def __init__(self, f):
      self.f = f

    def __enter__(self):
      return self

    def __exit__(self, *exc):
      self.f.close()

    def write(self, text):
      self.f.write(text[: len(text) // 2])
      raise RuntimeError("disk full")

  monkeypatch.setattr(
      os, "fdopen", lambda *a, **k: HalfWritten(real_fdopen(*a, **k))
  )
  with pytest.raises(RuntimeError, match="disk full"):
    reporting.write_json(path, {"step": 2})
  monkeypatch.setattr(os, "fdopen", real_fdopen)
  # The old results stay readable and no temporary file is left behind.
  assert reporting.read_json(path) == {"step": 1}
  assert os.listdir(tmp_path) == ["results.json"]
  reporting.write_json(path, {"step": 2})
  assert reporting.read_json(path) == {"step": 2}


def test_plot_curves_draws_error_bars_for_the_labelled_series(
    tmp_path, monkeypatch
):
  import matplotlib.axes  # pylint: disable=g-import-not-at-top

  drawn = []
  real = matplotlib.axes.Axes.errorbar

  def record(ax, xs, ys, yerr=None, **kwargs):
    drawn.append((kwargs["label"], list(xs), list(ys), list(yerr)))
    return real(ax, xs, ys, yerr=yerr, **kwargs)

  monkeypatch.setattr(matplotlib.axes.Axes, "errorbar", record)
  path = str(tmp_path / "curves.png")
  series = [("ours", [6, 10], [0.8, 0.6]), ("paper", [6, 10], [0.82, 0.58])]
  reporting.plot_curves(
      series,
      path,
      xlabel="k",
      ylabel="accuracy",
      error_bars={"paper": [0.06, 0.09]},
  )
  assert os.path.getsize(path) > 0
  assert drawn == [("paper", [6, 10], [0.82, 0.58], [0.06, 0.09])]
  with pytest.raises(ValueError, match=r"error_bars for \['papr'\].*'paper'"):
    reporting.plot_curves(
        series, path, xlabel="k", ylabel="a", error_bars={"papr": [0.1, 0.1]}
    )
