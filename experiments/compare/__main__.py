r"""Run one comparison: `python -m experiments.compare NAME --reference=DIR`.

  python -m experiments.compare clutrr_et --reference=/tmp/peers/et \
      --reference_python=/tmp/torchvenv/bin/python --budget=cpu
  python -m experiments.compare cogs_graph_et --reference=/tmp/peers/et \
      --reference_python=/tmp/torchvenv/bin/python --budget=cpu
  python -m experiments.compare scan_relative_universal --reference=/tmp/cs \
      --reference_python=/tmp/torchvenv/bin/python --budget=cpu
  python -m experiments.compare clrs_rt --reference=/tmp/peers/rt \
      --reference_python=/tmp/rtvenv/bin/python --budget=cpu

Our side runs in this process, the authors' side in `--reference_python`
(a venv with their dependencies; for PyTorch code `pip install torch==2.13.0
pytorch_lightning transformers`; for the RT fork see `clrs_rt.py`), in a thread beside ours, seed after seed.
Every run is kept under `--workdir` (ours: orbax checkpoints, exact resume;
theirs: the evaluation log, reused once finished), so the same command
resumes. Writes `--output_dir/NAME.json` and `NAME.png` (`NAME__<budget>.*`
at budgets other than cpu; `__partial` added while seeds are missing).
"""

import json
import os
import sys
import threading

from absl import app
from absl import flags

from experiments.compare import curves
from experiments.compare import protocol
from experiments.compare import reference as reference_lib
from experiments.compare import registry
from relational_jax.data import paths as data_paths
from relational_jax.training import reporting

_REPO = os.path.dirname(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
)
_SHARED = data_paths.OFFICIAL_DIR  # The data shipped with the package.

FLAGS = flags.FLAGS


def define_flags():
  """The entry point's flags, defined only when it runs (importing this
  module, e.g. in tests beside experiments.reproduce, defines none)."""
  flags.DEFINE_string("reference", None, "Checkout of the authors' repository.")
  flags.DEFINE_string(
      "reference_python", sys.executable, "Python of the authors' environment."
  )
  flags.DEFINE_string("budget", "cpu", "paper | cpu | smoke.")
  flags.DEFINE_integer("num_seeds", 0, "Seeds per side (0: the budget's).")
  flags.DEFINE_string("workdir", None, "Default runs/compare/NAME_BUDGET.")
  flags.DEFINE_string("output_dir", "results/compare", "JSON and PNG go here.")
  flags.DEFINE_string(
      "test_csv",
      os.path.join(data_paths.CLUTRR_K23_DIR, "test.csv"),
      "clutrr_et: the official test file.",
  )
  flags.DEFINE_string(
      "shared_data",
      _SHARED,
      "Holds scan/tasks.txt (scan_relative_universal) and cogs/*.tsv "
      "(cogs_graph_et).",
  )
  flags.DEFINE_integer("reference_threads", 1, "torch threads of their side.")
  flags.DEFINE_boolean(
      "report_only",
      False,
      "Train nothing: report the seeds both sides have finished in --workdir.",
  )
  flags.DEFINE_string(
      "reuse_reference",
      None,
      "An earlier comparison JSON "
      "of this NAME and budget: its reference seeds are "
      "taken as finished (their code, settings and data "
      "must be unchanged: checked against its record).",
  )


def run(
    name: str,
    reference: str,
    budget_name: str,
    workdir: str,
    output_dir: str,
    reference_python: str,
    test_csv: str,
    seeds: int = 0,
    reference_threads: int = 1,
    log=print,
    shared_data: str = _SHARED,
    report_only: bool = False,
    reuse_reference: str = None,
):
  """Trains both sides (resuming what is there) and writes the comparison;
  with `report_only`, trains nothing and reports the seeds that both sides
  have finished (`NAME__partial.json` while some are missing). With
  `reuse_reference` (an earlier comparison JSON), the reference seeds it
  holds are not rerun (see `reused_reference_runs`).

  Raises:
    ValueError: for a comparison or budget name that is not registered
      (naming it and the valid choices).
  """
  comparison = registry.get(name)
  budget = comparison.budget(budget_name)
  seeds = seeds or budget.seeds
  workdir = os.path.abspath(workdir)
  reused = (
      reused_reference_runs(reuse_reference, name, comparison, budget_name)
      if reuse_reference
      else {}
  )

  def write_report(ours, theirs):
    return report(
        name,
        comparison,
        budget_name,
        ours,
        theirs,
        seeds,
        output_dir,
        log,
        reuse_reference if reused else None,
    )

  if report_only:
    ours, theirs = {}, {}
    for seed in range(seeds):
      o = comparison.finished_ours(
          budget, os.path.join(workdir, f"ours_seed{seed}")
      )
      t = reused.get(seed) or comparison.finished_theirs(
          budget, os.path.join(workdir, f"theirs_seed{seed}")
      )
      if o is not None and t is not None:
        ours[seed], theirs[seed] = o, t
    if not ours:
      raise ValueError(
          f"report_only: no seed of {workdir} is finished on "
          f"both sides (budget {budget_name!r})."
      )
    return write_report(ours, theirs)
  reference = reference_lib.require(
      name, reference, comparison.repository, comparison.marker
  )
  scratch = os.path.join(workdir, "scratch")
  data_dir = comparison.prepare_data(
      budget,
      scratch,
      protocol.DataInputs(
          test_csv=test_csv,
          shared_data=shared_data,
          reference=reference,
          reference_python=reference_python,
      ),
  )
  theirs, errors = {s: reused[s] for s in range(seeds) if s in reused}, []

  def reference_side():
    try:
      for seed in range(seeds):
        if seed in theirs:
          log(f"[{name}] theirs seed {seed} reused from {reuse_reference}")
          continue
        theirs[seed] = comparison.run_theirs(
            budget,
            seed,
            reference,
            scratch,
            reference_python,
            os.path.join(workdir, f"theirs_seed{seed}"),
            threads=reference_threads,
        )
        log(f"[{name}] theirs seed {seed} done")
    except Exception as e:  # pylint: disable=broad-except
      errors.append(e)

  thread = threading.Thread(target=reference_side)
  thread.start()
  ours = {}
  for seed in range(seeds):
    ours[seed] = comparison.run_ours(
        budget,
        seed,
        data_dir,
        os.path.join(workdir, f"ours_seed{seed}"),
        log=log,
    )
    log(f"[{name}] ours seed {seed} done")
  thread.join()
  if errors:
    raise errors[0]
  return write_report(ours, theirs)


def reused_reference_runs(path, name, comparison, budget_name):
  """{seed: evaluation points} of the reference side recorded in the
  comparison JSON `path`. Refused unless it is the same comparison and
  budget with the same record of their side (`describe`: repository,
  hyperparameters, their flags, budget, data; a record worded by another
  version is converted once by scripts/migrate_workdir.py
  --comparison_record): a reference run is
  deterministic given those and its seed, so rerunning it would repeat it.
  What describes our side (`ours`) and the listed differences may change."""
  with open(path) as f:
    earlier = json.load(f)
  now = {
      "name": name,
      "budget_name": budget_name,
      **comparison.describe(comparison.budget(budget_name)),
  }
  keys = [k for k in now if k not in ("ours", "differences", "resolved")]
  changed = [k for k in keys if earlier.get(k) != now[k]]
  if changed:
    raise ValueError(
        f"--reuse_reference={path}: its {changed} differ from "
        f"this comparison's ({name}, budget {budget_name!r}); "
        "rerun the reference side instead."
    )
  return {
      int(seed): points for seed, points in earlier["runs"]["theirs"].items()
  }


def report(
    name,
    comparison,
    budget_name,
    ours,
    theirs,
    seeds,
    output_dir,
    log,
    reused_from=None,
):
  """Aggregates the finished seeds, applies the matching rule, writes the
  JSON and the PNG."""
  done = sorted(ours)
  matched = comparison.match(
      curves.aggregate([ours[s] for s in done]),
      curves.aggregate([theirs[s] for s in done]),
  )
  budget = comparison.budget(budget_name)
  result = {
      "name": name,
      "budget_name": budget_name,
      "seeds": seeds,
      "seeds_finished": done,
      **comparison.describe(budget),
      "comparison": matched,
      "runs": {"ours": ours, "theirs": theirs},
  }
  if reused_from:
    result["reference_reused_from"] = reused_from
  os.makedirs(output_dir, exist_ok=True)
  stem = name if budget_name == "cpu" else f"{name}__{budget_name}"
  if len(done) < seeds:
    stem += "__partial"
  path = os.path.join(output_dir, stem + ".json")
  reporting.write_json(path, result)
  curves.plot(
      matched,
      comparison.metric_names(),
      os.path.splitext(path)[0] + ".png",
      title=(
          f"{name}: ours vs {comparison.repository} "
          f"({len(done)} seeds each, mean +- sd)"
      ),
  )
  log(
      f"[{name}] {matched['num_matched']}/{matched['num_points']} "
      f"points match over seeds {done}; unmatched: "
      f"{matched['unmatched']}; wrote {path}"
  )
  return result


def main(argv):
  if len(argv) != 2:
    raise app.UsageError(
        "usage: python -m experiments.compare NAME "
        f"--reference=DIR; NAME in {list(registry.names())}."
    )
  name = argv[1]
  try:
    run(
        name,
        FLAGS.reference,
        FLAGS.budget,
        FLAGS.workdir
        or os.path.join("runs", "compare", f"{name}_{FLAGS.budget}"),
        FLAGS.output_dir,
        FLAGS.reference_python,
        FLAGS.test_csv,
        FLAGS.num_seeds,
        FLAGS.reference_threads,
        shared_data=FLAGS.shared_data,
        report_only=FLAGS.report_only,
        reuse_reference=FLAGS.reuse_reference,
    )
  except reference_lib.MissingReferenceError as e:
    print(e, file=sys.stderr)
    sys.exit(2)


if __name__ == "__main__":
  define_flags()
  app.run(main)
