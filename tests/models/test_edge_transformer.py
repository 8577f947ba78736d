"""Tests for the Edge Transformer layer, stack, input embedders and heads."""

import itertools

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from relational_jax.layers.triangular import TriangularAttention
from relational_jax.models import edge_transformer as et

B, N, D, H = 2, 4, 8, 2


def _x(seed, n=N):
  return jax.random.normal(jax.random.PRNGKey(seed), (B, n, n, D))


def _num_params(tree):
  return sum(np.size(leaf) for leaf in jax.tree.leaves(tree))


def _config(**kwargs):
  """An ETConfig of width D (H heads of width D // H)."""
  kwargs.setdefault("num_heads", H)
  kwargs.setdefault("head_dim", D // kwargs["num_heads"])
  return et.ETConfig(**kwargs)


def test_layer_shape_dropout_and_grad():
  x = _x(0)
  mask = jnp.array([[True, True, True, False], [True] * N])
  layer = et.EdgeTransformerLayer(
      num_heads=H, dropout_rate=0.5, layout="released_code", chunk_size=3
  )
  params = layer.lazy_init(jax.random.PRNGKey(0), x, mask)
  assert set(params["params"]) == {
      "ln_attention",
      "attention",
      "ln_ffn",
      "ffn_hidden",
      "ffn_out",
  }
  assert params["params"]["ffn_hidden"]["kernel"].shape == (D, 4 * D)

  @jax.jit
  def run(params, x, rng):
    det = layer.apply(params, x, mask)

    def loss(p):
      out = layer.apply(p, x, mask, deterministic=False, rngs={"dropout": rng})
      return jnp.sum(out**2), out

    (_, drop), grad = jax.value_and_grad(loss, has_aux=True)(params)
    return det, drop, grad

  det, drop, grad = run(params, x, jax.random.PRNGKey(1))
  assert det.shape == (B, N, N, D)
  assert not np.allclose(det, drop)
  assert all(np.isfinite(g).all() for g in jax.tree.leaves(grad))


def test_layer_matches_eq3_by_hand():
  x = _x(1)
  layer = et.EdgeTransformerLayer(num_heads=H)
  params = layer.lazy_init(jax.random.PRNGKey(0), x)
  p = params["params"]
  ln = lambda name, y: nn.LayerNorm(epsilon=1e-5).apply({"params": p[name]}, y)
  ta = TriangularAttention(num_heads=H).apply(
      {"params": p["attention"]}, ln("ln_attention", x)
  )
  z = ln("ln_ffn", x + ta)  # LN(X + TA(LN(X)))
  hidden = jax.nn.relu(z @ p["ffn_hidden"]["kernel"] + p["ffn_hidden"]["bias"])
  expected = hidden @ p["ffn_out"]["kernel"] + p["ffn_out"]["bias"]  # FFN(.)
  np.testing.assert_allclose(
      jax.jit(layer.apply)(params, x), expected, rtol=1e-5, atol=1e-5
  )


@pytest.mark.parametrize("layout", ["paper", "released_code"])
@pytest.mark.slow
def test_chunked_ffn_equals_unchunked_values_and_grads(layout):
  n = 7
  x = _x(5, n=n)
  mask = jnp.array([[True] * 5 + [False] * 2, [True] * n])
  cotangent = _x(6, n=n)
  unchunked = et.EdgeTransformerLayer(
      num_heads=H, layout=layout, chunk_size=3, ffn_chunk_size=None
  )
  params = unchunked.lazy_init(jax.random.PRNGKey(0), x, mask)

  def value_and_grad(layer):
    loss = lambda p, x: jnp.sum(layer.apply(p, x, mask) * cotangent)
    return jax.jit(jax.value_and_grad(loss, argnums=(0, 1)))(params, x)

  expected = value_and_grad(unchunked)
  # 1, 2, 3 and 4 do not divide N=7 (the last block overlaps), 7 and 9 >= N.
  for ffn_chunk_size in (1, 2, 3, 4, 7, 9):
    layer = et.EdgeTransformerLayer(
        num_heads=H, layout=layout, chunk_size=3, ffn_chunk_size=ffn_chunk_size
    )
    # Same parameter tree (and initial values) whatever the chunking.
    chunked_params = layer.lazy_init(jax.random.PRNGKey(0), x, mask)
    jax.tree.map(np.testing.assert_array_equal, chunked_params, params)
    got = value_and_grad(layer)
    for u, v in zip(jax.tree.leaves(got), jax.tree.leaves(expected)):
      np.testing.assert_allclose(
          np.asarray(u), np.asarray(v), rtol=1e-5, atol=1e-5
      )


@pytest.mark.slow
def test_chunked_ffn_with_dropout():
  n = 5
  x = _x(7, n=n)
  layer = et.EdgeTransformerLayer(
      num_heads=H, dropout_rate=0.5, layout="released_code", ffn_chunk_size=2
  )
  params = layer.lazy_init(jax.random.PRNGKey(0), x)

  def loss(p, rng):
    out = layer.apply(p, x, deterministic=False, rngs={"dropout": rng})
    return jnp.sum(out**2)

  grad_fn = jax.jit(jax.value_and_grad(loss))
  value, grad = grad_fn(params, jax.random.PRNGKey(1))
  value_again, _ = grad_fn(params, jax.random.PRNGKey(1))
  other, _ = grad_fn(params, jax.random.PRNGKey(2))
  assert np.isfinite(value) and value == value_again and value != other
  assert all(np.isfinite(g).all() for g in jax.tree.leaves(grad))
  # Training mode drops: its output is not the deterministic one.
  out = layer.apply(
      params, x, deterministic=False, rngs={"dropout": jax.random.PRNGKey(1)}
  )
  det = layer.apply(params, x)
  assert not np.allclose(out, det)


def test_row_chunks_draw_their_own_dropout_masks():
  """Each FFN row chunk folds its index into the dropout key: equal rows in
  different chunks get different masks."""
  u_BxNxNxD = jnp.ones((1, 6, 6, 4))
  drop = lambda p, rows, rng: rows * jax.random.bernoulli(rng, 0.5, rows.shape)
  out = et._row_chunked(drop, None, u_BxNxNxD, jax.random.PRNGKey(0), 2)
  chunks = np.asarray(out[0]).reshape(3, 2, 6, 4)
  assert not np.array_equal(chunks[0], chunks[1])
  assert not np.array_equal(chunks[1], chunks[2])
  same = et._row_chunked(drop, None, u_BxNxNxD, jax.random.PRNGKey(0), 2)
  np.testing.assert_array_equal(out, same)


@pytest.mark.slow
def test_chunked_ffn_lowers_compiled_memory():
  b, n, d = 2, 16, 32
  x = jnp.ones((b, n, n, d), jnp.float32)

  def peak_bytes(ffn_chunk_size):
    layer = et.EdgeTransformerLayer(num_heads=4, ffn_chunk_size=ffn_chunk_size)
    params = jax.eval_shape(layer.init, jax.random.PRNGKey(0), x)
    grad = jax.grad(lambda p, x: jnp.sum(layer.apply(p, x)), argnums=(0, 1))
    analysis = jax.jit(grad).lower(params, x).compile().memory_analysis()
    if analysis is None:
      pytest.skip("memory_analysis() is not available on this backend")
    return analysis.temp_size_in_bytes

  state_bytes = b * n * n * d * 4  # one B x N x N x D fp32 tensor
  # Unchunked, the backward holds the 4D hidden, its ReLU and gradients.
  saved = peak_bytes(None) - peak_bytes(4)
  assert saved >= 4 * state_bytes, (saved, state_bytes)


@pytest.mark.slow
def test_tied_and_untied_parameter_counts():
  x = _x(2)
  num_layers = 3
  single = et.EdgeTransformerLayer(num_heads=H)
  tied = et.EdgeTransformer(_config(num_layers=num_layers))
  untied = et.EdgeTransformer(_config(num_layers=num_layers, tied=False))
  shapes = lambda m: jax.eval_shape(m.init, jax.random.PRNGKey(0), x)
  p_single, p_untied = shapes(single), shapes(untied)
  p_tied = tied.lazy_init(jax.random.PRNGKey(0), x)
  assert list(p_tied["params"]) == ["layer"]
  assert sorted(p_untied["params"]) == ["layer_0", "layer_1", "layer_2"]
  assert _num_params(p_tied) == _num_params(p_single)
  assert _num_params(p_untied) == num_layers * _num_params(p_single)
  # Tied = the one layer applied L times.
  apply_layer = jax.jit(single.apply)
  expected = x
  for _ in range(num_layers):
    expected = apply_layer({"params": p_tied["params"]["layer"]}, expected)
  np.testing.assert_allclose(
      jax.jit(tied.apply)(p_tied, x), expected, rtol=1e-5, atol=1e-5
  )


def test_sequence_embedding_tokens_on_diagonal():
  tokens = jnp.array([[3, 1, 4, 1, 5], [9, 2, 6, 5, 3]])
  n, max_distance = tokens.shape[1], 2
  embed = et.SequenceEdgeEmbedding(
      vocab_size=10, features=D, max_distance=max_distance
  )
  params = embed.init(jax.random.PRNGKey(0), tokens)
  x = np.asarray(embed.apply(params, tokens))
  assert x.shape == (B, n, n, D)
  e = np.asarray(params["params"]["token"]["embedding"])
  a = np.asarray(params["params"]["relative_position"]["embedding"])
  tokens = np.asarray(tokens)
  for b in range(B):
    for i in range(n):
      for j in range(n):
        rel = a[int(np.clip(i - j, -max_distance, max_distance)) + max_distance]
        want = e[tokens[b, i]] + rel if i == j else rel  # eq. 10
        np.testing.assert_allclose(x[b, i, j], want, rtol=1e-6, atol=1e-6)


def test_graph_embedding():
  labels = jnp.array([[[0, 1], [2, 0]], [[1, 1], [0, 2]]])
  embed = et.GraphEdgeEmbedding(num_labels=3, features=D)
  params = embed.init(jax.random.PRNGKey(0), labels)
  x = embed.apply(params, labels)
  assert x.shape == (B, 2, 2, D)
  table = params["params"]["label"]["embedding"]
  np.testing.assert_allclose(x[1, 1, 1], table[2])
  with pytest.raises(ValueError, match="labels_BxNxN"):
    embed.apply(params, jnp.zeros((B, 2, 3), jnp.int32))


def test_heads():
  x = _x(3)
  mask = jnp.array([[True, True, False, False], [True] * N])
  edge = et.EdgeClassifier(num_classes=5)
  node = et.NodeClassifier(num_classes=7)
  parent = et.ParentPointerHead()
  init = lambda m, *a: m.init(jax.random.PRNGKey(0), *a)
  p_edge, p_node, p_parent = init(edge, x), init(node, x), init(parent, x, mask)
  edge_logits = edge.apply(p_edge, x)
  assert edge_logits.shape == (B, N, N, 5)
  node_logits = node.apply(p_node, x)
  assert node_logits.shape == (B, N, 7)
  # Per element: x_ij W + b, and x_ii W + b.
  xs, we, wn = (
      np.asarray(x),
      p_edge["params"]["logits"],
      p_node["params"]["logits"],
  )
  for b, i, j in itertools.product(range(B), range(N), range(N)):
    np.testing.assert_allclose(
        edge_logits[b, i, j], xs[b, i, j] @ we["kernel"] + we["bias"], atol=1e-5
    )
  for b, i in itertools.product(range(B), range(N)):
    np.testing.assert_allclose(
        node_logits[b, i], xs[b, i, i] @ wn["kernel"] + wn["bias"], atol=1e-5
    )
  # Node labels read the loop edges x_ii only.
  x_offdiag = x + 10.0 * (1.0 - jnp.eye(N))[None, :, :, None]
  np.testing.assert_allclose(
      node.apply(p_node, x_offdiag), node_logits, rtol=1e-5, atol=1e-5
  )
  logits = parent.apply(p_parent, x, mask)
  assert logits.shape == (B, N, N) and logits.dtype == jnp.float32
  # Padded candidates j are masked for every i; real ones are x_ji's score.
  np.testing.assert_array_equal(logits[0, :, 2:], -1e9)
  assert np.all(logits[0, :, :2] > -1e8) and np.all(logits[1] > -1e8)
  w = p_parent["params"]["score"]
  score_ji = jnp.einsum("bjid,d->bij", x, w["kernel"][:, 0]) + w["bias"][0]
  np.testing.assert_allclose(logits[1], score_ji[1], rtol=1e-5, atol=1e-5)
  row = et.ParentPointerHead(from_column=False).apply(p_parent, x)
  np.testing.assert_allclose(
      row, jnp.swapaxes(score_ji, 1, 2), rtol=1e-5, atol=1e-5
  )


@pytest.mark.slow
def test_end_to_end_sequence_model_gradient():
  tokens = jnp.array([[1, 2, 3, 0], [3, 2, 1, 1]])
  mask = jnp.array([[True, True, True, False], [True] * N])

  class Model(nn.Module):

    @nn.compact
    def __call__(self, tokens, mask):
      x = et.SequenceEdgeEmbedding(vocab_size=4, features=D)(tokens)
      x = et.EdgeTransformer(
          _config(num_layers=2, ablation="attention", layout="released_code")
      )(x, mask)
      return et.ParentPointerHead()(x, mask)

  model = Model()
  params = model.lazy_init(jax.random.PRNGKey(0), tokens, mask)
  parents = jnp.array([[1, 1, 0, 0], [0, 0, 1, 2]])

  @jax.jit
  def loss_and_grad(params):
    def loss(params):
      logits = model.apply(params, tokens, mask)
      logp = jax.nn.log_softmax(logits, axis=-1)
      nll = -jnp.take_along_axis(logp, parents[..., None], axis=-1)[..., 0]
      return jnp.sum(nll * mask) / jnp.sum(mask)

    return jax.value_and_grad(loss)(params)

  value, grad = loss_and_grad(params)
  assert np.isfinite(value)
  assert all(np.isfinite(g).all() for g in jax.tree.leaves(grad))


@pytest.mark.parametrize(
    "make, args, match",
    [
        (
            lambda: et.EdgeTransformerLayer(num_heads=H, layout="post"),
            (jnp.ones((B, N, N, D)),),
            (
                r"Unknown layout 'post'; valid choices are \['paper',"
                r" 'released_code'\]"
            ),
        ),
        (
            lambda: et.EdgeTransformerLayer(num_heads=3),
            (jnp.ones((B, N, N, D)),),
            "num_heads=3 must divide the width D 8",
        ),
        (
            lambda: et.EdgeTransformerLayer(num_heads=H, ffn_chunk_size=0),
            (jnp.ones((B, N, N, D)),),
            "ffn_chunk_size must be a positive int",
        ),
        (
            lambda: et.EdgeTransformer(_config(num_layers=0)),
            (jnp.ones((B, N, N, D)),),
            "num_layers must be a positive int",
        ),
        (
            lambda: et.EdgeTransformer(_config(num_layers=1)),
            (jnp.ones((B, N, N + 1, D)),),
            "equal node axes",
        ),
        (
            lambda: et.EdgeTransformer(_config(num_layers=1, ablation="both")),
            (jnp.ones((B, N, N, D)),),
            r"Unknown ablation 'both'",
        ),
        (
            lambda: et.ParentPointerHead(),
            (jnp.ones((B, N, N, D)), jnp.ones((B, N - 1), bool)),
            "node_mask_BxN",
        ),
    ],
)
def test_bad_inputs_raise(make, args, match):
  with pytest.raises(ValueError, match=match):
    make().init(jax.random.PRNGKey(0), *args)


def test_project_and_update_compose_to_the_layer():
  """__call__ = update(x, sum over pivots of project(x)), the split that
  incremental decoding uses."""
  from relational_jax.layers import triangular  # pylint: disable=g-import-not-at-top

  x = _x(4)
  mask = jnp.array([[True, True, True, False], [True] * N])
  layer = et.EdgeTransformerLayer(
      num_heads=H, layout="released_code", chunk_size=3
  )
  params = layer.init(jax.random.PRNGKey(0), x, mask)
  q, k, v1, v2 = layer.apply(params, x, method=et.EdgeTransformerLayer.project)
  assert q.shape == k.shape == v1.shape == v2.shape == (B, N, N, H, D // H)
  o = triangular.triangular_attention_core(q, k, v1, v2, mask, chunk_size=3)
  got = layer.apply(params, x, o, method=et.EdgeTransformerLayer.update)
  np.testing.assert_allclose(
      got, layer.apply(params, x, mask), rtol=1e-5, atol=1e-5
  )


@pytest.mark.slow
def test_any_ffn_dim_and_ln_epsilon():
  x = _x(5)
  layer = et.EdgeTransformerLayer(num_heads=H, ffn_dim=5)
  params = layer.init(jax.random.PRNGKey(0), x)
  assert params["params"]["ffn_hidden"]["kernel"].shape == (D, 5)
  assert layer.apply(params, x).shape == (B, N, N, D)
  stack = et.EdgeTransformer(_config(num_layers=1, ffn_dim=5))
  assert stack.init(jax.random.PRNGKey(0), x)["params"]["layer"]["ffn_hidden"][
      "kernel"
  ].shape == (D, 5)
  # ln_epsilon reaches the LayerNorms (default 1e-5, the authors' value).
  assert et.ETConfig().ln_epsilon == 1e-5
  small = 1e-3 * x
  params_4d = et.EdgeTransformerLayer(num_heads=H).init(
      jax.random.PRNGKey(0), x
  )
  default = et.EdgeTransformerLayer(num_heads=H).apply(params_4d, small)
  large_eps = et.EdgeTransformerLayer(num_heads=H, ln_epsilon=1.0).apply(
      params_4d, small
  )
  assert not np.allclose(default, large_eps, atol=1e-3)


@pytest.mark.parametrize(
    "layout, tied",
    [
        ("paper", True),
        pytest.param("released_code", False, marks=pytest.mark.slow),
    ],
)
def test_stack_is_permutation_equivariant_padding_invariant_and_jittable(
    layout, tied
):
  """The stack (2 layers; pivot chunks of 3 and FFN blocks of 3, neither
  dividing N = 5): relabelling the nodes (P X P^T, mask permuted alike)
  relabels the output; a graph of 3 real nodes padded to 5 with anything
  in the padding gives its real pairs the unpadded graph's outputs; jit ==
  eager."""
  n, n_real = 5, 3
  config = _config(
      num_layers=2, tied=tied, layout=layout, chunk_size=3, ffn_chunk_size=3
  )
  stack = et.EdgeTransformer(config)
  x = jax.random.normal(jax.random.PRNGKey(0), (B, n, n, D))
  mask = jnp.array([[True] * n, [True, False, True, True, False]])
  params = stack.init(jax.random.PRNGKey(1), x, mask)
  apply = jax.jit(stack.apply)
  y = apply(params, x, mask)
  perm = np.array([3, 0, 4, 1, 2])
  y_perm = apply(params, x[:, perm][:, :, perm], mask[:, perm])
  real = np.asarray(mask)[:, :, None] & np.asarray(mask)[:, None, :]
  np.testing.assert_allclose(
      np.where(real[:, perm][:, :, perm, None], y_perm, 0.0),
      np.where(real[..., None], y, 0.0)[:, perm][:, :, perm],
      atol=1e-5,
  )
  garbage = 10.0 * jax.random.normal(jax.random.PRNGKey(2), x.shape)
  x_pad = garbage.at[:, :n_real, :n_real].set(x[:, :n_real, :n_real])
  pad_mask = jnp.arange(n)[None, :].repeat(B, 0) < n_real
  np.testing.assert_allclose(
      apply(params, x_pad, pad_mask)[:, :n_real, :n_real],
      apply(params, x[:, :n_real, :n_real]),
      atol=1e-5,
  )
  np.testing.assert_allclose(stack.apply(params, x, mask), y, atol=1e-5)
