r"""Run a named reproduction and store the paper's number beside ours.

  python -m experiments.reproduce --list
  python -m experiments.reproduce rt_clrs_core8 --budget=cpu
  python -m experiments.reproduce scan_cutoff26_relative_universal --budget=paper
  python -m experiments.reproduce for2lam_short_tree_dfs --budget=cpu \
      --set=transformer.tree_pe_norm=sinusoid      # a variant of a named config

Writes the run's own results (checkpoints, JSON, PNGs) under --workdir
(default runs/reproduce/<name>_<budget>) and `<workdir>/reproduction.json`:
the paper, table, metric, published numbers, ours, and the budget. Running
the same command again resumes the run exactly.
"""

import ast
import re
import sys
from typing import Dict, Mapping, Optional, Sequence

from absl import app
from absl import flags

from experiments import reproductions
from relational_jax.parallel import distributed
from relational_jax.training import cli
from relational_jax.training import config as config_lib
from relational_jax.training import errors
from relational_jax.training import registry
from relational_jax.training import reporting

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
distributed.define_flags()
FLAGS = flags.FLAGS


def listing() -> str:
  rows = []
  for r in reproductions.REPRODUCTIONS.values():
    key, value = r.headline()
    rows.append(f"{r.name:34s} {r.paper}; {r.where}; {r.metric}: {key} {value}")
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


def overrides_suffix(overrides: Mapping[str, object]) -> str:
  """A work-dir suffix naming the overrides ('' for none)."""
  text = ",".join(f"{p}={v}" for p, v in overrides.items())
  return "__" + re.sub(r"[^A-Za-z0-9_.,=-]", "", text) if text else ""


def check(name: str, budget: str, overrides: Mapping[str, object]) -> None:
  """Raises ValueError naming a bad reproduction name, --set path or config
  value: the checks the task's training runs first, without its work."""
  reproduction = reproductions.get(name)
  config = config_lib.override(reproduction.build(budget), overrides)
  registry.get(reproduction.task).validate(config)


def run(
    name: str,
    budget: str,
    workdir: str = None,
    log=print,
    overrides: Optional[Mapping[str, object]] = None,
) -> dict:
  """Runs reproduction `name` at `budget`, with dotted-path `overrides` of
  its config if given; returns the reproduction record."""
  reproduction = reproductions.get(name)
  overrides = dict(overrides or {})
  config = config_lib.override(reproduction.build(budget), overrides)
  workdir = workdir or (
      f"runs/reproduce/{name}_{budget}" + overrides_suffix(overrides)
  )
  task = registry.get(reproduction.task)
  results = task.train_and_evaluate(config, workdir, log=log)
  results_path = task.results_path(config, workdir)
  if results.get("complete") is False:  # seq2seq's record of a planned stop.
    results = {"stopped_at": results["steps"]}
  if "stopped_at" in results:  # A planned stop (train.stop_at_step).
    log(
        f"{name}: stopped at step {results['stopped_at']} "
        "(train.stop_at_step); rerun the same command to resume."
    )
    return {"name": name, "budget": budget, "stopped_at": results["stopped_at"]}
  record = {
      "name": name,
      "paper": reproduction.paper,
      "where": reproduction.where,
      "metric": reproduction.metric,
      "budget": budget,
      "published": dict(reproduction.published),
      **reproduction.published_errors(),
      "ours": task.headline(results),
      "notes": reproduction.notes,
      "results_path": results_path,
      "command": (
          f"python -m experiments.reproduce {name} --budget={budget}"
          + "".join(f" --set={p}={set_text(v)}" for p, v in overrides.items())
      ),
  }
  if overrides:
    record["overrides"] = overrides
  # The run's own results JSON carries the published number beside ours.
  results["reproduction"] = record
  if distributed.is_primary():
    reporting.write_json(results_path, results)
    reporting.write_json(f"{workdir}/reproduction.json", record)
  return record


def main(argv):
  if FLAGS.list:
    print(listing())
    return
  if len(argv) != 2:
    raise app.UsageError("Give one reproduction name (see --list).")
  with errors.user_input():  # Bad values: one line, exit 2 (cli.run).
    distributed.initialize_from_flags(FLAGS)
    overrides = parse_overrides(FLAGS.set)
    check(argv[1], FLAGS.budget, overrides)
  record = run(argv[1], FLAGS.budget, FLAGS.workdir, overrides=overrides)
  if "stopped_at" in record or not distributed.is_primary():
    return
  key = (
      "mean"
      if "mean" in record["published"]
      else next(iter(record["published"]))
  )
  print(
      f"{record['name']} ({record['budget']} budget): published "
      f"{key} {record['published'][key]}, ours {record['ours'].get(key)}"
  )
  sys.stdout.flush()


if __name__ == "__main__":
  cli.run(main)
