"""Learning curves of two implementations, aggregated over seeds and matched.

A *run* is one seed of one side: a list of evaluation points
`{"step": int, "metrics": {name: value}}`. `aggregate` turns the runs of a
side into one curve (per step and metric: mean, sample sd, min, max, n and
the values); `compare_sides` puts our curve beside the authors' and applies
the matching rule of the comparison issue:

    |mean_ours - mean_theirs| <= max(range_ours, range_theirs, 2 * se_diff)

with range = max - min over that side's seeds and se_diff =
sqrt(sd_ours^2 / n_ours + sd_theirs^2 / n_theirs), the standard error of the
difference of the two means. A point where one side has no value is reported
as unmatched (`missing`), never skipped.
"""

import json
import math
import os
import statistics
from typing import Dict, List, Mapping, Optional, Sequence

Run = Sequence[Mapping]  # [{"step": int, "metrics": {name: float}}, ...]


def finished_history(workdir: str, steps: int) -> Optional[List[Dict]]:
  """The evaluation `history` of `<workdir>/results.json` when its last
  point is at `steps` (the run finished), else None."""
  path = os.path.join(workdir, "results.json")
  if not os.path.isfile(path):
    return None
  with open(path) as f:
    history = json.load(f)["history"]
  return history if history and history[-1]["step"] == steps else None


def summarize(values: Sequence[float]) -> Dict:
  """mean, sample sd (0 for one value), min, max, n, values."""
  values = [float(v) for v in values]
  if not values:
    raise ValueError("summarize needs at least one value.")
  return {
      "mean": statistics.fmean(values),
      "sd": statistics.stdev(values) if len(values) > 1 else 0.0,
      "min": min(values),
      "max": max(values),
      "n": len(values),
      "values": values,
  }


def aggregate(runs: Sequence[Run]) -> Dict[str, Dict[int, Dict]]:
  """{metric: {step: summarize(values over runs)}}.

  Raises:
    ValueError: if there are no runs, or a run has a point without 'step' or
      'metrics'.
  """
  if not runs:
    raise ValueError("aggregate needs at least one run.")
  values: Dict[str, Dict[int, List[float]]] = {}
  for r, run in enumerate(runs):
    for point in run:
      if "step" not in point or "metrics" not in point:
        raise ValueError(
            f"run {r}: an evaluation point needs 'step' and "
            f"'metrics', got keys {sorted(point)}."
        )
      for name, value in point["metrics"].items():
        values.setdefault(name, {}).setdefault(int(point["step"]), []).append(
            float(value)
        )
  return {
      name: {step: summarize(v) for step, v in sorted(by_step.items())}
      for name, by_step in sorted(values.items())
  }


def tolerance(ours: Mapping, theirs: Mapping) -> float:
  """max(seed range of either side, two standard errors of the difference)."""
  ranges = max(ours["max"] - ours["min"], theirs["max"] - theirs["min"])
  se = math.sqrt(ours["sd"] ** 2 / ours["n"] + theirs["sd"] ** 2 / theirs["n"])
  return max(ranges, 2.0 * se)


def chance_failure_rate(
    seeds: int = 3, trials: int = 100_000, seed: int = 0
) -> float:
  """How often the matching rule fails at one point when both sides draw
  their `seeds` values from the same normal distribution (Monte Carlo,
  `trials` draws): the rate of failures that need no cause."""
  import numpy as np  # pylint: disable=g-import-not-at-top

  if seeds < 2:
    raise ValueError(f"seeds must be >= 2 for a seed range, got {seeds}.")
  rng = np.random.default_rng(seed)
  ours, theirs = rng.normal(size=(2, trials, seeds))
  diff = np.abs(ours.mean(-1) - theirs.mean(-1))
  ranges = np.maximum(np.ptp(ours, -1), np.ptp(theirs, -1))
  se = np.sqrt((ours.var(-1, ddof=1) + theirs.var(-1, ddof=1)) / seeds)
  return float(np.mean(diff > np.maximum(ranges, 2.0 * se)))


def compare_sides(
    ours: Mapping[str, Mapping[int, Mapping]],
    theirs: Mapping[str, Mapping[int, Mapping]],
) -> Dict:
  """Per metric and step: both summaries, the difference of means, the
  tolerance and whether the matching rule holds; plus overall counts.

  Metrics or steps present on one side only count as unmatched points
  (`missing` names the side that lacks them)."""
  points = []
  for name in sorted(set(ours) | set(theirs)):
    steps = sorted(set(ours.get(name, {})) | set(theirs.get(name, {})))
    for step in steps:
      o, t = ours.get(name, {}).get(step), theirs.get(name, {}).get(step)
      point = {"metric": name, "step": step, "ours": o, "theirs": t}
      if o is None or t is None:
        point.update(match=False, missing="ours" if o is None else "theirs")
      else:
        diff = o["mean"] - t["mean"]
        tol = tolerance(o, t)
        point.update(diff=diff, tolerance=tol, match=abs(diff) <= tol)
      points.append(point)
  unmatched = [p for p in points if not p["match"]]
  return {
      "points": points,
      "num_points": len(points),
      "num_matched": len(points) - len(unmatched),
      "all_match": not unmatched,
      "unmatched": [(p["metric"], p["step"]) for p in unmatched],
  }


def plot(
    comparison: Mapping,
    metrics: Sequence[str],
    path: str,
    title: str = "",
    ylabel: str = "accuracy",
    labels: Optional[Sequence[str]] = None,
) -> None:
  """One panel per metric: mean +- sd over seeds for both sides (PNG)."""
  import matplotlib  # pylint: disable=g-import-not-at-top

  matplotlib.use("Agg")
  import matplotlib.pyplot as plt  # pylint: disable=g-import-not-at-top

  labels = labels or ("ours", "authors'")
  cols = min(len(metrics), 5)
  rows = math.ceil(len(metrics) / cols)
  fig, axes = plt.subplots(
      rows, cols, figsize=(3.2 * cols, 2.8 * rows), squeeze=False, sharey=True
  )
  for ax, name in zip(axes.flat, metrics):
    for side, label in zip(("ours", "theirs"), labels):
      pts = [
          p
          for p in comparison["points"]
          if p["metric"] == name and p[side] is not None
      ]
      xs = [p["step"] for p in pts]
      mean = [p[side]["mean"] for p in pts]
      sd = [p[side]["sd"] for p in pts]
      ax.plot(xs, mean, marker=".", label=label)
      ax.fill_between(
          xs,
          [m - s for m, s in zip(mean, sd)],
          [m + s for m, s in zip(mean, sd)],
          alpha=0.25,
      )
    ax.set_title(name, fontsize=9)
    ax.set_xlabel("step", fontsize=8)
  for ax in axes.flat[len(metrics) :]:
    ax.axis("off")
  axes.flat[0].set_ylabel(ylabel)
  axes.flat[0].legend(fontsize=8)
  if title:
    fig.suptitle(title, fontsize=10)
  fig.tight_layout()
  fig.savefig(path, dpi=110)
  plt.close(fig)
