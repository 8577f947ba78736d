"""Train CLRS processors and test them out of distribution: `train_and_evaluate`.

One model per (algorithm, seed), single-task as in the RT paper: train on
n <= 16, validate at n = 16 every `protocol.eval_every` steps, keep the
best-validation checkpoint, and test it at every length in
`protocol.test_lengths` (default 64). Checkpoints (orbax):
`<workdir>/<algorithm>_seed<seed>/checkpoints/{latest,best}`. Running again
on the same workdir resumes every unfinished run from its latest checkpoint,
continuing the same data stream, and reuses finished ones.
"""

import json
import math
import os
import time
from typing import Callable, Dict, List, Optional, Sequence

import jax
import numpy as np
import tqdm

import processors
from relational_jax.layers import shapes
from relational_jax.training import config as config_lib
from relational_jax.training import reporting
from relational_jax.training.checkpoints import RunCheckpoints
from relational_jax.training.checkpoints import abstract_like
from relational_jax.training.clrs import config as clrs_config
from relational_jax.training.clrs import data as clrs_data
from relational_jax.training.clrs import evaluation
from relational_jax.training.errors import NonFiniteLossError

ConfigDict = config_lib.ConfigDict


def build_model(config: ConfigDict, spec, dummy_feedback, checkpoint_dir: str,
                mesh=None, processor_factory: Optional[Callable] = None):
  """Our CLRS model, data-parallel over `mesh` (default: all local devices).

  `config.model` holds `processors.CarryModel` keyword arguments, passed on
  unchanged. With `carry_state=False` it computes exactly what stock CLRS
  BaselineModel computes (tested), on the mesh instead of pmap.
  `processor_factory` (a CLRS `out_size -> Processor` factory) replaces the
  one of `config.processor_type`."""
  factory = processor_factory or clrs_config.processor_factory(config)
  return processors.CarryModel(
      spec, dummy_feedback, factory, mesh=mesh, checkpoint_path=checkpoint_dir,
      encode_hints=config.hint_mode == "encoded_decoded",
      decode_hints=config.hint_mode in ("encoded_decoded", "decoded_only"),
      **config_lib.to_dict(config.model))


def _model_state(model) -> Dict:
  return {"params": model.params, "opt_state": model.opt_state}


def restore_model(model, ckpt: RunCheckpoints, which: str) -> Optional[Dict]:
  """Restores `which` ('latest' | 'best') into `model`; returns its JSON
  record (step, history, data-stream position), or None if there is none."""
  restored = ckpt.restore(abstract_like(_model_state(model)), which)
  if restored is None:
    return None
  state, meta = restored
  model.params, model.opt_state = state["params"], state["opt_state"]
  return meta


def model_for_run(config: ConfigDict, algorithm: str, seed: int, run_dir: str,
                  processor_factory: Optional[Callable] = None):
  """The run's model, initialised (not yet restored), and its data."""
  p = config.protocol
  stream = clrs_data.TrainStream(algorithm, p.train_lengths, p.batch_size,
                                 seed)
  val_set = clrs_data.make_eval_set(algorithm, "val", max(p.train_lengths),
                                    p.eval_batch_size, p.max_eval_samples)
  dummy, _ = next(val_set.batches())
  model = build_model(config, stream.spec, dummy,
                      os.path.join(run_dir, "clrs"),
                      processor_factory=processor_factory)
  model.init(dummy.features, seed)
  return model, stream, val_set


def _fingerprint(params) -> List[float]:
  """Per-leaf float64 sums of the parameters: compares runs without storing them."""
  return [float(np.sum(np.asarray(x, np.float64)))
          for x in jax.tree_util.tree_leaves(params)]


def train_one(config: ConfigDict, algorithm: str, seed: int, run_dir: str,
              log=print, processor_factory: Optional[Callable] = None) -> Dict:
  """Trains and tests one (algorithm, seed) run; resumes from `run_dir`."""
  p = config.protocol
  result_path = os.path.join(run_dir, "result.json")
  if os.path.exists(result_path):
    done = reporting.read_json(result_path)
    if (done.get("complete") and done["steps"] == p.train_steps
        and set(map(str, p.test_lengths)) <= set(done["test"])):
      log(f"[{algorithm} seed {seed}] already complete, reusing {result_path}")
      return done
  os.makedirs(run_dir, exist_ok=True)
  model, stream, val_set = model_for_run(config, algorithm, seed, run_dir,
                                         processor_factory)
  ckpt = RunCheckpoints(os.path.join(run_dir, "checkpoints"))
  meta = restore_model(model, ckpt, "latest")
  if meta is None:
    meta = {"step": 0, "history": [], "losses": [], "best_val": -1.0,
            "best_step": -1, "wall_time_s": 0.0}
  else:
    stream.set_state(meta["stream"])
    log(f"[{algorithm} seed {seed}] resumed at step {meta['step']}")
  key = jax.random.PRNGKey(seed)
  t0 = time.time() - meta["wall_time_s"]
  bar = tqdm.tqdm(total=p.train_steps, initial=meta["step"],
                  desc=f"{algorithm}/{config.processor_type}/seed{seed}",
                  disable=not p.progress, dynamic_ncols=True)
  step = meta["step"]
  while step < p.train_steps:
    feedback = next(stream)
    loss = float(model.feedback(jax.random.fold_in(key, step), feedback))
    if not math.isfinite(loss):
      bar.close()
      ckpt.close()
      raise NonFiniteLossError(
          f"[{algorithm} seed {seed}] non-finite loss {loss} at step {step}; "
          f"training stopped. The last good checkpoint (step {meta['step']}) "
          f"is kept in {run_dir}/checkpoints/latest.")
    step += 1
    meta["losses"].append(loss)
    bar.update(1)
    if step % p.eval_every == 0 or step == p.train_steps:
      val = evaluation.evaluate(model, val_set,
                                jax.random.fold_in(key, 10**9 + step))
      is_best = val["score"] > meta["best_val"]
      if is_best:
        meta["best_val"], meta["best_step"] = val["score"], step
      meta["history"].append({"step": step, "loss": loss, "val": val["score"]})
      meta.update(step=step, stream=stream.get_state(),
                  wall_time_s=time.time() - t0)
      ckpt.save(step, _model_state(model), meta, best=is_best)
      bar.set_postfix(loss=f"{loss:.3f}", val=f"{val['score']:.3f}",
                      best=f"{meta['best_val']:.3f}")
  bar.close()
  train_time = time.time() - t0
  model_final_params = model.params
  restore_model(model, ckpt, "best")
  ckpt.close()
  test = evaluation.test_at_lengths(
      p, algorithm, model, p.test_lengths,
      lambda m: log(f"[{algorithm} seed {seed}] {m}"))
  result = {"algorithm": algorithm, "seed": seed, "complete": True,
            "best_val": meta["best_val"], "best_step": meta["best_step"],
            "steps": step, "train_wall_time_s": train_time,
            "wall_time_s": time.time() - t0, "test": test,
            "history": meta["history"], "losses": meta["losses"],
            "final_params_fingerprint": _fingerprint(model_final_params)}
  reporting.write_json(result_path, result)
  return result


def train_and_evaluate(config: ConfigDict, workdir: str,
                       processor_factory: Optional[Callable] = None,
                       results_path: Optional[str] = None, log=print) -> Dict:
  """Runs every (algorithm, seed) of `config`; writes the results JSON and PNGs.

  Args:
    config: a config from `relational_jax.training.clrs.default_config()`.
    workdir: checkpoints and per-run results; a rerun resumes exactly.
    processor_factory: a CLRS processor factory (`out_size -> Processor`,
      e.g. your own `clrs.processors.Processor` subclass) used instead of
      `config.processor_type`'s, which then only labels the results.
    results_path: the results JSON (default `<workdir>/results.json`).
  """
  clrs_config.validate(config, custom_factory=processor_factory is not None)
  os.makedirs(workdir, exist_ok=True)
  record = config_lib.to_dict(config)
  reporting.write_json(os.path.join(workdir, "config.json"), record)
  results = {"config": record, "algorithms": {}}
  t0 = time.time()
  for algorithm in config.algorithms:
    runs = [train_one(config, algorithm, seed,
                      os.path.join(workdir, f"{algorithm}_seed{seed}"), log,
                      processor_factory)
            for seed in config.seeds]
    results["algorithms"][algorithm] = {
        "runs": runs,
        "mean_test": evaluation.mean_over_runs(runs,
                                               config.protocol.test_lengths),
        "mean_best_val": float(np.mean([r["best_val"] for r in runs]))}
  results["wall_time_s"] = time.time() - t0
  evaluation.write_results(
      results, results_path or os.path.join(workdir, "results.json"),
      validation=True)
  return results


def load_config(workdir: str, config_json: Optional[str] = None) -> ConfigDict:
  """The run's config: `<workdir>/config.json`, or the "config" entry of a
  results JSON given as `config_json` (either layout)."""
  if not os.path.isdir(workdir):
    raise FileNotFoundError(f"Checkpoint directory {workdir!r} does not exist.")
  path = config_json or os.path.join(workdir, "config.json")
  if not os.path.exists(path):
    raise FileNotFoundError(
        f"{path} not found: {workdir!r} is not a clrs_train work directory "
        "(or pass the run's results JSON as config_json).")
  with open(path) as f:
    raw = json.load(f)
  raw = raw["config"] if isinstance(raw.get("config"), dict) else raw
  return clrs_config.load(raw)


def evaluate_checkpoints(workdir: str, test_lengths: Sequence[int],
                         results_path: Optional[str] = None,
                         which: str = "best", log=print,
                         config_json: Optional[str] = None,
                         processor_factory: Optional[Callable] = None) -> Dict:
  """Tests the saved checkpoints of every run in `workdir` at `test_lengths`
  (no training); writes a JSON and a score-versus-size PNG."""
  shapes.check_choice(which, ("best", "latest"), "checkpoint")
  config = load_config(workdir, config_json)
  config.protocol.test_lengths = tuple(int(n) for n in test_lengths)
  config.protocol.progress = False
  clrs_data.check_lengths(test_lengths, "test_lengths")
  results = {"config": config_lib.to_dict(config), "checkpoint": which,
             "algorithms": {}}
  for algorithm in config.algorithms:
    runs = []
    for seed in config.seeds:
      run_dir = os.path.join(workdir, f"{algorithm}_seed{seed}")
      model, _, _ = model_for_run(config, algorithm, seed, run_dir,
                                  processor_factory)
      ckpt = RunCheckpoints(os.path.join(run_dir, "checkpoints"))
      meta = restore_model(model, ckpt, which)
      ckpt.close()
      if meta is None:
        raise FileNotFoundError(
            f"No {which} checkpoint in {run_dir}/checkpoints/{which}.")
      test = evaluation.test_at_lengths(
          config.protocol, algorithm, model, test_lengths,
          lambda m, a=algorithm, s=seed: log(f"[{a} seed {s}] {m}"))
      runs.append({"seed": seed, "step": meta["step"], "test": test})
    results["algorithms"][algorithm] = {
        "runs": runs, "mean_test": evaluation.mean_over_runs(runs, test_lengths)}
  evaluation.write_results(
      results, results_path or os.path.join(workdir, "evaluation.json"),
      validation=False)
  return results
