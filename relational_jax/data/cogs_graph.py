"""COGS as per-token graphs (the "sequence tagging" form of Ontanon et al.).

The Edge Transformer's COGS result (Bergen et al., 2021, Table 4) is on the
graph form of COGS introduced by Ontanon et al. (2021, "Making Transformers
Solve Compositional Tasks"): instead of decoding the logical form, the model
labels every input token and points it at its parent token.  This module
converts the original COGS logical forms (`sentence<TAB>lf<TAB>category`
files) into that form.  It is an independent implementation; its output is
identical, field by field, to the `{dev,test}_seqtag.jsonl` files that the
Edge Transformer authors distribute (checked in `tests/data`).

One graph (a dict, the keys and values of one `*_seqtag.jsonl` line):

`tokens`
    the sentence split on single spaces.
`parent`
    per token, the index of its parent token, or `-1` for none.
`role`
    per token, the label of the edge to its parent: a thematic role of the
    parent verb (`agent`, `theme`, `recipient`, `ccomp`, `xcomp`),
    `PREP` (a preposition, child of the noun it modifies) or `PP_NOUN`
    (the noun of a prepositional phrase, child of its preposition); `''`
    when the token has no parent.
`category`
    `VERB` (a verb with at least one argument, or a primitive verb),
    `CNOUN` (common noun), `PNOUN` (proper name) or `''`.
`noun_type`
    `DEF` (`* noun ( x _ i )`, "the"), `INDEF` (`noun ( x _ i )`,
    "a") or `''` (also for proper names).
`verb_name`
    for verbs, the lemma used in the logical form (`hoped` -> `hope`);
    `''` otherwise.
`distribution`
    the third column of the TSV row (`in_distribution`, `primitive` or a
    generalisation category); present when known.

How a logical form maps to the graph:

* `noun ( x _ i )` / `* noun ( x _ i )`: token `i` is `CNOUN`,
  `INDEF` / `DEF`.
* `verb . role ( x _ v , a )`: the argument `a` (a variable `x _ j` or
  a proper name, located in the sentence) gets parent `v` and role
  `role`; token `v` is a `VERB` named `verb`.
* `noun . nmod . prep ( x _ i , x _ j )`: the token `prep` between `i`
  and `j` gets parent `i` and role `PREP`; token `j` gets parent
  (the preposition) and role `PP_NOUN`.
* Control (`xcomp`): the clause `w . agent ( x _ w , a )` repeating the
  controlling verb's agent `a` for the infinitive `w` is implied by
  `v . agent ( x _ v , a )` and `v . xcomp ( x _ v , x _ w )` and is
  not stored (`a` keeps one parent, `v`); the infinitive keeps its
  `verb_name` (its category stays `''` unless it has another argument,
  as in the reference files).
* Capitalised words that are arguments are `PNOUN`.
* Primitive rows (one word, a lambda term or a bare name): the word is
  `PNOUN` (no `LAMBDA`), `CNOUN` (one `LAMBDA`) or `VERB` (more,
  with `verb_name` the word); no parents.

Every non-primitive graph is a tree over its content words rooted at the
main verb: exactly one `VERB` token has no parent, every other token with
a role hangs (acyclically) below it, and tokens without a role have no
parent (see `check_graph`).  `graph_to_logical_form` inverts the
conversion exactly (the COGS logical forms are in a canonical clause order).

Pure Python + NumPy.
"""

from __future__ import annotations

import dataclasses
import json
import os
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np

from relational_jax.data.vocab import Vocab

__all__ = [
    "FIELDS",
    "LABEL_FIELDS",
    "CogsFormatError",
    "logical_form_to_graph",
    "graph_to_logical_form",
    "check_graph",
    "convert_file",
    "load_with_categories",
    "LabelVocab",
    "GraphVocabs",
    "build_graph_vocabs",
    "graphs_to_arrays",
    "canonical_jsonl",
]

PathLike = Union[str, "os.PathLike[str]"]

#: Per-token fields of a graph, in the order of the seqtag files.
FIELDS: Tuple[str, ...] = (
    "tokens",
    "parent",
    "role",
    "category",
    "noun_type",
    "verb_name",
)
#: The per-token string label fields (each gets a `LabelVocab`).
LABEL_FIELDS: Tuple[str, ...] = ("role", "category", "noun_type", "verb_name")

NO_LABEL = ""
NO_PARENT = -1
PRIMITIVE = "primitive"

_KEYWORDS = frozenset({"(", ")", ",", ";", "AND", "*", ".", "_", "x", "LAMBDA"})


class CogsFormatError(ValueError):
  """A malformed COGS line or logical form (the message says where)."""


# -- logical form parsing ------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class _Clause:
  predicate: Tuple[
      str, ...
  ]  # e.g. ('hope', 'agent'), ('cake', 'nmod', 'in'), ('box',)
  args: Tuple[Union[int, str], ...]  # int: variable x _ i; str: proper name
  definite: bool


def _parse_logical_form(lf: str) -> Tuple[List[_Clause], int]:
  """Parses `[* n ( x _ i ) ;]* clause [AND clause]*`.

  Returns the clauses and how many leading ones are the `;`-separated
  definite nouns.
  """
  toks = lf.split()
  n = len(toks)
  pos = 0
  clauses: List[_Clause] = []
  n_definite = 0
  in_body = False  # after the last ';'

  def fail(msg: str) -> "CogsFormatError":
    return CogsFormatError(
        f"cannot parse logical form at token {pos} ({msg}): {lf!r}"
    )

  def expect(tok: str) -> None:
    nonlocal pos
    if pos >= n or toks[pos] != tok:
      raise fail(f"expected {tok!r}, found {toks[pos] if pos < n else 'end'!r}")
    pos += 1

  def name() -> str:
    nonlocal pos
    if pos >= n or toks[pos] in _KEYWORDS:
      raise fail(f"expected a name, found {toks[pos] if pos < n else 'end'!r}")
    pos += 1
    return toks[pos - 1]

  def arg() -> Union[int, str]:
    nonlocal pos
    if pos < n and toks[pos] == "x":
      expect("x")
      expect("_")
      if pos >= n or not toks[pos].isdigit():
        raise fail("expected a variable index")
      pos += 1
      return int(toks[pos - 1])
    return name()

  if n == 0:
    raise fail("empty")
  while True:
    definite = pos < n and toks[pos] == "*"
    if definite:
      pos += 1
    predicate = [name()]
    while pos < n and toks[pos] == ".":
      pos += 1
      predicate.append(name())
    expect("(")
    args = [arg()]
    while pos < n and toks[pos] == ",":
      pos += 1
      args.append(arg())
    expect(")")
    if len(args) > 2:
      raise fail("more than two arguments")
    clauses.append(_Clause(tuple(predicate), tuple(args), definite))
    if pos == n:
      break
    sep = toks[pos]
    pos += 1
    if sep == ";":
      if in_body or not definite:
        raise fail("';' may only follow definite noun clauses")
      n_definite = len(clauses)
    elif sep == "AND":
      in_body = True
      if definite:
        raise fail("a definite noun clause must be followed by ';'")
    else:
      raise fail(f"expected 'AND' or ';', found {sep!r}")
  if clauses[-1].definite:
    raise fail("logical form ends with a definite noun clause")
  for i, c in enumerate(clauses):
    if c.definite != (i < n_definite):
      raise fail("misplaced '*'")
  return clauses, n_definite


# -- conversion ----------------------------------------------------------------


def _empty_graph(
    tokens: List[str], distribution: Optional[str]
) -> Dict[str, Any]:
  m = len(tokens)
  g: Dict[str, Any] = {
      "tokens": tokens,
      "parent": [NO_PARENT] * m,
      "role": [NO_LABEL] * m,
      "category": [NO_LABEL] * m,
      "noun_type": [NO_LABEL] * m,
      "verb_name": [NO_LABEL] * m,
  }
  if distribution is not None:
    g["distribution"] = distribution
  return g


def _is_primitive(tokens: List[str], lf: str) -> bool:
  return len(tokens) == 1 and (lf.startswith("LAMBDA ") or lf == tokens[0])


def _primitive_graph(
    tokens: List[str], lf: str, distribution: Optional[str]
) -> Dict[str, Any]:
  g = _empty_graph(tokens, distribution)
  n_lambda = lf.split().count("LAMBDA")
  if n_lambda == 0:
    g["category"][0] = "PNOUN"
  elif n_lambda == 1:
    g["category"][0] = "CNOUN"
  else:
    g["category"][0] = "VERB"
    g["verb_name"][0] = tokens[0]
  return g


def logical_form_to_graph(
    sentence: str, lf: str, distribution: Optional[str] = None
) -> Dict[str, Any]:
  """Converts one COGS (sentence, logical form) pair to its graph.

  Args:
    sentence: the input sentence (tokens separated by single spaces).
    lf: its logical form in the original COGS notation.
    distribution: the row's third column; stored as `'distribution'`
      when given (the seqtag files have it).

  Returns:
    A dict with the keys of `FIELDS` (one list entry per token) and
    `'distribution'` when given; see the module docstring.

  Raises:
    CogsFormatError: if the logical form does not parse or does not fit the
      sentence (an index out of range, a word not found, a token given two
      parents, ...).
  """
  sentence = sentence.strip()
  lf = lf.strip()
  tokens = sentence.split(" ")
  if not sentence or any(not t for t in tokens):
    raise CogsFormatError(
        "empty sentence or token (tokens must be separated by single spaces):"
        f" {sentence!r}"
    )
  if _is_primitive(tokens, lf):
    return _primitive_graph(tokens, lf, distribution)

  clauses, _ = _parse_logical_form(lf)
  g = _empty_graph(tokens, distribution)
  parent, role, category = g["parent"], g["role"], g["category"]
  noun_type, verb_name = g["noun_type"], g["verb_name"]
  m = len(tokens)

  def bad(msg: str) -> CogsFormatError:
    return CogsFormatError(
        f"logical form does not fit the sentence ({msg}): {sentence!r} / {lf!r}"
    )

  def index(a: Union[int, str]) -> int:
    if isinstance(a, int):
      if not 0 <= a < m:
        raise bad(f"x _ {a} is out of range")
      return a
    where = [i for i, t in enumerate(tokens) if t == a]
    if len(where) != 1:
      raise bad(f"name {a!r} occurs {len(where)} times in the sentence")
    return where[0]

  def attach(child: int, label: str, head: int) -> None:
    if parent[child] != NO_PARENT or role[child] != NO_LABEL:
      raise bad(f"token {child} ({tokens[child]!r}) has two parents")
    if child == head:
      raise bad(f"token {child} would be its own parent")
    parent[child] = head
    role[child] = label

  def name_verb(v: int, verb: str) -> None:
    if verb_name[v] not in (NO_LABEL, verb):
      raise bad(f"token {v} is both {verb_name[v]!r} and {verb!r}")
    verb_name[v] = verb

  # Control: drop the infinitive's agent clause implied by the xcomp.
  agents = {
      c.args[0]: c.args[1]
      for c in clauses
      if len(c.predicate) == 2
      and c.predicate[1] == "agent"
      and len(c.args) == 2
  }
  dropped = set()
  for c in clauses:
    if len(c.predicate) == 2 and c.predicate[1] == "xcomp":
      if len(c.args) != 2 or not all(isinstance(a, int) for a in c.args):
        raise bad("xcomp needs two variables")
      v, w = c.args
      if v not in agents:
        raise bad(f"xcomp of x _ {v} without an agent")
      implied = [
          k
          for k, d in enumerate(clauses)
          if len(d.predicate) == 2
          and d.predicate[1] == "agent"
          and d.args == (w, agents[v])
      ]
      if len(implied) != 1:
        raise bad(f"no unique implied agent clause for the infinitive x _ {w}")
      dropped.add(implied[0])
      name_verb(index(w), clauses[implied[0]].predicate[0])

  for k, c in enumerate(clauses):
    if k in dropped:
      continue
    pred, args = c.predicate, c.args
    if len(pred) == 1:  # noun ( x _ i )
      if len(args) != 1 or not isinstance(args[0], int):
        raise bad(f"noun clause {' . '.join(pred)} needs one variable")
      i = index(args[0])
      if pred[0] not in (tokens[i], tokens[i].lower()):
        raise bad(f"noun {pred[0]!r} is not token {i} ({tokens[i]!r})")
      if noun_type[i] != NO_LABEL:
        raise bad(f"token {i} has two noun clauses")
      category[i] = "CNOUN"
      noun_type[i] = "DEF" if c.definite else "INDEF"
    elif (
        len(pred) == 3 and pred[1] == "nmod"
    ):  # noun . nmod . prep ( x _ i , x _ j )
      if len(args) != 2 or not all(isinstance(a, int) for a in args):
        raise bad("nmod clause needs two variables")
      i, j = index(args[0]), index(args[1])
      if pred[0] not in (tokens[i], tokens[i].lower()):
        raise bad(f"noun {pred[0]!r} is not token {i} ({tokens[i]!r})")
      preps = [p for p in range(i + 1, j) if tokens[p] == pred[2]]
      if len(preps) != 1:
        raise bad(f"no unique {pred[2]!r} between tokens {i} and {j}")
      attach(j, "PP_NOUN", preps[0])
      attach(preps[0], "PREP", i)
    elif len(pred) == 2:  # verb . role ( x _ v , arg )
      if len(args) != 2 or not isinstance(args[0], int):
        raise bad(
            f"verb clause {' . '.join(pred)} needs a variable and an argument"
        )
      v, a = index(args[0]), index(args[1])
      attach(a, pred[1], v)
      name_verb(v, pred[0])
      category[v] = "VERB"
      if isinstance(args[1], str):
        category[a] = "PNOUN"
    else:
      raise bad(f"unknown predicate {' . '.join(pred)!r}")
  return g


def graph_to_logical_form(graph: Mapping[str, Sequence[Any]]) -> str:
  """Rebuilds the COGS logical form of a (non-primitive) graph.

  Inverse of `logical_form_to_graph` on COGS data: the definite noun
  clauses come first, in token order, separated by `' ; '`; the other
  clauses follow joined by `' AND '`, sorted by their (first, second)
  argument position; the infinitive's agent clause is restored after each
  `xcomp`.
  """
  tokens, parent, role = graph["tokens"], graph["parent"], graph["role"]
  noun_type, verb_name, category = (
      graph["noun_type"],
      graph["verb_name"],
      graph["category"],
  )

  def noun(i: int) -> str:
    return tokens[i].lower() if tokens[i] == "TV" else tokens[i]

  def arg(i: int) -> str:
    return tokens[i] if category[i] == "PNOUN" else f"x _ {i}"

  definite = [
      f"* {noun(i)} ( x _ {i} )" for i, t in enumerate(noun_type) if t == "DEF"
  ]
  body: List[Tuple[Tuple[int, int], str]] = []
  for i, t in enumerate(noun_type):
    if t == "INDEF":
      body.append(((i, -1), f"{noun(i)} ( x _ {i} )"))
  for i, r in enumerate(role):
    if r in (NO_LABEL, "PREP"):
      continue
    if r == "PP_NOUN":
      p = parent[i]
      h = parent[p]
      body.append(
          ((h, i), f"{noun(h)} . nmod . {tokens[p]} ( x _ {h} , x _ {i} )")
      )
      continue
    v = parent[i]
    body.append(((v, i), f"{verb_name[v]} . {r} ( x _ {v} , {arg(i)} )"))
    if r == "xcomp":
      agents = [
          j for j in range(len(tokens)) if role[j] == "agent" and parent[j] == v
      ]
      if len(agents) != 1:
        raise ValueError(
            f"xcomp at token {i} without a unique controlling agent"
        )
      body.append((
          (i, agents[0]),
          f"{verb_name[i]} . agent ( x _ {i} , {arg(agents[0])} )",
      ))
  body.sort(key=lambda kv: kv[0])
  return " ; ".join(definite + [" AND ".join(s for _, s in body)])


def check_graph(graph: Mapping[str, Sequence[Any]]) -> None:
  """Checks the invariants of a graph; raises ValueError if one fails.

  * every field has one entry per token; parents are `-1` or in range;
  * a token has a parent iff it has a role;
  * primitive (one-token, no-role) graphs aside: exactly one root, a
    `VERB` token without parent, and every token with a role reaches it
    by following parents (no cycles); every `VERB` has a `verb_name`
    and every `CNOUN`/`PNOUN` hangs below the root.
  """
  tokens = graph["tokens"]
  m = len(tokens)
  for f in FIELDS:
    if len(graph[f]) != m:
      raise ValueError(
          f"field {f!r} has {len(graph[f])} entries for {m} tokens"
      )
  parent, role, category = graph["parent"], graph["role"], graph["category"]
  for i in range(m):
    if not (parent[i] == NO_PARENT or 0 <= parent[i] < m):
      raise ValueError(f"token {i}: parent {parent[i]} out of range")
    if (parent[i] == NO_PARENT) != (role[i] == NO_LABEL):
      raise ValueError(f"token {i}: parent {parent[i]} but role {role[i]!r}")
    if category[i] == "VERB" and not graph["verb_name"][i]:
      raise ValueError(f"token {i}: VERB without verb_name")
  if m == 1 and role[0] == NO_LABEL:
    return  # a primitive
  roots = [
      i for i in range(m) if category[i] == "VERB" and parent[i] == NO_PARENT
  ]
  if len(roots) != 1:
    raise ValueError(f"expected exactly one root verb, found {roots}")
  for i in range(m):
    if role[i] == NO_LABEL and category[i] not in ("CNOUN", "PNOUN"):
      continue
    seen = set()
    j = i
    while parent[j] != NO_PARENT:
      if j in seen:
        raise ValueError(f"token {i}: cycle in parents")
      seen.add(j)
      j = parent[j]
    if j != roots[0]:
      raise ValueError(f"token {i} does not hang below the root {roots[0]}")


# -- files -----------------------------------------------------------------------


def _read_rows(path: PathLike) -> List[Tuple[int, str, str, Optional[str]]]:
  path = os.fspath(path)
  if not os.path.isfile(path):
    raise FileNotFoundError(f"COGS file not found: {path}")
  rows = []
  with open(path, encoding="utf-8") as f:
    for lineno, line in enumerate(f, start=1):
      line = line.rstrip("\r\n")
      if not line.strip():
        continue
      fields = line.split("\t")
      if len(fields) not in (2, 3):
        raise CogsFormatError(
            f"{path}:{lineno}: expected 2 or 3 tab-separated columns (sentence,"
            f" logical form[, category]), found {len(fields)}: {line[:80]!r}"
        )
      fields = [x.strip() for x in fields]
      rows.append((
          lineno,
          fields[0],
          fields[1],
          fields[2] if len(fields) == 3 else None,
      ))
  return rows


def load_with_categories(
    path: PathLike,
) -> Tuple[List[Tuple[str, str]], List[Optional[str]]]:
  """Reads a COGS TSV file.

  Returns:
    `(pairs, categories)`: the (sentence, logical form) pairs in file
    order and, per row, its third column (`in_distribution`,
    `primitive` or a generalisation category such as `pp_recursion`;
    `None` for 2-column lines).

  Raises:
    FileNotFoundError: no such file.
    CogsFormatError: a line without 2 or 3 tab-separated columns (the
      message gives file and line).
  """
  rows = _read_rows(path)
  return [(s, lf) for _, s, lf, _ in rows], [c for _, _, _, c in rows]


def convert_file(path: PathLike) -> List[Dict[str, Any]]:
  """Converts a COGS TSV file to graphs, one per row, in file order.

  Each graph carries its row's category as `'distribution'` (when the
  file has a third column), so the result matches the seqtag files.

  Raises:
    FileNotFoundError: no such file.
    CogsFormatError: a malformed line or logical form; the message starts
      with `path:line:`.
  """
  out = []
  for lineno, sentence, lf, dist in _read_rows(path):
    try:
      out.append(logical_form_to_graph(sentence, lf, dist))
    except CogsFormatError as e:
      raise CogsFormatError(f"{os.fspath(path)}:{lineno}: {e}") from None
  return out


def canonical_jsonl(graphs: Iterable[Mapping[str, Any]]) -> str:
  """One sorted-key JSON object per line (`'\\n'`-joined, no trailing newline).

  Used to compare conversions with reference seqtag files by hash.
  """
  return "\n".join(json.dumps(dict(g), sort_keys=True) for g in graphs)


# -- vocabularies and arrays -------------------------------------------------------


class LabelVocab:
  """Labels <-> ids for one per-token field: `<pad>` = 0, `<unk>` = 1.

  The labels (`''` included: "no role", "no category") follow in sorted
  order, so the ids depend only on the label set.
  """

  PAD, UNK = "<pad>", "<unk>"
  pad_id, unk_id = 0, 1

  def __init__(self, labels: Iterable[str] = ()):
    regular = sorted(set(labels) - {self.PAD, self.UNK})
    self.labels: List[str] = [self.PAD, self.UNK] + regular
    self._stoi = {t: i for i, t in enumerate(self.labels)}

  def __len__(self) -> int:
    return len(self.labels)

  def __eq__(self, other: object) -> bool:
    return isinstance(other, LabelVocab) and self.labels == other.labels

  def __repr__(self) -> str:
    return f"LabelVocab(size={len(self)})"

  def __contains__(self, label: object) -> bool:
    return label in self._stoi

  def to_id(self, label: str) -> int:
    return self._stoi.get(label, self.unk_id)

  def to_label(self, idx: int) -> str:
    return self.labels[int(idx)]


@dataclasses.dataclass
class GraphVocabs:
  """Vocabularies of a graph data set: input tokens and the label fields."""

  tokens: Vocab
  role: LabelVocab
  category: LabelVocab
  noun_type: LabelVocab
  verb_name: LabelVocab

  def to_json(self) -> str:
    d = {"tokens": self.tokens.tokens}
    d.update({f: getattr(self, f).labels for f in LABEL_FIELDS})
    return json.dumps(d)

  @classmethod
  def from_json(cls, text: str) -> "GraphVocabs":
    d = json.loads(text)
    return cls(
        tokens=Vocab(d["tokens"]), **{f: LabelVocab(d[f]) for f in LABEL_FIELDS}
    )


def build_graph_vocabs(
    graphs: Iterable[Mapping[str, Sequence[Any]]],
) -> GraphVocabs:
  """Builds the vocabularies from (training) graphs."""
  seen: Dict[str, set] = {f: set() for f in ("tokens",) + LABEL_FIELDS}
  for g in graphs:
    for f, s in seen.items():
      s.update(g[f])
  return GraphVocabs(
      tokens=Vocab(seen["tokens"]),
      **{f: LabelVocab(seen[f]) for f in LABEL_FIELDS},
  )


def graphs_to_arrays(
    graphs: Sequence[Mapping[str, Sequence[Any]]],
    vocabs: GraphVocabs,
    length: Optional[int] = None,
) -> Dict[str, np.ndarray]:
  """Encodes graphs as right-padded NumPy arrays for a graph model.

  Args:
    graphs: graphs from `logical_form_to_graph` / `convert_file`.
    vocabs: from `build_graph_vocabs` (unknown words/labels -> UNK).
    length: padded length (default: the longest sentence).

  Returns:
    A dict of `[batch, length]` arrays (`[batch]` for `lengths`):

    * `tokens` (int32): token ids, PAD (0) beyond the sentence;
    * `parent` (int32): parent position, `-1` for none and for padding;
    * `parent_or_self` (int32): the parent position, or the token's own
      position when it has none (the pointer target of Ontanon et al. /
      Bergen et al.); 0 for padding;
    * `role`, `category`, `noun_type`, `verb_name` (int32): label
      ids (PAD = 0 for padding);
    * `mask` (bool): true on real tokens;
    * `has_parent` (bool): true where `parent >= 0`;
    * `lengths` (int32): sentence lengths.

  Raises:
    ValueError: if a sentence is longer than `length`.
  """
  n = len(graphs)
  lengths = np.asarray([len(g["tokens"]) for g in graphs], dtype=np.int32)
  longest = int(lengths.max()) if n else 0
  if length is None:
    length = longest
  elif longest > length:
    raise ValueError(
        f"graph {int(np.argmax(lengths))} has {longest} tokens, longer than"
        f" length={length}"
    )
  out = {f: np.zeros((n, length), np.int32) for f in ("tokens",) + LABEL_FIELDS}
  out["parent"] = np.full((n, length), NO_PARENT, np.int32)
  out["parent_or_self"] = np.zeros((n, length), np.int32)
  tok_stoi = vocabs.tokens.token_to_id
  for b, g in enumerate(graphs):
    m = lengths[b]
    out["tokens"][b, :m] = [tok_stoi(t) for t in g["tokens"]]
    for f in LABEL_FIELDS:
      to_id = getattr(vocabs, f).to_id
      out[f][b, :m] = [to_id(x) for x in g[f]]
    par = np.asarray(g["parent"], np.int32)
    out["parent"][b, :m] = par
    out["parent_or_self"][b, :m] = np.where(
        par >= 0, par, np.arange(m, dtype=np.int32)
    )
  pos = np.arange(length)[None, :]
  out["mask"] = pos < lengths[:, None]
  out["has_parent"] = out["parent"] >= 0
  out["lengths"] = lengths
  return out
