"""For2Lam: a synthetic imperative-to-functional program translation task.

The task of Chen, Liu & Song 2018 ("Tree-to-tree neural networks for program
translation", sec. 5.1), used by Shiv & Quirk 2019 (sec. 5.1.1, Fig. 5) for
their tree-transformer: translate a program of the imperative FOR language
into the functional LAMBDA language. Shiv & Quirk give only the set sizes
(100,000 training and 10,000 test programs per task, a short-program and a
long-program task) and defer everything else to Chen et al.; so the
grammars, the compiler and the lengths below are OUR choices, written from
their description, not copied from Chen et al.'s data.

FOR (program trees; a node's children in brackets):
  block[s_1 .. s_m]              statements in sequence (m >= 0; n-ary)
  =[v, e]                        assignment v := e
  if[c, block, block]            if c then .. else ..
  for[v, e_lo, e_hi, block]      C-style loop: v := e_lo; while v < e_hi:
                                 body; v := v + 1 (the bound is re-read at
                                 every test, as in `for (v = lo; v < hi; v++)`)
  e ::= v | n | +[e, e] | -[e, e]          n in 0..9 (CONSTANTS)
  c ::= <[e, e] | >[e, e] | ==[e, e]
  v in VARIABLES (a..e). Loop bounds are constants and a loop's body never
  assigns its loop variable, so every program terminates.

LAMBDA:
  let[v, e, P]                   bind v to e in P
  if[c, P, P]
  letrec[f, v, P, Q]             define the unary recursive function f(v) = P,
                                 then run Q
  app[f, e]                      apply f to e
  unit                           the end of the program
  e, c as in FOR; f in f0, f1, .. (numbered in order of creation); `_` is
  the parameter of a continuation function.
  Semantics (written in the tests' interpreter): DYNAMIC scope: a function
  body runs in the caller's environment extended with its parameter, so a
  `let` that precedes an `app` is visible in the called function (what makes
  `let` a state update). The program's result is the environment at `unit`.

The compiler (`compile_program`, rule-based, continuation passing):
  [[ =[v, e]; rest ]]k        = let[v, e, [[rest]]k]
  [[ for[v, lo, hi, B]; rest ]]k
                              = letrec[f, v, if[<[v, hi], [[B]]app[f, +[v, 1]],
                                                 [[rest]]k],
                                       app[f, lo]]
      a loop is a recursive function applied to its start value; the code
      after the loop is its exit branch;
  [[ if[c, B1, B2]; rest ]]k  = if[c, [[B1]]k, [[B2]]k]          (rest empty)
                              = letrec[g, _, [[rest]]k,
                                       if[c, [[B1]]app[g, 0], [[B2]]app[g, 0]]]
      (rest non-empty: the continuation is named once, not duplicated);
  [[ (empty) ]]k              = k;   the program is [[P]]unit.

Lengths (our choice; Chen et al.'s short/long sets are described only as
short and long programs in Shiv & Quirk): the length of a program is the
number of nodes of its FOR tree (= tokens of its annotated linearisation):
short 10..20, long 60..80 (`LENGTHS`). Both trees must fit the tree
positional encoding's depth after left-child-right-sibling binarisation
(`max_depth`, default k = 32, Shiv & Quirk sec. 5); deeper programs are
redrawn. Statement nesting is at most `MAX_NESTING` levels.

Tokens (`TOKENS`), every token written `symbol/arity` (`tree.annotate`,
Shiv & Quirk sec. 4):
  'lcrs_null'  the authors' sequences (microsoft/icecaps: util/trees.py
               `left_child_right_sibling`, then data_io/
               abstract_data_processor.py `write_to_tfrecord`, streamline
               on): the nodes of the left-child-right-sibling binary tree in
               its own DFS or BFS order, each annotated with its number of
               binary children (1: a right child, the next sibling, only),
               and an explicit `_NULL/0` leaf where a node has a left child
               (first child) but no right one (no next sibling; the root
               too); `relational_jax.layers.tree.linearize_lcrs_null`;
  'arity'      the general tree's nodes in its DFS or BFS order, each
               annotated with its number of children (our option; rebuilt by
               `relational_jax.layers.tree.tree_from_annotated`).
DFS visits the real nodes in the same order under both; BFS does not (the
binary tree's levels are not the general tree's). Pure Python + NumPy, like
the rest of the data package (no layer imports). The source is always DFS
(the encoder's tree positions follow the DFS order of the binarised tree);
the target is DFS or BFS (the decoder's traversal).

Sets: `generate_sets(size, num_train, num_test, seed)` draws distinct
programs (by FOR linearisation) with `numpy.random.default_rng(seed)`, so
train and test are disjoint and the sets depend only on the arguments.
"""

import collections
import dataclasses
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

VARIABLES = ("a", "b", "c", "d", "e")
CONSTANTS = tuple(str(n) for n in range(10))
COMPARISONS = ("<", ">", "==")
OPERATORS = ("+", "-")
SIZES = ("short", "long")
LENGTHS = {"short": (10, 20), "long": (60, 80)}
ORDERS = ("dfs", "bfs")
TOKENS = ("lcrs_null", "arity")
NULL = "_NULL"
MAX_NESTING = 3
CONTINUATION_PARAM = "_"
UNIT = "unit"


# ---------------------------------------------------------------------------
# Program trees (pure Python, like the rest of relational_jax.data; the same
# fields as relational_jax.layers.tree.Tree, whose functions accept them).


@dataclasses.dataclass
class Tree:
  """An ordered program tree node."""

  symbol: str
  children: List["Tree"] = dataclasses.field(default_factory=list)


def _check_choice(value, choices, what):
  if value not in choices:
    raise ValueError(
        f"invalid {what} {value!r}; valid choices are {list(choices)}."
    )


def linearize(tree, order: str = "dfs") -> List[Tuple[str, int]]:
  """(symbol, number of children) of every node in DFS (pre-order) or BFS
  (level) order, as `relational_jax.layers.tree.linearize`."""
  _check_choice(order, ORDERS, "tree order")
  frontier = collections.deque([tree])
  out = []
  while frontier:
    node = frontier.popleft() if order == "bfs" else frontier.pop()
    out.append((node.symbol, len(node.children)))
    frontier.extend(
        node.children if order == "bfs" else reversed(node.children)
    )
  return out


# ---------------------------------------------------------------------------
# The FOR generator.


class _Generator:
  """Random FOR programs from the grammar (module docstring)."""

  def __init__(self, rng: np.random.Generator):
    self.rng = rng

  def _choice(self, options):
    return options[int(self.rng.integers(len(options)))]

  def expr(self, depth: int = 0) -> Tree:
    r = self.rng.random()
    if depth >= 2 or r < 0.6:
      if self.rng.random() < 0.6:
        return Tree(self._choice(VARIABLES))
      return Tree(self._choice(CONSTANTS))
    return Tree(
        self._choice(OPERATORS), [self.expr(depth + 1), self.expr(depth + 1)]
    )

  def cond(self) -> Tree:
    return Tree(self._choice(COMPARISONS), [self.expr(1), self.expr(1)])

  def statement(self, nesting: int, loop_vars: Tuple[str, ...]) -> Tree:
    free = [v for v in VARIABLES if v not in loop_vars]
    r = self.rng.random()
    if nesting >= MAX_NESTING or r < 0.5:
      return Tree("=", [Tree(self._choice(free)), self.expr()])
    if r < 0.75:
      return Tree(
          "if",
          [
              self.cond(),
              self.block(nesting + 1, loop_vars),
              self.block(nesting + 1, loop_vars, allow_empty=True),
          ],
      )
    var = self._choice(free)
    lo = int(self.rng.integers(0, 5))
    hi = int(self.rng.integers(lo, 10))
    return Tree(
        "for",
        [
            Tree(var),
            Tree(str(lo)),
            Tree(str(hi)),
            self.block(nesting + 1, loop_vars + (var,)),
        ],
    )

  def block(
      self, nesting: int, loop_vars: Tuple[str, ...], allow_empty: bool = False
  ) -> Tree:
    lo = 0 if allow_empty else 1
    count = int(self.rng.integers(lo, 3))
    return Tree(
        "block", [self.statement(nesting, loop_vars) for _ in range(count)]
    )

  def program(self, min_nodes: int, max_nodes: int) -> Tree:
    """A top-level block grown statement by statement until it has at least
    `min_nodes` nodes; redrawn if it overshoots `max_nodes`."""
    while True:
      prog = Tree("block", [])
      size = 1
      while size < min_nodes:
        stmt = self.statement(0, ())
        prog.children.append(stmt)
        size += num_nodes(stmt)
      if size <= max_nodes:
        return prog


def num_nodes(tree: Tree) -> int:
  return 1 + sum(num_nodes(c) for c in tree.children)


# ---------------------------------------------------------------------------
# The compiler FOR -> LAMBDA.


class _Compiler:
  """Continuation-passing compiler (module docstring)."""

  def __init__(self):
    self.num_functions = 0

  def fresh(self) -> Tree:
    name = f"f{self.num_functions}"
    self.num_functions += 1
    return Tree(name)

  def block(self, statements: Sequence[Tree], k: Tree) -> Tree:
    if not statements:
      return k
    first, rest = statements[0], list(statements[1:])
    kind = first.symbol
    if kind == "=":
      var, expr = first.children
      return Tree("let", [_copy(var), _copy(expr), self.block(rest, k)])
    if kind == "for":
      var, lo, hi, body = first.children
      f = self.fresh()
      step = Tree("app", [_copy(f), Tree("+", [_copy(var), Tree("1")])])
      loop = Tree(
          "if",
          [
              Tree("<", [_copy(var), _copy(hi)]),
              self.block(body.children, step),
              self.block(rest, k),
          ],
      )
      return Tree(
          "letrec", [f, _copy(var), loop, Tree("app", [_copy(f), _copy(lo)])]
      )
    if kind == "if":
      cond, then_block, else_block = first.children
      if not rest:
        return Tree(
            "if",
            [
                _copy(cond),
                self.block(then_block.children, k),
                self.block(else_block.children, k),
            ],
        )
      g = self.fresh()
      call = lambda: Tree("app", [_copy(g), Tree("0")])
      branch = Tree(
          "if",
          [
              _copy(cond),
              self.block(then_block.children, call()),
              self.block(else_block.children, call()),
          ],
      )
      # The branch is compiled before the continuation, so the functions
      # inside it take the lower numbers although the letrec lists the
      # continuation first (numbers follow creation order; module docstring).
      body = self.block(rest, k)
      return Tree("letrec", [g, Tree(CONTINUATION_PARAM), body, branch])
    raise ValueError(
        f"unknown FOR statement {kind!r}; valid statements are "
        "['=', 'if', 'for']."
    )


def _copy(tree: Tree) -> Tree:
  return Tree(tree.symbol, [_copy(c) for c in tree.children])


def compile_program(program: Tree) -> Tree:
  """The LAMBDA translation of a FOR program (a `block` tree)."""
  if program.symbol != "block":
    raise ValueError(
        f"a FOR program is a 'block' node, got {program.symbol!r}."
    )
  return _Compiler().block(program.children, Tree(UNIT))


# ---------------------------------------------------------------------------
# Linearisation and sets.


def linearize_lcrs_null(tree, order: str = "dfs") -> List[Tuple[str, int]]:
  """(symbol, binary arity) of the 'lcrs_null' sequence (module docstring;
  as `relational_jax.layers.tree.linearize_lcrs_null`)."""
  _check_choice(order, ORDERS, "tree order")

  def binary(siblings):  # [left, right] of siblings[0], None if absent.
    if not siblings:
      return None
    left, right = binary(siblings[0].children), binary(siblings[1:])
    if left is not None and right is None:
      right = (NULL, [])
    kids = [left, right] if (left is not None or right is not None) else []
    return (siblings[0].symbol, kids)

  frontier = collections.deque([binary([tree])])
  out = []
  while frontier:
    symbol, kids = frontier.popleft() if order == "bfs" else frontier.pop()
    present = [k for k in kids if k is not None]
    out.append((symbol, len(present)))
    frontier.extend(present if order == "bfs" else reversed(present))
  return out


def to_tokens(tree: Tree, order: str = "dfs", tokens: str = "arity") -> str:
  """Space-separated annotated tokens `symbol/arity` (Shiv & Quirk sec. 4;
  `relational_jax.layers.tree.annotate`) in `order`; `tokens` one of
  `TOKENS` (module docstring)."""
  _check_choice(tokens, TOKENS, "tree tokens")
  pairs = (
      linearize_lcrs_null(tree, order)
      if tokens == "lcrs_null"
      else linearize(tree, order)
  )
  return " ".join(f"{s}/{a}" for s, a in pairs)


def binarized_depth(tree: Tree) -> int:
  """Depth (edges) of the left-child-right-sibling binarisation of `tree`:
  the number of stack slots its deepest tree position uses. Child c of a
  node lies c + 1 LCRS steps below it (first child, then c siblings)."""
  return max(
      [0]
      + [
          c + 1 + binarized_depth(child)
          for c, child in enumerate(tree.children)
      ]
  )


def generate_pairs(
    size: str,
    num: int,
    rng: np.random.Generator,
    max_depth: int = 32,
    exclude: Optional[set] = None,
) -> List[Tuple[Tree, Tree]]:
  """`num` distinct (FOR tree, LAMBDA tree) pairs of length class `size`
  whose binarised trees are at most `max_depth` deep; FOR programs whose DFS
  tokens are in `exclude` are skipped (and the drawn ones added to it)."""
  _check_choice(size, SIZES, "For2Lam program size")
  if max_depth < 1:
    raise ValueError(f"max_depth must be >= 1, got {max_depth}.")
  seen = set() if exclude is None else exclude
  gen = _Generator(rng)
  lo, hi = LENGTHS[size]
  out, attempts = [], 0
  while len(out) < num:
    attempts += 1
    if attempts > 50 * num + 1000:
      raise RuntimeError(
          f"For2Lam {size}: found only {len(out)} of {num} distinct programs "
          f"fitting depth {max_depth} in {attempts} draws."
      )
    program = gen.program(lo, hi)
    key = to_tokens(program)
    if key in seen:
      continue
    target = compile_program(program)
    if max(binarized_depth(program), binarized_depth(target)) > max_depth:
      continue
    seen.add(key)
    out.append((program, target))
  return out


def generate_sets(
    size: str,
    num_train: int = 100_000,
    num_test: int = 10_000,
    seed: int = 0,
    target_order: str = "dfs",
    max_depth: int = 32,
    tokens: str = "lcrs_null",
) -> Dict[str, List[Tuple[str, str]]]:
  """{'train': pairs, 'test': pairs} of (source DFS tokens, target tokens in
  `target_order`), both written as `tokens` (`TOKENS`); train and test hold
  different FOR programs (the same ones for either `tokens`)."""
  _check_choice(target_order, ORDERS, "target order")
  _check_choice(tokens, TOKENS, "tree tokens")
  rng = np.random.default_rng(seed)
  seen = set()
  sets = {}
  for name, num in (("train", num_train), ("test", num_test)):
    sets[name] = [
        (to_tokens(p, "dfs", tokens), to_tokens(t, target_order, tokens))
        for p, t in generate_pairs(size, num, rng, max_depth, seen)
    ]
  return sets
