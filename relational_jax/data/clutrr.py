"""CLUTRR (Sinha et al., 2019) as graphs: the official CSV schema.

CLUTRR asks for the kinship relation between two people of a family given a
chain of `k` stated kinship facts.  The graph version (Bergen et al., 2021,
"Systematic Generalization with Edge Transformers", sec. 4) feeds the facts as
a labelled directed graph and classifies the query edge; this module reads
(`load_clutrr`), writes (`write_csv`) and pads (`to_arrays`) that data, pure
Python + NumPy.  New rows in the same schema come from
`relational_jax.data.clutrr_generator`.

Format (the CLUTRR 1.0 CSV files, e.g. `gen_train23_test2to10/{validation,
test}.csv`).  Each row is one story; the columns this module reads are

* `story_edges` -- `[(0, 1), (1, 2), ...]`: the facts, as node pairs.  Nodes
  are numbered in order of first appearance along the story.
* `edge_types` -- `['sister', 'grandfather', ...]`, parallel to the edges.
  An edge `(a, b)` with type `r` states "b is a's r"; the name is gendered
  by `b` (`son`/`daughter`).
* `query_edge` -- `(a, b)`: the pair asked about; the answer is "b is a's
  target".
* `genders` -- `"Name:gender,Name:gender,..."`, one entry per node, in node
  order.
* `target` -- the class index (below); `target_text` its name.  Older
  CLUTRR files (and the ET authors' copies) store the name in `target`;
  both are accepted.
* `task_name` -- `task_1.K`: task 1 (no noise facts) with `K = k` facts.

Fields holding Python literals are parsed with `ast.literal_eval`.  The
21 classes, in CLUTRR's own index order, are `RELATIONS`; edge labels use
the same ids, and `NO_EDGE` (= 21) marks "no edge" in the padded label
matrix of `to_arrays`.  CLUTRR's generator writes `neice` for
`niece` in `edge_types`; the loader accepts both spellings.
"""

from __future__ import annotations

import ast
import csv
import dataclasses
import os
import re
from typing import Dict, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np

PathLike = Union[str, os.PathLike]

# ---------------------------------------------------------------------------
# Relations.

#: CLUTRR's 21 classes in CLUTRR's own index order (hf/1.0 README).
RELATIONS: Tuple[str, ...] = (
    "aunt",
    "son-in-law",
    "grandfather",
    "brother",
    "sister",
    "father",
    "mother",
    "grandmother",
    "uncle",
    "daughter-in-law",
    "grandson",
    "granddaughter",
    "father-in-law",
    "mother-in-law",
    "nephew",
    "son",
    "daughter",
    "niece",
    "husband",
    "wife",
    "sister-in-law",
)
NUM_RELATIONS = len(RELATIONS)
REL_ID: Dict[str, int] = {name: i for i, name in enumerate(RELATIONS)}
#: Label of an absent edge in `to_arrays`'s label matrix.
NO_EDGE = NUM_RELATIONS
#: Number of edge labels including `NO_EDGE`.
NUM_EDGE_LABELS = NUM_RELATIONS + 1
#: Alternative spellings found in CLUTRR files.
ALIASES: Dict[str, str] = {"neice": "niece"}

#: Columns of the CLUTRR 1.0 (hf/1.0) files, in order; the first is the
#: unnamed row index.
COLUMNS: Tuple[str, ...] = (
    "",
    "id",
    "story",
    "query",
    "target",
    "target_text",
    "clean_story",
    "proof_state",
    "f_comb",
    "task_name",
    "story_edges",
    "edge_types",
    "query_edge",
    "genders",
    "task_split",
)
REQUIRED_COLUMNS: Tuple[str, ...] = (
    "story_edges",
    "edge_types",
    "query_edge",
    "genders",
    "target",
    "task_name",
)


class ClutrrFormatError(ValueError):
  """A CLUTRR row that cannot be read; the message names file and row."""


def relation_id(name: str) -> int:
  """Class id of a gendered relation name (`'neice'` accepted)."""
  name = ALIASES.get(name, name)
  if name not in REL_ID:
    raise KeyError(name)
  return REL_ID[name]


# ---------------------------------------------------------------------------
# Loading.


@dataclasses.dataclass(frozen=True)
class ClutrrExample:
  """One CLUTRR story as a graph.

  Attributes:
    num_nodes: number of people in the story (nodes `0 .. num_nodes - 1`).
    edges: the stated facts `(a, b)`, in story order.
    edge_labels: relation id of each fact ("b is a's RELATIONS[id]").
    query: the queried pair `(a, b)`.
    target: relation id of the answer ("b is a's RELATIONS[target]").
    k: the number of facts of the task (`task_1.k`).
    genders: `'male'`/`'female'` per node.
  """

  num_nodes: int
  edges: Tuple[Tuple[int, int], ...]
  edge_labels: Tuple[int, ...]
  query: Tuple[int, int]
  target: int
  k: int
  genders: Tuple[str, ...]

  @property
  def target_text(self) -> str:
    return RELATIONS[self.target]

  @property
  def edge_types(self) -> Tuple[str, ...]:
    return tuple(RELATIONS[i] for i in self.edge_labels)


def _where(source: str, row_number: Optional[int]) -> str:
  return source if row_number is None else f"{source}, row {row_number}"


def _literal(value, field: str, where: str):
  if not isinstance(value, str):
    return value
  try:
    return ast.literal_eval(value)
  except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError) as e:
    raise ClutrrFormatError(
        f"{where}: column {field!r} is not a Python literal: {value[:80]!r}"
        f" ({e})"
    ) from None


def _is_int(x) -> bool:
  return isinstance(x, int) and not isinstance(x, bool)


def _pair(x, field: str, where: str) -> Tuple[int, int]:
  if not (
      isinstance(x, (tuple, list))
      and len(x) == 2
      and all(_is_int(v) for v in x)
  ):
    raise ClutrrFormatError(
        f"{where}: column {field!r}: expected a pair of ints, got {x!r}"
    )
  return int(x[0]), int(x[1])


_TASK_RE = re.compile(r"^task_(\d+)\.(\d+)$")


def parse_row(
    row: Mapping[str, object],
    *,
    source: str = "<rows>",
    row_number: Optional[int] = None,
) -> ClutrrExample:
  """One CSV row (a mapping column -> text) to a `ClutrrExample`.

  `source` and `row_number` (1-based, header not counted) only serve the
  error messages.  Raises `ClutrrFormatError` (a `ValueError`) for
  a malformed row, an unknown relation or `k < 2`.
  """
  where = _where(source, row_number)
  missing = [c for c in REQUIRED_COLUMNS if row.get(c) in (None, "")]
  if missing:
    raise ClutrrFormatError(
        f"{where}: missing or empty column(s) {', '.join(missing)}"
    )
  if None in row:  # csv.DictReader puts surplus fields under the key None
    raise ClutrrFormatError(f"{where}: more fields than header columns")

  task = str(row["task_name"]).strip()
  m = _TASK_RE.match(task)
  if not m:
    raise ClutrrFormatError(
        f"{where}: task_name {task!r} is not of the form 'task_T.K'"
    )
  task_id, k = int(m.group(1)), int(m.group(2))
  if k < 2:
    raise ClutrrFormatError(
        f"{where}: k = {k} (task_name {task!r}); CLUTRR needs k >= 2"
    )

  raw_edges = _literal(row["story_edges"], "story_edges", where)
  if not isinstance(raw_edges, (list, tuple)) or not raw_edges:
    raise ClutrrFormatError(
        f"{where}: column 'story_edges' must be a non-empty list of pairs"
    )
  edges = tuple(_pair(e, "story_edges", where) for e in raw_edges)
  types = _literal(row["edge_types"], "edge_types", where)
  if not isinstance(types, (list, tuple)) or not all(
      isinstance(t, str) for t in types
  ):
    raise ClutrrFormatError(
        f"{where}: column 'edge_types' must be a list of relation names"
    )
  if len(types) != len(edges):
    raise ClutrrFormatError(
        f"{where}: {len(edges)} story_edges but {len(types)} edge_types"
    )
  labels = []
  for t in types:
    try:
      labels.append(relation_id(t))
    except KeyError:
      raise ClutrrFormatError(
          f"{where}: unknown relation {t!r} in edge_types"
      ) from None
  if task_id == 1 and len(edges) != k:
    raise ClutrrFormatError(
        f"{where}: task_name {task!r} says k = {k} facts, story has"
        f" {len(edges)}"
    )
  query = _pair(
      _literal(row["query_edge"], "query_edge", where), "query_edge", where
  )

  genders = []
  for item in str(row["genders"]).split(","):
    name, sep, gender = item.strip().rpartition(":")
    if not sep or gender not in ("male", "female"):
      raise ClutrrFormatError(f"{where}: column 'genders': bad entry {item!r}")
    genders.append(gender)
  nodes = {v for e in edges for v in e} | set(query)
  if min(nodes) < 0 or max(nodes) >= len(genders):
    raise ClutrrFormatError(
        f"{where}: node ids {sorted(nodes)} do not fit the {len(genders)}"
        " genders"
    )

  target_raw = row["target"]
  target_text = row.get("target_text")
  if _is_int(target_raw) or (
      isinstance(target_raw, str) and target_raw.strip().isdigit()
  ):
    target = int(target_raw)
    if not 0 <= target < NUM_RELATIONS:
      raise ClutrrFormatError(
          f"{where}: target {target} is not a class index 0..20"
      )
    if (
        target_text not in (None, "")
        and ALIASES.get(target_text, target_text) != RELATIONS[target]
    ):
      raise ClutrrFormatError(
          f"{where}: target {target} is {RELATIONS[target]!r} but target_text"
          f" is {target_text!r}"
      )
  else:
    try:
      target = relation_id(str(target_raw).strip())
    except KeyError:
      raise ClutrrFormatError(
          f"{where}: unknown relation {target_raw!r} in target"
      ) from None

  seen: Dict[Tuple[int, int], int] = {}
  for e, lab in zip(edges, labels):
    if seen.setdefault(e, lab) != lab:
      raise ClutrrFormatError(
          f"{where}: edge {e} stated with two relations, {RELATIONS[seen[e]]}"
          f" and {RELATIONS[lab]}"
      )
  return ClutrrExample(
      num_nodes=len(genders),
      edges=edges,
      edge_labels=tuple(labels),
      query=query,
      target=target,
      k=k,
      genders=tuple(genders),
  )


def read_rows(path: PathLike) -> List[Dict[str, str]]:
  """The raw rows of a CLUTRR CSV file (column -> text), header checked."""
  path = os.fspath(path)
  with open(path, newline="", encoding="utf-8-sig") as f:
    reader = csv.DictReader(f)
    header = reader.fieldnames or []
    missing = [c for c in REQUIRED_COLUMNS if c not in header]
    if missing:
      raise ClutrrFormatError(
          f"{path}: header lacks column(s) {', '.join(missing)}"
      )
    try:
      return list(reader)
    except csv.Error as e:
      raise ClutrrFormatError(f"{path}, line {reader.line_num}: {e}") from None


def load_clutrr(path: PathLike) -> List[ClutrrExample]:
  """Load a CLUTRR CSV file (official 1.0 files or `write_csv` output)."""
  rows = read_rows(path)
  return [
      parse_row(r, source=os.fspath(path), row_number=i + 1)
      for i, r in enumerate(rows)
  ]


def examples_from_rows(
    rows: Sequence[Mapping[str, object]], source: str = "<rows>"
) -> List[ClutrrExample]:
  """`parse_row` over in-memory rows (e.g. `generate_rows` output)."""
  return [
      parse_row(r, source=source, row_number=i + 1) for i, r in enumerate(rows)
  ]


def to_arrays(
    examples: Sequence[ClutrrExample], num_nodes: Optional[int] = None
) -> Dict[str, np.ndarray]:
  """Pad a list of examples into arrays for a graph model.

  Returns a dict of
    `edge_labels`: int32 `[B, N, N]`, `edge_labels[b, i, j]` the
      relation id of the fact `(i, j)` ("j is i's ..."), `NO_EDGE`
      elsewhere (including padding);
    `query`: int32 `[B, 2]`;
    `targets`: int32 `[B]`;
    `node_mask`: bool `[B, N]`, True on real nodes;
    `k`: int32 `[B]`.
  `N` is `num_nodes` if given (it must fit every example), else the
  largest `num_nodes` in the batch.
  """
  if not examples:
    raise ValueError("to_arrays needs at least one example")
  largest = max(ex.num_nodes for ex in examples)
  n = largest if num_nodes is None else int(num_nodes)
  if n < largest:
    raise ValueError(
        f"num_nodes={n} is smaller than an example with {largest} nodes"
    )
  b = len(examples)
  labels = np.full((b, n, n), NO_EDGE, np.int32)
  mask = np.zeros((b, n), bool)
  for i, ex in enumerate(examples):
    for (s, t), lab in zip(ex.edges, ex.edge_labels):
      labels[i, s, t] = lab
    mask[i, : ex.num_nodes] = True
  return {
      "edge_labels": labels,
      "query": (
          np.asarray([ex.query for ex in examples], np.int32).reshape(b, 2)
      ),
      "targets": np.asarray([ex.target for ex in examples], np.int32),
      "node_mask": mask,
      "k": np.asarray([ex.k for ex in examples], np.int32),
  }


def story_signature(example: ClutrrExample) -> Tuple:
  """What a graph model sees: facts, their labels and the query (no names,
  no target).  Two examples with equal signatures are the same input."""
  return (example.edges, example.edge_labels, example.query)


def write_csv(rows: Sequence[Mapping[str, object]], path: PathLike) -> None:
  """Write rows in the CLUTRR 1.0 column layout (`COLUMNS`)."""
  with open(path, "w", newline="", encoding="utf-8") as f:
    writer = csv.writer(f)
    writer.writerow(COLUMNS)
    for i, row in enumerate(rows):
      writer.writerow([i] + [row.get(c, "") for c in COLUMNS[1:]])
