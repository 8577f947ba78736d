"""Writes tests/fidelity/goldens/clutrr_closure.json from CLUTRR's own code.

  python3 scripts/make_clutrr_closure_golden.py --clutrr_reference=<checkout>

The golden checks `relational_jax.data.clutrr_generator.clutrr_closure` (the
pair labels of `closure='clutrr'`, our generator's default) against CLUTRR's
generator (github.com/facebookresearch/clutrr): for a few seeds and tree
sizes, their `Ancestry.simulate` grows a family tree and their
`RelationBuilder.__init__` closes it (`apply_almost_complete`); the golden
stores the tree (genders, parents, partner, by their node ids) and their
closure, every labelled pair in their insertion order. The test
(tests/fidelity/test_clutrr_closure_golden.py) rebuilds each tree as a
`FamilyTree` and requires our closure to equal theirs, order included.

Needs numpy and PyYAML (their `Store` reads YAML; not a dependency of this
project). Their code runs unmodified from the checkout, with three shims for
this Python: PyYAML >= 6 needs a Loader (their `Store` calls `yaml.load(f)`; the
safe loader is passed); people's names come from a counter instead of the
`names` package (names do not enter the closure); and
`clutrr.relations.puzzle`, which the builder imports for puzzles only (it
pulls in networkx and matplotlib), is stubbed. Their `__init__` then
precomputes story expansions, which raises KeyError on some small trees
(an edge without expansions); the closure is complete before that, and it
is what is kept.
"""

import argparse
import contextlib
import io
import itertools
import json
import os
import random
import subprocess
import sys
import types

import numpy as np
import yaml

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(REPO, "tests", "fidelity", "goldens", "clutrr_closure.json")
URL = "github.com/facebookresearch/clutrr"
# (seed, max_levels, min_child, max_child, p_marry): the ET authors' trees
# (3 levels, 4 children, always married) and smaller, uneven ones.
TREES = (
    (0, 3, 4, 4, 1.0),
    (1, 3, 4, 4, 1.0),
    (2, 3, 1, 4, 1.0),
    (3, 2, 1, 4, 0.7),
    (4, 3, 2, 3, 1.0),
    (5, 3, 1, 3, 0.8),
    (6, 2, 2, 4, 1.0),
    (7, 1, 4, 4, 1.0),
)


def load_their_code(checkout: str):
  sys.path.insert(0, checkout)
  load = yaml.load
  yaml.load = lambda stream, Loader=None: load(  # pylint: disable=invalid-name
      stream, Loader=Loader or yaml.SafeLoader
  )
  counter = itertools.count()
  sys.modules["names"] = types.SimpleNamespace(
      get_first_name=lambda gender=None: f"person{next(counter)}"
  )
  puzzle = types.ModuleType("clutrr.relations.puzzle")
  puzzle.Puzzle = object
  sys.modules["clutrr.relations.puzzle"] = puzzle
  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  from clutrr.actors.ancestry import Ancestry
  from clutrr.relations.builder import RelationBuilder
  from clutrr.store.store import Store

  return Ancestry, RelationBuilder, Store


def their_tree_and_closure(
    classes, seed, max_levels, min_child, max_child, p_marry
):
  ancestry_cls, builder_cls, store_cls = classes
  args = types.SimpleNamespace(
      attribute_store=None,
      relations_store="relations_store.yaml",
      question_store="question_store.yaml",
      rules_store="rules_store.yaml",
      max_levels=max_levels,
      min_child=min_child,
      max_child=max_child,
      p_marry=p_marry,
      boundary=True,
      relation_length=3,
  )
  random.seed(seed)
  np.random.seed(seed)
  store = store_cls(args)
  anc = ancestry_cls(args, store)
  n = len(anc.family_data)
  tree = {
      "genders": [anc.family_data[i].gender for i in range(n)],
      "parents": [[] for _ in range(n)],
      "partner": [-1] * n,
  }
  for (a, b), rel in anc.family.items():
    if rel["family"] == "SO":
      tree["partner"][a], tree["partner"][b] = b, a
    elif rel["family"] == "child":
      tree["parents"][b].append(a)
  with contextlib.redirect_stdout(io.StringIO()):
    try:
      builder_cls(args, store, anc)
    except KeyError:  # precompute_expansions, after the closure (docstring).
      pass
  closure = [[a, b, rel["family"]] for (a, b), rel in anc.family.items()]
  return tree, closure


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument(
      "--clutrr_reference", required=True, help=f"checkout of {URL}"
  )
  parser.add_argument(
      "--commit",
      default="",
      help="its commit, if the checkout is not a git work tree",
  )
  parser.add_argument("--out", default=OUT)
  args = parser.parse_args()
  commit = (
      args.commit
      or subprocess.run(
          ["git", "-C", args.clutrr_reference, "rev-parse", "HEAD"],
          check=True,
          capture_output=True,
          text=True,
      ).stdout.strip()
  )
  classes = load_their_code(args.clutrr_reference)
  cases = []
  for seed, levels, lo, hi, p in TREES:
    tree, closure = their_tree_and_closure(classes, seed, levels, lo, hi, p)
    cases.append({
        "seed": seed,
        "max_levels": levels,
        "min_child": lo,
        "max_child": hi,
        "p_marry": p,
        "tree": tree,
        "closure": closure,
    })
  golden = {
      "about": (
          __doc__.splitlines()[0] + " (scripts/make_clutrr_closure_golden.py)"
      ),
      "reference": {"repository": URL, "commit": commit},
      "function": (
          "clutrr/actors/ancestry.py Ancestry.simulate, "
          "clutrr/relations/builder.py RelationBuilder.__init__ "
          "(apply_almost_complete)"
      ),
      "trees": cases,
  }
  with open(args.out, "w") as f:
    json.dump(golden, f, separators=(",", ":"))
    f.write("\n")
  print(
      f"wrote {args.out}: {len(cases)} trees, "
      f"{sum(len(c['closure']) for c in cases)} labelled pairs"
  )


if __name__ == "__main__":
  main()
