"""Our tree positional encodings equal the authors' code (microsoft/icecaps).

The golden (goldens/icecaps_tree_pe.npz) was written by
scripts/make_tree_pe_golden.py, which ran icecaps's own functions under
TensorFlow (tf.compat.v1): their LCRS trees' tokens and positions
(`left_child_right_sibling`, `write_to_tfrecord`), the encoding
(`build_embeddings`, `treeify_positions`) and its dense map to d_model
(`init_inputs`, the decoder's `pos_proj`), the decoder's shifted positions
under teacher forcing (`init_targets`) and the positions its greedy decoding
computes (`get_next_pos_tree`). Ours: `tree.linearize_lcrs_null` /
`lcrs_null_nodes`, `tree.node_positions(lcrs=False)`,
`tree.decoder_positions` and `tree.TreeDecoderState` with slots='last', and
the model's `TreeEmbedding` (the defaults: norm 'paper', a biased dense
layer). CI has no TensorFlow: this test only reads the golden.
"""

import json
import math
import pathlib

import jax
import jax.numpy as jnp
import numpy as np

from relational_jax.layers import tree as tree_lib
from relational_jax.models import seq2seq

GOLDEN = pathlib.Path(__file__).parent / "goldens" / "icecaps_tree_pe.npz"
TOLERANCE = 1e-5  # fp32 rounding of values of order 10.


def _load():
  return np.load(GOLDEN)


def _tree(obj):
  """icecaps JSON tree ([root, child, ...], a string is a leaf)."""
  if isinstance(obj, str):
    return tree_lib.Tree(obj, [])
  return tree_lib.Tree(obj[0], [_tree(c) for c in obj[1:]])


def _their_annotation(word):
  """icecaps annotation -> (symbol, number of children)."""
  if word == tree_lib.NULL:
    return word, 0
  if word.endswith("_0"):
    return word[:-2], 0
  if word.endswith("_1"):
    return word[:-2], 1
  return word, 2


def _embedding(g, prefix=""):
  """Our TreeEmbedding at the golden's sizes, with their parameters."""
  c = seq2seq.Seq2SeqConfig(
      src_vocab_size=8,
      tgt_vocab_size=8,
      d_model=int(g["d_model"]),
      num_heads=2,
      positions="tree",
      tree_depth=int(g["k"]),
      tree_arity=int(g["n"]),
      tree_pos_width=int(g["d_pos"]),
  )
  params = {
      "encoding": {"theta": jnp.asarray(g[prefix + "theta"])},
      "to_d_model": {
          "kernel": jnp.asarray(g[prefix + "kernel"]),
          "bias": jnp.asarray(g[prefix + "bias"]),
      },
  }
  module = seq2seq.TreeEmbedding(c)
  return lambda x: np.asarray(
      module.apply({"params": params}, jnp.asarray(x, jnp.float32))
  )


def max_abs_diffs():
  """Ours vs theirs, per output (0 for exact integer agreement)."""
  g = _load()
  k, n = int(g["k"]), int(g["n"])
  trees = [_tree(json.loads(t)) for t in g["trees"]]
  diffs = {}

  # Tokens and positions of the binarised trees (their data pipeline).
  for order in ("dfs", "bfs"):
    words = [str(w) for w in g[f"{order}_words"]]
    worst = 0.0
    for i, t in enumerate(trees):
      theirs = [_their_annotation(words[j]) for j in g[f"{order}_tree{i}_ids"]]
      ours = tree_lib.lcrs_null_nodes(t, order)
      assert [(s, a) for s, a, _ in ours] == theirs, (order, i)
      pos = tree_lib.positions_from_paths([p for _, _, p in ours], n, k)
      from_arities = tree_lib.node_positions(
          [a for _, a in theirs], order, k, strict=False, lcrs=False
      )
      worst = max(
          worst,
          float(np.max(np.abs(pos - g[f"{order}_tree{i}_pos"]))),
          float(np.max(np.abs(from_arities - g[f"{order}_tree{i}_pos"]))),
      )
    diffs[f"{order}_positions"] = worst
    degrees = g[f"{order}_degrees"]
    for j, w in enumerate(words[3:], start=3):  # After _END, _GO, _UNK.
      assert _their_annotation(w)[1] == degrees[j], w

  # The encoding of given positions with given parameters.
  enc = tree_lib.TreePositionalEncoding(
      int(g["d_model"]), k=k, n=n, d_pos=int(g["d_pos"])
  )
  got = enc.apply(
      {"params": {"theta": jnp.asarray(g["theta"])}}, g["positions"]
  )
  diffs["treeified"] = float(np.max(np.abs(np.asarray(got) - g["treeified"])))
  embed = _embedding(g)
  diffs["encoder_positions"] = float(
      np.max(np.abs(embed(g["positions"]) - g["encoder_positions"]))
  )

  # Teacher forcing: the decoder's shifted positions.
  dec_embed = _embedding(g, "dec_")
  words = [str(w) for w in g["dfs_words"]]
  num_t = g["decoder_positions"].shape[1]
  rows = []
  for i in range(len(trees)):
    ids = g[f"dfs_tree{i}_ids"]
    arities = [_their_annotation(words[j])[1] for j in ids]
    rows.append(
        tree_lib.decoder_positions(
            arities, "dfs", k, n, binarize=False, length=num_t, slots="last"
        )
    )
  diffs["decoder_positions"] = float(
      np.max(np.abs(dec_embed(np.stack(rows)) - g["decoder_positions"]))
  )

  # Greedy decoding: each emitted token's position, then the inputs.
  worst_raw, worst_in = 0.0, 0.0
  for i in range(len(trees)):
    ids = g[f"dfs_tree{i}_ids"]
    state = tree_lib.TreeDecoderState("dfs", k, n, binarize=False, slots="last")
    own = [state.push(*_their_annotation(words[j])) for j in ids]
    assert state.done
    own.append(state.push("_END", 0))  # After the tree: zero.
    raw = np.stack(own)
    worst_raw = max(worst_raw, float(np.max(np.abs(raw - g[f"greedy{i}_raw"]))))
    inputs = np.concatenate([np.zeros((1, n * k), np.float32), raw])[None]
    worst_in = max(
        worst_in,
        float(np.max(np.abs(dec_embed(inputs)[0] - g[f"greedy{i}_inputs"]))),
    )
  diffs["greedy_positions"] = worst_raw
  diffs["greedy_inputs"] = worst_in
  return diffs


def test_ours_equals_icecaps():
  diffs = max_abs_diffs()
  for name, diff in diffs.items():
    assert diff <= TOLERANCE, (name, diff)


def test_theta_init_is_theirs():
  """Their theta: tf.get_variable without initializer, i.e. Glorot uniform
  with fan_in = fan_out = m: U(-sqrt(3/m), sqrt(3/m)). Ours ('glorot'): the
  same bounds and spread."""
  g = _load()
  for m in (32, 4096):
    limit = math.sqrt(3.0 / m)
    theirs = g[f"theta_init_m{m}"]
    enc = tree_lib.TreePositionalEncoding(2 * 32 * m, k=32, n=2)
    ours = np.asarray(
        enc.init(jax.random.key(m), jnp.zeros((1, 1, 64)))["params"]["theta"]
    )
    for theta in (theirs, ours):
      assert theta.shape == (m,)
      assert np.max(np.abs(theta)) <= limit * (1 + 1e-6)
    if m == 4096:  # Uniform on +-limit: sd limit / sqrt(3) = 1 / sqrt(m).
      for theta in (theirs, ours):
        np.testing.assert_allclose(np.std(theta), 1 / math.sqrt(m), rtol=0.05)
  # At the paper's sizes (m = 32) |p| = |tanh(theta)| stays under 0.3.
  assert np.max(np.abs(np.tanh(g["theta_init_m32"]))) < 0.3
