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
from relational_jax.models.relational_transformer import RelationalTransformer
from relational_jax.models.relational_transformer import RTConfig

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
  params = layer.init(jax.random.PRNGKey(1), nodes, edges, mask)["params"]
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
  params = layer.init(jax.random.PRNGKey(2), m, nodes)["params"]
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


def test_edge_update_matches_loop_reference():
  nodes, edges, _ = _inputs()
  layer = EdgeUpdate(msg_dim=4, ffn_dim=3)
  params = layer.init(jax.random.PRNGKey(3), edges, nodes)["params"]
  got = layer.apply({"params": params}, edges, nodes)
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
  for b, i, j in itertools.product(range(B), range(N), range(N)):
    cat = np.concatenate([e[b, i, j], e[b, j, i], n[b, i], n[b, j]])
    m = np.maximum(cat @ w4 + b4, 0)
    u = _layer_norm(
        params["ln_1"]["LayerNorm_0"], _dense(params["w5"], m) + e[b, i, j]
    )
    f = np.maximum(_dense(params["w6"], u), 0)
    want = _layer_norm(
        params["ln_2"]["LayerNorm_0"], _dense(params["w7"], f) + u
    )
    np.testing.assert_allclose(got[b, i, j], want, rtol=1e-4, atol=1e-5)


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
      **kw
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
def test_padding_does_not_change_real_nodes():
  nodes, edges, _ = _inputs()
  model = _stack()
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


def test_tied_layers_share_parameters():
  nodes, edges, _ = _inputs()
  untied = _stack().init(jax.random.PRNGKey(0), nodes, edges)
  tied = _stack(tied=True).init(jax.random.PRNGKey(0), nodes, edges)
  assert _count(untied) == 2 * _count(tied)


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
  with pytest.raises(
      ValueError, match=r"RTConfig.num_layers must be a positive int"
  ):
    RTConfig(num_layers=0)
