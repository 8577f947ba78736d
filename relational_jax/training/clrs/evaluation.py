"""CLRS scoring: `clrs.evaluate` (mean over outputs) on seeded sets, any sizes."""

import os
from typing import Dict, Mapping, Optional, Sequence

import clrs
import jax
import numpy as np
from jax.experimental import multihost_utils

from relational_jax.parallel import distributed
from relational_jax.training import errors
from relational_jax.training import reporting
from relational_jax.training.clrs import data as clrs_data
from relational_jax.training.clrs import fixed_data


def evaluate(model, eval_set: clrs_data.EvalSet, rng_key) -> Dict[str, float]:
  """CLRS evaluation (mean over outputs) of `model` on every sample once.
  With several processes, each passes every batch (it keeps its rows) and
  gathers every process's predictions, so all return the same scores."""
  preds = []
  for i, (batch, real) in enumerate(eval_set.batches()):
    out, _ = model.predict(jax.random.fold_in(rng_key, i), batch.features)
    if jax.process_count() > 1:  # Every process gets every row.
      out = multihost_utils.process_allgather(out, tiled=True)
    preds.append(
        jax.tree_util.tree_map(lambda x, r=real: np.asarray(x)[:r], out)
    )
  preds = jax.tree_util.tree_map(lambda *x: np.concatenate(x, axis=0), *preds)
  scores = clrs.evaluate(eval_set.feedback.outputs, preds)
  return {k: float(v) for k, v in scores.items()}


def test_at_lengths(
    config,
    algorithm: str,
    model,
    lengths: Sequence[int],
    log=print,
    test_sets: Optional[Mapping[int, clrs_data.EvalSet]] = None,
) -> Dict[str, float]:
  """CLRS test score of `model` (or any predictor) at each graph size in
  `lengths` (test sampler seed 3; `config.train.eval_batch_size` samples a
  batch, at most `config.protocol.max_eval_samples`): on `test_sets[n]`
  where given, else on the set sampled as CLRS's run.py does, or, with
  `protocol.train_size`, as the RT fork's run.py does (`fixed_data`)."""
  p, t = config.protocol, config.train
  make = fixed_data.make_eval_set if p.train_size else clrs_data.make_eval_set
  test = {}
  for n in lengths:
    test_set = (test_sets or {}).get(int(n)) or make(
        algorithm, "test", n, t.eval_batch_size, p.max_eval_samples
    )
    test[str(n)] = evaluate(model, test_set, jax.random.PRNGKey(3))["score"]
    log(f"test n={n}: {test[str(n)]:.4f} ({test_set.num_samples} samples)")
  return test


def mean_over_runs(runs, lengths) -> Dict[str, float]:
  return {
      str(n): float(np.mean([r["test"][str(n)] for r in runs])) for n in lengths
  }


def read_results(path: str) -> Dict:
  """A clrs_train / clrs_evaluate results JSON; UserError naming the file
  when it is missing or of another kind."""
  if not os.path.exists(path):
    raise errors.UserError(f"results JSON {path} not found.")
  results = reporting.read_json(path)
  if not (
      isinstance(results, dict)
      and isinstance(results.get("config"), dict)
      and "processor_type" in results["config"]
      and isinstance(results.get("algorithms"), dict)
  ):
    raise errors.UserError(
        f"{path} is not a clrs_train or clrs_evaluate results JSON (it has "
        "no config.processor_type and algorithms entries); a reproduction's "
        "JSON draws its own figures."
    )
  return results


def plot_ood(results_list: Sequence[Dict], path: str) -> None:
  """Test score against graph size: one line per (processor, algorithm)."""
  series = []
  for results in results_list:
    kind = results["config"]["processor_type"]
    for algorithm, entry in results["algorithms"].items():
      sizes = sorted(int(n) for n in entry["mean_test"])
      series.append((
          f"{kind}: {algorithm}",
          sizes,
          [entry["mean_test"][str(n)] for n in sizes],
      ))
  reporting.plot_curves(
      series,
      path,
      xlabel="graph size n (train n <= 16)",
      ylabel="test score",
      log2_x=True,
      ylim=(0, 1.02),
      title="Out-of-distribution score versus graph size",
  )


def plot_validation(results: Dict, path: str) -> None:
  """Validation score against training step, one line per run."""
  series = [
      (
          f"{algorithm} seed {run['seed']}",
          [h["step"] for h in run["history"]],
          [h["val"] for h in run["history"]],
      )
      for algorithm, entry in results["algorithms"].items()
      for run in entry["runs"]
  ]
  reporting.plot_curves(
      series,
      path,
      xlabel="training step",
      ylabel="validation score (n=16)",
      ylim=(0, 1.02),
      title=f"{results['config']['processor_type']}: validation",
  )


def write_results(results: Dict, path: str, validation: bool) -> None:
  """The results JSON (atomic) and its PNGs beside it; written by process 0
  only (`distributed.is_primary`)."""
  if not distributed.is_primary():
    return
  reporting.write_json(path, results)
  stem = os.path.splitext(path)[0]
  if validation:
    plot_validation(results, stem + "_validation.png")
  plot_ood([results], stem + "_ood.png")
