r"""CLUTRR k = 2, 3 training rows of the paper budget against the official files.

  nice -n 19 python3 scripts/clutrr_data_stats.py \
      --authors_dir=/tmp/et_data_9b2173cf   # optional, see below

writes `results/clutrr/data_stats.json` (`--out`). No model is built or run.

Sets compared (k = number of facts = `task_1.k`):
  ours_train_all  the 35,000 rows `clutrr_et_k23 --budget=paper` generates
                  (`relational_jax.training.clutrr.load_data`, same seed);
  ours_train      its 28,000 training rows (the 80% split), ours_val the 7,000;
  ours_gen_test   its generated test rows (100 per generated test k);
  official_val    gen_train23_test2to10/validation.csv (2,020 k = 2, 3 rows,
                  CLUTRR's own generator: the stand-in for the paper's
                  training file, which is not available);
  official_test   gen_train23_test2to10/test.csv (1,146 rows, k = 2..10);
  authors_k23     with --authors_dir: the ET authors' `1.2_test.csv` and
                  `1.3_test.csv` of `clutrr/data/data_9b2173cf` (the CLUTRR run
                  whose training file gave the paper's 35k rows; their test
                  part holds only the last quarter of the relation patterns,
                  so its class balance is not the training file's).

Statistics per set and k: rows, target-label distribution, nodes per story,
female share of the story's people and of the answer person, distinct names,
how often the answer label is the label of one stated fact, distinct story
graphs (`story_signature`) and repeats, and the composition steps
(r1, r2 -> r) of the proofs (`proof_state`). Comparisons: total variation
distance (TVD) of the label distributions with the largest differences, graph
coverage of one set by another, and the share of official test rows at each k
whose proof uses a two-fact pattern (r1, r2) that no k = 2 training row of
ours shows (with `protocol.holdout_fraction` > 0 our generator keeps that
share of the k = 2, 3 graphs out of training; the paper budget's is 0).
"""

import ast
import collections
import json
import os
import sys

from absl import app
from absl import flags

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# pylint: disable=g-import-not-at-top,wrong-import-position
import numpy as np  # noqa: E402

from experiments import reproductions  # noqa: E402
from relational_jax.data import clutrr as data_lib  # noqa: E402
from relational_jax.data import clutrr_generator  # noqa: E402
from relational_jax.training import clutrr as clutrr_training  # noqa: E402

# pylint: enable=g-import-not-at-top,wrong-import-position

flags.DEFINE_string(
    "reproduction", "clutrr_et_k23", "Reproduction whose rows are generated."
)
flags.DEFINE_string("budget", "paper", "Its budget.")
flags.DEFINE_string(
    "authors_dir",
    "",
    "Optional folder with the ET authors' data_9b2173cf 1.2_test.csv and "
    "1.3_test.csv.",
)
flags.DEFINE_string(
    "out", "results/clutrr/data_stats.json", "Where to write the JSON."
)
flags.DEFINE_string(
    "closure",
    "",
    "protocol.closure of the generated rows (sound, clutrr); empty: the "
    "reproduction's.",
)
FLAGS = flags.FLAGS

RELS = data_lib.RELATIONS


def _name(rel: str) -> str:
  return data_lib.ALIASES.get(rel, rel)


def proof_steps(row) -> list:
  """[(r1, r2, r)]: each step 'b is a's r' from (a, r1, z), (z, r2, b)."""
  out = []
  for step in ast.literal_eval(row["proof_state"]):
    for head, body in step.items():
      out.append((_name(body[0][1]), _name(body[1][1]), _name(head[1])))
  return out


def people(row) -> list:
  return [g.rpartition(":")[0] for g in row["genders"].split(",")]


class Set:
  """Raw rows and their parsed `ClutrrExample`s."""

  def __init__(self, rows, examples):
    assert len(rows) == len(examples)
    self.rows, self.examples = list(rows), list(examples)

  def at(self, k):
    keep = [i for i, ex in enumerate(self.examples) if ex.k == k]
    return Set([self.rows[i] for i in keep], [self.examples[i] for i in keep])

  @property
  def ks(self):
    return sorted({ex.k for ex in self.examples})

  def labels(self):
    counts = np.bincount(
        [ex.target for ex in self.examples], minlength=len(RELS)
    )
    return counts

  def signatures(self):
    return [data_lib.story_signature(ex) for ex in self.examples]


def label_dist(s: Set) -> dict:
  c = s.labels()
  return {RELS[i]: int(c[i]) for i in range(len(RELS)) if c[i]}


def tvd(a: Set, b: Set, top: int = 5) -> dict:
  """Total variation distance of the target labels, largest differences."""
  pa = a.labels() / max(len(a.examples), 1)
  pb = b.labels() / max(len(b.examples), 1)
  diff = pa - pb
  order = np.argsort(-np.abs(diff))[:top]
  # Sampling noise: the mean TVD of two multinomial samples of these sizes
  # drawn from one distribution (the two sets pooled).
  rng = np.random.default_rng(0)
  pool = (a.labels() + b.labels()) / (len(a.examples) + len(b.examples))
  floor = np.mean([
      0.5
      * np.abs(
          rng.multinomial(len(a.examples), pool) / len(a.examples)
          - rng.multinomial(len(b.examples), pool) / len(b.examples)
      ).sum()
      for _ in range(200)
  ])
  return {
      "tvd": round(float(0.5 * np.abs(diff).sum()), 4),
      "same_distribution_tvd": round(float(floor), 4),
      "largest": [
          f"{RELS[i]} {pa[i]:.3f} vs {pb[i]:.3f}" for i in order if diff[i]
      ],
  }


def describe(s: Set) -> dict:
  n = len(s.examples)
  ex = s.examples
  sigs = s.signatures()
  distinct = collections.Counter(sigs)
  nodes = np.array([e.num_nodes for e in ex])
  female = np.mean([g == "female" for e in ex for g in e.genders])
  answer_female = np.mean([e.genders[e.query[1]] == "female" for e in ex])
  in_facts = np.mean([e.target in e.edge_labels for e in ex])
  last = []
  for e in ex:  # the label of the stated fact that ends at the answer person
    into = [
        lab for (a, b), lab in zip(e.edges, e.edge_labels) if b == e.query[1]
    ]
    last.append(bool(into) and into[-1] == e.target)
  query_is_fact = np.mean([e.query in e.edges for e in ex])
  names = {p for r in s.rows for p in people(r)}
  return {
      "rows": n,
      "labels": label_dist(s),
      "num_labels": int(np.count_nonzero(s.labels())),
      "nodes_mean": round(float(nodes.mean()), 3),
      "nodes": {
          int(v): int(c) for v, c in zip(*np.unique(nodes, return_counts=True))
      },
      "female_share_people": round(float(female), 4),
      "female_share_answer": round(float(answer_female), 4),
      "distinct_names": len(names),
      "answer_label_is_a_fact_label": round(float(in_facts), 4),
      "answer_label_is_last_fact_label": round(float(np.mean(last)), 4),
      "query_pair_is_a_fact": round(float(query_is_fact), 4),
      "distinct_graphs": len(distinct),
      "rows_per_graph_max": max(distinct.values()) if distinct else 0,
      "distinct_proof_steps": len({t for r in s.rows for t in proof_steps(r)}),
  }


def coverage(of: Set, by: Set) -> dict:
  """Share of `of`'s rows (and distinct graphs) whose graph `by` has."""
  have = set(by.signatures())
  sigs = of.signatures()
  return {
      "rows": (
          round(float(np.mean([g in have for g in sigs])), 4) if sigs else None
      ),
      "graphs": f"{len(set(sigs) & have)} of {len(set(sigs))}",
  }


def two_fact_patterns(s: Set) -> set:
  """(r1, r2) of the k = 2 rows (their one proof step)."""
  return {proof_steps(r)[0][:2] for r in s.at(2).rows}


def unseen_step_share(test: Set, patterns: set, steps: set) -> dict:
  """Per k: share of rows whose proof uses a step (r1, r2) not in
  `patterns` (the k = 2 training graphs) / not in `steps` (any proof step
  of the training rows)."""
  out = {}
  for k in test.ks:
    rows = test.at(k).rows
    p = [any(t[:2] not in patterns for t in proof_steps(r)) for r in rows]
    q = [any(t not in steps for t in proof_steps(r)) for r in rows]
    out[str(k)] = {
        "rows": len(rows),
        "uses_a_two_fact_pattern_unseen_at_k2": round(float(np.mean(p)), 4),
        "uses_a_step_unseen_anywhere": round(float(np.mean(q)), 4),
    }
  return out


def load_csv(path: str) -> Set:
  rows = data_lib.read_rows(path)
  return Set(
      rows,
      [
          data_lib.parse_row(r, source=path, row_number=i + 1)
          for i, r in enumerate(rows)
      ],
  )


def build_sets(config) -> dict:
  p = config.protocol
  loaded = clutrr_training.load_data(config)  # The training code's own path.
  train_rows, test_rows = clutrr_generator.generate_splits(
      tuple(p.train_ks),
      tuple(p.generated_test_ks),
      int(p.num_train_per_k),
      int(p.num_generated_test_per_k),
      seed=int(p.generation_seed),
      holdout_fraction=float(p.holdout_fraction),
      closure=p.closure,
  )
  allset = Set(train_rows, data_lib.examples_from_rows(train_rows))
  order = np.random.default_rng([int(config.train.seed), 7]).permutation(
      len(train_rows)
  )
  num_val = int(round(p.val_fraction * len(train_rows)))
  pick = lambda idx: Set(
      [allset.rows[int(i)] for i in idx],
      [allset.examples[int(i)] for i in idx],
  )
  sets = {
      "ours_train_all": allset,
      "ours_train": pick(order[num_val:]),
      "ours_val": pick(order[:num_val]),
      "ours_gen_test": Set(test_rows, data_lib.examples_from_rows(test_rows)),
  }
  # The same rows as the training code's (order and content).
  assert sets["ours_train"].examples == loaded["train"], "train rows differ"
  assert sets["ours_val"].examples == loaded["val"], "val rows differ"
  assert sets["ours_gen_test"].examples == loaded["generated"]
  d = config.data.data_dir
  sets["official_val"] = load_csv(os.path.join(d, "validation.csv"))
  sets["official_test"] = load_csv(os.path.join(d, "test.csv"))
  if FLAGS.authors_dir:
    a = [
        load_csv(os.path.join(FLAGS.authors_dir, f"1.{k}_test.csv"))
        for k in (2, 3)
    ]
    sets["authors_k23"] = Set(
        a[0].rows + a[1].rows, a[0].examples + a[1].examples
    )
  return sets


def main(argv):
  del argv
  config = reproductions.get(FLAGS.reproduction).build(FLAGS.budget)
  if FLAGS.closure:
    config.protocol.closure = FLAGS.closure
    clutrr_training.validate(config)
  sets = build_sets(config)
  p = config.protocol
  out = {
      "command": (
          "nice -n 19 python3 scripts/clutrr_data_stats.py"
          + (" --authors_dir=<data_9b2173cf>" if FLAGS.authors_dir else "")
          + (f" --closure={FLAGS.closure}" if FLAGS.closure else "")
          + (f" --out={FLAGS.out}" if FLAGS["out"].present else "")
      ),
      "reproduction": f"{FLAGS.reproduction} --budget={FLAGS.budget}",
      "protocol": {k: p[k] for k in p},
      "sets": {},
      "label_tvd": {},
      "coverage": {},
      "k2_patterns_missing_from_ours_train": [],
      "unseen_steps_official_test": {},
      "unseen_steps_ours_gen_test": {},
  }
  for name, s in sets.items():
    out["sets"][name] = {
        "rows": len(s.examples),
        "per_k": {str(k): describe(s.at(k)) for k in s.ks},
    }
  ref = ["official_val"] + (["authors_k23"] if "authors_k23" in sets else [])
  pairs = [("ours_train_all", r) for r in ref]
  if "authors_k23" in sets:
    pairs.append(("official_val", "authors_k23"))
  for a, b in pairs:
    entry = {"k2,3": tvd(sets[a], sets[b])}
    for k in (2, 3):
      entry[str(k)] = tvd(sets[a].at(k), sets[b].at(k))
    out["label_tvd"][f"{a} vs {b}"] = entry
  # Per-k class balance of the test sets (the k both have).
  entry = {}
  for k in sorted(
      set(sets["official_test"].ks) & set(sets["ours_gen_test"].ks)
  ):
    entry[str(k)] = tvd(
        sets["ours_gen_test"].at(k), sets["official_test"].at(k)
    )
  out["label_tvd"]["ours_gen_test vs official_test"] = entry
  train = sets["ours_train_all"]
  for of in ref + ["official_test", "ours_gen_test"]:
    for k in sorted({2, 3} & set(sets[of].ks)):
      out["coverage"][f"{of} k={k} by ours_train_all"] = coverage(
          sets[of].at(k), train.at(k)
      )
  for of in ("official_test",):
    for by in ref:
      for k in (2, 3):
        out["coverage"][f"{of} k={k} by {by}"] = coverage(
            sets[of].at(k), sets[by].at(k)
        )
  out["coverage"]["ours_val by ours_train (k=2,3)"] = coverage(
      sets["ours_val"], sets["ours_train"]
  )
  # Graphs our generator never produces at all (neither train nor held out):
  # official graphs absent from 17,500 rows per k that the hash does not hold
  # out (`clutrr_generator._held_out`, the split `generate_splits` applies).
  never = {}
  have = set(train.signatures())
  for of in ref:
    for k in (2, 3):
      s = sets[of].at(k)
      miss = [
          g
          for g in s.signatures()
          if g not in have
          and not clutrr_generator._held_out(  # pylint: disable=protected-access
              g, int(p.generation_seed), float(p.holdout_fraction)
          )
      ]
      never[f"{of} k={k}"] = {
          "rows": round(len(miss) / max(len(s.examples), 1), 4),
          "graphs": len(set(miss)),
      }
  out["graphs_never_generated"] = never
  ours_pat = two_fact_patterns(train)
  ref_pat = two_fact_patterns(sets["official_val"])
  if "authors_k23" in sets:
    ref_pat |= two_fact_patterns(sets["authors_k23"])
  out["k2_patterns"] = {
      "ours_train_all": len(ours_pat),
      "official": len(ref_pat),
      "official_k2_graphs_all_files": len(
          ref_pat | two_fact_patterns(sets["official_test"])
      ),
  }
  out["k2_patterns_missing_from_ours_train"] = sorted(
      "-".join(x)
      for x in (ref_pat | two_fact_patterns(sets["official_test"])) - ours_pat
  )
  steps = {t for r in train.rows for t in proof_steps(r)}
  out["unseen_steps_official_test"] = unseen_step_share(
      sets["official_test"], ours_pat, steps
  )
  out["unseen_steps_ours_gen_test"] = unseen_step_share(
      sets["ours_gen_test"], ours_pat, steps
  )
  # Exact repeats: the same row id, and (graph, names) pairs.
  ids = [r["id"] for r in train.rows]
  named = [
      (r["story_edges"], r["edge_types"], r["query_edge"], r["genders"])
      for r in train.rows
  ]
  off_names = {
      (r["story_edges"], r["edge_types"], r["query_edge"], r["genders"])
      for s in ("official_test",)
      for r in sets[s].rows
  }
  out["duplicates"] = {
      "ours_train_all_ids_repeated": len(ids) - len(set(ids)),
      "ours_train_all_rows_repeated_with_names": len(named) - len(set(named)),
      "ours_train_all_rows_equal_to_an_official_test_row_with_names": sum(
          x in off_names for x in named
      ),
      "official_val_rows_repeated_graphs": (
          len(sets["official_val"].examples)
          - len(set(sets["official_val"].signatures()))
      ),
  }
  if "authors_k23" in sets:
    a = {str(k): len(sets["authors_k23"].at(k).examples) for k in (2, 3)}
    # CLUTRR's run_task: train_rows + test_rows = 20,000 puzzles per train k
    # (at least; a tree's puzzles are kept whole), the test part written to
    # 1.k_test.csv, the rest to the training file.
    out["paper_train_rows_estimate"] = {
        "authors_test_rows": a,
        "train_rows_per_k_at_least": {k: 20_000 - v for k, v in a.items()},
        "train_rows_at_least": 40_000 - sum(a.values()),
        "after_80_20_split": int(0.8 * (40_000 - sum(a.values()))),
    }
  os.makedirs(os.path.dirname(FLAGS.out) or ".", exist_ok=True)
  with open(FLAGS.out, "w") as f:
    json.dump(out, f, indent=1)
  print(json.dumps({k: out[k] for k in out if k != "sets"}, indent=1))


if __name__ == "__main__":
  app.run(main)
