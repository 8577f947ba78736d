"""CLUTRR (Sinha et al., 2019) story graphs made by CLUTRR's own procedure.

`generate_rows` and `generate_splits` return new rows in the official CLUTRR
1.0 schema (column -> CSV text); the schema, the 21 classes, the reader
(`examples_from_rows`) and the writer (`write_csv`) are in
`relational_jax.data.clutrr`.  `clutrr_closure` and `kinship` label the
pairs of a family tree; `check_holdout` is the rule for test k shared with
training.  Pure Python + NumPy.

Generator (`generate_rows`, `generate_splits`), following the
procedure of CLUTRR's own code (`clutrr/actors/ancestry.py`,
`clutrr/relations/builder.py`, `clutrr/store/rules_store.yaml`) with the
configuration the ET authors used (`max_levels=3`, 4 children per couple,
`p_marry=1.0`, task 1, no noise; see their `data_*/config.json`):

1. A family tree: one root, who marries (probability `p_marry`) a partner of
   the other gender; every couple not in the last generation has between
   `min_child` and `max_child` children of random gender; the last
   generation marries but has no children.  With the defaults: 3 generations,
   21 couples, 42 people.
2. Ten abstract kinship relations hold between people (`child`, its inverse
   `inv-child`, `SO`, `sibling`, `grand`/`inv-grand`, `un`
   (nephew/niece)/`inv-un` (uncle/aunt), `in-law` (child's partner) and
   `inv-in-law` (partner's parent)).  A pair's gendered name is chosen by
   the gender of its second person (`GENDERED`).
3. A target pair `(x, y)` is expanded `k - 1` times by CLUTRR's
   composition rules (`COMPOSITION`) read backwards: pick an
   unexpanded fact `(a, b)` of the current story at random, replace it by
   `(a, z), (z, b)` whose relations compose to the relation of `(a, b)`
   (one of them at random; CLUTRR cycles through each edge's expansions in
   rule and person order across the puzzles of a tree, which leaves the
   label balance within sampling noise of the official files), unless one
   of the two (or its reverse) was expanded before.  A story is
   kept when it has exactly `k` facts, so `k` = number of facts = the
   `K` of `task_1.K`.  As in CLUTRR a story may pass through the same
   person twice (e.g. `husband, son, father, ...`).
4. Puzzles are balanced over their relation pattern (`f_comb`) the way
   CLUTRR's `equal` option does (`generate_rows`, `balance`).

Pair relations, two ways (`closure`).  CLUTRR labels the pairs of its tree
by closing the tree's child/partner edges under the same composition rules,
in an order-dependent way, and some of the rules are not sound in its trees
(`child . inv-grand = inv-child` also fires for a partner's parent,
`child . inv-un = sibling` for a partner's sibling), so some pairs of its
trees carry a relation that does not hold (e.g. a sister-in-law labelled
`sister`).  `closure='clutrr'` (the default) computes CLUTRR's labels
(`clutrr_closure`) and derives stories from them, as the authors' data was
made.  With `closure='sound'` each pair carries the relation that holds in
the tree (`kinship`; pairs with none of the ten, such as cousins or
siblings-in-law, carry none), and a fact is only ever expanded through a
person `z` for whom both halves hold: every generated fact and target is
true in its tree, and the recorded proof uses only CLUTRR's rules.  The
official files show the difference: their 62 distinct `k = 2` story graphs
are exactly the 62 either closure produces;
of their 328 `k = 3` graphs, 'clutrr' produces all 328 (and no other) and
'sound' 312 (17,500 rows per k, seed 0); the other 16 (44 of the 1,000
`k = 3` validation rows, 30 of the 105 `k = 3` test rows) state a relation
that does not hold, e.g. `son, father, brother -> brother` (x's son's
father other than x is x's husband, whose brother is x's brother-in-law) or
`son, mother, mother -> mother` (a mother-in-law).

Ambiguity (in the official files too): because `child . inv-grand =
inv-child` is only sound for blood parents, a few stories admit two rule
derivations with different answers, e.g. `wife, son, grandmother` (`x`'s
wife's son's grandmother is `x`'s mother or mother-in-law).  21 of the 2,020
official validation rows and 22 of the 1,146 test rows are of this kind; the
target is one of the two derivable answers, and the row's `proof_state`
(the expansion tree) picks it.
"""

from __future__ import annotations

import dataclasses
import hashlib
import uuid
from typing import Callable, Dict, Iterable, List, Optional, Sequence, Set, Tuple, Union

import numpy as np

from relational_jax.data.clutrr import REL_ID

# ---------------------------------------------------------------------------
# CLUTRR's rules.

#: The ten abstract relations of CLUTRR's rules (`relations_store.yaml`).
ABSTRACT_RELATIONS: Tuple[str, ...] = (
    "child",
    "inv-child",
    "SO",
    "sibling",
    "grand",
    "inv-grand",
    "un",
    "inv-un",
    "in-law",
    "inv-in-law",
)

#: (abstract relation, gender of the second person) -> gendered name.
GENDERED: Dict[Tuple[str, str], str] = {
    ("child", "male"): "son",
    ("child", "female"): "daughter",
    ("inv-child", "male"): "father",
    ("inv-child", "female"): "mother",
    ("SO", "male"): "husband",
    ("SO", "female"): "wife",
    ("sibling", "male"): "brother",
    ("sibling", "female"): "sister",
    ("grand", "male"): "grandson",
    ("grand", "female"): "granddaughter",
    ("inv-grand", "male"): "grandfather",
    ("inv-grand", "female"): "grandmother",
    ("un", "male"): "nephew",
    ("un", "female"): "niece",
    ("inv-un", "male"): "uncle",
    ("inv-un", "female"): "aunt",
    ("in-law", "male"): "son-in-law",
    ("in-law", "female"): "daughter-in-law",
    ("inv-in-law", "male"): "father-in-law",
    ("inv-in-law", "female"): "mother-in-law",
}
#: gendered name -> (abstract relation, gender).
ABSTRACT: Dict[str, Tuple[str, str]] = {v: k for k, v in GENDERED.items()}

#: CLUTRR's compositional rules (`rules_store.yaml`, family part):
#: `(r1, r2) -> r` means (a, r1, z) and (z, r2, b) give (a, r, b).
COMPOSITION: Dict[Tuple[str, str], str] = {
    ("child", "child"): "grand",
    ("child", "SO"): "in-law",
    ("child", "sibling"): "child",
    ("child", "inv-un"): "sibling",
    ("child", "inv-grand"): "inv-child",
    ("inv-child", "child"): "sibling",
    ("inv-child", "inv-child"): "inv-grand",
    ("inv-child", "sibling"): "inv-un",
    ("SO", "inv-child"): "inv-in-law",
    ("SO", "grand"): "grand",
    ("SO", "child"): "child",
    ("sibling", "sibling"): "sibling",
    ("sibling", "inv-grand"): "inv-grand",
    ("sibling", "child"): "un",
    ("sibling", "inv-child"): "inv-child",
    ("grand", "sibling"): "grand",
}
#: r -> the rule bodies (r1, r2) that produce it, in a fixed order.
DECOMPOSITION: Dict[str, Tuple[Tuple[str, str], ...]] = {
    r: tuple(body for body, head in COMPOSITION.items() if head == r)
    for r in ABSTRACT_RELATIONS
}


# ---------------------------------------------------------------------------
# Family trees and kinship.


@dataclasses.dataclass(frozen=True)
class FamilyTree:
  """People `0 .. n - 1`: gender, parents (empty for founders and people
  who married in) and partner (`-1` for none)."""

  genders: Tuple[str, ...]
  parents: Tuple[Tuple[int, ...], ...]
  partner: Tuple[int, ...]

  @property
  def num_people(self) -> int:
    return len(self.genders)


def sample_family_tree(
    rng: np.random.Generator,
    *,
    max_levels: int = 3,
    min_child: int = 4,
    max_child: int = 4,
    p_marry: float = 1.0,
) -> FamilyTree:
  """A random family tree, following CLUTRR's `Ancestry.simulate`.

  One male root; in each of `max_levels` generations every member marries
  with probability `p_marry` (a partner of the other gender) and, except in
  the last generation, the couple has `min_child .. max_child` children of
  uniformly random gender, who form the next generation.
  """
  genders: List[str] = []
  parents: List[Tuple[int, ...]] = []
  partner: List[int] = []

  def add(gender: str, pars: Tuple[int, ...] = ()) -> int:
    genders.append(gender)
    parents.append(pars)
    partner.append(-1)
    return len(genders) - 1

  generation = [add("male")]
  for level in range(max_levels):
    nxt: List[int] = []
    for person in generation:
      if rng.random() >= p_marry:
        continue
      other = add("female" if genders[person] == "male" else "male")
      partner[person], partner[other] = other, person
      if level != max_levels - 1:
        num = int(rng.integers(min_child, max_child + 1))
        for _ in range(num):
          gender = "male" if rng.random() < 0.5 else "female"
          nxt.append(add(gender, (person, other)))
    generation = nxt
  return FamilyTree(tuple(genders), tuple(parents), tuple(partner))


def kinship(tree: FamilyTree) -> Dict[Tuple[int, int], str]:
  """The abstract relation of every ordered pair `(a, b)` for which one of
  CLUTRR's ten holds ("b is a's r"): blood relations through shared parents,
  partners, and a child's partner / a partner's parent."""
  n = tree.num_people
  par = tree.parents
  children: List[List[int]] = [[] for _ in range(n)]
  for c in range(n):
    for p in par[c]:
      children[p].append(c)
  rel: Dict[Tuple[int, int], str] = {}

  def put(a: int, b: int, r: str) -> None:
    if a == b:
      return
    old = rel.setdefault((a, b), r)
    if old != r:  # cannot happen in trees without cousin/in-family marriages
      raise AssertionError(f"pair {(a, b)} is both {old} and {r}")

  def siblings(a: int) -> List[int]:
    if not par[a]:
      return []
    return [c for c in children[par[a][0]] if c != a and par[c] == par[a]]

  for a in range(n):
    if tree.partner[a] >= 0:
      put(a, tree.partner[a], "SO")
      for q in par[tree.partner[a]]:
        put(a, q, "inv-in-law")
    for c in children[a]:
      put(a, c, "child")
      put(c, a, "inv-child")
      for g in children[c]:
        put(a, g, "grand")
        put(g, a, "inv-grand")
      if tree.partner[c] >= 0:
        put(a, tree.partner[c], "in-law")
    for s in siblings(a):
      put(a, s, "sibling")
      for nephew in children[s]:
        put(a, nephew, "un")
        put(nephew, a, "inv-un")
  return rel


#: How the pairs of a tree get their relation: 'clutrr' (`clutrr_closure`:
#: CLUTRR's own labels, some of which do not hold; the module docstring) or
#: 'sound' (`kinship`: the relation that holds).
CLOSURES: Tuple[str, ...] = ("clutrr", "sound")

# CLUTRR's `inverse-equivalence` and `symmetric` rules (`rules_store.yaml`).
_INVERSE: Dict[str, str] = {
    "child": "inv-child",
    "grand": "inv-grand",
    "un": "inv-un",
    "in-law": "inv-in-law",
}
_SYMMETRIC: Tuple[str, ...] = ("SO", "sibling")


def clutrr_closure(tree: FamilyTree) -> Dict[Tuple[int, int], str]:
  """The relations CLUTRR's generator gives the pairs of `tree`
  (`RelationBuilder.apply_almost_complete`), as {(a, b): abstract relation},
  in CLUTRR's insertion order.

  CLUTRR starts from the tree's partner and child edges in the order its
  `Ancestry.simulate` makes them (a couple, then its children; our ids are
  that order) and calls `almost_complete((i, j))` for every ordered pair of
  people in id order. Each call first applies the inverse rules (the reverse
  of a `child`, `grand`, `un` or `in-law` edge is set to its inverse) and
  then the symmetric ones (`SO`, `sibling`), each as one sweep over a
  snapshot of the edges, overwriting; then composes `(e, edge)` for every
  edge `e` into `edge`'s first person and `(edge, e)` for every `e` out of its
  second (both lists from one snapshot taken before), each giving
  `COMPOSITION`'s head to the new pair unless the pair already has a
  relation (the first derivation wins); then recurses, depth first, into
  each newly labelled pair. Rules like `child . inv-grand = inv-child` fire
  for a partner's parent too, so some pairs get a relation that does not hold
  (e.g. a sibling-in-law labelled `sibling`), and which one wins depends on
  the order.

  Computed incrementally: a sweep changes a pair (a, b) only through (b, a),
  so only the pairs labelled or changed since the last sweep are swept
  (in CLUTRR's insertion order); the result, order included, equals
  re-sweeping everything at every call (tests/data/test_clutrr_generator.py
  checks it against that transcription).
  """
  n = tree.num_people
  rel: Dict[Tuple[int, int], str] = {}
  rank: Dict[Tuple[int, int], int] = {}  # insertion order
  into: List[List[Tuple[int, int]]] = [[] for _ in range(n)]  # (x, b) by b
  out_of: List[List[Tuple[int, int]]] = [[] for _ in range(n)]  # by x
  dirty: Set[Tuple[int, int]] = set()  # unordered pairs (a < b) to sweep

  def unordered(pair: Tuple[int, int]) -> Tuple[int, int]:
    return pair if pair[0] < pair[1] else (pair[1], pair[0])

  def put(pair: Tuple[int, int], r: str) -> None:
    if pair not in rel:
      rank[pair] = len(rank)
      into[pair[1]].append(pair)
      out_of[pair[0]].append(pair)
    rel[pair] = r
    dirty.add(unordered(pair))

  for p in range(n):  # Ancestry.simulate's order: a couple, their children.
    q = tree.partner[p]
    if q > p:  # p is born into the family (or the root), q married in.
      put((p, q), "SO")
      for c in range(n):
        if tree.parents[c] == (p, q):
          put((p, c), "child")
          put((q, c), "child")

  def sweep(sources: Set[Tuple[int, int]], new_relation) -> None:
    """One of CLUTRR's rule sweeps over the ordered pairs of `sources`:
    writes computed from the snapshot, applied in insertion order."""
    found = [
        pair
        for a, b in sources
        for pair in ((a, b), (b, a))
        if new_relation(rel.get(pair)) is not None
    ]
    found.sort(key=rank.__getitem__)
    writes = [((b, a), new_relation(rel[(a, b)])) for a, b in found]
    for pair, r in writes:
      if rel.get(pair) != r:
        put(pair, r)

  def sweeps() -> None:
    nonlocal dirty
    if dirty:
      # Both sweeps write a pair only from its reverse, so they change only
      # `sources`; `put` marks those they change, for the next sweeps (which
      # may change them again); the others are fixed points of both.
      sources, dirty = dirty, set()
      sweep(sources, _INVERSE.get)
      sweep(sources, lambda r: r if r in _SYMMETRIC else None)

  def compose(first: Tuple[int, int], second: Tuple[int, int]):
    pair = (first[0], second[1])
    if pair[0] == pair[1] or pair in rel:
      return None
    head = COMPOSITION.get((rel[first], rel[second]))
    if head is None:
      return None
    put(pair, head)
    return pair

  def almost_complete(edge: Tuple[int, int]) -> List[Tuple[int, int]]:
    sweeps()
    if edge not in rel:
      return []
    before, after = list(into[edge[0]]), list(out_of[edge[1]])
    new = [compose(e, edge) for e in before]
    new += [compose(edge, e) for e in after]
    return [e for e in new if e is not None]

  for i in range(n):
    for j in range(n):
      if i != j:
        stack = [(i, j)]  # CLUTRR's recursion, depth first, in order.
        while stack:
          stack.extend(reversed(almost_complete(stack.pop())))
  return rel


# ---------------------------------------------------------------------------
# Generation.

_MALE_NAMES = (
    "Adam",
    "Ben",
    "Carl",
    "David",
    "Eric",
    "Frank",
    "George",
    "Henry",
    "Ian",
    "Jack",
    "Kevin",
    "Leo",
    "Mark",
    "Nick",
    "Oscar",
    "Paul",
    "Ralph",
    "Sam",
    "Tom",
    "Victor",
    "Walter",
)
_FEMALE_NAMES = (
    "Alice",
    "Beth",
    "Clara",
    "Diana",
    "Emma",
    "Fiona",
    "Grace",
    "Helen",
    "Irene",
    "Julia",
    "Kate",
    "Laura",
    "Mary",
    "Nora",
    "Olga",
    "Paula",
    "Rose",
    "Sara",
    "Tina",
    "Vera",
    "Wendy",
)


def _names(tree: FamilyTree, rng: np.random.Generator) -> List[str]:
  """Distinct first names by gender (a number is appended past the pools)."""
  out, used = [], {"male": 0, "female": 0}
  pools = {
      "male": list(rng.permutation(_MALE_NAMES)),
      "female": list(rng.permutation(_FEMALE_NAMES)),
  }
  for g in tree.genders:
    i = used[g]
    pool = pools[g]
    out.append(
        str(pool[i % len(pool)])
        + ("" if i < len(pool) else str(i // len(pool) + 1))
    )
    used[g] += 1
  return out


class _Builder:
  """Story derivation on one tree (CLUTRR's `RelationBuilder.derive`)."""

  def __init__(self, tree: FamilyTree, closure: str = "clutrr"):
    self.tree = tree
    self.rel = kinship(tree) if closure == "sound" else clutrr_closure(tree)
    self.out: List[List[int]] = [[] for _ in range(tree.num_people)]
    for a, b in sorted(self.rel):
      self.out[a].append(b)
    self._exp: Dict[
        Tuple[int, int], List[Tuple[Tuple[int, int], Tuple[int, int]]]
    ] = {}

  def expansions(self, edge: Tuple[int, int]):
    """All `((a, z), (z, b))` whose relations compose, by a CLUTRR rule,
    to the relation of `edge = (a, b)`."""
    if edge not in self._exp:
      a, b = edge
      r = self.rel[edge]
      found = []
      for z in self.out[a]:
        if z == b:
          continue
        r2 = self.rel.get((z, b))
        if r2 is not None and COMPOSITION.get((self.rel[(a, z)], r2)) == r:
          found.append(((a, z), (z, b)))
      self._exp[edge] = found
    return self._exp[edge]

  def derive(self, target: Tuple[int, int], k: int, rng: np.random.Generator):
    """Expand `target` into `k` facts; returns (story, proof) or None."""
    story = [target]
    seen: Set[Tuple[int, int]] = set()
    proof = []
    todo = k - 1
    while todo > 0:
      candidates = sorted(set(story) - seen)
      if not candidates:
        break
      e = candidates[int(rng.integers(len(candidates)))]
      seen.add(e)
      options = self.expansions(e)
      if not options:
        continue
      e1, e2 = options[int(rng.integers(len(options)))]
      if e1 in seen or e2 in seen or e1[::-1] in seen or e2[::-1] in seen:
        continue
      pos = story.index(e)
      story[pos : pos + 1] = [e1, e2]
      proof.append((e, e1, e2))
      todo -= 1
    if len(story) != k:
      return None
    return story, proof

  def name(self, edge: Tuple[int, int]) -> str:
    return GENDERED[(self.rel[edge], self.tree.genders[edge[1]])]


def _row(
    builder: _Builder,
    names: List[str],
    target: Tuple[int, int],
    story,
    proof,
    k: int,
    split: str,
    rng: np.random.Generator,
) -> Tuple[Dict[str, str], Tuple]:
  ids: Dict[int, int] = {}
  for a, b in story:
    ids.setdefault(a, len(ids))
    ids.setdefault(b, len(ids))
  order = sorted(ids, key=ids.get)
  types = [builder.name(e) for e in story]
  target_text = builder.name(target)

  def triple(e):
    return (names[e[0]], builder.name(e), names[e[1]])

  edges = tuple((ids[a], ids[b]) for a, b in story)
  query = (ids[target[0]], ids[target[1]])
  signature = (edges, tuple(REL_ID[t] for t in types), query)
  sentences = " ".join(
      f"[{names[b]}] is [{names[a]}]'s {t}." for (a, b), t in zip(story, types)
  )
  return {
      "id": str(uuid.UUID(bytes=rng.bytes(16), version=4)),
      "story": sentences,
      "query": repr((names[target[0]], names[target[1]])),
      "target": str(REL_ID[target_text]),
      "target_text": target_text,
      "clean_story": sentences,
      "proof_state": repr(
          [{triple(e): [triple(e1), triple(e2)]} for e, e1, e2 in proof]
      ),
      "f_comb": "-".join(types),
      "task_name": f"task_1.{k}",
      "story_edges": repr(list(edges)),
      "edge_types": repr(types),
      "query_edge": repr(query),
      "genders": ",".join(
          f"{names[p]}:{builder.tree.genders[p]}" for p in order
      ),
      "task_split": split,
  }, signature


# Trees without a single story of k facts after which k is out of reach.
_ROUNDS_TO_FIND_K = 100


def generate_rows(
    k: int,
    num_rows: int,
    *,
    seed: Union[int, np.random.Generator] = 0,
    max_levels: int = 3,
    min_child: int = 4,
    max_child: int = 4,
    p_marry: float = 1.0,
    balance: bool = True,
    exclude: Optional[Set[Tuple]] = None,
    accept: Optional[Callable[[Tuple], bool]] = None,
    unique: bool = False,
    task_split: str = "train",
    max_rounds: int = 20_000,
    closure: str = "clutrr",
) -> List[Dict[str, str]]:
  """`num_rows` noiseless CLUTRR stories with `k` facts (`task_1.k`).

  Each round samples a family tree (`sample_family_tree`) and derives
  one story from every related pair of it, in random order.  With
  `balance` (CLUTRR's `equal`), as in CLUTRR's `prune_puzzles`, a
  round keeps the same number of stories (the smallest count) of each
  relation pattern `f_comb`, and only patterns whose count so far is the
  smallest are added.  Stories whose `clutrr.story_signature` is in
  `exclude` are skipped, and with `unique` so are repeats within this
  call.  (As in the official files, the same signature may recur with other
  people and names otherwise: at `k = 2` there are only 62.)

  Args:
    k: facts per story, >= 2.
    num_rows: rows to return.
    seed: an int or a `numpy.random.Generator`; equal seeds give equal rows.
    max_levels, min_child, max_child, p_marry: the tree (CLUTRR's arguments;
      defaults are the ET authors' configuration).
    balance: balance the relation patterns as CLUTRR does.
    exclude: signatures that must not be produced (e.g. the training set's).
    accept: if given, only stories whose signature it accepts are kept.
    unique: no two returned rows share a signature.
    task_split: value of the `task_split` column.
    max_rounds: give up (`RuntimeError`) after this many trees; a `k` that
      none of the first 100 trees can tell is a ValueError.
    closure: the relations of a tree's pairs (targets and facts alike):
      'clutrr' (`clutrr_closure`, CLUTRR's labels, as the authors' data) or
      'sound' (`kinship`, only relations that hold).
  Returns:
    rows as dicts over `clutrr.COLUMNS` (without the index column),
    values as the CSV text; read them with `clutrr.examples_from_rows`,
    write them with `clutrr.write_csv`.
  """
  if k < 2:
    raise ValueError(f"k must be >= 2, got {k}")
  if closure not in CLOSURES:
    raise ValueError(
        f"closure {closure!r}: valid closures are {list(CLOSURES)}"
    )
  rng = (
      seed
      if isinstance(seed, np.random.Generator)
      else np.random.default_rng(seed)
  )
  exclude = set() if exclude is None else exclude
  kept: Set[Tuple] = set()
  pattern_count: Dict[str, int] = {}
  rows: List[Dict[str, str]] = []
  any_story = False  # Whether any tree so far held a story of k facts.
  for round_ in range(max_rounds):
    if round_ == _ROUNDS_TO_FIND_K and not any_story:
      raise ValueError(
          f"generate_rows(k={k}): none of the first {round_} family trees "
          f"(max_levels={max_levels}, {min_child}-{max_child} children) "
          f"holds a story of {k} facts: k is too large for these trees."
      )
    tree = sample_family_tree(
        rng,
        max_levels=max_levels,
        min_child=min_child,
        max_child=max_child,
        p_marry=p_marry,
    )
    builder = _Builder(tree, closure)
    names = _names(tree, rng)
    pairs = sorted(builder.rel)
    by_pattern: Dict[str, List[Tuple[Dict[str, str], Tuple]]] = {}
    this_round: Set[Tuple] = set()
    for idx in rng.permutation(len(pairs)):
      target = pairs[int(idx)]
      derived = builder.derive(target, k, rng)
      if derived is None:
        continue
      any_story = True
      row, sig = _row(
          builder, names, target, derived[0], derived[1], k, task_split, rng
      )
      if sig in exclude or (accept is not None and not accept(sig)):
        continue
      if unique and (sig in kept or sig in this_round):
        continue
      this_round.add(sig)
      by_pattern.setdefault(row["f_comb"], []).append((row, sig))
    if not by_pattern:
      continue
    if balance:
      keep = min(len(v) for v in by_pattern.values())
      least = min(pattern_count.values()) if pattern_count else 0
      batch = []
      for pattern in sorted(by_pattern):
        if pattern_count.get(pattern, 0) > least:
          continue
        group = by_pattern[pattern]
        chosen = rng.choice(len(group), size=keep, replace=False)
        batch.extend(group[int(i)] for i in sorted(chosen))
    else:
      batch = [r for p in sorted(by_pattern) for r in by_pattern[p]]
    for i in rng.permutation(len(batch)):
      row, sig = batch[int(i)]
      rows.append(row)
      kept.add(sig)
      pattern_count[row["f_comb"]] = pattern_count.get(row["f_comb"], 0) + 1
      if len(rows) == num_rows:
        return rows
  raise RuntimeError(
      f"generate_rows(k={k}): only {len(rows)} of {num_rows} new stories after "
      f"{max_rounds} trees (too few distinct stories outside `exclude`"
      f"{' or with unique=True' if unique else ''}?)"
  )


def _held_out(signature: Tuple, seed: int, fraction: float) -> bool:
  digest = hashlib.sha256(repr((seed, signature)).encode()).digest()
  return int.from_bytes(digest[:8], "big") / 2.0**64 < fraction


def check_holdout(
    train_ks: Sequence[int], test_ks: Sequence[int], holdout_fraction: float
) -> Set[int]:
  """The k in both `train_ks` and `test_ks`; raises unless `holdout_fraction`
  is in [0, 1) and, with such k, above 0 (test graphs kept out of training)."""
  if not 0.0 <= holdout_fraction < 1.0:
    raise ValueError(
        f"holdout_fraction must be in [0, 1), got {holdout_fraction}"
    )
  shared = set(train_ks) & set(test_ks)
  if shared and holdout_fraction == 0.0:
    raise ValueError(
        f"test k {tuple(test_ks)} shares k = {sorted(shared)} with train k "
        f"{tuple(train_ks)}: that needs holdout_fraction > 0 (story graphs "
        "kept out of training), or test k beyond training only"
    )
  return shared


def generate_splits(
    train_ks: Iterable[int] = (2, 3),
    test_ks: Iterable[int] = tuple(range(2, 11)),
    num_train_per_k: int = 1000,
    num_test_per_k: int = 100,
    *,
    seed: int = 0,
    holdout_fraction: float = 0.2,
    **kwargs,
) -> Tuple[List[Dict[str, str]], List[Dict[str, str]]]:
  """Disjoint train rows (`train_ks`) and test rows (`test_ks`).

  No test row has the `clutrr.story_signature` of a train row. At a `k` not in
  `train_ks` this holds by construction (a different number of facts). At a `k`
  in both, the story graphs are few (every one of them recurs in a training set
  of a few hundred rows: 62 at `k = 2`, 328 at `k = 3`, 312 with
  closure='sound'), so a seeded hash reserves `holdout_fraction` of them for
  test (CLUTRR's pattern-level `holdout` split): train never produces them and
  test only produces them. (For the ET protocol, train on `generate_rows` for
  `k = 2, 3` and test on the official files or on `generate_rows` at
  `k >= 4`.) Each `(split, k)` draws from its own seeded stream; `kwargs` go
  to `generate_rows`.
  """
  train_ks, test_ks = tuple(train_ks), tuple(test_ks)
  shared = check_holdout(train_ks, test_ks, holdout_fraction)

  def rows(ks, num_per_k, stream, task_split, held_out):
    """The rows of one split: per k, its stream (seed, stream, k); at a
    shared k only story graphs whose `_held_out` is `held_out`."""
    out: List[Dict[str, str]] = []
    for k in ks:
      accept = None
      if k in shared:
        accept = lambda sig: _held_out(sig, seed, holdout_fraction) == held_out
      out += generate_rows(
          k,
          num_per_k,
          seed=np.random.default_rng([seed, stream, k]),
          accept=accept,
          task_split=task_split,
          **kwargs,
      )
    return out

  train = rows(train_ks, num_train_per_k, 0, "train", held_out=False)
  test = rows(test_ks, num_test_per_k, 1, "test", held_out=True)
  return train, test
