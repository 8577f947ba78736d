"""Tree positional encodings, Shiv & Quirk 2019 ("Novel positional encodings
to enable tree-based transformers", NeurIPS; cited [SQ19] below).

A node's position is its path from the root in a regular n-ary tree of
maximum depth k (sec. 3.2). Positions are `n*k` vectors used as a stack of
one-hot n-chunks; the root is the zero vector and, for child i (0-indexed
here; the paper counts 1..n):
  D_i x = [onehot_n(i); x[:-n]]        [SQ19] eq. 2
  U x   = [x[n:]; 0_n]                 [SQ19] eq. 3
so that U D_i = I for nodes above depth k ([SQ19] eq. 1). A node with root
path <b_1, ..., b_L> sits at x = D_{b_L} ... D_{b_1} 0: stack slot 0 holds the
last step, slot l the step l levels up.

General trees are made binary (n = 2) with the left-child-right-sibling
(LCRS) transform ([SQ19] sec. 5): child 0 is the first child, child 1 the
next sibling. So the c-th child (0-indexed) of a general-tree node x sits at
D_1^c D_0 x in the binarised tree.

Decoding ([SQ19] sec. 4): every symbol is annotated with its number of
children; `TreeDecoderState` follows the emitted (symbol, arity) sequence in
DFS (pre-order) or BFS order and returns the position of the next node to be
generated. Two alignments of positions with decoder inputs (`ALIGNMENTS`):
  'output'  [SQ19] sec. 4 (the default): "a zero vector for the start
            token's positional encoding, and ... the appropriate positional
            encoding for each autoregressed output": decoder input t >= 1
            (the node emitted at step t - 1) carries that node's own
            position;
  'next'    decoder input t carries the position of the node generated at
            step t (the start token the root's, which is zero too).
`decoder_positions` gives either for teacher forcing.

Encoding a tree input (tree2tree): `node_positions` turns an annotated
(arity) sequence into the position of every node, raising a clear error if
the sequence is not exactly one tree or is deeper than k.

This module is numpy / pure Python except `TreePositionalEncoding` (Flax).
"""

import collections
import dataclasses
import math
from typing import Any, List, Optional, Sequence, Tuple

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from relational_jax.layers import shapes

ORDERS = ("dfs", "bfs")
SLOTS = ("first", "last")
TREE_TOKENS = ("lcrs_null", "arity")  # How tree sequences are written.
TREE_ENDS = ("complete", "eos")  # What ends a decoded tree.
NULL = "_NULL"  # icecaps' placeholder for an absent right child.
ALIGNMENTS = ("output", "next")
PE_NORMS = ("paper", "pe_width", "sinusoid")
THETA_INITS = ("glorot", "spread")

Path = Tuple[int, ...]


@dataclasses.dataclass
class Tree:
  """An ordered tree. In a binarised tree `children` is [left, right] and a
  missing child is None."""

  symbol: Any
  children: List[Optional["Tree"]] = dataclasses.field(default_factory=list)

  def arity(self) -> int:
    return sum(c is not None for c in self.children)


# ---------------------------------------------------------------------------
# The stack operators of [SQ19] eq. 2-3.


def down(x, i: int, n: int):
  """D_i x = [onehot_n(i); x[:-n]] ([SQ19] eq. 2), i in 0..n-1."""
  if not 0 <= i < n:
    raise ValueError(f"child index {i} out of range for an {n}-ary tree.")
  x = np.asarray(x)
  onehot_n = np.zeros(x.shape[:-1] + (n,), x.dtype)
  onehot_n[..., i] = 1
  return np.concatenate([onehot_n, x[..., :-n]], axis=-1)


def up(x, n: int):
  """U x = [x[n:]; 0_n] ([SQ19] eq. 3)."""
  x = np.asarray(x)
  return np.concatenate(
      [x[..., n:], np.zeros(x.shape[:-1] + (n,), x.dtype)], axis=-1
  )


def position_from_path(path: Sequence[int], n: int, k: int):
  """x = D_{b_L} ... D_{b_1} 0 for the root path <b_1, ..., b_L> ([SQ19]
  sec. 3.2, Fig. 1). Steps deeper than k push the oldest ones off the stack."""
  x_P = np.zeros(n * k, np.float32)
  for b in path:
    x_P = down(x_P, b, n)
  return x_P


def positions_from_paths(paths: Sequence[Sequence[int]], n: int, k: int):
  """`len(paths) x n*k` positions."""
  out = np.zeros((len(paths), n * k), np.float32)
  for row, path in enumerate(paths):
    out[row] = position_from_path(path, n, k)
  return out


def binary_path(general_path: Sequence[int]) -> Path:
  """Path in the LCRS-binarised tree of a general-tree root path: child c is
  one step to the first child (0) then c steps to the next sibling (1)."""
  out = []
  for c in general_path:
    if c < 0:
      raise ValueError(f"child indices must be non-negative, got {c}.")
    out.extend([0] + [1] * c)
  return tuple(out)


# ---------------------------------------------------------------------------
# Trees: binarisation, traversal, linearisation.


def binarize_lcrs(tree: Tree) -> Tree:
  """Left-child-right-sibling binarisation ([SQ19] sec. 5): each node's left
  child is its first child and its right child is its next sibling."""

  check_general_tree(tree)

  def convert(siblings: Sequence[Tree]) -> Optional[Tree]:
    if not siblings:
      return None
    first = siblings[0]
    return Tree(first.symbol, [convert(first.children), convert(siblings[1:])])

  return convert([tree])


def unbinarize_lcrs(tree: Tree) -> Tree:
  """Inverse of `binarize_lcrs`."""

  def siblings(node: Optional[Tree]) -> List[Tree]:
    out = []
    while node is not None:
      left, right = (list(node.children) + [None, None])[:2]
      out.append(Tree(node.symbol, siblings(left)))
      node = right
    return out

  roots = siblings(tree)
  if len(roots) != 1:
    raise ValueError("a binarised tree's root must have no right child.")
  return roots[0]


def lcrs_null_tree(tree: Tree) -> Tree:
  """The LCRS-binarised tree as the authors' data pipeline writes it
  (microsoft/icecaps, util/trees.py `left_child_right_sibling` then
  data_io/abstract_data_processor.py `write_to_tfrecord` with its default
  streamline=True): a node whose left child (first child) is present and
  whose right child (next sibling) is absent gets an explicit `NULL` leaf as
  its right child; a node without a left child keeps its right slot empty
  (None), so its only child, if any, is its right one. The root of a tree
  with children gets a `NULL` right child too."""
  binary = binarize_lcrs(tree)

  def fill(node: Optional[Tree]) -> Optional[Tree]:
    if node is None:
      return None
    left, right = fill(node.children[0]), fill(node.children[1])
    if left is not None and right is None:
      right = Tree(NULL, [])
    return Tree(node.symbol, [left, right] if (left or right) else [])

  return fill(binary)


def lcrs_null_nodes(
    tree: Tree, order: str = "dfs"
) -> List[Tuple[Any, int, Path]]:
  """(symbol, binary arity, binary root path) of every node of
  `lcrs_null_tree(tree)` in DFS pre-order or BFS level order of the binary
  tree, `NULL` nodes included: the authors' target sequence (icecaps
  `write_to_tfrecord` traversal 'depth_first' / 'breadth_first'). The arity
  is their annotation: 0 (their suffix '_0'), 1 (suffix '_1': the right
  child only) or 2 (no suffix); a node of arity a has its children in the
  last a of the 2 slots (`TreeDecoderState(slots='last')`)."""
  shapes.check_choice(order, ORDERS, "tree order")
  by_path = {}

  def visit(node, path):
    by_path[path] = node
    for i, c in enumerate(node.children):
      if c is not None:
        visit(c, path + (i,))

  root = lcrs_null_tree(tree)
  visit(root, ())
  out = []
  for symbol, path in node_paths(root, order):
    node = by_path[path]
    out.append((symbol, sum(c is not None for c in node.children), path))
  return out


def linearize_lcrs_null(tree: Tree, order: str = "dfs") -> List[str]:
  """`lcrs_null_nodes` as annotated tokens 'symbol/arity' ('_NULL/0' for
  the placeholders), for a decoder with `TreeDecoderState(binarize=False,
  slots='last')` (the authors' target sequences, see `lcrs_null_tree`)."""
  return [annotate(s, a) for s, a, _ in lcrs_null_nodes(tree, order)]


def node_paths(tree: Tree, order: str = "dfs") -> List[Tuple[Any, Path]]:
  """(symbol, root path) of every node in DFS pre-order or BFS order.

  Child indices are list indices, so a binarised tree's None slots keep the
  left/right meaning of its present children.
  """
  shapes.check_choice(order, ORDERS, "tree order")
  out = []
  frontier = collections.deque([(tree, ())])
  while frontier:
    node, path = frontier.popleft() if order == "bfs" else frontier.pop()
    out.append((node.symbol, path))
    kids = [
        (c, path + (i,)) for i, c in enumerate(node.children) if c is not None
    ]
    frontier.extend(kids if order == "bfs" else reversed(kids))
  return out


def linearize(tree: Tree, order: str = "dfs") -> List[Tuple[Any, int]]:
  """The (symbol, arity) sequence of a general tree in DFS or BFS order.

  The arity annotation is what lets a decoder rebuild the tree ([SQ19]
  sec. 4); `annotate` turns each pair into one vocabulary entry.
  """
  shapes.check_choice(order, ORDERS, "tree order")
  frontier = collections.deque([tree])
  out = []
  while frontier:
    node = frontier.popleft() if order == "bfs" else frontier.pop()
    out.append((node.symbol, len(node.children)))
    frontier.extend(
        node.children if order == "bfs" else reversed(node.children)
    )
  return out


def annotate(symbol: Any, arity: int) -> str:
  """One vocabulary entry per (symbol, number of children) ([SQ19] sec. 4)."""
  return f"{symbol}/{arity}"


def split_annotation(token: str) -> Tuple[str, int]:
  symbol, _, arity = str(token).rpartition("/")
  if not symbol or not arity.isdigit():
    raise ValueError(f"token {token!r} is not an annotated 'symbol/arity'.")
  return symbol, int(arity)


def tree_positions(
    tree: Tree,
    order: str = "dfs",
    k: int = 32,
    binarize: bool = True,
    n: int = 2,
):
  """Positions of every node of a general tree, in traversal `order`.

  With `binarize`, positions live in the LCRS tree (n must be 2); without,
  the tree must be n-ary already (child index < n).
  Returns (symbols, `num_nodes x n*k` positions).
  """
  symbols, paths = zip(*node_paths(tree, order))
  if binarize:
    _check_binary_n(n)
    paths = [binary_path(p) for p in paths]
  return list(symbols), positions_from_paths(paths, n, k)


def _check_binary_n(n: int):
  if n != 2:
    raise ValueError(
        f"LCRS binarisation gives binary trees: n must be 2, got n={n}."
    )


# ---------------------------------------------------------------------------
# Decoding.


class TreeDecoderState:
  """The partial tree of a seq2tree decoder ([SQ19] sec. 4).

  Feed it the emitted (symbol, arity) pairs one at a time with `push`;
  `next_position()` is the tree position of the node the decoder generates
  next; `push` returns the position of the node it records. So with the
  'output' alignment ([SQ19] sec. 4) a decoder feeds the start token with
  zero and every emitted token with what `push` returned for it; with
  'next' it feeds every input with `next_position()`. Once the tree is
  complete (`done`), the next position is zero (the step that should emit
  EOS) and further pushes are ignored (and return zero).

  DFS is pre-order (first child first); BFS is level order. Positions are in
  the LCRS-binarised tree (`binarize=True`, n = 2) or in a regular n-ary tree
  (`binarize=False`, each arity must be <= n). `slots` (binarize=False): a
  node of arity a < n puts its children in its 'first' a child slots, or in
  its 'last' a, as the authors' decoder does (microsoft/icecaps,
  estimators/transformer_decoder_estimator.py `get_next_pos_tree`: branch
  n - remaining children), which reads `linearize_lcrs_null` sequences.
  """

  def __init__(
      self,
      order: str = "dfs",
      k: int = 32,
      n: int = 2,
      binarize: bool = True,
      slots: str = "first",
  ):
    shapes.check_choice(order, ORDERS, "tree order")
    shapes.check_choice(slots, SLOTS, "tree child slots")
    if binarize:
      _check_binary_n(n)
      if slots != "first":
        raise ValueError(
            "slots='last' reads binary trees as given (binarize=False)."
        )
    if k <= 0 or n <= 0:
      raise ValueError(
          f"tree arity n and depth k must be positive, got n={n}, k={k}."
      )
    self.order, self.k, self.n, self.binarize = order, k, n, binarize
    self.slots = slots
    self._open = collections.deque([()])  # Paths still to be generated.
    self.nodes: List[Tuple[Any, Path, int]] = []  # (symbol, path, arity).

  @property
  def done(self) -> bool:
    return not self._open

  def next_path(self) -> Optional[Path]:
    """General-tree root path of the next node (None when done)."""
    if not self._open:
      return None
    return self._open[0] if self.order == "bfs" else self._open[-1]

  def next_position(self):
    """`n*k` position of the next node; zero when the tree is complete."""
    path = self.next_path()
    if path is None:
      return np.zeros(self.n * self.k, np.float32)
    if self.binarize:
      path = binary_path(path)
    elif any(c >= self.n for c in path):
      raise ValueError(f"child index in {path} exceeds n-1={self.n - 1}.")
    return position_from_path(path, self.n, self.k)

  def push(self, symbol: Any, arity: int):
    """Records the next node and opens its `arity` child slots; returns the
    node's `n*k` position (zero if the tree was already complete)."""
    if arity < 0:
      raise ValueError(f"arity must be non-negative, got {arity}.")
    if not self.binarize and arity > self.n:
      raise ValueError(f"arity {arity} exceeds n={self.n} (binarize=False).")
    if self.done:
      return np.zeros(self.n * self.k, np.float32)
    position_P = self.next_position()
    path = self._open.popleft() if self.order == "bfs" else self._open.pop()
    self.nodes.append((symbol, path, arity))
    first = self.n - arity if self.slots == "last" else 0
    kids = [path + (first + c,) for c in range(arity)]
    self._open.extend(kids if self.order == "bfs" else reversed(kids))
    return position_P

  def to_tree(self) -> Tree:
    """The (possibly partial) tree built so far; open slots are left out."""
    if not self.nodes:
      raise ValueError("no node has been pushed yet.")
    by_path = {path: Tree(symbol, []) for symbol, path, _ in self.nodes}
    for path in sorted(by_path, key=lambda p: (len(p), p)):
      if path:
        by_path[path[:-1]].children.append(by_path[path])
    return by_path[()]


def decoder_positions(
    arities: Sequence[int],
    order: str = "dfs",
    k: int = 32,
    n: int = 2,
    binarize: bool = True,
    length: Optional[int] = None,
    alignment: str = "output",
    slots: str = "first",
):
  """Teacher-forcing input positions for an emitted arity sequence.

  Decoder input 0 is the start token, input t >= 1 the token emitted at step
  t - 1. alignment 'output' ([SQ19] sec. 4): row 0 is zero and row t >= 1 is
  the position of node t - 1 (each fed-back output carries its own
  position); 'next': row t is the position of node t, the node generated at
  step t. Rows of tokens that are not nodes of the tree (after it is
  complete: EOS, padding, extra tokens) are zero. Returns `length x n*k`
  (length defaults to len(arities) + 1). `slots`: see `TreeDecoderState`.
  """
  shapes.check_choice(alignment, ALIGNMENTS, "tree alignment")
  length = len(arities) + 1 if length is None else length
  state = TreeDecoderState(order, k, n, binarize, slots)
  node_P = []  # Position of each emitted token's node (zero if none).
  for arity in arities[:length]:
    node_P.append(state.next_position())
    state.push(None, int(arity))
  next_P = node_P + [state.next_position()]
  out = np.zeros((length, n * k), np.float32)
  if alignment == "next":
    rows = next_P[:length]
  else:
    rows = ([np.zeros(n * k, np.float32)] + node_P)[:length]
  if rows:
    out[: len(rows)] = np.stack(rows)
  return out


def node_positions(
    arities: Sequence[int],
    order: str = "dfs",
    k: int = 32,
    what: str = "tree",
    strict: bool = True,
    lcrs: bool = True,
):
  """`N x 2k` positions, in the LCRS-binarised tree ([SQ19] sec. 5), of the
  N nodes of a general tree given as its annotated arity sequence in
  `order`. With `lcrs=False` the arities are those of a binary tree whose
  nodes of arity 1 have a right child only (`linearize_lcrs_null`, the
  authors' sequences; `TreeDecoderState(binarize=False, slots='last')`).

  strict: raises ValueError if the arities do not describe exactly one tree
  (too few nodes to fill the announced children, or nodes left over) or if
  the binarised tree is deeper than k (its positions would lose their
  oldest steps, [SQ19] sec. 3.2). `what` names the sequence in the
  messages. Not strict (e.g. a model's input that may hold unknown
  tokens): nodes after the tree is complete get zero, missing children are
  ignored and deeper nodes keep their last k steps.
  """
  shapes.check_choice(order, ORDERS, "tree order")
  if k <= 0:
    raise ValueError(f"tree depth k must be positive, got k={k}.")
  num = len(arities)
  if num == 0:
    raise ValueError(f"{what}: an empty sequence is not a tree.")
  open_paths = collections.deque([()])  # Binary paths still to be filled.
  out = np.zeros((num, 2 * k), np.float32)
  for t, arity in enumerate(arities):
    arity = int(arity)
    if arity < 0:
      raise ValueError(f"{what}: node {t} has negative arity {arity}.")
    if not open_paths:
      if not strict:
        break
      raise ValueError(
          f"{what}: the arity annotations do not describe one tree: the "
          f"tree is complete after {t} nodes but the sequence has {num}."
      )
    path = open_paths.popleft() if order == "bfs" else open_paths.pop()
    if len(path) > k and strict:
      raise ValueError(
          f"{what}: node {t} lies at depth {len(path)} of the binarised tree, "
          f"beyond the tree positional encoding's depth k={k}; use a larger "
          "k (tree_depth) or shallower trees."
      )
    for slot, b in enumerate(reversed(path[-k:])):  # Slot 0: last step.
      out[t, 2 * slot + b] = 1.0
    if not lcrs:  # A binary tree's node: its last `arity` slots.
      if arity > 2:
        raise ValueError(
            f"{what}: node {t} has arity {arity} in a binary tree (lcrs=False)."
        )
      kids = [path + (2 - arity + c,) for c in range(arity)]
    else:  # Child c of a general-tree node: D_1^c D_0 in the LCRS tree.
      kids = [path + (0,) + (1,) * c for c in range(arity)]
    open_paths.extend(kids if order == "bfs" else reversed(kids))
  if open_paths and strict:
    raise ValueError(
        f"{what}: the arity annotations do not describe one tree: "
        f"{len(open_paths)} announced child(ren) missing after the last of "
        f"{num} nodes."
    )
  return out


def tree_from_annotated(tokens: Sequence[str], order: str = "dfs") -> Tree:
  """Rebuilds the general tree of annotated tokens 'symbol/arity' in
  `order`; raises ValueError if they are not exactly one tree."""
  pairs = [split_annotation(t) for t in tokens]
  node_positions(
      [a for _, a in pairs],
      order,
      k=max(1, 2 * len(pairs)),
      what="annotated tokens",
  )  # Checks the tree shape.
  state = TreeDecoderState(order, k=1, n=2, binarize=True)
  for symbol, arity in pairs:
    state.push(symbol, arity)
  return state.to_tree()


def check_general_tree(tree: Tree) -> None:
  """Raises ValueError if `tree` cannot be LCRS-binarised: a missing (None)
  child, or a symbol annotated 'symbol/arity' whose arity disagrees with its
  number of children."""

  def visit(node, path):
    if node is None:
      raise ValueError(
          "cannot binarise: missing child (None) at root path "
          f"{path}; a general tree lists only present children."
      )
    symbol = str(node.symbol)
    if "/" in symbol:
      try:
        _, arity = split_annotation(symbol)
      except ValueError:
        arity = None
      if arity is not None and arity != len(node.children):
        raise ValueError(
            f"cannot binarise: node {symbol!r} at root path {path} is "
            f"annotated with {arity} children but has "
            f"{len(node.children)}."
        )
    for i, c in enumerate(node.children):
      visit(c, path + (i,))

  visit(tree, ())


# ---------------------------------------------------------------------------
# Parameterised encoding.


class TreePositionalEncoding(nn.Module):
  """Learned tree encoding of [SQ19] sec. 3.2 (last two paragraphs), laid out
  as the authors' code has it (microsoft/icecaps,
  icecaps/estimators/abstract_transformer_estimator.py `build_embeddings`,
  `treeify_positions`; cited [IC] below).

  For each of m = d_pos / (n k) parameters p = tanh(theta), the raw stack
  vector x (`n*k`) is weighted per depth slot l by p^l,
    x' = x * (1_n; p_n; p^2_n; ...),
  times sqrt(1 - p^2) (approximate normalisation: a node at depth L has
  |x'|^2 = 1 - p^(2L)) and a scale, giving d_pos features. Feature
  (n l + i) m + q is slot l, branch i, parameter q: the m weighted copies of
  one stack entry sit together ([IC] `tree_weights`, a (k n) x m matrix,
  and `treeify_positions`' reshape).

  `norm` picks the scale:
    'paper'     sqrt(d_model / 2) with d_model the model's width, as sec. 3.2
                states ("to achieve norms more similar to the original
                transformer's positional encoding scheme") and [IC] computes
                (`tree_norm` = sqrt((1 - p^2) d_model / 2));
    'pe_width'  sqrt(d_pos / 2), the encoding's own width (our option;
                sqrt(d_pos / d_model) times 'paper', sqrt(8) at the paper's
                d_pos 2048, d_model 256);
    'sinusoid'  sqrt(d_pos / (2 m)): a deep node's norm is the sinusoidal
                encoding's of width d_pos (our option).
  `theta_init` picks theta's initialiser:
    'glorot'    uniform on +-sqrt(3 / m): [IC] creates theta with
                tf.get_variable and no initializer, so TensorFlow's default,
                Glorot uniform, with fan_in = fan_out = m (|p| <= 0.3 at
                m = 32);
    'spread'    p spread evenly over [0.5, 0.95], like a sinusoid's
                frequencies (our option).
  """

  d_model: int  # The model's width (the 'paper' scale).
  k: int = 32
  n: int = 2
  norm: str = "paper"  # One of PE_NORMS.
  theta_init: str = "glorot"  # One of THETA_INITS (not `init`: Module.init).
  d_pos: int = 0  # The encoding's width; 0: d_model.

  @property
  def width(self) -> int:
    return self.d_pos or self.d_model

  def setup(self):
    shapes.check_choice(self.norm, PE_NORMS, "tree positional encoding norm")
    shapes.check_choice(
        self.theta_init, THETA_INITS, "tree positional encoding theta init"
    )
    if self.width % (self.n * self.k):
      valid_k = [
          k for k in range(1, self.width + 1) if self.width % (self.n * k) == 0
      ]
      raise ValueError(
          f"tree positional encoding: its width d_pos={self.width} must be a "
          f"multiple of n*k={self.n * self.k} (n={self.n}, depth k={self.k}); "
          f"valid depths k for this width are {valid_k}."
      )
    self.num_p = self.width // (self.n * self.k)

    if self.theta_init == "glorot":
      limit = math.sqrt(3.0 / self.num_p)

      def init_fn(key, shape, dtype=jnp.float32):
        return jax.random.uniform(key, shape, dtype, -limit, limit)

    else:

      def init_fn(_, shape, dtype=jnp.float32):
        return jnp.arctanh(jnp.linspace(0.5, 0.95, shape[0], dtype=dtype))

    self.theta_Q = self.param("theta", init_fn, (self.num_p,))

  def __call__(self, x_BxNxP):
    shapes.check_shape(x_BxNxP, ("B", "N", self.n * self.k), "tree positions")
    p_Q = jnp.tanh(self.theta_Q)
    depth_P = jnp.repeat(jnp.arange(self.k), self.n)  # Slot of each entry.
    if self.norm == "paper":
      scale = math.sqrt(self.d_model / 2.0)
    elif self.norm == "pe_width":
      scale = math.sqrt(self.width / 2.0)
    else:  # 'sinusoid'
      scale = math.sqrt(self.width / (2.0 * self.num_p))
    weight_PxQ = p_Q[None, :] ** depth_P[:, None]
    weight_PxQ = weight_PxQ * jnp.sqrt(1.0 - p_Q[None, :] ** 2) * scale
    pe_BxNxPxQ = x_BxNxP[..., None] * weight_PxQ
    return pe_BxNxPxQ.reshape(x_BxNxP.shape[:2] + (self.width,))
