r"""Convert a work directory written by an earlier layout to today's, once.

  python3 scripts/migrate_workdir.py /work/runs/floyd_bf_protocol

The library reads only today's layout; this standalone script (imported by
nothing in the library) converts:

- a `clrs_rt_protocol` work directory (the RT paper's CLRS protocol as the
  comparison harness ran it: `config.json` with `processors` and a
  `protocol.steps` field, runs in `<processor>/<algorithm>/seed<s>/`) to the
  CLRS task's: `config.json` the `relational_jax.training.clrs` config of
  `rt_protocol.config` with the old budget fields, runs in
  `<algorithm>_seed<42 + s>/` (the seed is run.py's model seed, as the task
  names it). A directory of several processors (`pair_models_clrs`, which
  still runs as that task) is left as it is. The checkpoints and
  `metrics.jsonl` move unchanged (the task trains the same function from
  them); the old config is kept as `config.clrs_rt_protocol.json`.

  python3 scripts/migrate_workdir.py --pair_models_results \
      results/reproductions/pair_models_clrs_cpu__results.json

splits the harness's combined `pair_models_clrs` results JSON (every
processor's seeds, curves summarised) into the CLRS task's results JSON of
each `pair_models_clrs_<kind>` reproduction beside it
(`pair_models_clrs_<kind>_<budget>__results.json`, with its validation and
OOD plots): per run its validation and test curve, best point, test score,
parameters, wall time and resumed parts (the harness kept no per-evaluation
loss). The original is removed.

It refuses (exit 2, one line) a directory it does not recognise, and never
overwrites a run directory that already exists.
"""

import argparse
import json
import os
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

OLD_CONFIG = "config.clrs_rt_protocol.json"


def _is_clrs_rt_protocol(config) -> bool:
  return (
      isinstance(config, dict)
      and "processors" in config
      and "steps" in config.get("protocol", {})
  )


def clrs_rt_protocol_config(old, processor: str):
  """The CLRS task's config of `processor`'s runs in the old config."""
  from relational_jax.training.clrs import rt_protocol  # pylint: disable=g-import-not-at-top

  p = old["protocol"]
  c = rt_protocol.config(
      processor,
      tuple(old["algorithms"]),
      tuple(rt_protocol.FIRST_SEED + s for s in old["seeds"]),
  )
  c.train.steps, c.train.eval_every = p["steps"], p["eval_every"]
  c.protocol.train_size = p["train_size"]
  c.protocol.max_eval_samples = p["max_eval_samples"]
  c.protocol.test_points = p.get("test_points", "every_evaluation")
  # Samples per predict call: run.py's, unless fewer samples are scored.
  batch = rt_protocol.RUN_PY_FLAGS["eval_batch_size"]
  if 0 < p["max_eval_samples"] < batch:
    c.train.eval_batch_size = p["max_eval_samples"]
  c.train.stop_at_step = old.get("stop_at_step", 0)
  c.results_path = old.get("results_path", "")
  return c


def migrate_clrs_rt_protocol(workdir: str, old, log=print):
  from relational_jax.training import config as config_lib  # pylint: disable=g-import-not-at-top

  if len(old["processors"]) != 1:
    raise ValueError(
        f"{workdir} holds runs of {old['processors']}: a pair_models_clrs "
        "work directory, which that task reads as it is; nothing changed."
    )
  (processor,) = old["processors"]
  new = clrs_rt_protocol_config(old, processor)
  moves = []
  for algorithm in old["algorithms"]:
    for seed in old["seeds"]:
      src = os.path.join(workdir, processor, algorithm, f"seed{seed}")
      dst = os.path.join(
          workdir, f"{algorithm}_seed{new.seeds[old['seeds'].index(seed)]}"
      )
      if not os.path.isdir(src):
        continue
      if os.path.exists(dst):
        raise ValueError(f"{dst} exists already: nothing was moved.")
      moves.append((src, dst))
  os.replace(
      os.path.join(workdir, "config.json"), os.path.join(workdir, OLD_CONFIG)
  )
  with open(os.path.join(workdir, "config.json"), "w") as f:
    json.dump(config_lib.to_dict(new), f, indent=1, sort_keys=True)
  for src, dst in moves:
    os.replace(src, dst)
    log(f"moved {src} -> {dst}")
  for path in (os.path.join(workdir, processor, a) for a in old["algorithms"]):
    if os.path.isdir(path) and not os.listdir(path):
      os.rmdir(path)
  if os.path.isdir(os.path.join(workdir, processor)) and not os.listdir(
      os.path.join(workdir, processor)
  ):
    os.rmdir(os.path.join(workdir, processor))
  log(
      f"{workdir}: a CLRS task work directory now ({processor}; the old "
      f"config kept as {OLD_CONFIG})"
  )


def migrate(workdir: str, log=print) -> None:
  """Converts `workdir` (module docstring); ValueError if it cannot."""
  path = os.path.join(workdir, "config.json")
  if not os.path.isfile(path):
    raise ValueError(f"{path} not found: not a work directory.")
  with open(path) as f:
    config = json.load(f)
  if _is_clrs_rt_protocol(config):
    migrate_clrs_rt_protocol(workdir, config, log)
    return
  raise ValueError(
      f"{workdir}: no earlier layout recognised (known: a clrs_rt_protocol "
      "work directory); nothing changed."
  )


def split_pair_models_results(path: str, log=print) -> None:
  """The CLRS task's results of each processor in the harness's combined
  `pair_models_clrs` results JSON at `path` (module docstring)."""
  from experiments import reproductions  # pylint: disable=g-import-not-at-top
  from relational_jax.training import config as config_lib  # pylint: disable=g-import-not-at-top
  from relational_jax.training.clrs import evaluation  # pylint: disable=g-import-not-at-top
  from relational_jax.training.clrs import rt_protocol  # pylint: disable=g-import-not-at-top

  with open(path) as f:
    old = json.load(f)
  if not (isinstance(old, dict) and {"results", "budget"} <= set(old)):
    raise ValueError(f"{path}: not a pair_models_clrs results JSON.")
  budget = old["reproduction"]["budget"]
  length = str(rt_protocol.TEST_LENGTH)
  for processor, by_algorithm in old["results"].items():
    name = f"pair_models_clrs_{processor}"
    reproduction = reproductions.get(name)
    config = reproduction.build(budget)
    algorithms = {}
    for algorithm, entry in by_algorithm.items():
      runs = []
      for s, run in entry["seeds"].items():
        tests = dict((step, t) for step, t in run["ood_test"])
        history = [
            {
                "step": step,
                "val": val,
                **({"test": tests[step]} if step in tests else {}),
            }
            for step, val in run["validation"]
        ]
        runs.append({
            "algorithm": algorithm,
            "seed": 42 + int(s),
            "steps": old["budget"]["steps"],
            "complete": True,
            "num_params": run["num_params"],
            "train_seconds": run["train_seconds"],
            "sittings": run.get("sittings", []),
            "history": history,
            "best": {"step": run["best_step"], "score": run["best_val"]},
            "checkpoint_fallbacks": run.get("checkpoint_fallbacks", []),
            "best_val": run["best_val"],
            "best_step": run["best_step"],
            "select_on": "val",
            "selected": f"val (step {run['best_step']})",
            "test": {length: run["test"]},
        })
      algorithms[algorithm] = {
          "runs": runs,
          "mean_test": evaluation.mean_over_runs(runs, [length]),
          "mean_best_val": sum(r["best_val"] for r in runs) / len(runs),
      }
    ours = {a: 100.0 * e["mean_test"][length] for a, e in algorithms.items()}
    ours["mean"] = sum(ours.values()) / len(algorithms)
    out = os.path.join(os.path.dirname(path), f"{name}_{budget}__results.json")
    results = {
        "config": config_lib.to_dict(config),
        "algorithms": algorithms,
        "wall_time_s": sum(
            r["train_seconds"] for e in algorithms.values() for r in e["runs"]
        ),
        "reproduction": {
            "name": name,
            "paper": reproduction.paper,
            "where": reproduction.where,
            "metric": reproduction.metric,
            "budget": budget,
            "published": dict(reproduction.published),
            **reproduction.published_errors(),
            "ours": ours,
            "notes": reproduction.notes,
            "results_path": os.path.relpath(out, REPO),
            "command": (
                f"python -m experiments.reproduce {name} --budget={budget}"
            ),
            "converted": (
                "from the comparison harness's combined pair_models_clrs "
                "results (scripts/migrate_workdir.py); it kept no "
                "per-evaluation loss"
            ),
        },
    }
    evaluation.write_results(results, out, validation=True)
    log(f"wrote {out}")
  os.remove(path)
  png = os.path.splitext(path)[0] + ".png"
  if os.path.exists(png):
    os.remove(png)


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("workdir", nargs="?")
  parser.add_argument("--pair_models_results", default="")
  args = parser.parse_args(argv)
  try:
    if args.pair_models_results:
      split_pair_models_results(args.pair_models_results)
    elif args.workdir:
      migrate(args.workdir)
    else:
      raise ValueError("give a work directory or --pair_models_results.")
  except ValueError as e:
    print(f"migrate_workdir: {e}", file=sys.stderr)
    return 2
  return 0


if __name__ == "__main__":
  sys.exit(main())
