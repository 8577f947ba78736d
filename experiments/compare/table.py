r"""A comparison's curves as a Markdown table (for the README).

  python3 -m experiments.compare.table results/compare/clutrr_et.json \
      [--metrics=test_all,test_k10]

One row per evaluation step; per metric `ours mean +- sd / theirs mean +- sd`
and whether the matching rule holds there (`curves.compare_sides`).
"""

import json
import sys
from typing import Mapping, Optional, Sequence


def markdown(result: Mapping, metrics: Optional[Sequence[str]] = None) -> str:
  """The table of `result` (a comparison JSON) for `metrics` (default:
  every metric, in the JSON's order)."""
  points = result["comparison"]["points"]
  names = list(dict.fromkeys(p["metric"] for p in points))
  metrics = list(metrics or names)
  unknown = [m for m in metrics if m not in names]
  if unknown:
    raise ValueError(f"unknown metrics {unknown}; the JSON has {names}.")
  by_key = {(p["metric"], p["step"]): p for p in points}
  steps = sorted({p["step"] for p in points})
  head = ["step"] + [f"{m}: ours / theirs" for m in metrics]
  lines = [
      "| " + " | ".join(head) + " |",
      "| " + " | ".join(["---:"] * len(head)) + " |",
  ]
  for step in steps:
    cells = [str(step)]
    for m in metrics:
      p = by_key.get((m, step))
      if p is None or p.get("ours") is None or p.get("theirs") is None:
        cells.append("missing")
        continue
      o, t = p["ours"], p["theirs"]
      mark = "" if p["match"] else " **x**"
      cells.append(
          f"{o['mean']:.3f} +- {o['sd']:.3f} / "
          f"{t['mean']:.3f} +- {t['sd']:.3f}{mark}"
      )
    lines.append("| " + " | ".join(cells) + " |")
  c = result["comparison"]
  lines.append("")
  lines.append(
      f"{c['num_matched']} of {c['num_points']} points match "
      "(**x**: the rule fails there); seeds "
      f"{result['seeds_finished']} a side."
  )
  return "\n".join(lines)


def main(argv: Sequence[str]) -> int:
  if len(argv) < 2:
    print(__doc__, file=sys.stderr)
    return 2
  metrics = None
  for arg in argv[2:]:
    if arg.startswith("--metrics="):
      metrics = arg.split("=", 1)[1].split(",")
    else:
      print(f"unknown argument {arg!r}; valid: --metrics=a,b", file=sys.stderr)
      return 2
  with open(argv[1]) as f:
    print(markdown(json.load(f), metrics))
  return 0


if __name__ == "__main__":
  sys.exit(main(sys.argv))
