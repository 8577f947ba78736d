r"""Run a named reproduction and store the paper's number beside ours.

  python -m experiments.reproduce --list
  python -m experiments.reproduce rt_clrs_core8 --budget=cpu
  python -m experiments.reproduce scan_cutoff26_relative_universal --budget=paper

Writes the run's own results (checkpoints, JSON, PNGs) under --workdir
(default runs/reproduce/<name>_<budget>) and `<workdir>/reproduction.json`:
the paper, table, metric, published numbers, ours, and the budget. Running
the same command again resumes the run exactly.
"""

import sys

from absl import app
from absl import flags
from absl import logging

from experiments import reproductions
from relational_jax.training import reporting

flags.DEFINE_boolean("list", False, "List the named reproductions and exit.")
flags.DEFINE_enum("budget", "paper", list(reproductions.BUDGETS), "paper: the paper's protocol; cpu: the README's CPU budget; smoke: seconds, for tests.")
flags.DEFINE_string("workdir", None, "Work directory (default runs/reproduce/<name>_<budget>).")
FLAGS = flags.FLAGS


def listing() -> str:
  rows = []
  for r in reproductions.REPRODUCTIONS.values():
    key, value = r.headline()
    rows.append(f"{r.name:34s} {r.paper}; {r.where}; {r.metric}: "
                f"{key} {value}")
  return "\n".join(rows)


def ours_from_results(reproduction, results) -> dict:
  """Our numbers in the published numbers' keys and units."""
  if reproduction.task == "clrs":
    ours = {a: 100.0 * e["mean_test"][max(e["mean_test"], key=int)]
            for a, e in results["algorithms"].items()}
    ours["mean"] = sum(ours.values()) / len(ours)
    return ours
  selected = results["best"] or results["final"] or {"accuracies": {}}
  return dict(selected["accuracies"])


def run(name: str, budget: str, workdir: str = None, log=print) -> dict:
  """Runs reproduction `name` at `budget`; returns the reproduction record."""
  reproduction = reproductions.get(name)
  config = reproduction.build(budget)
  workdir = workdir or f"runs/reproduce/{name}_{budget}"
  if reproduction.task == "clrs":
    from relational_jax.training.clrs import loop  # pylint: disable=g-import-not-at-top
    results = loop.train_and_evaluate(config, workdir, log=log)
    results_path = f"{workdir}/results.json"
  elif reproduction.task == "clutrr":
    from relational_jax.training import clutrr  # pylint: disable=g-import-not-at-top
    results = clutrr.train_and_evaluate(config, workdir, log=log)
    results_path = clutrr.results_path(config, workdir)
  elif reproduction.task == "cogs_graph":
    from relational_jax.training import cogs_graph  # pylint: disable=g-import-not-at-top
    results = cogs_graph.train_and_evaluate(config, workdir, log=log)
    results_path = cogs_graph.results_path(config, workdir)
  else:
    from relational_jax.training import seq2seq  # pylint: disable=g-import-not-at-top
    results = seq2seq.train_and_evaluate(config, workdir, log=log)
    results_path = config.results_path or f"{workdir}/results.json"
  record = {
      "name": name, "paper": reproduction.paper, "where": reproduction.where,
      "metric": reproduction.metric, "budget": budget,
      "published": dict(reproduction.published),
      "ours": ours_from_results(reproduction, results),
      "notes": reproduction.notes, "results_path": results_path,
      "command": f"python -m experiments.reproduce {name} --budget={budget}",
  }
  # The run's own results JSON carries the published number beside ours.
  results["reproduction"] = record
  reporting.write_json(results_path, results)
  reporting.write_json(f"{workdir}/reproduction.json", record)
  return record


def main(argv):
  if FLAGS.list:
    print(listing())
    return
  if len(argv) != 2:
    raise app.UsageError("Give one reproduction name (see --list).")
  if not FLAGS["verbosity"].present:
    logging.set_verbosity(logging.WARNING)
  record = run(argv[1], FLAGS.budget, FLAGS.workdir)
  key = "mean" if "mean" in record["published"] else next(iter(record["published"]))
  print(f"{record['name']} ({record['budget']} budget): published "
        f"{key} {record['published'][key]}, ours {record['ours'].get(key)}")
  sys.stdout.flush()


if __name__ == "__main__":
  app.run(main)
