r"""The generalist against its specialists on CLRS (Ibarz et al. 2022's
question: does one processor over several algorithms keep each single-task
model's out-of-distribution score?).

  python3 -m experiments.generalist_vs_specialists --budget=cpu \
      --workdir=runs/generalist_vs_specialists

For each processor of --processors it runs the reproduction
`<processor>_generalist_3` (one model over bellman_ford, insertion_sort and
binary_search, CLRS run.py's step order and summed-validation checkpoint)
and the same config with `multi_algorithm='separate'` (one model per
algorithm: the specialists), every seed of --seeds, at --budget. Each
algorithm sees the same examples in both (a generalist step is one update on
a batch of each algorithm in turn). The four runs go one after another in
`<workdir>/<processor>_<generalist|specialists>`; the same command resumes
them. Writes `results/clrs_generalist/generalist_vs_specialists_<budget>.json`
(per processor and algorithm: the test score at n = 64 of each seed, their
mean and sample sd, for both; Table 19's single-task number beside them) and
a PNG beside it.
"""

import os
from typing import Dict, Sequence

import numpy as np

from absl import app
from absl import flags

from experiments import reproduce
from experiments import reproductions
from relational_jax.training import cli
from relational_jax.training import reporting

cli.drop_foreign_flags()
# --budget (required here), --seeds (default 42,43,44) and --workdir
# (default runs/generalist_vs_specialists) are experiments.reproduce's flags.
flags.DEFINE_list("processors", ["mpnn", "rt"], "Processor kinds.")
flags.DEFINE_string(
    "out",
    "",
    "Results JSON ('' = results/clrs_generalist/"
    "generalist_vs_specialists_<budget>.json); the PNG beside it.",
)
FLAGS = flags.FLAGS
MODES = {"generalist": "generalist", "specialists": "separate"}


def _mean_sd(values: Sequence[float]) -> Dict[str, float]:
  v = np.asarray(values, float)
  return {
      "mean": float(v.mean()),
      "sd": float(v.std(ddof=1)) if len(v) > 1 else 0.0,
      "n": int(len(v)),
  }


def scores(results: Dict, length: int) -> Dict[str, Dict]:
  """Per algorithm: each seed's test score at `length` (percent) and their
  mean and sd, from a CLRS results JSON."""
  out = {}
  for algorithm, entry in results["algorithms"].items():
    per_seed = {
        str(r["seed"]): 100.0 * r["test"][str(length)] for r in entry["runs"]
    }
    out[algorithm] = {"seeds": per_seed, **_mean_sd(list(per_seed.values()))}
  return out


def run_all(budget, processors, seeds, workdir, log=print) -> Dict:
  """Runs (or resumes) every processor x mode; the comparison record, or
  None after a planned stop."""
  table, commands = {}, {}
  for processor in processors:
    name = f"{processor}_generalist_3"
    published = reproductions.get(name).published
    for mode, multi in MODES.items():
      overrides = {"seeds": tuple(seeds), "multi_algorithm": multi}
      record, results = reproduce._run(  # pylint: disable=protected-access
          name,
          budget,
          os.path.join(workdir, f"{processor}_{mode}"),
          log,
          overrides,
          None,
          False,
      )
      if results is None:
        return None
      commands[f"{processor}/{mode}"] = record["command"]
      length = max(results["config"]["protocol"]["test_lengths"])
      for algorithm, s in scores(results, length).items():
        row = table.setdefault(processor, {}).setdefault(
            algorithm, {"table19_single_task": published.get(algorithm)}
        )
        row[mode] = s
    for row in table[processor].values():
      row["generalist_minus_specialist"] = (
          row["generalist"]["mean"] - row["specialists"]["mean"]
      )
    table[processor]["mean"] = {
        mode: float(
            np.mean([
                table[processor][a][mode]["mean"]
                for a in table[processor]
                if a != "mean"
            ])
        )
        for mode in MODES
    }
  return {
      "question": (
          "Does one processor over bellman_ford, insertion_sort and "
          "binary_search (the generalist, CLRS run.py's semantics) keep the "
          f"single-task models' test micro-F1 at n = {length}?"
      ),
      "budget": budget,
      "seeds": list(seeds),
      "metric": f"test micro-F1 at n={length} (%), best-validation checkpoint",
      "results": table,
      "commands": commands,
  }


def plot(record: Dict, path: str) -> None:
  """One panel per processor: per algorithm, specialist and generalist
  bars (mean +- sd over seeds, the seeds as dots), Table 19 as a tick."""
  import matplotlib  # pylint: disable=g-import-not-at-top

  matplotlib.use("Agg")
  import matplotlib.pyplot as plt  # pylint: disable=g-import-not-at-top

  processors = list(record["results"])
  fig, axes = plt.subplots(
      1, len(processors), figsize=(5 * len(processors), 3.6), squeeze=False
  )
  for ax, processor in zip(axes[0], processors):
    rows = {
        a: r for a, r in record["results"][processor].items() if a != "mean"
    }
    xs = np.arange(len(rows))
    for i, mode in enumerate(MODES):
      means = [r[mode]["mean"] for r in rows.values()]
      sds = [r[mode]["sd"] for r in rows.values()]
      ax.bar(
          xs + (i - 0.5) * 0.38, means, 0.36, yerr=sds, label=mode, capsize=3
      )
      for x, r in zip(xs, rows.values()):
        ax.plot(
            [x + (i - 0.5) * 0.38] * len(r[mode]["seeds"]),
            list(r[mode]["seeds"].values()),
            "k.",
            ms=3,
        )
    for x, r in zip(xs, rows.values()):
      if r["table19_single_task"] is not None:
        ax.hlines(r["table19_single_task"], x - 0.4, x + 0.4, "r", lw=1)
    ax.set_xticks(xs)
    ax.set_xticklabels(list(rows), fontsize=8)
    ax.set_ylim(0, 100)
    ax.set_title(f"{processor} ({record['budget']} budget)", fontsize=9)
    ax.set_ylabel(record["metric"], fontsize=7)
    ax.grid(alpha=0.3, axis="y")
  axes[0, 0].legend(fontsize=7, title="red: Table 19", title_fontsize=7)
  fig.tight_layout()
  os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
  fig.savefig(path, dpi=110)
  plt.close(fig)


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f"Unexpected arguments: {argv[1:]}")
  if not FLAGS["budget"].present:
    raise app.UsageError(
        f"Give --budget, one of {list(reproductions.BUDGETS)}."
    )
  seeds = reproduce.parse_seeds(FLAGS.seeds or "42,43,44")
  for processor in FLAGS.processors:
    reproductions.get(f"{processor}_generalist_3")  # Names the valid ones.
  workdir = FLAGS.workdir or "runs/generalist_vs_specialists"
  record = run_all(FLAGS.budget, FLAGS.processors, seeds, workdir)
  if record is None:
    return
  out = FLAGS.out or os.path.join(
      reproduce.REPO,
      "results",
      "clrs_generalist",
      f"generalist_vs_specialists_{FLAGS.budget}.json",
  )
  record["command"] = (
      "python3 -m experiments.generalist_vs_specialists"
      f" --budget={FLAGS.budget} --processors={','.join(FLAGS.processors)}"
      f" --seeds={','.join(map(str, seeds))}"
  )
  reporting.write_json(out, record)
  plot(record, os.path.splitext(out)[0] + ".png")
  for processor, rows in record["results"].items():
    for algorithm, r in rows.items():
      if algorithm == "mean":
        print(f"{processor} mean: {r}")
        continue
      print(
          f"{processor} {algorithm}: specialists "
          f"{r['specialists']['mean']:.2f} +- {r['specialists']['sd']:.2f}, "
          f"generalist {r['generalist']['mean']:.2f} +- "
          f"{r['generalist']['sd']:.2f} (Table 19: {r['table19_single_task']})"
      )


if __name__ == "__main__":
  cli.run(main)
