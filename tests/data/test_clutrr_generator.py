"""Tests for the CLUTRR generator (relational_jax.data.clutrr_generator).

The reasoner below is written here from CLUTRR's composition rules
(``clutrr/store/rules_store.yaml``) as a table of gendered compositions; it
does not use the module's rule tables.
"""

import ast
import collections

import numpy as np
import pytest

from relational_jax.data import clutrr
from relational_jax.data import clutrr_generator
from tests.data.test_clutrr import MALE, OFFICIAL, raw_rows

# ---------------------------------------------------------------------------
# An independent reasoner.  "a r1 b" then "b r2 c" gives "a r c": read "b is
# a's r1".  Each line: r1 options . r2 options = result; the result is gendered
# like r2 (the gender of the last person), listed male|female.
_RULES = """
son|daughter . son|daughter = grandson|granddaughter
son|daughter . husband|wife = son-in-law|daughter-in-law
son|daughter . brother|sister = son|daughter
son|daughter . uncle|aunt = brother|sister
son|daughter . grandfather|grandmother = father|mother
father|mother . son|daughter = brother|sister
father|mother . father|mother = grandfather|grandmother
father|mother . brother|sister = uncle|aunt
husband|wife . father|mother = father-in-law|mother-in-law
husband|wife . grandson|granddaughter = grandson|granddaughter
husband|wife . son|daughter = son|daughter
brother|sister . brother|sister = brother|sister
brother|sister . grandfather|grandmother = grandfather|grandmother
brother|sister . son|daughter = nephew|niece
brother|sister . father|mother = father|mother
grandson|granddaughter . brother|sister = grandson|granddaughter
"""


def _table():
  table = {}
  for line in _RULES.strip().splitlines():
    left, result = line.split(" = ")
    first, second = left.split(" . ")
    for r1 in first.split("|"):
      for r2, r in zip(second.split("|"), result.split("|")):
        table[(r1, r2)] = r
  return table


TABLE = _table()


def derivable(facts):
  """All relations derivable for the ends of a walk of facts (each used
  once, any bracketing): CYK over the chain."""
  n = len(facts)
  span = {(i, i + 1): {facts[i]} for i in range(n)}
  for length in range(2, n + 1):
    for i in range(n - length + 1):
      j = i + length
      span[i, j] = {
          TABLE[a, b]
          for m in range(i + 1, j)
          for a in span[i, m]
          for b in span[m, j]
          if (a, b) in TABLE
      }
  return span[0, n]


def check_walk(edges, query):
  """The facts, in story order, form a walk from query[0] to query[1]."""
  assert edges[0][0] == query[0] and edges[-1][1] == query[1]
  assert all(edges[i][1] == edges[i + 1][0] for i in range(len(edges) - 1))


def replay_proof(row):
  """Replay the row's proof_state: every step must be a rule of TABLE, the
  root the query with the target, the leaves the stated facts."""
  names = [g.split(":")[0] for g in row["genders"].split(",")]
  edges = ast.literal_eval(row["story_edges"])
  types = ast.literal_eval(row["edge_types"])
  q = ast.literal_eval(row["query_edge"])
  steps = [next(iter(s.items())) for s in ast.literal_eval(row["proof_state"])]
  heads, bodies = collections.Counter(), collections.Counter()
  for (a, r, c), ((a1, r1, b1), (b2, r2, c2)) in steps:
    if not (a == a1 and b1 == b2 and c2 == c and TABLE.get((r1, r2)) == r):
      return False
    heads[(a, r, c)] += 1
    bodies.update([(a1, r1, b1), (b2, r2, c2)])
  facts = collections.Counter(
      (names[i], t, names[j]) for (i, j), t in zip(edges, types)
  )
  return (
      steps[0][0] == (names[q[0]], row["target_text"], names[q[1]])
      and bodies - heads == facts
  )


def reason_over(rows):
  """(number derived uniquely, ambiguous answer sets, proof replays that hold)."""
  unique, ambiguous, proofs = 0, collections.Counter(), 0
  for row in rows:
    edges = ast.literal_eval(row["story_edges"])
    check_walk(edges, ast.literal_eval(row["query_edge"]))
    answers = derivable(
        [clutrr.ALIASES.get(t, t) for t in ast.literal_eval(row["edge_types"])]
    )
    assert row["target_text"] in answers, row
    if len(answers) == 1:
      unique += 1
    else:
      ambiguous[tuple(sorted(answers))] += 1
    proofs += replay_proof(row)
  return unique, ambiguous, proofs


# ---------------------------------------------------------------------------
# The official files.


def test_reasoner_derives_official_rows(official_data):
  # Every target is derivable from its facts.  A few stories have two
  # derivations with different answers: "child . grandparent = parent" is
  # one of CLUTRR's rules, but a child's grandparent may be the partner's
  # parent (e.g. wife, son, grandmother: mother or mother-in-law).  The
  # recorded proof (proof_state) then picks the target; it replays for all.
  val = raw_rows(official_data / OFFICIAL / "validation.csv")
  test = raw_rows(official_data / OFFICIAL / "test.csv")
  unique, ambiguous, proofs = reason_over(val)
  assert (unique, sum(ambiguous.values()), proofs) == (1999, 21, 2020)
  assert set(ambiguous) <= {
      ("father", "father-in-law"),
      ("mother", "mother-in-law"),
  }
  unique, ambiguous, proofs = reason_over(test)
  assert (unique, sum(ambiguous.values()), proofs) == (1124, 22, 1146)
  assert set(ambiguous) <= {
      ("father", "father-in-law"),
      ("mother", "mother-in-law"),
  }


# ---------------------------------------------------------------------------
# The generator.


@pytest.fixture(scope="module")
def generated():
  return {
      k: clutrr_generator.generate_rows(k, 60, seed=k) for k in range(2, 11)
  }


def test_generated_rows_are_derivable(generated):
  for k, rows in generated.items():
    assert len(rows) == 60
    unique, ambiguous, proofs = reason_over(rows)
    assert proofs == len(rows)
    assert set(ambiguous) <= {
        ("father", "father-in-law"),
        ("mother", "mother-in-law"),
    }
    assert unique >= 0.8 * len(rows)


def test_generated_shape(generated):
  repeats = 0
  for k, rows in generated.items():
    examples = clutrr.examples_from_rows(rows)
    for row, ex in zip(rows, examples):
      assert (
          ex.k == k and len(ex.edges) == k and row["task_name"] == f"task_1.{k}"
      )
      assert ex.query == (0, ex.edges[-1][1])
      order = []  # node ids by first appearance along the story
      for a, b in ex.edges:
        order += [v for v in (a, b) if v not in order]
      assert order == list(range(ex.num_nodes))
      for (_, b), t in zip(ex.edges, ex.edge_types):
        assert ex.genders[b] == ("male" if t in MALE else "female")
      assert row["f_comb"] == "-".join(ex.edge_types)
      repeats += ex.num_nodes < k + 1
  assert repeats > 0  # some stories pass through a person twice, as in CLUTRR
  # Only relations CLUTRR's rules use as premises appear as facts.
  facts = {
      t
      for rows in generated.values()
      for r in rows
      for t in ast.literal_eval(r["edge_types"])
  }
  assert facts <= {
      "son",
      "daughter",
      "father",
      "mother",
      "husband",
      "wife",
      "brother",
      "sister",
      "grandson",
      "granddaughter",
      "grandfather",
      "grandmother",
      "uncle",
      "aunt",
  }


def test_generation_is_deterministic():
  a = clutrr_generator.generate_rows(4, 40, seed=11)
  assert a == clutrr_generator.generate_rows(4, 40, seed=11)
  assert a != clutrr_generator.generate_rows(4, 40, seed=12)
  tr1, te1 = clutrr_generator.generate_splits((2, 3), (2, 3, 5), 40, 10, seed=3)
  tr2, te2 = clutrr_generator.generate_splits((2, 3), (2, 3, 5), 40, 10, seed=3)
  assert (tr1, te1) == (tr2, te2)


def test_family_tree_and_kinship():
  tree = clutrr_generator.sample_family_tree(np.random.default_rng(0))
  assert tree.num_people == 42  # 1 + 1, 4 + 4, 16 + 16
  rel = clutrr_generator.kinship(tree)
  # inverse pairs
  inverse = {
      "child": "inv-child",
      "grand": "inv-grand",
      "un": "inv-un",
      "in-law": "inv-in-law",
  }
  inverse.update({v: k for k, v in inverse.items()})
  inverse.update({"SO": "SO", "sibling": "sibling"})
  for (a, b), r in rel.items():
    assert rel[(b, a)] == inverse[r]
  assert sum(r == "SO" for r in rel.values()) == 42


# CLUTRR's closure, transcribed from what RelationBuilder.apply_almost_complete
# does (clutrr/relations/builder.py), without the module's incremental sweeps:
# every call sweeps every pair (copies, as CLUTRR's deep copies).
_INVERSE_RULES = {
    "child": "inv-child",
    "grand": "inv-grand",
    "un": "inv-un",
    "in-law": "inv-in-law",
}


def _closure_by_full_sweeps(tree):
  n, fam = tree.num_people, {}
  for p in range(n):  # Ancestry.simulate: a couple, then its children.
    q = tree.partner[p]
    if q > p:
      fam.setdefault((p, q), "SO")
      for c in range(n):
        if tree.parents[c] == (p, q):
          fam.setdefault((p, c), "child")
          fam.setdefault((q, c), "child")

  def sweeps():
    for rules in (_INVERSE_RULES, {"SO": "SO", "sibling": "sibling"}):
      new = dict(fam)
      for (a, b), r in fam.items():
        if r in rules:
          new[(b, a)] = rules[r]
      fam.clear()
      fam.update(new)

  def compose(e1, e2):
    pair = (e1[0], e2[1])
    if e1[1] != e2[0] or pair[0] == pair[1] or pair in fam:
      return None
    if (
        e1 in fam
        and e2 in fam
        and (fam[e1], fam[e2]) in clutrr_generator.COMPOSITION
    ):
      fam[pair] = clutrr_generator.COMPOSITION[(fam[e1], fam[e2])]
      return pair
    return None

  def almost_complete(edge):
    sweeps()
    keys = list(fam)
    first = [compose(e, edge) for e in keys if e[1] == edge[0]]
    second = [compose(edge, e) for e in keys if e[0] == edge[1]]
    for e in first + second:
      if e is not None:
        almost_complete(e)

  for i in range(n):
    for j in range(n):
      if i != j:
        almost_complete((i, j))
  return fam


@pytest.mark.parametrize(
    "seed, sizes",
    [
        (0, {}),
        (1, {}),
        (2, dict(max_levels=2, min_child=1, max_child=3)),
        (3, dict(max_levels=3, min_child=2, max_child=3)),
        (4, dict(max_levels=1)),
        (5, dict(p_marry=0.7)),
    ],
)
def test_clutrr_closure_equals_full_sweeps(seed, sizes):
  tree = clutrr_generator.sample_family_tree(
      np.random.default_rng(seed), **sizes
  )
  fast = clutrr_generator.clutrr_closure(tree)
  assert list(fast.items()) == list(_closure_by_full_sweeps(tree).items())


def test_clutrr_closure_adds_clutrrs_unsound_labels():
  tree = clutrr_generator.sample_family_tree(np.random.default_rng(0))
  rel, kin = clutrr_generator.clutrr_closure(tree), clutrr_generator.kinship(
      tree
  )
  changed = collections.Counter(
      (kin.get(p), rel.get(p))
      for p in set(rel) | set(kin)
      if rel.get(p) != kin.get(p)
  )
  # A child's partner labelled child (son-in-law as son), a partner's
  # parent as parent, a sibling's partner as sibling, a partner's nephew as
  # nephew; every other pair as kinship.
  assert set(changed) == {
      ("in-law", "child"),
      ("inv-in-law", "inv-child"),
      (None, "sibling"),
      (None, "un"),
      (None, "inv-un"),
  }
  assert sum(r == "SO" for r in rel.values()) == 42


def _official_graphs(official_data, k):
  out = collections.defaultdict(set)
  for name in ("validation.csv", "test.csv"):
    for ex in clutrr.load_clutrr(official_data / OFFICIAL / name):
      if ex.k == k:
        out[clutrr.story_signature(ex)].add(ex.target)
  return out


def test_clutrr_closure_makes_official_graphs_sound_never_does(official_data):
  official = _official_graphs(official_data, 3)
  rows = {
      closure: clutrr.examples_from_rows(
          clutrr_generator.generate_rows(3, 600, seed=0, closure=closure)
      )
      for closure in clutrr_generator.CLOSURES
  }
  graphs = {
      c: {clutrr.story_signature(ex) for ex in v} for c, v in rows.items()
  }
  assert graphs["clutrr"] <= set(official) and graphs["sound"] <= set(official)

  # The 16 official graphs only CLUTRR's labels give: x's child's other
  # parent (x's partner) has a parent or sibling, labelled x's own (e.g. son,
  # father, father -> father; it is x's father-in-law).
  def unsound(ex):
    return (
        ex.edges == ((0, 1), (1, 2), (2, 3))
        and ex.edge_types[0] in ("son", "daughter")
        and ex.edge_types[1] in ("father", "mother")
        and ex.edge_types[2] in ("father", "mother", "brother", "sister")
    )

  assert not any(unsound(ex) for ex in rows["sound"])
  found = [ex for ex in rows["clutrr"] if unsound(ex)]
  assert found
  for ex in found:
    assert official[clutrr.story_signature(ex)] == {ex.target}
    assert clutrr.RELATIONS[ex.target] == ex.edge_types[2]


@pytest.mark.slow
def test_clutrr_closure_makes_exactly_the_official_graphs(official_data):
  # 1,000 / 3,500 rows (seed 0) are enough to meet every graph; at the
  # paper's 17,500 per k too (results/clutrr/data_stats.json).
  for k, num, rows in ((2, 62, 1_000), (3, 328, 3_500)):
    official = _official_graphs(official_data, k)
    assert len(official) == num
    examples = clutrr.examples_from_rows(
        clutrr_generator.generate_rows(k, rows, seed=0, closure="clutrr")
    )
    assert {clutrr.story_signature(ex) for ex in examples} == set(official)
    labelled = [
        ex.target in official[clutrr.story_signature(ex)] for ex in examples
    ]
    assert np.mean(labelled) > 0.98  # Ambiguous graphs: either label.


def test_generate_rows_names_a_bad_closure():
  with pytest.raises(ValueError, match="valid closures are"):
    clutrr_generator.generate_rows(2, 1, closure="exact")


def test_train_test_disjoint():
  train, test = clutrr_generator.generate_splits(
      (2, 3), (2, 3, 4), 200, 30, seed=5
  )
  sig = lambda rows: {
      clutrr.story_signature(x) for x in clutrr.examples_from_rows(rows)
  }
  assert len(train) == 400 and len(test) == 90
  assert not sig(train) & sig(test)
  assert {r["task_split"] for r in train} == {"train"} and {
      r["task_split"] for r in test
  } == {"test"}
  counts = collections.Counter(r["task_name"] for r in test)
  assert counts == {"task_1.2": 30, "task_1.3": 30, "task_1.4": 30}


def test_round_trip(tmp_path, generated):
  rows = generated[2] + generated[7]
  path = tmp_path / "gen.csv"
  clutrr.write_csv(rows, path)
  assert clutrr.load_clutrr(path) == clutrr.examples_from_rows(rows)
  raw = raw_rows(path)
  assert list(raw[0]) == list(clutrr.COLUMNS)
  assert [{c: r[c] for c in clutrr.COLUMNS[1:]} for r in raw] == rows


def test_generator_rejects_small_k():
  with pytest.raises(ValueError, match="k must be >= 2"):
    clutrr_generator.generate_rows(1, 5)


def test_a_k_no_tree_can_tell_is_refused_early():
  """Small trees (2 levels of 2 children) hold no story of 6 facts: a clear
  error after 100 trees, not `max_rounds` of them."""
  tree = dict(max_levels=2, min_child=2, max_child=2)
  assert len(clutrr_generator.generate_rows(4, 2, **tree)) == 2
  with pytest.raises(
      ValueError,
      match=r"k=6\): none of the first 100 family trees .* too large",
  ):
    clutrr_generator.generate_rows(6, 2, **tree)


@pytest.mark.slow  # 200 rounds of generation: ~15 s.
def test_generator_names_how_many_unique_stories_it_found():
  with pytest.raises(RuntimeError, match="only 62 of 63 new stories"):
    clutrr_generator.generate_rows(2, 63, seed=0, unique=True, max_rounds=200)
