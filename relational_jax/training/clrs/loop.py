"""Train CLRS processors and test them out of distribution: `train_and_evaluate`.

One model per (algorithm, seed), single-task as in the RT paper: train on
n <= 16, validate at n = 16 every `train.eval_every` steps, keep the
best-validation checkpoint, and test it at every length in
`protocol.test_lengths` (default 64). Checkpoints (orbax):
`<workdir>/<algorithm>_seed<seed>/checkpoints/{latest,best}`.

Two data recipes, one loop: by default every batch is sampled afresh at
the train lengths (CLRS's run.py today, `data`); with `protocol.train_size`
> 0 the run trains on run.py's fixed datasets of the RT paper's protocol
(`fixed_data`: a fixed train set, batches drawn with replacement). With
`protocol.test_points` 'every_evaluation' (or 'new_best') the test set is
scored during training (at every evaluation, or at each new best and the
last step) and the run's test score is that of its best validation point;
'end' tests the selected state once, at every test length.

With `multi_algorithm` 'generalist' (or 'generalist_summed'), one model per
seed over all of `config.algorithms` (`train_generalist`), as CLRS's
examples/run.py trains it: one processor, each algorithm's encoders and
decoders; a step is one update on a batch of each algorithm in turn (the
same key for all; the other algorithms' modules untouched:
`processors.model.update_of_algorithm`), or, summed, one update on the sum
of their losses; each evaluation scores every algorithm's validation set and
the best checkpoint is chosen on their sum; it is tested on every algorithm
at the test lengths. Each algorithm's batches are those its single-task run
draws with the same seed, so a generalist over one algorithm is that run
(tested). Checkpoints: `<workdir>/generalist_seed<seed>/checkpoints/`.
Running again
on the same workdir resumes every unfinished run from its latest checkpoint,
continuing the same data stream, and reuses finished ones. A latest
checkpoint that cannot be restored (truncated, garbled, checksum mismatch) is
reported (log, absl warning, the run's "checkpoint_fallbacks") and the run
resumes from the previous good one, replaying the same batches. A workdir
whose `config.json` differs from the given config in anything but
`RESUMABLE_CHANGES` is refused, naming the fields. The engine does what
every run repeats: the config check once (`engine.check_config`, with this
module's `validate` and `resume_conflicts`), and per run the training and
the selected state (`engine.fit`).

Several processes (`parallel.distributed`; the mesh spans all their
devices): every process draws the same seeded global batch from its own
`TrainStream` (the CLRS samplers cannot draw a part of a batch without
changing the stream) and places only its rows on its devices
(`CarryModel.shard_feedback` -> `mesh.shard_batch`), so 1 process x 2
devices and 2 processes x 1 device train on the same global batches.
Evaluation gathers every process's predictions. Checkpoints are saved and
restored by all processes; `config.json`, `result.json`, the results JSON
and the PNGs are written by process 0.
"""

import functools
import json
import os
import sys
import time
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import jax
import jax.numpy as jnp
import numpy as np

import processors
from relational_jax.layers import shapes
from relational_jax.parallel import distributed
from relational_jax.parallel import mesh as mesh_lib
from relational_jax.training import checkpoints as ckpt_lib
from relational_jax.training import config as config_lib
from relational_jax.training import engine
from relational_jax.training import task as task_lib
from relational_jax.training import optim
from relational_jax.training import reporting
from relational_jax.training import trainer
from relational_jax.training import workdir_lock
from relational_jax.training.checkpoints import abstract_like
from relational_jax.training.clrs import config as clrs_config
from relational_jax.training.clrs import data as clrs_data
from relational_jax.training.clrs import evaluation
from relational_jax.training.clrs import fixed_data
from relational_jax.training.errors import UserError

ConfigDict = config_lib.ConfigDict

# Config paths (and their sub-paths) that may differ from a workdir's saved
# config.json when a run is resumed: every task's train fields
# (`trainer.RESUMABLE_TRAIN_CHANGES`), test elsewhere, and which
# (algorithm, seed) run dirs to train.
RESUMABLE_CHANGES = trainer.RESUMABLE_TRAIN_CHANGES + (
    "protocol.test_lengths",
    "algorithms",
    "seeds",
)


def build_model(
    config: ConfigDict,
    spec,
    dummy_feedback,
    checkpoint_dir: str,
    mesh=None,
    processor_factory: Optional[Callable] = None,
):
  """Our CLRS model, data-parallel over `mesh` (default: all local devices).

  `config.model` holds `processors.CarryModel` keyword arguments, passed on
  unchanged; the optimiser is `optim.make_optimizer(config.train)`. With
  `carry_state=False` it computes exactly what stock CLRS BaselineModel
  computes (tested), on the mesh instead of pmap. `processor_factory` (a
  CLRS `out_size -> Processor` factory) replaces the one of
  `config.processor_type`."""
  factory = processor_factory or clrs_config.processor_factory(config)
  return processors.CarryModel(
      spec,
      dummy_feedback,
      factory,
      mesh=mesh
      if mesh is not None
      else mesh_lib.mesh_of_first(config.train.devices),
      optimizer=optim.make_optimizer(config.train),
      checkpoint_path=checkpoint_dir,
      encode_hints=config.hint_mode == "encoded_decoded",
      decode_hints=config.hint_mode in ("encoded_decoded", "decoded_only"),
      **config_lib.to_dict(config.model),
  )


class ClrsTask:
  """The `trainer.Trainee` of one CLRS model: the training state
  {params, opt_state} is a pytree the trainer holds, stepped by
  `CarryModel.train_step` (the model's own parameters are not touched).

  Args:
    model: the model, initialised (`init`): its parameters and optimiser
      state are the fresh run's state.
    stream: its training feedback (`__next__`, `get_state`, `set_state`).
    seed: step t trains with dropout/noise key fold_in(PRNGKey(seed), t).
    evaluate: (predictor, step) -> (history fields, selection score); the
      predictor has the model's `predict` with the state's parameters.
    evaluate_best: optional (predictor, step) -> history fields scored only
      at a new best evaluation and at the last step (`trainer.Trainee`).
  """

  def __init__(
      self,
      model,
      stream,
      seed: int,
      evaluate: Callable,
      evaluate_best: Optional[Callable] = None,
  ):
    self.model, self.stream, self._evaluate = model, stream, evaluate
    self.evaluate_best = evaluate_best and (
        lambda state, step: evaluate_best(
            self.model.bound(state["params"]), step
        )
    )
    self.key = jax.random.PRNGKey(seed)
    self._abstract = abstract_like(model.state())

  def init_state(self) -> Dict:
    return self.model.state()

  def abstract_state(self) -> Dict:
    return self._abstract

  def train_step(self, state, feedback, step):
    return self.model.train_step(
        state, jax.random.fold_in(self.key, step), feedback
    )

  def evaluate(self, state, step):
    return self._evaluate(self.model.bound(state["params"]), step)


class OneAlgorithm:
  """The predictor of algorithm `index` of a multi-algorithm model (as a
  single-algorithm model's predictor: `predict(rng_key, features)`)."""

  def __init__(self, model, index: int):
    self.model, self.index = model, index

  def predict(self, rng_key, features, **kwargs):
    return self.model.predict(
        rng_key, features, algorithm_index=self.index, **kwargs
    )


class GeneralistTask(ClrsTask):
  """The `trainer.Trainee` of one model over several algorithms: a step is
  one update on each algorithm's batch in turn with the step's key (CLRS
  run.py), or, `summed`, one update on the sum of their losses. Metrics:
  'loss' (the sum over algorithms), 'loss_<algorithm>' (in turn only) and
  'grad_norm' (the largest of the step's updates)."""

  def __init__(self, model, stream, seed, evaluate, algorithms, summed):
    super().__init__(model, stream, seed, evaluate)
    self.algorithms, self.summed = tuple(algorithms), summed

  def train_step(self, state, feedbacks, step):
    key = jax.random.fold_in(self.key, step)
    if self.summed:
      return self.model.train_step_summed(state, key, feedbacks)
    metrics, norms = {}, []
    for i, (algorithm, feedback) in enumerate(zip(self.algorithms, feedbacks)):
      state, m = self.model.train_step(state, key, feedback, i)
      metrics[f"loss_{algorithm}"] = m["loss"]
      norms.append(m["grad_norm"])
    metrics["loss"] = sum(metrics[f"loss_{a}"] for a in self.algorithms)
    metrics["grad_norm"] = functools.reduce(jnp.maximum, norms)
    return state, metrics


def generalist_evaluate(
    algorithms: Sequence[str], val_sets: Sequence, seed: int
) -> Callable:
  """(model, step) -> ({'val': mean, 'val_<algorithm>': score, ...}, sum):
  every algorithm's validation score with the key of `validation_evaluate`;
  selection on their sum, as CLRS run.py."""
  key = jax.random.PRNGKey(seed)

  def evaluate(model, step):
    k = jax.random.fold_in(key, 10**9 + step)
    scores = {
        a: evaluation.evaluate(OneAlgorithm(model, i), val_set, k)["score"]
        for i, (a, val_set) in enumerate(zip(algorithms, val_sets))
    }
    total = sum(scores.values())
    entry = {"val": total / len(scores)}
    entry.update((f"val_{a}", v) for a, v in scores.items())
    return entry, total

  return evaluate


def validation_evaluate(val_set, seed: int) -> Callable:
  """(model, step) -> ({'val': score}, score) on `val_set`, with the
  evaluation key fold_in(PRNGKey(seed), 10**9 + step)."""
  key = jax.random.PRNGKey(seed)

  def evaluate(model, step):
    score = evaluation.evaluate(
        model, val_set, jax.random.fold_in(key, 10**9 + step)
    )["score"]
    return {"val": score}, score

  return evaluate


def _run_data(config: ConfigDict, algorithm: str, seed: int, data=None):
  """An algorithm's training stream, validation set and test sets
  ({length: EvalSet}, or None: sampled at the end, `test_at_lengths`) for
  seed `seed`: fresh samples, or with `protocol.train_size` the fixed
  datasets (`data`, or built: `fixed_data.FixedData.build`)."""
  p, t = config.protocol, config.train
  if not p.train_size:
    stream = clrs_data.TrainStream(
        algorithm, p.train_lengths, t.batch_size, seed
    )
    val_set = clrs_data.make_eval_set(
        algorithm,
        "val",
        max(p.train_lengths),
        t.eval_batch_size,
        p.max_eval_samples,
    )
    return stream, val_set, None
  if data is None:
    data = fixed_data.FixedData.build(
        algorithm, p.train_size, p.train_lengths[0], p.test_lengths[0]
    )
  val_set, test_set = (
      data.eval_set(algorithm, split, t.eval_batch_size, p.max_eval_samples)
      for split in ("val", "test")
  )
  stream = fixed_data.FixedStream(data, t.batch_size)
  return stream, val_set, {p.test_lengths[0]: test_set}


def model_for_run(
    config: ConfigDict,
    algorithm: str,
    seed: int,
    run_dir: str,
    processor_factory: Optional[Callable] = None,
    data=None,
):
  """The run's model, initialised (not yet restored), and its data
  (`_run_data`: stream, validation set, test sets)."""
  stream, val_set, test_sets = _run_data(config, algorithm, seed, data)
  dummy, _ = next(val_set.batches())
  model = build_model(
      config,
      stream.spec,
      dummy,
      os.path.join(run_dir, "clrs"),
      processor_factory=processor_factory,
  )
  model.init(dummy.features, seed + config.protocol.init_seed_offset)
  return model, stream, val_set, test_sets


def generalist_for_run(
    config: ConfigDict,
    seed: int,
    run_dir: str,
    processor_factory: Optional[Callable] = None,
):
  """The generalist's model over `config.algorithms` (initialised, not yet
  restored), its `MultiStream`, the validation sets and the test sets
  (`_run_data`), in that order."""
  data = [_run_data(config, a, seed) for a in config.algorithms]
  dummies = [next(val_set.batches())[0] for _, val_set, _ in data]
  model = build_model(
      config,
      [stream.spec for stream, _, _ in data],
      dummies,
      os.path.join(run_dir, "clrs"),
      processor_factory=processor_factory,
  )
  model.init(
      [d.features for d in dummies], seed + config.protocol.init_seed_offset
  )
  stream = clrs_data.MultiStream([stream for stream, _, _ in data])
  return model, stream, [d[1] for d in data], [d[2] for d in data]


def _fingerprint(params) -> List[float]:
  """Per-leaf float64 sums of the parameters: compares runs without storing them."""
  return [
      float(np.sum(np.asarray(x, np.float64)))
      for x in jax.tree_util.tree_leaves(params)
  ]


def train_one(
    config: ConfigDict,
    algorithm: str,
    seed: int,
    run_dir: str,
    log=print,
    processor_factory: Optional[Callable] = None,
) -> Dict:
  """Trains and tests one (algorithm, seed) run; resumes from `run_dir`.
  The run's result, or {'stopped_at': step} after a planned stop
  (`train.stop_at_step`)."""
  p, t = config.protocol, config.train
  result_path = os.path.join(run_dir, "result.json")
  if os.path.exists(result_path):
    done = reporting.read_json(result_path)
    if (
        done["complete"]
        and done["steps"] == t.steps
        and set(map(str, p.test_lengths)) <= set(done["test"])
        and done["select_on"] == t.select_on
    ):
      log(f"[{algorithm} seed {seed}] already complete, reusing {result_path}")
      return done
  run_log = lambda m: log(f"[{algorithm} seed {seed}] {m}")
  model, done, state, selected, test_sets = fit_one(
      config, algorithm, seed, run_dir, run_log, processor_factory
  )
  if not done.complete:
    return {"stopped_at": done.step}
  if p.test_points == "end":
    test = evaluation.test_at_lengths(
        config,
        algorithm,
        model.bound(state["params"]),
        p.test_lengths,
        run_log,
        test_sets,
    )
  else:  # Scored during training: the selected (best) point's score.
    best = next(h for h in done.history if h["step"] == done.best["step"])
    test, selected = {str(p.test_lengths[0]): best["test"]}, (
        f"val (step {best['step']})"
    )
  return _write_result(
      result_path,
      done,
      selected,
      t.select_on,
      test,
      algorithm=algorithm,
      seed=seed,
  )


def fit_one(
    config: ConfigDict,
    algorithm: str,
    seed: int,
    run_dir: str,
    log=print,
    processor_factory: Optional[Callable] = None,
    data=None,
):
  """Trains (or resumes) one (algorithm, seed) run in `run_dir`: (model,
  run record, selected state, its description, test sets). The state is
  None after a planned stop, and with `protocol.test_points` other than
  'end', whose test scores are in the run record's history ('test', at the
  one test length; key fold_in(PRNGKey(seed), 2 * 10**9 + step)). `data`:
  the fixed datasets to train on (`protocol.train_size`), else built."""
  p, t = config.protocol, config.train
  os.makedirs(run_dir, exist_ok=True)
  model, stream, val_set, test_sets = model_for_run(
      config, algorithm, seed, run_dir, processor_factory, data
  )
  evaluate, score_test = validation_evaluate(val_set, seed), None
  if p.test_points != "end":
    (length,) = p.test_lengths
    test_set = (test_sets or {}).get(int(length)) or clrs_data.make_eval_set(
        algorithm, "test", length, t.eval_batch_size, p.max_eval_samples
    )
    key = jax.random.PRNGKey(seed)

    def score_test(model, step):
      return {
          "test": evaluation.evaluate(
              model, test_set, jax.random.fold_in(key, 2 * 10**9 + step)
          )["score"]
      }

  if p.test_points == "every_evaluation":
    validate_only = evaluate

    def evaluate(model, step):  # pylint: disable=function-redefined
      fields, score = validate_only(model, step)
      return {**fields, **score_test(model, step)}, score

  task = ClrsTask(
      model,
      stream,
      seed,
      evaluate,
      evaluate_best=score_test if p.test_points == "new_best" else None,
  )
  done, state, selected = engine.fit(
      task,
      trainer.loop_of(t, f"{algorithm}/{config.processor_type}/seed{seed}"),
      run_dir,
      log,
      t.select_on,
      select=p.test_points == "end",
  )
  return model, done, state, selected, test_sets


def train_generalist(
    config: ConfigDict,
    seed: int,
    run_dir: str,
    log=print,
    processor_factory: Optional[Callable] = None,
) -> Dict:
  """Trains and tests the generalist of seed `seed` over
  `config.algorithms`; resumes from `run_dir`. Its result ('test' per
  algorithm and length), or {'stopped_at': step} after a planned stop."""
  p, t = config.protocol, config.train
  algorithms = tuple(config.algorithms)
  result_path = os.path.join(run_dir, "result.json")
  if os.path.exists(result_path):
    done = reporting.read_json(result_path)
    if (
        done["complete"]
        and done["steps"] == t.steps
        and all(
            set(map(str, p.test_lengths)) <= set(done["test"][a])
            for a in algorithms
        )
        and done["select_on"] == t.select_on
    ):
      log(f"[generalist seed {seed}] already complete, reusing {result_path}")
      return done
  os.makedirs(run_dir, exist_ok=True)
  model, stream, val_sets, test_sets = generalist_for_run(
      config, seed, run_dir, processor_factory
  )
  task = GeneralistTask(
      model,
      stream,
      seed,
      generalist_evaluate(algorithms, val_sets, seed),
      algorithms,
      config.multi_algorithm == "generalist_summed",
  )
  run_log = lambda m: log(f"[generalist seed {seed}] {m}")
  done, state, selected = engine.fit(
      task,
      trainer.loop_of(t, f"generalist/{config.processor_type}/seed{seed}"),
      run_dir,
      run_log,
      t.select_on,
  )
  if not done.complete:
    return {"stopped_at": done.step}
  bound = model.bound(state["params"])
  test = {
      a: evaluation.test_at_lengths(
          config,
          a,
          OneAlgorithm(bound, i),
          p.test_lengths,
          lambda m, a=a: run_log(f"{a} {m}"),
          test_sets[i],
      )
      for i, a in enumerate(algorithms)
  }
  return _write_result(
      result_path,
      done,
      selected,
      t.select_on,
      test,
      algorithms=list(algorithms),
      seed=seed,
  )


def _write_result(path, done, selected, select_on, test, **identity) -> Dict:
  """A finished run's result (`identity`: which run), written to `path` by
  process 0."""
  result = {
      **identity,
      **done.to_json(),
      "best_val": done.best["score"],
      "best_step": done.best["step"],
      "select_on": select_on,
      "selected": selected,
      "test": test,
      "final_params_fingerprint": _fingerprint(
          jax.device_get(done.state["params"])
      ),
  }
  if distributed.is_primary():
    reporting.write_json(path, result)
  return result


def per_algorithm(run: Dict, algorithm: str) -> Dict:
  """One algorithm's part of a generalist's result, in a single-task run's
  fields: its test scores, its validation curve ('val': its own score) and
  its validation score at the selected checkpoint ('best_val'; 'last'
  selection: at the last evaluation)."""
  name = f"val_{algorithm}"
  history = [{"step": h["step"], "val": h[name]} for h in run["history"]]
  at = run["best_step"] if run["select_on"] == "val" else run["steps"]
  best = [h["val"] for h in history if h["step"] == at]
  return {
      "seed": run["seed"],
      "test": run["test"][algorithm],
      "history": history,
      "best_val": best[-1] if best else history[-1]["val"],
      "best_step": run["best_step"],
  }


def unread_paths(config: Dict, custom_factory: bool = False) -> Tuple[str, ...]:
  """Config paths (prefixes) that the processor of `config` (a record)
  never reads, following `clrs_config.processor_factory`: our kinds read
  their own model section (`processors.PROCESSORS`), processor.nb_heads and
  processor.use_ln where their config has num_heads / use_ln (heads: every
  kind of ours; layer norm: the RT kinds, not 'et' and 'floyd'), and only
  their own processor options (RT: no node_readout) and no
  nb_triplet_fts; CLRS kinds read no model section, none of our
  processor options, and only the factory arguments that dm-clrs's kind
  reads (`processors.factory.CLRS_ARGUMENT_READERS`); a user's processor
  factory reads none of them."""
  sections = tuple(clrs_config.model_sections())
  if custom_factory:
    return ("processor",) + sections
  kind = config.get("processor_type")
  spec = processors.PROCESSORS.get(kind)
  unread = tuple(
      f"processor.{name}" for name in clrs_config.unread_processor_fields(kind)
  )
  return unread + tuple(
      s for s in sections if spec is None or s != spec.section
  )


def resume_conflicts(
    saved: Dict, current, processor_factory: Optional[Callable] = None
) -> Dict:
  """{path: (saved, current)} of the config fields that differ between a
  workdir's saved config record and the current config (or its record),
  other than `RESUMABLE_CHANGES` and fields the processor does not read
  (`unread_paths`; none of them with the caller's own `processor_factory`)
  (`config.resume_conflicts`). The engine's resume check of this task."""
  current = config_lib.to_dict(current)
  free = RESUMABLE_CHANGES
  if current.get("multi_algorithm", "separate") != "separate":
    free = tuple(f for f in free if f != "algorithms")  # One model of them.
  return config_lib.resume_conflicts(
      saved,
      current,
      free=free + unread_paths(current, processor_factory is not None),
  )


def validate(
    config: ConfigDict, processor_factory: Optional[Callable] = None
) -> None:
  """Raises ValueError naming a bad value and the valid choices (the
  processor kind and its options unchecked with the caller's own
  `processor_factory`)."""
  clrs_config.validate(config, custom_factory=processor_factory is not None)


default_config = clrs_config.default_config


def headline(results: Dict) -> Dict[str, float]:
  """Percent test score per algorithm at the largest test size (mean over
  seeds), and their 'mean'."""
  ours = {
      a: 100.0 * e["mean_test"][max(e["mean_test"], key=int)]
      for a, e in results["algorithms"].items()
  }
  ours["mean"] = sum(ours.values()) / len(ours)
  return ours


results_path = task_lib.results_path


def train_and_evaluate(
    config: ConfigDict,
    workdir: str,
    processor_factory: Optional[Callable] = None,
    log=print,
) -> Dict:
  """Runs every (algorithm, seed) of `config`; writes the results JSON and
  PNGs. After a planned stop (`train.stop_at_step`, every run stopped
  there) it returns {'stopped_at': step} and writes no results.

  Args:
    config: a config from `relational_jax.training.clrs.default_config()`.
    workdir: checkpoints and per-run results; a rerun resumes exactly.
    processor_factory: a CLRS processor factory (`out_size -> Processor`,
      e.g. your own `clrs.processors.Processor` subclass) used instead of
      `config.processor_type`'s, which then only labels the results.

  Raises:
    ValueError: a bad config, or `<workdir>/config.json` (a run already
      there) differs from `config` in a field outside `RESUMABLE_CHANGES`;
      the message names the fields, and nothing is overwritten.
    CorruptCheckpointError: a run has checkpoints and none can be restored.
    WorkdirInUseError: another run holds `workdir` (`workdir_lock`).
  """
  validate(config, processor_factory)  # Before the work directory is touched.
  with workdir_lock.hold(workdir):
    return _train_and_evaluate(config, workdir, processor_factory, log)


def _train_and_evaluate(config, workdir, processor_factory, log) -> Dict:
  engine.check_config(
      TASK,
      config,
      workdir,
      processor_factory=processor_factory,
  )
  record = config_lib.to_dict(config)
  results = {"config": record, "algorithms": {}}
  t0 = time.time()
  if config.multi_algorithm != "separate":
    return _train_generalists(
        config, workdir, results, t0, log, processor_factory
    )
  for algorithm in config.algorithms:
    runs = [
        train_one(
            config,
            algorithm,
            seed,
            os.path.join(workdir, f"{algorithm}_seed{seed}"),
            log,
            processor_factory,
        )
        for seed in config.seeds
    ]
    stopped = [r["stopped_at"] for r in runs if "stopped_at" in r]
    if stopped:
      results.setdefault("stopped_at", min(stopped))
      continue
    results["algorithms"][algorithm] = {
        "runs": runs,
        "mean_test": evaluation.mean_over_runs(
            runs, config.protocol.test_lengths
        ),
        "mean_best_val": float(np.mean([r["best_val"] for r in runs])),
    }
  if "stopped_at" in results:  # train.stop_at_step: every run stopped there.
    log(
        f"stopped at step {results['stopped_at']} (train.stop_at_step); "
        "rerun on the same work directory to resume"
    )
    return {"stopped_at": results["stopped_at"]}
  results["wall_time_s"] = time.time() - t0
  evaluation.write_results(
      results,
      results_path(config, workdir),
      validation=True,
  )
  return results


def _train_generalists(
    config, workdir, results, t0, log, processor_factory
) -> Dict:
  """`train_and_evaluate` of the generalist: one model per seed; the
  results hold each algorithm's part of every seed's run
  (`per_algorithm`), the runs themselves under 'generalist', and the mean
  over algorithms of the test scores ('mean_test')."""
  runs = [
      train_generalist(
          config,
          seed,
          os.path.join(workdir, f"generalist_seed{seed}"),
          log,
          processor_factory,
      )
      for seed in config.seeds
  ]
  stopped = [r["stopped_at"] for r in runs if "stopped_at" in r]
  if stopped:
    log(
        f"stopped at step {min(stopped)} (train.stop_at_step); "
        "rerun on the same work directory to resume"
    )
    return {"stopped_at": min(stopped)}
  lengths = config.protocol.test_lengths
  for algorithm in config.algorithms:
    parts = [per_algorithm(run, algorithm) for run in runs]
    results["algorithms"][algorithm] = {
        "runs": parts,
        "mean_test": evaluation.mean_over_runs(parts, lengths),
        "mean_best_val": float(np.mean([r["best_val"] for r in parts])),
    }
  results["generalist"] = {"runs": runs}
  results["mean_test"] = {
      str(n): float(
          np.mean(
              [e["mean_test"][str(n)] for e in results["algorithms"].values()]
          )
      )
      for n in lengths
  }
  results["wall_time_s"] = time.time() - t0
  evaluation.write_results(
      results, results_path(config, workdir), validation=True
  )
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
        "(or pass the run's results JSON as config_json)."
    )
  with open(path) as f:
    raw = json.load(f)
  raw = raw["config"] if isinstance(raw.get("config"), dict) else raw
  return clrs_config.load(raw)


def _no_checkpoint(run_dir: str, which: str) -> UserError:
  return UserError(
      f"No {which} checkpoint in {run_dir}/checkpoints/{which}: that "
      "run has not been saved yet (train it further with the same "
      "--workdir; the first checkpoint comes at the first evaluation"
      + ("; or test --checkpoint=latest)." if which == "best" else ").")
  )


def evaluate_checkpoints(
    workdir: str,
    test_lengths: Sequence[int],
    results_path: Optional[str] = None,
    which: str = "best",
    log=print,
    config_json: Optional[str] = None,
    processor_factory: Optional[Callable] = None,
) -> Dict:
  """Tests the saved checkpoints of every run in `workdir` at `test_lengths`
  (no training); writes a JSON and a score-versus-size PNG. A run's entry
  says which checkpoint it tested: `which`, or, where none of `which`
  could be restored ('latest' falls back to 'best'), the one restored
  instead, with the `skipped` ones (moved to `checkpoints/corrupt/`, as a
  resumed run moves them)."""
  shapes.check_choice(which, ("best", "latest"), "checkpoint")
  config = load_config(workdir, config_json)
  config.protocol.test_lengths = tuple(int(n) for n in test_lengths)
  config.train.progress = False
  clrs_data.check_lengths(test_lengths, "test_lengths")
  results = {
      "config": config_lib.to_dict(config),
      "checkpoint": which,
      "algorithms": {},
  }
  generalist = config.multi_algorithm != "separate"
  tested_runs = {a: [] for a in config.algorithms}
  for algorithm in config.algorithms[:1] if generalist else config.algorithms:
    for seed in config.seeds:
      name = "generalist" if generalist else algorithm
      run_dir = os.path.join(workdir, f"{name}_seed{seed}")
      if not any(  # Fail before building data and model.
          ckpt_lib.saved_steps(trainer.checkpoint_dir(run_dir), w)
          for w in ckpt_lib.WHICH
      ):
        raise _no_checkpoint(run_dir, which)
      if generalist:
        model, _, _, _ = generalist_for_run(
            config, seed, run_dir, processor_factory
        )
        predictors = [
            lambda params, i=i: OneAlgorithm(model.bound(params), i)
            for i in range(len(config.algorithms))
        ]
        algorithms = tuple(config.algorithms)
      else:
        model, _, _, _ = model_for_run(
            config, algorithm, seed, run_dir, processor_factory
        )
        predictors, algorithms = [model.bound], (algorithm,)
      task = ClrsTask(model, None, seed, None)
      skipped = []
      restored = trainer.restore(
          task.abstract_state(),
          trainer.checkpoint_dir(run_dir),
          which,
          skipped=skipped,
      )
      if restored is None:
        raise _no_checkpoint(run_dir, which)
      # What was tested: `which`, or what its restore fell back to.
      tested = skipped[-1]["restored_instead"] if skipped else {"which": which}
      for failure in skipped:
        log(
            f"[{name} seed {seed}] {failure['which']} step "
            f"{failure['step']} could not be restored ({failure['error']}): "
            f"moved to {failure['moved_to']}; tested {tested['which']} step "
            f"{restored[1]['step']} instead"
        )
      for a, predictor in zip(algorithms, predictors):
        test = evaluation.test_at_lengths(
            config,
            a,
            predictor(restored[0]["params"]),
            test_lengths,
            lambda m, a=a, s=seed: log(f"[{a} seed {s}] {m}"),
        )
        tested_runs[a].append({
            "seed": seed,
            "checkpoint": tested["which"],
            "step": restored[1]["step"],
            "test": test,
            **({"skipped": skipped} if skipped else {}),
        })
  for algorithm, runs in tested_runs.items():
    results["algorithms"][algorithm] = {
        "runs": runs,
        "mean_test": evaluation.mean_over_runs(runs, test_lengths),
    }
  evaluation.write_results(
      results,
      results_path or os.path.join(workdir, "evaluation.json"),
      validation=False,
  )
  return results


class Clrs(task_lib.Task):
  """CLRS, task 'clrs' (this module's functions): its config holds a run
  per algorithm and seed (or a generalist per seed), so it trains through
  its own `train_and_evaluate` (the engine's `check_config` and `fit`), not
  `engine.run`. Run option: `processor_factory`."""

  RESUMABLE_CHANGES = RESUMABLE_CHANGES

  def default_config(self):
    return default_config()

  def validate(self, config, processor_factory=None):
    validate(config, processor_factory)

  def resume_conflicts(self, saved, config, processor_factory=None):
    return resume_conflicts(saved, config, processor_factory)

  def headline(self, results):
    return headline(results)

  def train_and_evaluate(
      self, config, workdir, log=print, processor_factory=None
  ):
    return train_and_evaluate(config, workdir, processor_factory, log)


TASK = Clrs()
