"""Logical forms as trees: the semantic-parsing sets of Shiv & Quirk's Table 1.

Shiv & Quirk 2019 ("Novel positional encodings to enable tree-based
transformers", NeurIPS, sec. 5.2, Table 1) train a sequence-to-tree
transformer on JOBS, GEO and ATIS in the preprocessed forms of Dong & Lapata
2016 ("Language to logical form with neural attention", ACL). The files
shipped in `official/semparse/` are those sets as the Unimer benchmark
redistributes them (`official/README.md`). Two surface syntaxes
(`FORMATS`):

  'sexpr'   s-expressions (GEO, ATIS lambda calculus):
            `( lambda $0 e ( and ( river:t $0 ) ( loc:t $0 s0 ) ) )`. A list
            is a node whose symbol is its first element (an atom) and whose
            children are the rest, so a list needs an atom head and at least
            one argument (`( f )` would read as the atom `f`: refused).
  'prolog'  Prolog call syntax (JOBS): `job ( ANS ) , \\+ language ( ANS ,
            languageid0 )`. A call `f ( a , b )` is the node f[a, b]; the
            operators, Prolog's precedence, loosest first, are `;`
            (disjunction), `,` (conjunction) and the prefix `\\+` (negation);
            an n-ary `;` or `,` is one node ';'[..] or ','[..], `\\+ x` is
            '\\+'[x], and a parenthesised group `( x )` is kept as the node
            '()'[x], so that the file's string comes back exactly.

`parse(text, fmt)` reads a logical form into a `Tree` (for2lam's, with the
fields of `relational_jax.layers.tree.Tree`); `to_string(tree, fmt)`
writes it back: the shipped files' strings come back exactly, every row
but ATIS train.tsv line 1106, whose `$0 ))` comes back as `$0 ) )`
(`tokenize`; tests/data/test_semparse.py). The tree decoder reads a tree as its
annotated linearisation (`tree_tokens`: 'symbol/arity' tokens in DFS or BFS,
Shiv & Quirk sec. 4; `relational_jax.layers.tree.tree_from_annotated`
rebuilds it).

Scoring, as the literature does (`exact_match`, `tree_match`):
  exact match  the token sequences are equal (Dong & Lapata's accuracy);
  tree match   the trees are equal with the children of the order-free
               operators (`ORDER_FREE`: `and` / `or` of GEO, `_and` / `_or`
               of ATIS, `,` / `;` of JOBS) compared as multisets: Dong &
               Lapata's `compute_tree_accuracy` (lang2logic,
               `seq2tree/*/utils/accuracy.lua`, `norm_tree`), which sorts
               those children. Theirs sorts top-down, each level by its
               children's unsorted strings; ours canonicalises bottom-up, so
               nested reorderings match too.
  Both compare s-expressions after renaming their variables in order of
  first appearance (`rename_variables`: a token `x` or one that starts with
  `$` is a variable, the i-th distinct one becomes `$i`), as Unimer's own
  evaluation does (JasperGuo/Unimer, `grammars/atis/atis_normalization.py`,
  `standardize_lambda_calculus_varnames`): ATIS's test file names its
  variables differently from its train and dev files (`$v0`, `$x`, `$f`,
  `$airline`, a bare `x`, against `$0`, `$1`). Prolog variables (`ANS`,
  `A`, `J`) are compared as written, as Dong & Lapata did.

Entity anonymisation (`read_lexicon`, `anonymize`, `deanonymize`): Dong &
Lapata's ATIS writes each entity mention as a typed marker (`ci0`, `ap0`)
in both the sentence and the form; the shipped ATIS writes entities out
(`denver:_ci`). `anonymize` rewrites a row as theirs through Zettlemoyer &
Collins's lexicon (`atis/lexicon.txt`, lines `phrase :- NP : value:type`,
an entity `value:type` written `value:_type` in the forms): each entity of
the form, in order of first appearance, whose lexicon phrase (the longest
that fits) occurs in the sentence, becomes `<type><i>` (i counts that type
from 0) in both; an entity without a phrase in the sentence stays written
out. The form's entities choose what is replaced, on test rows too, as in
Dong & Lapata's preprocessed files (the argument identification is given,
not predicted). `deanonymize` maps a row's markers back, so a prediction is
scored against the form as its file writes it.

Pure Python, like the rest of `relational_jax.data`.
"""

import dataclasses
import os
from typing import Callable, Dict, List, Tuple

import numpy as np

from relational_jax.data import tsv as tsv_lib
from relational_jax.data.for2lam import Tree, binarized_depth, linearize
from relational_jax.data.for2lam import to_tokens

__all__ = [
    "FORMATS",
    "ORDER_FREE",
    "Tree",
    "parse",
    "to_string",
    "tree_tokens",
    "rename_variables",
    "tokenize",
    "exact_match",
    "tree_match",
    "canonical",
    "is_variable",
    "load_logical_forms",
    "binarized_depth",
    "read_lexicon",
    "anonymize",
    "deanonymize",
    "split_holdout",
]

FORMATS = ("sexpr", "prolog")
# Operators whose children are compared order-free by the tree match.
ORDER_FREE: Dict[str, Tuple[str, ...]] = {
    "sexpr": ("and", "or", "_and", "_or"),
    "prolog": (",", ";"),
}
# Prolog's operators and group node.
CONJ, DISJ, NOT, GROUP = ",", ";", "\\+", "()"
_PROLOG_SPECIAL = ("(", ")", CONJ, DISJ, NOT)


def _check_format(fmt: str) -> None:
  if fmt not in FORMATS:
    raise ValueError(
        f"invalid logical-form format {fmt!r}; valid choices are "
        f"{list(FORMATS)}."
    )


def tokenize(text: str) -> List[str]:
  """The tokens of a logical form: split on spaces, with parentheses split
  off the atoms they touch (ATIS's train.tsv line 1106 ends `$0 ))`)."""
  return text.replace("(", " ( ").replace(")", " ) ").split()


class _Tokens:
  """A cursor over a logical form's tokens; `error` names the position."""

  def __init__(self, text: str):
    self.tokens = tokenize(text)
    self.pos = 0

  def peek(self):
    return self.tokens[self.pos] if self.pos < len(self.tokens) else None

  def next(self, expected: str = "a token"):
    token = self.peek()
    if token is None:
      raise self.error(f"it ends where {expected} was expected")
    self.pos += 1
    return token

  def error(self, message: str, at=None) -> ValueError:
    at = self.pos if at is None else at
    return ValueError(f"{message} (token {at + 1} of {len(self.tokens)})")


def _parse_sexpr(s: _Tokens) -> Tree:
  start = s.pos
  token = s.next()
  if token == ")":
    raise s.error("unbalanced ')'", start)
  if token != "(":
    return Tree(token)
  head = s.next("the list's head")
  if head in ("(", ")"):
    raise s.error(
        f"a list must start with an atom (its head), found {head!r}",
        s.pos - 1,
    )
  children = []
  while s.peek() != ")":
    if s.peek() is None:
      raise s.error(f"the '(' of token {start + 1} is never closed")
    children.append(_parse_sexpr(s))
  s.next()
  if not children:
    raise s.error(
        f"the list '( {head} )' has no argument (it would read as the atom "
        f"{head!r})",
        start,
    )
  return Tree(head, children)


def _parse_prolog_disj(s: _Tokens) -> Tree:
  items = [_parse_prolog_conj(s)]
  while s.peek() == DISJ:
    s.next()
    items.append(_parse_prolog_conj(s))
  return items[0] if len(items) == 1 else Tree(DISJ, items)


def _parse_prolog_conj(s: _Tokens) -> Tree:
  items = [_parse_prolog_unary(s)]
  while s.peek() == CONJ:
    s.next()
    items.append(_parse_prolog_unary(s))
  return items[0] if len(items) == 1 else Tree(CONJ, items)


def _parse_prolog_unary(s: _Tokens) -> Tree:
  if s.peek() == NOT:
    s.next()
    return Tree(NOT, [_parse_prolog_unary(s)])
  start = s.pos
  token = s.next("a term")
  if token == "(":
    inner = _parse_prolog_disj(s)
    if s.next(f"the ')' closing token {start + 1}") != ")":
      raise s.error(f"expected ')' to close token {start + 1}", s.pos - 1)
    return Tree(GROUP, [inner])
  if token in _PROLOG_SPECIAL:
    raise s.error(f"expected a term, found {token!r}", start)
  if s.peek() != "(":
    return Tree(token)
  s.next()
  args = [_parse_prolog_unary(s)]
  while s.peek() == CONJ:
    s.next()
    args.append(_parse_prolog_unary(s))
  if s.next(f"the ')' closing the arguments of {token!r}") != ")":
    raise s.error(
        f"expected ',' or ')' in the arguments of {token!r}", s.pos - 1
    )
  return Tree(token, args)


_PARSERS: Dict[str, Callable[[_Tokens], Tree]] = {
    "sexpr": _parse_sexpr,
    "prolog": _parse_prolog_disj,
}


def parse(text: str, fmt: str) -> Tree:
  """The tree of logical form `text` (tokens separated by spaces) in format
  `fmt` (module docstring).

  Raises:
    ValueError: one line saying what is wrong and at which token (an
      unbalanced parenthesis, a list without a head or an argument, tokens
      after the end, an empty form).
  """
  _check_format(fmt)
  s = _Tokens(text)
  if not s.tokens:
    raise ValueError("empty logical form")
  tree = _PARSERS[fmt](s)
  if s.pos != len(s.tokens):
    raise s.error(
        f"tokens after the end of the logical form, from {s.peek()!r}"
    )
  return tree


def _arity_error(symbol, arity, want) -> ValueError:
  return ValueError(
      f"Prolog node {symbol!r} has {arity} child(ren), it needs {want}"
  )


def _prolog_string(tree) -> str:
  symbol, kids = str(tree.symbol), tree.children
  if symbol in (CONJ, DISJ):
    if len(kids) < 2:
      raise _arity_error(symbol, len(kids), "2 or more")
    return f" {symbol} ".join(_prolog_string(c) for c in kids)
  if symbol in (NOT, GROUP):
    if len(kids) != 1:
      raise _arity_error(symbol, len(kids), "1")
    inner = _prolog_string(kids[0])
    return f"{NOT} {inner}" if symbol == NOT else f"( {inner} )"
  if not kids:
    return symbol
  return f"{symbol} ( {' , '.join(_prolog_string(c) for c in kids)} )"


def _sexpr_string(tree) -> str:
  if not tree.children:
    return str(tree.symbol)
  inner = " ".join(_sexpr_string(c) for c in tree.children)
  return f"( {tree.symbol} {inner} )"


def to_string(tree, fmt: str) -> str:
  """The logical form of `tree` in format `fmt`: `parse`'s inverse (any
  object with `symbol` and `children` fields, e.g. a decoded
  `layers.tree.Tree`).

  Raises:
    ValueError: a Prolog operator node with the wrong number of children
      (a decoded tree may have one).
  """
  _check_format(fmt)
  return _sexpr_string(tree) if fmt == "sexpr" else _prolog_string(tree)


# The annotated linearisation of a tree ('symbol/arity' tokens in DFS or BFS
# order, Shiv & Quirk sec. 4), space-separated: the tree decoder's target.
tree_tokens = to_tokens


def is_variable(token: str, fmt: str) -> bool:
  """A lambda-calculus variable (s-expressions): `x` or a token starting
  with `$` (Unimer's rule). Prolog forms have none renamed."""
  return fmt == "sexpr" and (token == "x" or token.startswith("$"))


def rename_variables(text: str, fmt: str = "sexpr") -> str:
  """`text` with its variables renamed `$0`, `$1`, ... in order of first
  appearance (`is_variable`; module docstring). Unimer's evaluation does
  this to every ATIS form it compares. It changes 384 of ATIS's 448 test
  forms, 1 of its 4,473 train forms and none of dev; 11 of GEO's 600 train
  and 7 of its 280 test forms, which name a variable before `$0`
  (tests/data/test_semparse.py)."""
  _check_format(fmt)
  names: Dict[str, str] = {}
  out = []
  for token in tokenize(text):
    if is_variable(token, fmt):
      token = names.setdefault(token, f"${len(names)}")
    out.append(token)
  return " ".join(out)


def canonical(tree, fmt: str):
  """A hashable form of `tree` in which the children of `ORDER_FREE[fmt]`
  operators are sorted (bottom-up): equal for trees that differ only in
  the order of those children."""

  def visit(node):
    kids = tuple(visit(c) for c in node.children)
    if str(node.symbol) in ORDER_FREE[fmt]:
      kids = tuple(sorted(kids, key=repr))
    return (str(node.symbol), kids)

  return visit(tree)


def exact_match(predicted: str, gold: str, fmt: str) -> bool:
  """Equal token sequences (`tokenize`), after `rename_variables`
  (s-expressions)."""
  return rename_variables(predicted, fmt) == rename_variables(gold, fmt)


def tree_match(predicted: str, gold: str, fmt: str) -> bool:
  """Equal trees with `ORDER_FREE` children compared order-free (Dong &
  Lapata's tree accuracy; module docstring), after `rename_variables`. A
  prediction that does not parse is wrong; the gold must parse."""
  gold_tree = parse(rename_variables(gold, fmt), fmt)
  try:
    pred_tree = parse(rename_variables(predicted, fmt), fmt)
  except ValueError:
    return False
  return canonical(pred_tree, fmt) == canonical(gold_tree, fmt)


@dataclasses.dataclass
class LogicalForms:
  """The rows of one file: sources, the file's logical forms and their
  trees, in file order."""

  path: str
  sources: List[str]
  targets: List[str]
  trees: List[Tree]


def load_logical_forms(path: str, fmt: str) -> LogicalForms:
  """A `source<TAB>logical form` file (`tsv.load_tsv`) with every logical
  form parsed in format `fmt`.

  Raises:
    tsv.DataFormatError: (a ValueError) one line naming the file, the line
      and what is wrong with its logical form.
  """
  _check_format(fmt)
  rows = tsv_lib.load_tsv(path)
  sources, targets, trees = [], [], []
  lines = _data_line_numbers(path)
  for (source, target), lineno in zip(rows, lines):
    try:
      trees.append(parse(target, fmt))
    except ValueError as e:
      raise tsv_lib.DataFormatError(
          os.fspath(path),
          lineno,
          f"malformed {fmt} logical form: {e}: {target[:80]!r}",
      ) from None
    sources.append(source)
    targets.append(target)
  return LogicalForms(os.fspath(path), sources, targets, trees)


def _data_line_numbers(path: str) -> List[int]:
  """1-based numbers of the non-empty lines (`load_tsv`'s rows)."""
  with open(path, encoding="utf-8") as f:
    return [i for i, line in enumerate(f, start=1) if line.strip()]


def read_lexicon(path: str) -> Dict[str, List[str]]:
  """{entity 'value:type': its phrases, longest first} of a lexicon of
  `phrase :- NP : value:type` lines (Zettlemoyer & Collins's ATIS lexicon;
  spacing as in the file is normalised).

  Raises:
    FileNotFoundError: naming the path.
    tsv.DataFormatError: one line naming the file, the line and its fault.
  """
  if not os.path.isfile(path):
    raise FileNotFoundError(f"entity lexicon not found: {path}")
  out: Dict[str, List[str]] = {}
  with open(path, encoding="utf-8") as f:
    for lineno, line in enumerate(f, start=1):
      if not line.strip():
        continue
      phrase, sep, rest = line.partition(":-")
      category, sep2, entity = rest.partition(":")
      entity = "".join(entity.split())
      phrase = " ".join(phrase.split())
      value, sep3, kind = entity.rpartition(":")
      if not (sep and sep2 and sep3 and phrase and value and kind):
        raise tsv_lib.DataFormatError(
            path,
            lineno,
            f"expected 'phrase :- NP : value:type', got {line.strip()[:80]!r}",
        )
      del category
      out.setdefault(entity, []).append(phrase)
  return {
      e: sorted(set(p), key=lambda x: (-len(x.split()), x))
      for e, p in out.items()
  }


def anonymize(
    sentence: str, form: str, lexicon: Dict[str, List[str]]
) -> Tuple[str, str, Dict[str, str]]:
  """(sentence, form, {marker: entity token}) with the form's entities
  replaced by typed markers where the lexicon finds them in the sentence
  (module docstring)."""
  words = sentence.split()
  taken = [False] * len(words)
  tokens = tokenize(form)
  markers: Dict[str, str] = {}  # entity token -> marker
  counts: Dict[str, int] = {}
  for token in tokens:
    value, sep, kind = token.rpartition(":_")
    if not sep or token in markers or token.startswith("_"):
      continue
    phrases = lexicon.get(f"{value}:{kind}")
    if not phrases:
      continue
    span = _find_phrase(words, taken, phrases)
    if span is None:
      continue
    marker = f"{kind}{counts.get(kind, 0)}"
    counts[kind] = counts.get(kind, 0) + 1
    markers[token] = marker
    start, end = span
    words[start:end] = [marker] + [None] * (end - start - 1)
    taken[start:end] = [True] * (end - start)
  return (
      " ".join(w for w in words if w is not None),
      " ".join(markers.get(t, t) for t in tokens),
      {m: t for t, m in markers.items()},
  )


def _find_phrase(words, taken, phrases):
  """(start, end) of the first phrase (in the given order) found as whole
  words of `words` not yet replaced."""
  for phrase in phrases:
    p = phrase.split()
    for start in range(len(words) - len(p) + 1):
      if words[start : start + len(p)] == p and not any(
          taken[start : start + len(p)]
      ):
        return start, start + len(p)
  return None


def deanonymize(form: str, entities: Dict[str, str]) -> str:
  """`form` with a row's markers ({marker: entity token}, `anonymize`)
  mapped back; other tokens as they are."""
  return " ".join(entities.get(t, t) for t in form.split())


def split_holdout(
    num: int, size: int, seed: int = 0
) -> Tuple[List[int], List[int]]:
  """(kept, held out): row indices of a deterministic draw of `size` of
  `num` rows (`numpy.random.default_rng(seed)`), each sorted."""
  if not 0 < size < num:
    raise ValueError(
        f"a hold-out of {size} rows needs 0 < size < {num} (the rows)."
    )
  held = set(np.random.default_rng(seed).choice(num, size, replace=False))
  kept = [i for i in range(num) if i not in held]
  return kept, sorted(int(i) for i in held)
