r"""Several of our processors side by side under the RT paper's CLRS protocol
(task 'clrs_rt_protocol'), at the `clrs_rt` comparison's settings.

  python3 -m experiments.reproduce pair_models_clrs --budget=cpu \
      --workdir=/work/runs/pair_models_clrs

(the named reproduction `pair_models_clrs`, experiments/reproductions/
clrs.py; one processor at the protocol is a config of the CLRS task,
`relational_jax.training.clrs.rt_protocol`). Every (processor, algorithm, seed) of the config is
trained by `clrs_rt.fit_ours`: the library's CLRS task
(`relational_jax.training.clrs.loop.fit_one`) with the comparison's
our-side configuration (`clrs_rt.our_config`: the RT authors' run.py
hyperparameters `clrs_rt.AUTHORS`, batch 4, Adam 2.5e-4 without
clipping, noisy teacher forcing 0.5; 'et' and 'floyd' put that pair-state
processor in the RT's place at its 3 layers x 12 heads x 16; 'mpnn' and 'triplet_gmpnn' CLRS's own
network at `rt_protocol.BASELINES`' sizes) on run.py's datasets
(`fixed_data.FixedData.build`: train seed 1, `train_size` samples at
n = 16; validation seed 2 at n = 16; test seed 3 at n = 64; the first
`max_eval_samples` of each evaluation set), with run.py's batch stream.
Seed s is the comparison's seed s (initialisation seed 43 + s). Every
`eval_every` steps the current parameters are scored on the validation set
and, with `protocol.test_points` 'every_evaluation', on the test (n = 64,
out of distribution) set too; with 'new_best', the test set only at each new
best validation point and at the last step (the reported number is the
same; the OOD curve keeps only those points). A run's test score is that of
its best validation point (the first best: the best checkpoint, which the
RT paper's protocol tests).

Work directory: `<processor>/<algorithm>/seed<s>/` per run (orbax
checkpoints at every evaluation; `run.json` once finished) and the config
(`config.json`, checked on resume: only processors, algorithms, seeds,
stop_at_step, results_path and protocol.test_points may change). The same
command skips finished runs and resumes an interrupted one where its last
checkpoint left it.
Runs go seed by seed (every processor and algorithm of seed 0 first), and
`partial_results.json` holds the finished ones after each. When all are
finished: the results JSON (`results_path`, default
`<workdir>/results.json`) and a PNG beside it (same stem): validation and
OOD (n = 64) curves, mean +- sd over seeds, one line per processor.
"""

import dataclasses
import os
import sys
import time
from typing import Dict, Mapping, Sequence, Tuple

from experiments.compare import clrs_rt
from experiments.compare import curves
from relational_jax.parallel import distributed
from relational_jax.training import config as config_lib
from relational_jax.training import engine
from relational_jax.training import metrics_log
from relational_jax.training import reporting
from relational_jax.training import workdir_lock
from relational_jax.training.clrs import fixed_data
from relational_jax.training.clrs import rt_protocol

ConfigDict = config_lib.ConfigDict
REPO = os.path.dirname(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
)
# Config fields a resumed work directory may change.
RESUMABLE_CHANGES = (
    "processors",
    "algorithms",
    "seeds",
    "stop_at_step",
    "results_path",
    # Which evaluations score the test set: the best checkpoint's test score
    # is the same either way.
    "protocol.test_points",
)


def config_of(budget: clrs_rt.Budget) -> ConfigDict:
  """The config of the clrs_rt budget `budget` and every processor."""
  c = ConfigDict()
  c.processors = ("floyd", "rt", "et")
  c.algorithms = tuple(budget.algorithms)
  c.seeds = tuple(range(budget.seeds))  # the comparison's seed indices
  c.protocol = ConfigDict(
      dict(
          steps=budget.steps,
          eval_every=budget.eval_every,
          train_size=budget.train_size,
          max_eval_samples=budget.max_eval_samples,
          test_points=budget.test_points,
      )
  )
  c.stop_at_step = 0  # > 0: every run stops there (rerun to resume)
  c.results_path = ""  # '' = <workdir>/results.json; relative: to the repo
  return c


def default_config() -> ConfigDict:
  """The RT paper's protocol (clrs_rt's paper budget) for every processor."""
  return config_of(clrs_rt.BUDGETS["paper"])


def budget_overrides(budget: clrs_rt.Budget) -> Dict[str, object]:
  """Dotted-path overrides of `config_of` giving `budget`'s values."""
  c = config_of(budget)
  return {
      "algorithms": c.algorithms,
      "seeds": c.seeds,
      **{f"protocol.{k}": v for k, v in c.protocol.items()},
  }


def budget_of(config: ConfigDict) -> clrs_rt.Budget:
  p = config.protocol
  return clrs_rt.Budget(
      algorithms=tuple(config.algorithms),
      steps=p.steps,
      eval_every=p.eval_every,
      seeds=len(config.seeds),
      train_size=p.train_size,
      max_eval_samples=p.max_eval_samples,
      test_points=p.get("test_points", clrs_rt.TEST_POINTS[0]),
  )


def validate(config: ConfigDict) -> None:
  """Raises ValueError naming a bad value (and the valid choices)."""
  from relational_jax.layers import shapes  # pylint: disable=g-import-not-at-top
  from relational_jax.training.clrs import config as clrs_config  # pylint: disable=g-import-not-at-top
  from relational_jax.training.clrs import data as clrs_data  # pylint: disable=g-import-not-at-top

  valid = rt_protocol.kinds()
  if not config.processors:
    raise ValueError(f"processors must name at least one of {list(valid)}.")
  for processor in config.processors:
    shapes.check_choice(processor, valid, "processor")
  if not config.algorithms:
    raise ValueError("algorithms must name at least one CLRS algorithm.")
  for algorithm in config.algorithms:
    clrs_data.check_algorithm(algorithm)
  if not config.seeds or any(
      not isinstance(s, int) or s < 0 for s in config.seeds
  ):
    raise ValueError(
        f"seeds must be a non-empty tuple of ints >= 0, got {config.seeds!r}."
    )
  for name in ("steps", "eval_every", "train_size"):
    if config.protocol[name] < 1:
      raise ValueError(
          f"protocol.{name} must be >= 1, got {config.protocol[name]}."
      )
  if config.protocol.max_eval_samples < 0:
    raise ValueError(
        "protocol.max_eval_samples must be >= 0 (0: all), got "
        f"{config.protocol.max_eval_samples}."
    )
  shapes.check_choice(
      config.protocol.test_points, clrs_rt.TEST_POINTS, "protocol.test_points"
  )
  if config.stop_at_step < 0:
    raise ValueError(f"stop_at_step must be >= 0, got {config.stop_at_step}.")
  budget = budget_of(config)
  for processor in config.processors:
    for algorithm in config.algorithms:
      clrs_config.validate(
          clrs_rt.our_config(budget, 0, algorithm, processor_type=processor)
      )


def saved_defaults() -> None:
  """The resume check compares the saved config as it is."""
  return None


def results_path(config: ConfigDict, workdir: str) -> str:
  if not config.results_path:
    return os.path.join(workdir, "results.json")
  return os.path.join(REPO, config.results_path)  # an absolute path stays


def headline(results: Mapping) -> Dict[str, float]:
  """Percent test score (mean over seeds) per 'processor/algorithm'; with one
  processor also per algorithm and their 'mean', as the RT paper's tables."""
  ours = dict(results["ours"])
  if len(results["config"]["processors"]) == 1:
    by_algorithm = {key.split("/", 1)[1]: v for key, v in ours.items()}
    mean = sum(by_algorithm.values()) / len(by_algorithm)
    ours.update(by_algorithm, mean=mean)
  return ours


def plot_path(config: ConfigDict, workdir: str) -> str:
  return os.path.splitext(results_path(config, workdir))[0] + ".png"


def run_dir(workdir: str, processor: str, algorithm: str, seed: int) -> str:
  return os.path.join(workdir, processor, algorithm, f"seed{seed}")


def finished_run(path: str, steps: int):
  """The run record in `path/run.json` if that run finished `steps`."""
  record_path = os.path.join(path, "run.json")
  if not os.path.isfile(record_path):
    return None
  record = reporting.read_json(record_path)
  return record if record.get("steps") == steps else None


def run_record(done, processor: str, algorithm: str, seed: int) -> Dict:
  """What the results keep of one finished `trainer.RunRecord`."""
  history = [
      {
          k: float(h[k]) if k != "step" else int(h[k])
          for k in ("step", "loss", "val", "test")
          if k in h  # 'test': at every point, or ('new_best') some
      }
      for h in done.history
  ]
  best = next(h for h in history if h["step"] == done.best["step"])
  return {
      "processor": processor,
      "algorithm": algorithm,
      "seed": seed,
      "init_seed": clrs_rt.MODEL_SEED + seed + 1,
      "steps": done.step,
      "num_params": done.num_params,
      "train_seconds": done.train_seconds,
      "sittings": done.sittings,  # Each resumed part: code, wall, steps.
      # Unreadable checkpoints moved aside (and what was restored instead).
      "checkpoint_fallbacks": done.checkpoint_fallbacks,
      "history": history,
      "best_step": best["step"],
      "best_val": best["val"],
      "test": best["test"],
      "final_val": history[-1]["val"],
      "final_test": history[-1]["test"],
  }


def training_dynamics(path: str, record: Mapping) -> Dict:
  """How a finished run trained, from its `path/metrics.jsonl` (every
  step's loss and gradient norm): `training_windows` (tenths of the run)
  and `largest_step` (the largest gradient and the validation after it);
  {} for a run without the file."""
  if not os.path.isfile(os.path.join(path, metrics_log.FILENAME)):
    return {}
  by_step = {
      r["step"]: (r["loss"], r["grad_norm"])
      for r in metrics_log.read(path)
      if r["kind"] == "train" and r["step"] <= record["steps"]
  }
  train = [[s, *by_step[s]] for s in sorted(by_step)]
  if not train:
    return {}
  return {
      "training_windows": curves.training_windows(train, record["steps"]),
      "largest_step": curves.largest_step(
          train, [[h["step"], h["val"]] for h in record["history"]]
      ),
  }


def summarize(records: Sequence[Mapping]) -> Dict:
  """One processor x algorithm over its seeds: curves and scores."""
  runs = [
      [
          {
              "step": h["step"],
              "metrics": {k: h[k] for k in ("val", "test") if k in h},
          }
          for h in r["history"]
      ]
      for r in records
  ]
  agg = curves.aggregate(runs)

  def curve(name):
    return [{"step": step, **s} for step, s in agg[name].items()]

  return {
      "seeds": {
          str(r["seed"]): {
              "validation": [[h["step"], h["val"]] for h in r["history"]],
              # Where the validation score stops moving: tenths of the run.
              "validation_windows": curves.windows(
                  [[h["step"], h["val"]] for h in r["history"]], r["steps"]
              ),
              "ood_test": [
                  [h["step"], h["test"]] for h in r["history"] if "test" in h
              ],
              **{
                  k: r[k]
                  for k in (
                      "init_seed",
                      "best_step",
                      "best_val",
                      "test",
                      "final_val",
                      "final_test",
                      "train_seconds",
                      "num_params",
                  )
              },
              # Runs finished before records kept these have none.
              **{
                  k: r[k]
                  for k in (
                      "sittings",
                      "checkpoint_fallbacks",
                      "training_windows",
                      "largest_step",
                  )
                  if k in r
              },
          }
          for r in records
      },
      "validation": curve("val"),
      "ood_test": curve("test"),
      "best_val": curves.summarize([r["best_val"] for r in records]),
      "test": curves.summarize([r["test"] for r in records]),
      "final_test": curves.summarize([r["final_test"] for r in records]),
      "train_seconds": curves.summarize([r["train_seconds"] for r in records]),
  }


def combine(
    config: ConfigDict, records: Mapping[Tuple[str, str, int], Mapping]
) -> Dict:
  """The results of the finished `records` ({(processor, algorithm, seed):
  run record})."""
  budget = budget_of(config)
  results, ours = {}, {}
  for processor in config.processors:
    for algorithm in config.algorithms:
      done = [
          records[(processor, algorithm, s)]
          for s in config.seeds
          if (processor, algorithm, s) in records
      ]
      if not done:
        continue
      summary = summarize(done)
      results.setdefault(processor, {})[algorithm] = summary
      ours[f"{processor}/{algorithm}"] = 100.0 * summary["test"]["mean"]
  return {
      "config": config_lib.to_dict(config),
      "budget": dataclasses.asdict(budget),
      "hyperparameters": dict(clrs_rt.AUTHORS),
      "our_configs": {
          p: config_lib.to_dict(
              clrs_rt.our_config(
                  budget, 0, config.algorithms[0], processor_type=p
              )
          )
          for p in config.processors
      },
      "protocol": (
          "clrs_rt's our side (experiments/compare/clrs_rt.py): run.py's"
          " datasets (dm-clrs 2.0.3; train seed 1, train_size samples at n=16;"
          " validation seed 2 at n=16; test seed 3 at n=64), the first"
          " max_eval_samples of each evaluation set (0: all), run.py's batch"
          " stream; every eval_every steps the current parameters are scored on"
          " both sets; 'test' is the test score at the first best validation"
          " point (the best checkpoint), 'final_test' at the last step;"
          " summaries: mean, sample sd, min, max over seeds; train_seconds:"
          " training and evaluation wall time, summed over resumptions, on the"
          " machine that ran it; a seed's sittings: each resumed part (started,"
          " from_step, to_step, code, host, seconds, cpu_seconds, steps_per_s);"
          " a seed's validation_windows: the validation curve's mean, min and"
          " max over each tenth of the run; its training_windows: the"
          " per-step loss and gradient norm over each tenth (median, the"
          " norm's 99th percentile and max, steps_above: norms over 100); its"
          " largest_step: the largest gradient norm, the loss and validation"
          " before and after it and the first validation point back at the"
          " level before (from the run's metrics.jsonl)"
      ),
      "num_runs": len(records),
      "wall_seconds": sum(r["train_seconds"] for r in records.values()),
      "results": results,
      "ours": ours,
  }


def _count(n: int, noun: str) -> str:
  return f"{n} {noun}" + ("" if n == 1 else "s")


def _step_label(step: float, _=None) -> str:
  """Axis label of a step: 600, 20k, 2.5k."""
  return f"{step / 1000:g}k" if abs(step) >= 1000 else f"{step:g}"


def plot(results: Mapping, path: str, title: str = "") -> None:
  """Rows: algorithms; columns: validation (n=16), OOD test (n=64); one line
  per processor, mean +- sd over seeds."""
  import matplotlib  # pylint: disable=g-import-not-at-top

  matplotlib.use("Agg")
  import matplotlib.pyplot as plt  # pylint: disable=g-import-not-at-top
  from matplotlib import ticker  # pylint: disable=g-import-not-at-top

  algorithms = list(results["config"]["algorithms"])
  panels = (
      ("validation", "validation (n = 16)"),
      ("ood_test", "OOD test (n = 64)"),
  )
  fig, axes = plt.subplots(
      len(algorithms),
      2,
      figsize=(9, 3.2 * len(algorithms)),
      squeeze=False,
      sharey=True,
  )
  for row, algorithm in enumerate(algorithms):
    for col, (key, label) in enumerate(panels):
      ax = axes[row, col]
      for processor, by_algorithm in results["results"].items():
        if algorithm not in by_algorithm:
          continue
        pts = by_algorithm[algorithm][key]
        xs = [p["step"] for p in pts]
        mean = [p["mean"] for p in pts]
        sd = [p["sd"] for p in pts]
        n = by_algorithm[algorithm]["test"]["n"]
        ax.plot(
            xs, mean, marker=".", label=f"{processor} ({_count(n, 'seed')})"
        )
        ax.fill_between(
            xs,
            [m - s for m, s in zip(mean, sd)],
            [m + s for m, s in zip(mean, sd)],
            alpha=0.2,
        )
      ax.set_title(f"{algorithm}: {label}", fontsize=9)
      ax.set_xlabel("step", fontsize=8)
      ax.xaxis.set_major_locator(ticker.MaxNLocator(6))
      ax.xaxis.set_major_formatter(ticker.FuncFormatter(_step_label))
      ax.set_ylim(-0.02, 1.02)
      ax.grid(alpha=0.3)
    axes[row, 0].set_ylabel("micro-F1")
  axes[0, 0].legend(fontsize=8)
  if title:
    fig.suptitle(title, fontsize=10)
  fig.tight_layout()
  os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
  fig.savefig(path, dpi=110)
  plt.close(fig)


def train_and_evaluate(config: ConfigDict, workdir: str, log=print) -> Dict:
  """Trains (or resumes, or skips) every run of `config` in `workdir`; the
  combined results once all are finished (also written to `results_path`
  with the PNG beside it), else {"stopped_at": step} after a planned stop.
  The work directory is locked for the whole run (`workdir_lock`)."""
  validate(config)  # Before the work directory is touched.
  with workdir_lock.hold(workdir):
    return _train_and_evaluate(config, workdir, log)


def _train_and_evaluate(config: ConfigDict, workdir: str, log) -> Dict:
  engine.check_config(sys.modules[__name__], config, workdir)
  budget = budget_of(config)
  data: Dict[str, fixed_data.FixedData] = {}
  records: Dict[Tuple[str, str, int], Dict] = {}
  for seed in config.seeds:
    for processor in config.processors:
      for algorithm in config.algorithms:
        path = run_dir(workdir, processor, algorithm, seed)
        name = f"{processor} {algorithm} seed {seed}"
        record = finished_run(path, budget.steps)
        if record is None:
          if algorithm not in data:
            started = time.time()
            data[algorithm] = fixed_data.FixedData.build(
                algorithm, budget.train_size
            )
            log(
                f"[clrs_rt_protocol] {algorithm}: run.py's datasets built in "
                f"{time.time() - started:.0f} s"
            )
          log(f"[clrs_rt_protocol {name}] training in {path}")
          done = clrs_rt.fit_ours(
              budget,
              seed,
              algorithm,
              data[algorithm],
              path,
              lambda m, name=name: log(f"[clrs_rt_protocol {name}] {m}"),
              stop_at=config.stop_at_step,
              processor_type=processor,
          )
          if not done.complete:
            return {"stopped_at": done.step}
          record = run_record(done, processor, algorithm, seed)
          if distributed.is_primary():
            reporting.write_json(os.path.join(path, "run.json"), record)
          log(
              f"[clrs_rt_protocol {name}] done: best val "
              f"{record['best_val']:.4f} (step {record['best_step']}), test "
              f"{record['test']:.4f}, {record['train_seconds']:.0f} s"
          )
        else:
          log(f"[clrs_rt_protocol {name}] finished earlier: skipped")
        records[(processor, algorithm, seed)] = {
            **record,
            **training_dynamics(path, record),
        }
        if distributed.is_primary():
          reporting.write_json(
              os.path.join(workdir, "partial_results.json"),
              combine(config, records),
          )
  results = combine(config, records)
  path = results_path(config, workdir)
  if distributed.is_primary():  # Process 0 alone writes (as engine.fit).
    reporting.write_json(path, results)
    plot(
        results,
        plot_path(config, workdir),
        f"{'/'.join(config.processors)}: {budget.steps:,} steps, "
        f"{_count(len(config.seeds), 'seed')}",
    )
  log(f"[clrs_rt_protocol] wrote {path} and {plot_path(config, workdir)}")
  return results
