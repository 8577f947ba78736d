r"""Run a named reproduction and store the paper's number beside ours.

  python -m experiments.reproduce --list
  python -m experiments.reproduce rt_clrs_core8 --budget=cpu
  python -m experiments.reproduce scan_cutoff26_relative_universal --budget=paper
  python -m experiments.reproduce for2lam_short_tree_dfs --budget=cpu \
      --set=transformer.tree_pe_norm=sinusoid      # a variant of a named config
  python -m experiments.reproduce clutrr_et_k23 --budget=paper \
      --seeds=42,43,44 --workdir=runs/clutrr_paper/clutrr_et_k23

Writes the run's own results (checkpoints, JSON, PNGs) under --workdir
(default runs/reproduce/<name>_<budget>[__<overrides>]) and
`<workdir>/reproduction.json`: the paper, table, metric, published numbers,
ours, and the budget. Running
the same command again resumes the run exactly.

--seeds: one run per training seed (tasks with one training seed, the
task module's `SEED_PATH`): the config's own seed in --workdir as above,
seed S in `<workdir>__seed<S>` (its record's overrides and command name
`--set=<SEED_PATH>=S`), each resumed on its own; then the mean and sample sd
over the seeds of every headline number, and the task's own `aggregate` of
their results, in `<workdir>__seeds.json`.

Where the reproduction keeps results copies (`Reproduction.results_copy`,
e.g. CLUTRR: results/clutrr/<name>[_paper][__seed<S>].json) each finished
run's results JSON is copied there and its figures (`Reproduction.figures`,
e.g. CLUTRR's Figure 3 from every model's seed mean) are redrawn: not for a
variant (--set) nor with --nocopy_results.

`--set=train.stop_at_step=N` (and the other `RUN_CONTROL` paths: progress,
TensorBoard, checkpoint interval) makes no variant: the run stops at step N
in the reproduction's own work directory, and the command without it goes
on from there.
"""

import ast
import os
import re
import shutil
import sys
from typing import Dict, List, Mapping, Optional, Sequence

import numpy as np

from absl import app
from absl import flags

from experiments import reproductions
from relational_jax.parallel import distributed
from relational_jax.training import cli
from relational_jax.training import config as config_lib
from relational_jax.training import errors
from relational_jax.training import registry
from relational_jax.training import reporting

cli.drop_foreign_flags()  # dm-clrs's --seeds among them: ours is below.
flags.DEFINE_boolean("list", False, "List the named reproductions and exit.")
flags.DEFINE_enum(
    "budget",
    "paper",
    list(reproductions.BUDGETS),
    "paper: the paper's protocol; cpu: the README's CPU budget; smoke: seconds,"
    " for tests.",
)
flags.DEFINE_string(
    "workdir",
    None,
    "Work directory (default runs/reproduce/<name>_<budget>[__<overrides>]).",
)
flags.DEFINE_multi_string(
    "set",
    [],
    "PATH=VALUE: a variant of the named config (e.g."
    " transformer.tree_pe_norm=sinusoid); recorded in reproduction.json and its"
    " command.",
)
flags.DEFINE_string(
    "seeds",
    None,
    "Training seeds, comma-separated (e.g. 42,43,44): one run each, the"
    " config's own seed in --workdir, seed S in <workdir>__seed<S>, each"
    " resumed on its own; then their mean and sd in <workdir>__seeds.json.",
)
flags.DEFINE_boolean(
    "copy_results",
    True,
    "Copy each finished run's results JSON where the reproduction keeps it"
    " (e.g. results/clutrr/) and redraw its figures (never for a --set"
    " variant).",
)
distributed.define_flags()
FLAGS = flags.FLAGS
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def listing() -> str:
  rows = []
  for r in reproductions.REPRODUCTIONS.values():
    key, value = r.headline()
    number = "no published number" if value is None else f"{key} {value}"
    rows.append(f"{r.name:34s} {r.paper}; {r.where}; {r.metric}: {number}")
  return "\n".join(rows)


def parse_overrides(items: Sequence[str]) -> Dict[str, object]:
  """{path: value} of 'PATH=VALUE' strings; VALUE is a Python literal
  (1e-3, True, (2, 3), 'x') or else the string as given."""
  out = {}
  for item in items:
    path, sep, text = item.partition("=")
    if not sep or not path:
      raise ValueError(
          f"--set {item!r}: expected PATH=VALUE, e.g. "
          "transformer.tree_pe_norm=sinusoid."
      )
    try:
      out[path] = ast.literal_eval(text)
    except (ValueError, SyntaxError):
      out[path] = text
  return out


def set_text(value) -> str:
  """VALUE as --set takes it back: strings bare unless they would parse as
  another literal."""
  if isinstance(value, str):
    return (
        repr(value) if parse_overrides([f"x={value}"])["x"] != value else value
    )
  return repr(value)


# Config paths that say how a run goes, not what it computes: they make no
# variant (no work-dir suffix, no mark in the record's command, the results
# still copied), so the same command without them goes on with the same run.
RUN_CONTROL = (
    "train.stop_at_step",
    "train.progress",
    "train.tensorboard",
    "train.checkpoint_every",
)


def variant_overrides(overrides: Mapping[str, object]) -> Dict:
  """`overrides` less the `RUN_CONTROL` paths: what makes a variant."""
  return {p: v for p, v in overrides.items() if p not in RUN_CONTROL}


def overrides_suffix(overrides: Mapping[str, object]) -> str:
  """A work-dir suffix naming the overrides ('' for none)."""
  text = ",".join(f"{p}={v}" for p, v in overrides.items())
  return "__" + re.sub(r"[^A-Za-z0-9_.,=-]", "", text) if text else ""


def parse_seeds(text: str) -> List[int]:
  """The seeds of --seeds ('42,43,44'); ValueError naming a bad one."""
  seeds = []
  for item in text.split(","):
    if not re.fullmatch(r"\s*\d+\s*", item):
      raise ValueError(
          f"--seeds={text!r}: {item.strip()!r} is not a non-negative "
          "integer; give seeds as 42,43,44."
      )
    if int(item) in seeds:
      raise ValueError(f"--seeds={text!r}: seed {int(item)} is given twice.")
    seeds.append(int(item))
  return seeds


def seed_path(name: str) -> str:
  """The config path of reproduction `name`'s training seed (its task's
  `SEED_PATH`); ValueError where the task has none."""
  task_name = reproductions.get(name).task
  path = registry.get(task_name).SEED_PATH
  if path is None:
    raise ValueError(
        f"--seeds: reproduction {name!r} (task {task_name!r}) has no single "
        "training seed to sweep (its task has no SEED_PATH); set "
        "its config's seeds with --set."
    )
  return path


def check(
    name: str,
    budget: str,
    overrides: Mapping[str, object],
    seeds: Optional[Sequence[int]] = None,
) -> None:
  """Raises ValueError naming a bad reproduction name, --set path, seed or
  config value: the checks the task's training runs first, without its
  work."""
  reproduction = reproductions.get(name)
  config = config_lib.override(reproduction.build(budget), overrides)
  task = registry.get(reproduction.task)
  task.validate(config)
  for seed in seeds or ():
    task.validate(config_lib.override(config, {seed_path(name): seed}))


def _default_workdir(name, budget, overrides) -> str:
  return f"runs/reproduce/{name}_{budget}" + overrides_suffix(
      variant_overrides(overrides)
  )


def _algorithms(config):
  """A CLRS config's algorithms (None for other tasks)."""
  return tuple(config.algorithms) if "algorithms" in config else None


def _comparable(published, ours, algorithms=None, paper_algorithms=None):
  """`ours` without its 'mean' where that is not a mean over what the
  published 'mean' is over: a run of other `algorithms` than the paper
  budget's (e.g. one algorithm of the core 8)."""
  if "mean" in published and "mean" in ours:
    if set(algorithms or ()) != set(paper_algorithms or ()):
      return {k: v for k, v in ours.items() if k != "mean"}
  return ours


def _seed_tag(seed: Optional[int]) -> str:
  return "" if seed is None else f"__seed{seed}"


def _own_seed(name, budget, overrides) -> int:
  """The training seed of reproduction `name`'s config (with `overrides`)."""
  config = config_lib.override(reproductions.get(name).build(budget), overrides)
  return config_lib.get_path(config, seed_path(name))


def _results_copy(reproduction, budget, seed_tag) -> Optional[str]:
  """Where a run's results JSON is copied (absolute); None for a budget
  without copies."""
  path = reproduction.copy_path(budget, seed_tag)
  return None if path is None else os.path.join(REPO, path)


def run(
    name: str,
    budget: str,
    workdir: str = None,
    log=print,
    overrides: Optional[Mapping[str, object]] = None,
    *,
    seed: Optional[int] = None,
    copy_results: bool = False,
) -> dict:
  """Runs reproduction `name` at `budget`, with dotted-path `overrides` of
  its config if given; returns the reproduction record.

  seed: a training seed (the task's `SEED_PATH`); other than the config's
    own, the run is `<workdir>__seed<S>`, its overrides name the seed.
  copy_results: copy the finished run's results JSON to the reproduction's
    `results_copy` for `budget` (none for a variant: `overrides` given).
  """
  return _run(name, budget, workdir, log, overrides, seed, copy_results)[0]


def _run(name, budget, workdir, log, overrides, seed, copy_results):
  """`run`, also returning the run's results (None at a planned stop)."""
  reproduction = reproductions.get(name)
  overrides = dict(overrides or {})
  workdir = workdir or _default_workdir(name, budget, overrides)
  variant = bool(variant_overrides(overrides))
  if seed is not None and seed == _own_seed(name, budget, overrides):
    seed = None  # The config's own seed: the untagged run.
  if seed is not None:
    workdir += _seed_tag(seed)
    overrides[seed_path(name)] = seed
  config = config_lib.override(reproduction.build(budget), overrides)
  task = registry.get(reproduction.task)
  results = task.train_and_evaluate(config, workdir, log=log)
  results_path = task.results_path(config, workdir)
  if "stopped_at" in results:  # A planned stop (RUN_CONTROL's stop_at_step).
    log(
        f"{name}{_seed_tag(seed)}: stopped at step {results['stopped_at']} "
        "(a planned stop); rerun the command without the stop (or with a "
        "later one) to go on."
    )
    stopped = {"name": name, "budget": budget}
    if seed is not None:
      stopped["seed"] = seed
    return {**stopped, "stopped_at": results["stopped_at"]}, None
  named = variant_overrides(overrides)  # The seed's path among them.
  record = {
      "name": name,
      "paper": reproduction.paper,
      "where": reproduction.where,
      "metric": reproduction.metric,
      "budget": budget,
      "published": dict(reproduction.published),
      **reproduction.published_errors(),
      "ours": _comparable(
          reproduction.published,
          task.headline(results),
          _algorithms(config),
          _algorithms(reproduction.build("paper")),
      ),
      "notes": reproduction.notes,
      "results_path": results_path,
      "command": (
          f"python -m experiments.reproduce {name} --budget={budget}"
          + "".join(f" --set={p}={set_text(v)}" for p, v in named.items())
      ),
  }
  if named:
    record["overrides"] = named
  # The run's own results JSON carries the published number beside ours.
  results["reproduction"] = record
  if distributed.is_primary():
    reporting.write_json(results_path, results)
    reporting.write_json(f"{workdir}/reproduction.json", record)
    copy = (
        copy_results
        and not variant
        and _results_copy(reproduction, budget, _seed_tag(seed))
    )
    if copy:
      os.makedirs(os.path.dirname(copy), exist_ok=True)
      shutil.copyfile(results_path, copy)
      log(f"{name}{_seed_tag(seed)}: results copied to {copy}")
  return record, results


def draw_figures(
    name: str,
    budget: str,
    overrides: Optional[Mapping[str, object]] = None,
    log=print,
) -> tuple:
  """The reproduction's figures at `budget`, redrawn from its results copies
  (none for a variant, or a budget without copies); returns their paths."""
  reproduction = reproductions.get(name)
  if (
      overrides
      or reproduction.figures is None
      or reproduction.copy_path(budget, "") is None
      or not distributed.is_primary()
  ):
    return ()
  paths = tuple(reproduction.figures(budget))
  for path in paths:
    log(f"{name}: drew {path}")
  return paths


def _mean_sd(values: Sequence[float]) -> tuple:
  """Mean and sample sd (0 for one value)."""
  values = np.asarray(values, float)
  sd = float(values.std(ddof=1)) if len(values) > 1 else 0.0
  return float(values.mean()), sd


def run_seeds(
    name: str,
    budget: str,
    seeds: Sequence[int],
    workdir: str = None,
    log=print,
    overrides: Optional[Mapping[str, object]] = None,
    copy_results: bool = False,
) -> dict:
  """`run` once per training seed in `seeds` (each resumed on its own),
  then the sweep's record: each seed's headline numbers ('ours'), their
  mean and sample sd ('mean', 'sd': keys every seed reports with a number),
  the task's `aggregate` of the runs' results where it has one, written to
  `<workdir>__seeds.json`; the figures redrawn with `copy_results`. At a
  planned stop it returns that seed's stop record (rerun to resume)."""
  reproduction = reproductions.get(name)
  overrides = dict(overrides or {})
  workdir = workdir or _default_workdir(name, budget, overrides)
  path = seed_path(name)
  records, results = {}, []
  for seed in seeds:
    record, result = _run(
        name, budget, workdir, log, overrides, seed, copy_results
    )
    if result is None:
      return record
    records[seed] = record
    results.append(result)
  named = variant_overrides(overrides)
  ours = {str(seed): record["ours"] for seed, record in records.items()}
  keys = [
      k
      for k, v in records[seeds[0]]["ours"].items()
      if all(
          isinstance(r["ours"].get(k), (int, float))
          and not isinstance(r["ours"].get(k), bool)
          for r in records.values()
      )
  ]
  stats = {k: _mean_sd([r["ours"][k] for r in records.values()]) for k in keys}
  sweep = {
      "name": name,
      "paper": reproduction.paper,
      "where": reproduction.where,
      "metric": reproduction.metric,
      "budget": budget,
      "seed_path": path,
      "seeds": list(seeds),
      "published": dict(reproduction.published),
      **reproduction.published_errors(),
      "mean": {k: m for k, (m, _) in stats.items()},
      "sd": {k: s for k, (_, s) in stats.items()},
      "ours": ours,
      "results_paths": {
          str(seed): r["results_path"] for seed, r in records.items()
      },
      "command": (
          f"python -m experiments.reproduce {name} --budget={budget}"
          f" --seeds={','.join(map(str, seeds))}"
          + "".join(f" --set={p}={set_text(v)}" for p, v in named.items())
      ),
  }
  aggregate = registry.get(reproduction.task).aggregate(results)
  if aggregate is not None:
    sweep["aggregate"] = aggregate
  if named:
    sweep["overrides"] = named
  if distributed.is_primary():
    reporting.write_json(f"{workdir}__seeds.json", sweep)
  if copy_results:
    draw_figures(name, budget, named, log)
  return sweep


def main(argv):
  if FLAGS.list:
    print(listing())
    return
  if len(argv) != 2:
    raise app.UsageError("Give one reproduction name (see --list).")
  name, budget = argv[1], FLAGS.budget
  with errors.user_input():  # Bad values: one line, exit 2 (cli.run).
    distributed.initialize_from_flags(FLAGS)
    overrides = parse_overrides(FLAGS.set)
    seeds = None if FLAGS.seeds is None else parse_seeds(FLAGS.seeds)
    check(name, budget, overrides, seeds)
  if seeds is None:
    record = run(
        name,
        budget,
        FLAGS.workdir,
        overrides=overrides,
        copy_results=FLAGS.copy_results,
    )
    if "stopped_at" in record:
      return
    if FLAGS.copy_results:
      draw_figures(name, budget, variant_overrides(overrides))
  else:
    record = run_seeds(
        name,
        budget,
        seeds,
        FLAGS.workdir,
        overrides=overrides,
        copy_results=FLAGS.copy_results,
    )
    if "stopped_at" in record:
      return
  if not distributed.is_primary():
    return
  measured = record["ours"] if seeds is None else record["mean"]
  key = next(
      (
          k
          for k in ("mean", *record["published"])
          if k in measured and k in record["published"]
      ),
      "mean"
      if "mean" in record["published"]
      else next(iter(record["published"])),
  )
  if key not in measured:  # E.g. a smoke budget's smaller test set.
    ours = f"not measured at this budget (ours has {sorted(measured)})"
  elif seeds is None:
    ours = measured[key]
  else:
    ours = (
        f"{measured[key]} +- {record['sd'][key]} (mean +- sd over seeds"
        f" {FLAGS.seeds})"
    )
  print(
      f"{record['name']} ({record['budget']} budget): published "
      f"{key} {record['published'][key]}, ours {ours}"
  )
  sys.stdout.flush()


if __name__ == "__main__":
  cli.run(main)
