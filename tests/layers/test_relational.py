"""Relational attention, node and edge updates vs loop references of RT eq. 3-7, 17-18."""

import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from relational_jax.layers.relational import EdgeUpdate
from relational_jax.layers.relational import NodeUpdate
from relational_jax.layers.relational import RelationalAttention
from relational_jax.layers.relational import RelationalTransformerLayer
from relational_jax.layers.relational import attention_mask
from relational_jax.models.relational_transformer import RelationalTransformer
from relational_jax.models.relational_transformer import RTConfig
from tests.layers.test_triangular import naive_triangular_attention

B, N, D, E, H = 2, 5, 8, 6, 2
K = D // H


def _inputs(seed=0, n=N):
  k1, k2, k3 = jax.random.split(jax.random.PRNGKey(seed), 3)
  nodes = jax.random.normal(k1, (B, n, D))
  edges = jax.random.normal(k2, (B, n, n, E))
  adjacency = jax.random.bernoulli(k3, 0.5, (B, n, n)) | jnp.eye(n, dtype=bool)
  return nodes, edges, adjacency


def _dense(p, x):
  """x @ kernel + bias for DenseGeneral/Dense params, one vector at a time."""
  kernel = np.asarray(p["kernel"])
  out = np.tensordot(x, kernel, axes=([0], [0]))
  if "bias" in p:
    out = out + np.asarray(p["bias"])
  return out


def _layer_norm(p, x, eps=1e-5):
  mu, var = x.mean(), x.var()
  return (x - mu) / np.sqrt(var + eps) * np.asarray(p["scale"]) + np.asarray(
      p["bias"]
  )


def _perturbed(params, seed=11):
  """`params` plus noise in every leaf: the references then see nonzero
  biases and LayerNorm offsets and scales other than 1, as trained ones."""
  leaves, tree = jax.tree_util.tree_flatten(params)
  keys = jax.random.split(jax.random.PRNGKey(seed), len(leaves))
  return jax.tree_util.tree_unflatten(
      tree,
      [x + 0.3 * jax.random.normal(k, x.shape) for x, k in zip(leaves, keys)],
  )


def naive_relational_attention(p, nodes, edges, mask, use_edges=True):
  """Loops over b, i, j, heads: eq. 4 then softmax over j (eq. 3)."""
  nodes, edges = np.asarray(nodes), np.asarray(edges)
  out = np.zeros((B, nodes.shape[1], H, K))
  n = nodes.shape[1]
  for b, i in itertools.product(range(B), range(n)):
    logits = np.zeros((H, n))
    values = np.zeros((n, H, K))
    for j in range(n):
      q = _dense(p["query_node"], nodes[b, i])
      k = _dense(p["key_node"], nodes[b, j])
      v = _dense(p["value_node"], nodes[b, j])
      if use_edges:  # W^Q_e, W^K_e are stored stacked as "edge_qk".
        qk = _dense(p["edge_qk"], edges[b, i, j])
        q = q + qk[0]
        k = k + qk[1]
        v = v + _dense(
            {"kernel": p["value_edge_kernel"], "bias": p["value_edge_bias"]},
            edges[b, i, j],
        )
      for h in range(H):
        logits[h, j] = q[h] @ k[h] / np.sqrt(K)
        if mask is not None and not mask[b, i, j]:
          logits[h, j] = -1e9
      values[j] = v
    for h in range(H):
      a = np.exp(logits[h] - logits[h].max())
      a = a / a.sum()
      out[b, i, h] = sum(a[j] * values[j, h] for j in range(n))
  return out.reshape(B, n, H * K)


@pytest.mark.parametrize("use_mask", [False, True])
@pytest.mark.parametrize("use_edges", [True, False])
def test_relational_attention_matches_loop_reference(use_mask, use_edges):
  nodes, edges, adjacency = _inputs()
  mask = adjacency if use_mask else None
  layer = RelationalAttention(num_heads=H, use_edges=use_edges)
  params = _perturbed(
      layer.init(jax.random.PRNGKey(1), nodes, edges, mask)["params"]
  )
  got = layer.apply({"params": params}, nodes, edges, mask)
  want = naive_relational_attention(
      params,
      nodes,
      edges,
      None if mask is None else np.asarray(mask),
      use_edges,
  )
  np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_node_update_matches_loop_reference():
  nodes, _, _ = _inputs()
  m = jax.random.normal(jax.random.PRNGKey(5), (B, N, D))
  layer = NodeUpdate(ffn_dim=3)
  params = _perturbed(layer.init(jax.random.PRNGKey(2), m, nodes)["params"])
  got = layer.apply({"params": params}, m, nodes)
  for b, i in itertools.product(range(B), range(N)):
    u = _layer_norm(
        params["ln_1"]["LayerNorm_0"],
        _dense(params["w1"], np.asarray(m[b, i])) + np.asarray(nodes[b, i]),
    )
    f = np.maximum(_dense(params["w2"], u), 0)
    want = _layer_norm(
        params["ln_2"]["LayerNorm_0"], _dense(params["w3"], f) + u
    )
    np.testing.assert_allclose(got[b, i], want, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("triangular_heads", [0, 2])
def test_edge_update_matches_loop_reference(triangular_heads):
  """RT eq. 5-7; with triangular heads (rt_triangular) the Edge
  Transformer's triangular attention of e (ET eq. 4-9, its own loop
  reference) joins the residual: u_ij = LN(m_ij W_5 + TA(e)_ij + e_ij). A
  padded node (mask False) is no pivot of TA."""
  nodes, edges, _ = _inputs()
  node_mask = jnp.arange(N)[None].repeat(B, 0) < jnp.array([[N], [N - 2]])
  layer = EdgeUpdate(
      msg_dim=4, ffn_dim=3, triangular_heads=triangular_heads, chunk_size=2
  )
  params = _perturbed(layer.init(jax.random.PRNGKey(3), edges, nodes)["params"])
  got = layer.apply({"params": params}, edges, nodes, node_mask_BxN=node_mask)
  # W_4 of eq. 6 as one matrix acting on the concatenation [e_ij, e_ji, n_i, n_j].
  w4 = np.concatenate(
      [
          np.asarray(params[k]["kernel"])
          for k in ("w4_e_ij", "w4_e_ji", "w4_n_i", "w4_n_j")
      ],
      axis=0,
  )
  b4 = np.asarray(params["w4_e_ij"]["bias"])
  e, n = np.asarray(edges), np.asarray(nodes)
  ta = np.zeros_like(e)
  if triangular_heads:
    ta = np.asarray(
        naive_triangular_attention(
            {"params": params["triangular"]},
            edges,
            node_mask,
            triangular_heads,
            "none",
        )
    )
  for b, i, j in itertools.product(range(B), range(N), range(N)):
    cat = np.concatenate([e[b, i, j], e[b, j, i], n[b, i], n[b, j]])
    m = np.maximum(cat @ w4 + b4, 0)
    u = _layer_norm(
        params["ln_1"]["LayerNorm_0"],
        _dense(params["w5"], m) + ta[b, i, j] + e[b, i, j],
    )
    f = np.maximum(_dense(params["w6"], u), 0)
    want = _layer_norm(
        params["ln_2"]["LayerNorm_0"], _dense(params["w7"], f) + u
    )
    np.testing.assert_allclose(got[b, i, j], want, rtol=1e-4, atol=1e-5)


def test_triangular_edge_update_chunked_equals_unchunked():
  """rt_triangular's pivot chunking changes no value: chunks of 1 and 2
  against one chunk of all N pivots."""
  nodes, edges, _ = _inputs()
  make = lambda c: EdgeUpdate(4, 3, triangular_heads=2, chunk_size=c)
  variables = make(N).init(jax.random.PRNGKey(3), edges, nodes)
  full = make(N).apply(variables, edges, nodes)
  for chunk in (1, 2):
    np.testing.assert_allclose(
        make(chunk).apply(variables, edges, nodes), full, rtol=1e-5, atol=1e-5
    )


def test_layer_updates_nodes_before_edges():
  """The edge update reads the *updated* nodes (RT section 3.2)."""
  nodes, edges, _ = _inputs()
  layer = RelationalTransformerLayer(
      num_heads=H, node_ffn_dim=4, edge_msg_dim=4, edge_ffn_dim=3
  )
  variables = layer.init(jax.random.PRNGKey(4), nodes, edges)
  new_nodes, new_edges = layer.apply(variables, nodes, edges)
  p = variables["params"]
  want = EdgeUpdate(4, 3).apply({"params": p["edge_update"]}, edges, new_nodes)
  np.testing.assert_allclose(new_edges, want, rtol=1e-5, atol=1e-6)


def _stack(**kw):
  cfg = RTConfig(
      num_layers=2,
      num_heads=H,
      head_dim=K,
      node_ffn_dim=4,
      edge_msg_dim=4,
      edge_ffn_dim=3,
      edge_dim=E,
      **kw,
  )
  return RelationalTransformer(cfg)


def test_stack_is_node_permutation_equivariant():
  nodes, edges, adjacency = _inputs()
  model = _stack(use_adjacency=True)
  variables = model.init(jax.random.PRNGKey(0), nodes, edges, adjacency)
  perm = np.random.RandomState(0).permutation(N)
  out_n, out_e = model.apply(variables, nodes, edges, adjacency)
  p_n, p_e = model.apply(
      variables,
      nodes[:, perm],
      edges[:, perm][:, :, perm],
      adjacency[:, perm][:, :, perm],
  )
  np.testing.assert_allclose(p_n, out_n[:, perm], rtol=1e-4, atol=1e-5)
  np.testing.assert_allclose(
      p_e, out_e[:, perm][:, :, perm], rtol=1e-4, atol=1e-5
  )


@pytest.mark.slow
@pytest.mark.parametrize(
    "options", [{}, dict(triangular_heads=2, chunk_size=2)], ids=["rt", "tri"]
)
def test_padding_does_not_change_real_nodes(options):
  """Garbage in padded node slots changes no real node or edge (with
  triangular heads: padded nodes are no pivots)."""
  nodes, edges, _ = _inputs()
  model = _stack(**options)
  variables = model.init(jax.random.PRNGKey(0), nodes, edges)
  out_n, out_e = model.apply(variables, nodes, edges)
  pad = 3
  big_n, big_e, _ = _inputs(seed=7, n=N + pad)  # garbage in the padded slots
  big_n = big_n.at[:, :N].set(nodes)
  big_e = big_e.at[:, :N, :N].set(edges)
  node_mask = jnp.arange(N + pad)[None].repeat(B, 0) < N
  pad_n, pad_e = model.apply(variables, big_n, big_e, node_mask_BxN=node_mask)
  np.testing.assert_allclose(pad_n[:, :N], out_n, rtol=1e-4, atol=1e-5)
  np.testing.assert_allclose(pad_e[:, :N, :N], out_e, rtol=1e-4, atol=1e-5)


def test_jit_equals_no_jit_and_dropout_only_in_training():
  nodes, edges, _ = _inputs()
  model = _stack(dropout_rate=0.3)
  variables = model.init(jax.random.PRNGKey(0), nodes, edges)
  eager = model.apply(variables, nodes, edges)
  jitted = jax.jit(model.apply)(variables, nodes, edges)
  for a, b in zip(eager, jitted):
    np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
  train = model.apply(
      variables,
      nodes,
      edges,
      deterministic=False,
      rngs={"dropout": jax.random.PRNGKey(1)},
  )
  assert not np.allclose(train[0], eager[0])


def _count(tree):
  return sum(x.size for x in jax.tree_util.tree_leaves(tree))


@pytest.mark.parametrize("stack", [False, True])
def test_compute_and_parameter_dtypes_reach_every_sublayer(stack):
  """dtype / param_dtype reach the LayerNorms too: bfloat16 in, parameters
  and outputs bfloat16 (the LayerNorm statistics stay fp32 inside)."""
  nodes, edges, _ = _inputs()
  bf16 = dict(dtype=jnp.bfloat16, param_dtype=jnp.bfloat16)
  if stack:
    module = RelationalTransformer(_stack().config, **bf16)
  else:
    module = RelationalTransformerLayer(
        num_heads=H,
        head_dim=K,
        node_ffn_dim=4,
        edge_msg_dim=4,
        edge_ffn_dim=3,
        **bf16,
    )
  args = (nodes.astype(jnp.bfloat16), edges.astype(jnp.bfloat16))
  variables = module.init(jax.random.PRNGKey(0), *args)
  kinds = {x.dtype for x in jax.tree_util.tree_leaves(variables)}
  assert kinds == {jnp.dtype(jnp.bfloat16)}
  out_nodes, out_edges = module.apply(variables, *args)
  assert out_nodes.dtype == out_edges.dtype == jnp.bfloat16


def test_tied_layers_share_parameters():
  nodes, edges, _ = _inputs()
  untied = _stack().init(jax.random.PRNGKey(0), nodes, edges)
  tied = _stack(tied=True).init(jax.random.PRNGKey(0), nodes, edges)
  assert _count(untied) == 2 * _count(tied)


def test_tied_stack_is_its_one_layer_applied_num_layers_times():
  nodes, edges, adjacency = _inputs()
  stack = _stack(tied=True, use_adjacency=True)
  variables = stack.init(jax.random.PRNGKey(0), nodes, edges, adjacency)
  assert list(variables["params"]) == ["layer_tied"]
  layer = RelationalTransformerLayer(
      num_heads=H, head_dim=K, node_ffn_dim=4, edge_msg_dim=4, edge_ffn_dim=3
  )
  layer_params = {"params": variables["params"]["layer_tied"]}
  n, e = nodes, edges
  for _ in range(stack.config.num_layers):
    n, e = layer.apply(layer_params, n, e, attention_mask(adjacency, None))
  got_n, got_e = stack.apply(variables, nodes, edges, adjacency)
  np.testing.assert_allclose(got_n, n, rtol=1e-5, atol=1e-5)
  np.testing.assert_allclose(got_e, e, rtol=1e-5, atol=1e-5)


def test_ablations_standard_transformer_and_no_edge_update():
  nodes, edges, _ = _inputs()
  no_update = _stack(edge_update=False)
  v = no_update.init(jax.random.PRNGKey(0), nodes, edges)
  _, e_out = no_update.apply(v, nodes, edges)
  np.testing.assert_array_equal(e_out, edges)
  plain = _stack(use_edges=False)
  v = plain.init(jax.random.PRNGKey(0), nodes, edges)
  assert not any(
      "edge" in "/".join(map(str, path))
      for path, _ in jax.tree_util.tree_leaves_with_path(v)
  )
  n1, _ = plain.apply(v, nodes, edges)
  n2, _ = plain.apply(v, nodes, edges * 0 + 5.0)
  np.testing.assert_allclose(n1, n2)


def test_bad_input_errors():
  nodes, edges, _ = _inputs()
  with pytest.raises(
      ValueError, match=r"num_heads=3 must divide the node width D 8"
  ):
    RelationalAttention(num_heads=3).init(jax.random.PRNGKey(0), nodes, edges)
  with pytest.raises(ValueError, match=r"e_BxNxNxE axis 2 must have size 5"):
    RelationalAttention(num_heads=2).init(
        jax.random.PRNGKey(0), nodes, edges[:, :, :4]
    )
  with pytest.raises(ValueError, match=r"n_BxNxD axis 2 must have size 8"):
    _stack().init(jax.random.PRNGKey(0), nodes[..., :6], edges)
  n = nodes.shape[1]
  with pytest.raises(ValueError, match=r"mask_BxNxN axis 0 must have size 2"):
    RelationalAttention(num_heads=2).init(
        jax.random.PRNGKey(0), nodes, edges, jnp.ones((3, n, n), bool)
    )
  RelationalAttention(num_heads=2).init(  # One mask for the whole batch.
      jax.random.PRNGKey(0), nodes, edges, jnp.ones((1, n, n), bool)
  )
  with pytest.raises(ValueError, match=r"e_BxNxNxE axis 3 must have size 6"):
    _stack().init(jax.random.PRNGKey(0), nodes, edges[..., :4])  # edge_dim
  with pytest.raises(
      ValueError, match=r"RTConfig.num_layers must be a positive int"
  ):
    RTConfig(num_layers=0)
  with pytest.raises(ValueError, match=r"RTConfig.chunk_size .*got None"):
    RTConfig(chunk_size=None)
  with pytest.raises(ValueError, match=r"triangular_heads must be .*got -1"):
    RTConfig(triangular_heads=-1)
  for off in ("use_edges", "edge_update"):  # No edge update reads the heads.
    with pytest.raises(
        ValueError,
        match=rf"triangular_heads=4 is read by the edge update only.*"
        rf"{off}=False.*set triangular_heads=0",
    ):
      RTConfig(triangular_heads=4, **{off: False})
  with pytest.raises(
      ValueError, match=r"RTConfig.tied must be a bool, got 'no'"
  ):
    RTConfig(tied="no")
  with pytest.raises(
      ValueError, match=r"edge_dim must be a positive int .*2.5"
  ):
    RTConfig(edge_dim=2.5)
