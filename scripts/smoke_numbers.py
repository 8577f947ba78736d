r"""Every named reproduction's numbers at the smoke budget, to check that a
refactoring changes none of them.

  python3 scripts/smoke_numbers.py record --out=results/smoke_numbers/before.json
  # ... restructure ...
  python3 scripts/smoke_numbers.py record --out=/tmp/after.json
  python3 scripts/smoke_numbers.py compare results/smoke_numbers/before.json \
      /tmp/after.json --report=results/smoke_numbers/report.md
  # Some reproductions only, on both sides: --names=a,b

`record` runs `experiments.reproduce.run(name, 'smoke', <temp dir>)` for every
reproduction (or `--names`) and keeps every number of its results JSON (per-step
losses, evaluation history, test scores, parameter fingerprints), without the
wall-clock times, paths and the config. `compare` flattens both records to
`name/path -> value` (a reproduction that moved to another name compared under
its new one, `--moved`) and lists every value that differs (bit-for-bit, or beyond
`--rtol`) and every path that only one side has (a renamed key shows as one of
each).
"""

import json
import math
import re
import os
import sys
import tempfile
import time

from absl import app
from absl import flags

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

flags.DEFINE_string("out", None, "record: where to write the JSON.")
flags.DEFINE_list(
    "names",
    [],
    "record: these reproductions only; compare: only these (both sides).",
)
flags.DEFINE_float("rtol", 0.0, "compare: relative tolerance (0: bit-equal).")
flags.DEFINE_string("report", None, "compare: also write the report here.")
FLAGS = flags.FLAGS

flags.DEFINE_list(
    "moved",
    [],
    "compare: reproductions renamed between the records, as before:after.",
)
flags.DEFINE_list(
    "renames",
    [],
    "compare: keys renamed inside a run's results, as pattern:replacement "
    "(regular expressions over `flatten`'s paths).",
)
flags.DEFINE_string(
    "explained",
    None,
    "compare: a Markdown file saying why keys appear on one side only and "
    "why values differ, quoted in the report.",
)


def _pairs(items):
  out = []
  for item in items:
    before, sep, after = item.partition(":")
    if not sep or not before or not after:
      raise ValueError(f"{item!r} is not before:after.")
    out.append((before, after))
  return out


# Keys whose values are not the run's numbers (times, paths, the config).
VOLATILE = (
    "config",
    "command",
    "results_path",
    "devices",
    "notes",
    "code",  # a sitting's git commit
    "started",  # a sitting's start (UTC)
)
VOLATILE_PARTS = ("seconds", "time", "wall", "per_s")


def strip(tree):
  """`tree` without wall-clock times, paths and the config."""
  if isinstance(tree, dict):
    return {
        k: strip(v)
        for k, v in tree.items()
        if k not in VOLATILE and not any(p in k for p in VOLATILE_PARTS)
    }
  if isinstance(tree, list):
    return [strip(v) for v in tree]
  return tree


def flatten(tree, prefix=""):
  """{'a/b/0': leaf} of a JSON tree."""
  if isinstance(tree, dict):
    items = tree.items()
  elif isinstance(tree, list):
    items = enumerate(tree)
  else:
    return {prefix: tree}
  out = {}
  for k, v in items:
    out.update(flatten(v, f"{prefix}/{k}" if prefix else str(k)))
  return out


def record(names, out_path):
  from experiments import reproduce  # pylint: disable=g-import-not-at-top
  from experiments import reproductions  # pylint: disable=g-import-not-at-top

  names = names or sorted(reproductions.REPRODUCTIONS)
  runs = {}
  with tempfile.TemporaryDirectory() as root:
    for name in names:
      started = time.time()
      rec = reproduce.run(
          name, "smoke", os.path.join(root, name), log=lambda m: None
      )
      with open(rec["results_path"]) as f:
        results = json.load(f)
      runs[name] = {"ours": rec["ours"], "results": strip(results)}
      print(f"{name}: {time.time() - started:.1f} s", flush=True)
  os.makedirs(os.path.dirname(os.path.abspath(out_path)), exist_ok=True)
  with open(out_path, "w") as f:
    json.dump(runs, f, indent=1, sort_keys=True)


def same(a, b, rtol):
  if isinstance(a, float) and isinstance(b, (int, float)):
    if math.isnan(a) and math.isnan(b):
      return True
    return a == b or (rtol > 0 and abs(a - b) <= rtol * max(abs(a), abs(b)))
  return a == b


def _only(runs, names):
  """`runs` of `names` (all without names)."""
  return {k: v for k, v in runs.items() if not names or k in names}


def compare(
    before_path, after_path, rtol, names=(), moved=(), renames=(), explained=""
):
  """The report of `before_path` against `after_path` and whether every
  value is the same (`moved`: (before, after) names; `renames`: (pattern,
  replacement) key renames; `explained`: the report's explanation)."""
  moved = dict(moved)
  with open(before_path) as f:  # strip(): records made before a key was
    before = flatten(  # volatile keep it.
        strip(
            _only(
                {
                    moved.get(name, name): run
                    for name, run in json.load(f).items()
                },
                names,
            )
        )
    )
  with open(after_path) as f:
    after = flatten(strip(_only(json.load(f), names)))
  renamed = {}
  for k in sorted(before.keys() - after.keys()):
    for pattern, replacement in renames:
      new = re.sub(pattern, replacement, k)
      if new != k and new in after:
        renamed[k] = new
        break
  changed = [
      (k, before[k], after[k])
      for k in sorted(before.keys() & after.keys())
      if not same(before[k], after[k], rtol)
  ] + [
      (f"{k} -> {new}", before[k], after[new])
      for k, new in renamed.items()
      if not same(before[k], after[new], rtol)
  ]
  only_before = sorted(before.keys() - after.keys() - renamed.keys())
  only_after = sorted(after.keys() - before.keys())
  lines = [
      f"# Smoke numbers: {before_path} vs {after_path}",
      "",
  ]
  if names:
    lines += [f"Reproductions compared: {', '.join(sorted(names))}.", ""]
  lines += [
      f"{len(before.keys() & after.keys())} values on both sides and "
      f"{len(renamed)} renamed (--renames), {len(changed)} differ"
      + (f" beyond rtol {rtol}" if rtol else " (bit-for-bit)")
      + f"; {len(only_before)} only before, {len(only_after)} only after.",
  ]
  for title, rows in (
      ("Differ", [f"- `{k}`: {a!r} -> {b!r}" for k, a, b in changed]),
      ("Only before", [f"- `{k}`" for k in only_before]),
      ("Only after", [f"- `{k}`" for k in only_after]),
  ):
    if rows:
      lines += ["", f"## {title}", ""] + rows
  if explained:
    lines += ["", "## Why", "", explained.strip()]
  return "\n".join(lines) + "\n", not changed


def main(argv):
  if len(argv) < 2 or argv[1] not in ("record", "compare"):
    print("usage: smoke_numbers.py record --out=PATH | compare BEFORE AFTER")
    sys.exit(2)
  if argv[1] == "record":
    if not FLAGS.out:
      print("record needs --out=PATH")
      sys.exit(2)
    record(FLAGS.names, FLAGS.out)
    return
  if len(argv) != 4:
    print("compare needs BEFORE and AFTER record files")
    sys.exit(2)
  explained = ""
  if FLAGS.explained:
    with open(FLAGS.explained) as f:
      explained = f.read()
  report, equal = compare(
      argv[2],
      argv[3],
      FLAGS.rtol,
      FLAGS.names,
      _pairs(FLAGS.moved),
      _pairs(FLAGS.renames),
      explained,
  )
  print(report)
  if FLAGS.report:
    with open(FLAGS.report, "w") as f:
      f.write(report)
  sys.exit(0 if equal else 1)


if __name__ == "__main__":
  app.run(main)
