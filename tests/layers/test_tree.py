"""Tests for relational_jax.layers.tree (Shiv & Quirk 2019)."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from relational_jax.layers import positional_encoding as pe_lib
from relational_jax.layers import tree as tree_lib

Tree = tree_lib.Tree


def _example_tree():
  """A(B(G), C(D, E)): DFS A B G C D E, BFS A B C G D E."""
  return Tree("A", [Tree("B", [Tree("G")]), Tree("C", [Tree("D"), Tree("E")])])


def test_up_inverts_down_up_to_depth_k():
  n, k = 3, 4
  rng = np.random.default_rng(0)
  for _ in range(20):
    depth = rng.integers(0, k)  # At most k - 1 steps: room for one more.
    x = tree_lib.position_from_path(rng.integers(0, n, depth), n, k)
    for i in range(n):
      np.testing.assert_array_equal(tree_lib.up(tree_lib.down(x, i, n), n), x)
  # At depth k the deepest step falls off the stack: U D_i != I there.
  x_full = tree_lib.position_from_path([1, 0, 2, 1], n, k)
  assert not np.array_equal(tree_lib.up(tree_lib.down(x_full, 0, n), n), x_full)


def test_down_and_up_operators():
  x = np.array([0.0, 1.0, 1.0, 0.0, 0.0, 0.0])
  np.testing.assert_array_equal(tree_lib.down(x, 0, 2), [1, 0, 0, 1, 1, 0])
  np.testing.assert_array_equal(tree_lib.up(x, 2), [1, 0, 0, 0, 0, 0])
  with pytest.raises(ValueError, match="child index 2"):
    tree_lib.down(x, 2, 2)


def test_positions_of_hand_made_tree_binarized():
  # LCRS: A.left=B, B.left=G, B.right=C, C.left=D, D.right=E; n=2, k=3.
  symbols, pos = tree_lib.tree_positions(_example_tree(), "dfs", k=3)
  assert symbols == ["A", "B", "G", "C", "D", "E"]
  want = np.array(
      [
          [0, 0, 0, 0, 0, 0],  # A  root
          [1, 0, 0, 0, 0, 0],  # B  D_0 0
          [1, 0, 1, 0, 0, 0],  # G  D_0 D_0 0
          [0, 1, 1, 0, 0, 0],  # C  D_1 D_0 0
          [1, 0, 0, 1, 1, 0],  # D  D_0 D_1 D_0 0
          [0, 1, 1, 0, 0, 1],  # E  D_1 D_0 D_1 D_0 0 (oldest step dropped)
      ],
      np.float32,
  )
  np.testing.assert_array_equal(pos, want)


def test_positions_of_hand_made_tree_regular_binary():
  symbols, pos = tree_lib.tree_positions(
      _example_tree(), "bfs", k=3, binarize=False
  )
  assert symbols == ["A", "B", "C", "G", "D", "E"]
  want = np.array(
      [
          [0, 0, 0, 0, 0, 0],  # A  ()
          [1, 0, 0, 0, 0, 0],  # B  (0)
          [0, 1, 0, 0, 0, 0],  # C  (1)
          [1, 0, 1, 0, 0, 0],  # G  (0, 0)
          [1, 0, 0, 1, 0, 0],  # D  (1, 0)
          [0, 1, 0, 1, 0, 0],  # E  (1, 1)
      ],
      np.float32,
  )
  np.testing.assert_array_equal(pos, want)


def test_lcrs_round_trip_and_dfs_agrees_with_binary_tree():
  tree = _example_tree()
  binary = tree_lib.binarize_lcrs(tree)
  assert binary.symbol == "A" and binary.children[1] is None
  assert binary.children[0].children[1].symbol == "C"
  assert tree_lib.unbinarize_lcrs(binary) == tree
  # Pre-order of a general tree = pre-order of its LCRS tree.
  _, general = tree_lib.tree_positions(tree, "dfs", k=8)
  paths = [p for _, p in tree_lib.node_paths(binary, "dfs")]
  np.testing.assert_array_equal(
      general, tree_lib.positions_from_paths(paths, 2, 8)
  )


def test_linearize_and_annotations():
  tree = _example_tree()
  assert tree_lib.linearize(tree, "dfs") == [
      ("A", 2),
      ("B", 1),
      ("G", 0),
      ("C", 2),
      ("D", 0),
      ("E", 0),
  ]
  assert tree_lib.linearize(tree, "bfs") == [
      ("A", 2),
      ("B", 1),
      ("C", 2),
      ("G", 0),
      ("D", 0),
      ("E", 0),
  ]
  assert tree_lib.annotate("C", 2) == "C/2"
  assert tree_lib.split_annotation("C/2") == ("C", 2)
  with pytest.raises(ValueError, match="tree order 'pre'"):
    tree_lib.linearize(tree, "pre")


@pytest.mark.parametrize("order", ["dfs", "bfs"])
@pytest.mark.parametrize("binarize", [True, False])
def test_decoder_state_rebuilds_tree(order, binarize):
  tree = _example_tree()
  _, want_pos = tree_lib.tree_positions(tree, order, k=4, binarize=binarize)
  state = tree_lib.TreeDecoderState(order, k=4, binarize=binarize)
  np.testing.assert_array_equal(state.next_position(), np.zeros(8))  # Start.
  for t, (symbol, arity) in enumerate(tree_lib.linearize(tree, order)):
    assert not state.done
    np.testing.assert_array_equal(state.next_position(), want_pos[t])
    state.push(symbol, arity)
  assert state.done
  np.testing.assert_array_equal(state.next_position(), np.zeros(8))
  assert state.to_tree() == tree
  arities = [a for _, a in tree_lib.linearize(tree, order)]
  # 'next' alignment: row t is node t's; then zeros (EOS, padding).
  tf = tree_lib.decoder_positions(
      arities, order, k=4, binarize=binarize, length=8, alignment="next"
  )
  np.testing.assert_array_equal(tf[:6], want_pos)
  np.testing.assert_array_equal(tf[6:], 0)
  # 'output' (the default, [SQ19] sec. 4): start token zero, then input t
  # (node t - 1 fed back) at node t - 1's position; padding zero.
  tf = tree_lib.decoder_positions(
      arities, order, k=4, binarize=binarize, length=8
  )
  np.testing.assert_array_equal(tf[0], 0)
  np.testing.assert_array_equal(tf[1:7], want_pos)
  np.testing.assert_array_equal(tf[7:], 0)


def test_decoder_state_rejects_bad_arity():
  state = tree_lib.TreeDecoderState("dfs", k=4, n=2, binarize=False)
  with pytest.raises(ValueError, match="arity 3 exceeds n=2"):
    state.push("X", 3)
  with pytest.raises(ValueError, match="n must be 2"):
    tree_lib.TreeDecoderState("dfs", k=4, n=3, binarize=True)


def test_parameterised_encoding_formula():
  """Feature (n l + i) m + q: slot l, branch i, parameter q (icecaps'
  layout); scale sqrt(d_model / 2) with the model's width ('paper')."""
  n, k, d_model, d_pos = 2, 3, 20, 12  # Two p's of n*k = 6 entries each.
  enc = tree_lib.TreePositionalEncoding(d_model, k=k, n=n, d_pos=d_pos)
  _, raw = tree_lib.tree_positions(_example_tree(), "dfs", k=k)
  x = jnp.asarray(raw)[None]
  params = {"theta": jnp.array([0.3, -1.2])}
  got = np.asarray(jax.jit(enc.apply)({"params": params}, x))[0]
  assert got.shape == (6, d_pos)
  for q, theta in enumerate([0.3, -1.2]):
    p = math.tanh(theta)
    for f in range(n * k):
      slot = f // n
      scale = p**slot * math.sqrt(1 - p * p) * math.sqrt(d_model / 2)
      np.testing.assert_allclose(
          got[:, f * 2 + q], raw[:, f] * scale, rtol=1e-5, atol=1e-7
      )
  init = jax.eval_shape(enc.init, jax.random.key(0), x)
  assert init["params"]["theta"].shape == (2,)


def test_theta_inits():
  """'glorot' (icecaps): U(+-sqrt(3/m)); 'spread': p over [0.5, 0.95]."""
  x = jnp.zeros((1, 1, 8))
  for m in (2, 50):
    enc = tree_lib.TreePositionalEncoding(8 * m, k=4, n=2)
    theta = enc.init(jax.random.key(1), x)["params"]["theta"]
    assert theta.shape == (m,)
    assert float(jnp.max(jnp.abs(theta))) <= math.sqrt(3 / m)
  enc = tree_lib.TreePositionalEncoding(24, k=4, n=2, theta_init="spread")
  theta = enc.init(jax.random.key(1), x)["params"]["theta"]
  np.testing.assert_allclose(np.tanh(theta), [0.5, 0.725, 0.95], rtol=1e-5)


def test_encoding_norms():
  """A node at depth L >= k has |x'|^2 = sum_q (1 - p_q^(2k)) scale^2:
  'paper' scale sqrt(d_model/2) gives up to m d_model / 2 (m copies),
  'pe_width' sqrt(d_pos/2) up to m d_pos / 2, 'sinusoid' sqrt(d_pos / (2m))
  up to d_pos / 2, the sinusoidal encoding's |P|^2 at width d_pos."""
  n, k, d_pos, d_model = 2, 4, 64, 16  # m = 8 copies.
  m = d_pos // (n * k)
  x = jnp.asarray(tree_lib.position_from_path([0, 1] * k, n, k))[None, None]
  thetas = jnp.arctanh(jnp.linspace(0.5, 0.95, m))
  p = np.tanh(np.asarray(thetas, np.float64))
  depth_sum = np.sum(1.0 - p ** (2 * k))
  sinusoid = pe_lib.sinusoidal(5, d_pos)[3]
  np.testing.assert_allclose(float(jnp.sum(sinusoid**2)), d_pos / 2, rtol=1e-5)
  for norm, want in (
      ("paper", depth_sum * d_model / 2),
      ("pe_width", depth_sum * d_pos / 2),
      ("sinusoid", depth_sum * d_pos / (2 * m)),
  ):
    enc = tree_lib.TreePositionalEncoding(
        d_model, k=k, n=n, norm=norm, d_pos=d_pos
    )
    got = enc.apply({"params": {"theta": thetas}}, x)
    np.testing.assert_allclose(float(jnp.sum(got**2)), want, rtol=1e-5)
  enc = tree_lib.TreePositionalEncoding(d_pos, k=k, n=n, norm="unit")
  with pytest.raises(ValueError, match="'unit'.*'paper', 'pe_width'"):
    enc.init(jax.random.key(0), x)


def test_lcrs_null_sequence():
  """A(B, C(D)) as icecaps writes it (LCRS, streamlined): B has only a right
  child (C), C's right slot and the root's are explicit NULLs."""
  t = tree_lib.Tree(
      "A", [tree_lib.Tree("B"), tree_lib.Tree("C", [tree_lib.Tree("D")])]
  )
  assert tree_lib.linearize_lcrs_null(t, "dfs") == [
      "A/2",
      "B/1",
      "C/2",
      "D/0",
      "_NULL/0",
      "_NULL/0",
  ]
  assert tree_lib.linearize_lcrs_null(t, "bfs") == [
      "A/2",
      "B/1",
      "_NULL/0",
      "C/2",
      "D/0",
      "_NULL/0",
  ]
  paths = [p for _, _, p in tree_lib.lcrs_null_nodes(t, "dfs")]
  assert paths == [(), (0,), (0, 1), (0, 1, 0), (0, 1, 1), (1,)]
  for order in ("dfs", "bfs"):
    nodes = tree_lib.lcrs_null_nodes(t, order)
    want = tree_lib.positions_from_paths([p for _, _, p in nodes], 2, 4)
    arities = [a for _, a, _ in nodes]
    np.testing.assert_array_equal(
        tree_lib.node_positions(arities, order, 4, lcrs=False), want
    )
    state = tree_lib.TreeDecoderState(order, 4, 2, binarize=False, slots="last")
    got = [state.push(s, a) for s, a, _ in nodes]
    assert state.done
    np.testing.assert_array_equal(np.stack(got), want)
  with pytest.raises(ValueError, match="binarize=False"):
    tree_lib.TreeDecoderState("dfs", 4, 2, binarize=True, slots="last")


def test_parameterised_encoding_bad_width():
  enc = tree_lib.TreePositionalEncoding(d_model=10, k=3, n=2)
  with pytest.raises(
      ValueError, match="d_pos=10 must be a multiple of n\\*k=6"
  ):
    enc.init(jax.random.key(0), jnp.zeros((1, 1, 6)))


def test_decoder_alignment_hand_worked_example():
  """[SQ19] sec. 4: "a zero vector for the start token's positional
  encoding, and ... the appropriate positional encoding for each
  autoregressed output". Target A(B, C(D)), DFS, LCRS, k = 3 (6 features,
  stack slot 0 = the last step, one-hot [left, right]):
    A  root                 -> 0
    B  first child: D_0 0   -> [1,0, 0,0, 0,0]
    C  B's sibling: D_1 D_0 -> [0,1, 1,0, 0,0]
    D  C's first child: D_0 D_1 D_0 -> [1,0, 0,1, 1,0]
  Decoder inputs <s> A B C D (the last predicts EOS): the start token is
  zero and each fed-back output carries its own position."""
  tree = Tree("A", [Tree("B"), Tree("C", [Tree("D")])])
  arities = [a for _, a in tree_lib.linearize(tree, "dfs")]
  assert arities == [2, 0, 1, 0]
  a = [0, 0, 0, 0, 0, 0]
  b = [1, 0, 0, 0, 0, 0]
  c = [0, 1, 1, 0, 0, 0]
  d = [1, 0, 0, 1, 1, 0]
  zero = [0] * 6
  paper = tree_lib.decoder_positions(arities, "dfs", k=3, length=6)
  np.testing.assert_array_equal(paper, [zero, a, b, c, d, zero])
  nxt = tree_lib.decoder_positions(
      arities, "dfs", k=3, length=6, alignment="next"
  )
  np.testing.assert_array_equal(nxt, [a, b, c, d, zero, zero])
  # The incremental state gives the same: push returns the node's own
  # position, next_position the next node's.
  state = tree_lib.TreeDecoderState("dfs", k=3)
  own = [state.push(s, n) for s, n in tree_lib.linearize(tree, "dfs")]
  np.testing.assert_array_equal(own, [a, b, c, d])
  np.testing.assert_array_equal(state.push("extra", 0), zero)  # Done.
  with pytest.raises(ValueError, match="tree alignment 'previous'"):
    tree_lib.decoder_positions(arities, alignment="previous")


def test_node_positions_and_bad_trees():
  tree = _example_tree()
  arities = [a for _, a in tree_lib.linearize(tree, "bfs")]
  _, want = tree_lib.tree_positions(tree, "bfs", k=4)
  np.testing.assert_array_equal(
      tree_lib.node_positions(arities, "bfs", k=4), want
  )
  tokens = [tree_lib.annotate(s, a) for s, a in tree_lib.linearize(tree, "dfs")]
  assert tree_lib.tree_from_annotated(tokens, "dfs") == tree
  # Arity annotations that disagree with the sequence: not one tree.
  with pytest.raises(ValueError, match="1 announced child\\(ren\\) missing"):
    tree_lib.node_positions([2, 0], "dfs", k=4)
  with pytest.raises(
      ValueError, match="complete after 1 nodes but the sequence has 2"
  ):
    tree_lib.node_positions([0, 0], "dfs", k=4)
  with pytest.raises(ValueError, match="not describe one tree"):
    tree_lib.tree_from_annotated(["A/2", "B/0"])
  # Depth beyond k: the chain A(B(C)) is 2 deep.
  with pytest.raises(
      ValueError, match="depth 2 of the binarised tree, beyond .* k=1"
  ):
    tree_lib.node_positions([1, 1, 0], "dfs", k=1)
  loose = tree_lib.node_positions([1, 1, 0, 0], "dfs", k=1, strict=False)
  np.testing.assert_array_equal(loose, [[0, 0], [1, 0], [1, 0], [0, 0]])
  # Unbinarisable general trees: a missing child; an arity annotation that
  # disagrees with the children.
  with pytest.raises(
      ValueError, match="missing child \\(None\\) at root path \\(1,\\)"
  ):
    tree_lib.binarize_lcrs(Tree("A", [Tree("B"), None]))
  with pytest.raises(
      ValueError,
      match="'f/2' at root path \\(\\) is annotated with 2 children but has 1",
  ):
    tree_lib.binarize_lcrs(Tree("f/2", [Tree("x/0")]))
