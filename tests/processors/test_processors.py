"""Our CLRS processors and factory, outside any CLRS network."""

import types

import flax.linen as nn
import haiku as hk
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import processors
from processors.pair_state import PairStateProcessor
from processors.relational_transformer import ProcessorState

B, N, F, OUT = 2, 5, 16, 16
TINY = dict(
    num_layers=1, head_dim=4, node_ffn_dim=4, edge_msg_dim=4, edge_ffn_dim=3
)
ET_TINY = dict(num_layers=2, head_dim=4, chunk_size=3)


def _tiny(kind):
  """The tiny sizes the kind reads (the RT ablations have no edge update)."""
  sizes = ET_TINY if kind == "et" else TINY
  return {
      k: v
      for k, v in sizes.items()
      if k in processors.PROCESSORS[kind].options()
  }


def _inputs(seed=0):
  ks = jax.random.split(jax.random.PRNGKey(seed), 5)
  node_fts = jax.random.normal(ks[0], (B, N, F))
  edge_fts = jax.random.normal(ks[1], (B, N, N, F))
  graph_fts = jax.random.normal(ks[2], (B, F))
  adj = (
      jax.random.bernoulli(ks[3], 0.4, (B, N, N)) | jnp.eye(N, dtype=bool)
  ).astype(jnp.float32)
  hidden = jax.random.normal(ks[4], (B, N, OUT))
  return node_fts, edge_fts, graph_fts, adj, hidden


def _transform(kind, **options):
  factory = processors.get_processor_factory(
      kind, use_ln=True, nb_triplet_fts=4, nb_heads=2, **options
  )

  def fn(*args, **kwargs):
    return factory(OUT)(*args, **kwargs)

  return hk.transform(fn)


@pytest.mark.parametrize("kind", processors.CLRS_KINDS)
def test_every_clrs_kind_builds_and_matches_clrs(kind):
  import clrs  # pylint: disable=g-import-not-at-top

  args = _inputs()
  ours = _transform(kind)
  stock = hk.transform(
      lambda *a: clrs.get_processor_factory(
          kind, use_ln=True, nb_triplet_fts=4, nb_heads=2
      )(OUT)(*a)
  )
  params = ours.init(jax.random.PRNGKey(0), *args)
  assert jax.tree_util.tree_structure(params) == jax.tree_util.tree_structure(
      stock.init(jax.random.PRNGKey(0), *args)
  )
  got = ours.apply(params, None, *args)
  want = stock.apply(params, None, *args)
  for a, b in zip(
      jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want)
  ):
    np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("graph_vec", ["cat", "core"])
@pytest.mark.parametrize(
    "kind", ["rt", "rt_no_edge_update", "transformer", "rt_triangular", "et"]
)
@pytest.mark.slow
def test_processor_is_node_permutation_equivariant(kind, graph_vec):
  node_fts, edge_fts, graph_fts, adj, hidden = _inputs()
  t = _transform(kind, graph_vec=graph_vec, **_tiny(kind))
  params = t.init(
      jax.random.PRNGKey(0), node_fts, edge_fts, graph_fts, adj, hidden
  )
  perm = np.random.RandomState(1).permutation(N)
  pe = lambda x: x[:, perm][:, :, perm]
  nodes, edges = t.apply(
      params, None, node_fts, edge_fts, graph_fts, adj, hidden
  )
  p_nodes, p_edges = t.apply(
      params,
      None,
      node_fts[:, perm],
      pe(edge_fts),
      graph_fts,
      pe(adj),
      hidden[:, perm],
  )
  np.testing.assert_allclose(p_nodes, nodes[:, perm], rtol=1e-4, atol=1e-5)
  assert nodes.shape == (B, N, OUT)
  if kind == "transformer":
    assert edges is None
  else:
    assert edges.shape == (B, N, N, 2 * 4)
    np.testing.assert_allclose(p_edges, pe(edges), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("kind", ["rt", "et"])
@pytest.mark.parametrize("graph_vec", ["cat", "core"])
@pytest.mark.slow
def test_carried_edge_and_graph_hiddens_change_the_output(kind, graph_vec):
  node_fts, edge_fts, graph_fts, adj, hidden = _inputs()
  t = _transform(kind, graph_vec=graph_vec, **_tiny(kind))
  params = t.init(
      jax.random.PRNGKey(0), node_fts, edge_fts, graph_fts, adj, hidden
  )
  run = lambda **kw: t.apply(
      params,
      None,
      node_fts,
      edge_fts,
      graph_fts,
      adj,
      hidden,
      return_state=True,
      **kw,
  )
  base = run()
  assert isinstance(base, ProcessorState)
  # Missing carried state means zeros.
  zeros = run(
      edge_hidden=jnp.zeros((B, N, N, 8)), graph_hidden=jnp.zeros((B, OUT))
  )
  np.testing.assert_allclose(base.nodes, zeros.nodes, rtol=1e-6)
  with_edges = run(edge_hidden=base.edges)
  assert not np.allclose(with_edges.nodes, base.nodes, atol=1e-4)
  if graph_vec == "cat":  # graph features re-read each step: nothing to carry
    assert base.graph is None
  else:  # the core node's output is the graph hidden
    assert base.graph.shape == (B, OUT)
    with_graph = run(graph_hidden=base.graph)
    assert not np.allclose(with_graph.nodes, base.nodes, atol=1e-4)


@pytest.mark.slow
def test_et_node_readouts_and_tied_layers():
  node_fts, edge_fts, graph_fts, adj, hidden = _inputs()
  count = lambda p: sum(x.size for x in jax.tree_util.tree_leaves(p))
  tied = _transform("et", **ET_TINY).init(
      jax.random.PRNGKey(0), node_fts, edge_fts, graph_fts, adj, hidden
  )
  untied = _transform("et", tied=False, **ET_TINY).init(
      jax.random.PRNGKey(0), node_fts, edge_fts, graph_fts, adj, hidden
  )
  stack = lambda p: count({k: v for k, v in p.items() if "/stack" in k})
  assert stack(untied) == 2 * stack(tied)
  t = _transform("et", node_readout="rowcol", **ET_TINY)
  params = t.init(
      jax.random.PRNGKey(0), node_fts, edge_fts, graph_fts, adj, hidden
  )
  nodes, _ = t.apply(params, None, node_fts, edge_fts, graph_fts, adj, hidden)
  assert nodes.shape == (B, N, OUT)


def test_bad_input_errors():
  with pytest.raises(
      ValueError, match=r"'rt_triangular' needs triangular_heads >= 1.*got 0"
  ):
    processors.get_processor_factory(
        "rt_triangular", use_ln=True, nb_triplet_fts=8, triangular_heads=0
    )
  with pytest.raises(
      ValueError,
      match=r"Unknown processor kind 'rtx'; valid kinds are \[.*'mpnn'.*'rt'",
  ):
    processors.get_processor_factory("rtx", use_ln=True, nb_triplet_fts=8)
  with pytest.raises(
      ValueError,
      match=r"Unknown graph_vec 'sum'; valid choices are \['cat', 'core'\]",
  ):
    processors.get_processor_factory(
        "rt", use_ln=True, nb_triplet_fts=8, graph_vec="sum"
    )
  with pytest.raises(
      ValueError, match=r"Unknown option\(s\) \['depth'\].*valid options"
  ):
    processors.get_processor_factory(
        "rt", use_ln=True, nb_triplet_fts=8, depth=2
    )
  with pytest.raises(
      ValueError,
      match=(
          r"Unknown ablation 'keys'; valid choices are \['none', 'value',"
          r" 'attention'\]"
      ),
  ):
    processors.get_processor_factory(
        "et", use_ln=True, nb_triplet_fts=8, ablation="keys"
    )
  for kind in ("et", "floyd"):
    with pytest.raises(
        ValueError, match=rf"use_ln=False: processor kind '{kind}' has no"
    ):
      processors.get_processor_factory(kind, use_ln=False, nb_triplet_fts=8)
  with pytest.raises(ValueError, match=r"Unknown node_readout 'max'"):
    processors.get_processor_factory(
        "et", use_ln=True, nb_triplet_fts=8, node_readout="max"
    )
  with pytest.raises(
      ValueError, match=r"triangular_heads=5 must divide the edge width 192"
  ):
    processors.get_processor_factory(
        "rt_triangular", use_ln=True, nb_triplet_fts=8, triangular_heads=5
    )
  with pytest.raises(ValueError, match=r"CLRS kind and takes no extra options"):
    processors.get_processor_factory(
        "mpnn", use_ln=True, nb_triplet_fts=8, graph_vec="cat"
    )
  node_fts, edge_fts, graph_fts, adj, hidden = _inputs()
  t = _transform("rt", **TINY)
  with pytest.raises(ValueError, match=r"edge_fts axis 2 must have size 5"):
    t.init(
        jax.random.PRNGKey(0),
        node_fts,
        edge_fts[:, :, :3],
        graph_fts,
        adj,
        hidden,
    )


@pytest.mark.parametrize(
    "kind, options",
    [
        (
            "rt",
            dict(
                num_layers=1,
                head_dim=4,
                node_ffn_dim=4,
                edge_msg_dim=4,
                edge_ffn_dim=3,
                edge_dim=6,
                ln_epsilon=1e-3,
                tied=True,
            ),
        ),
        (
            "rt_triangular",
            dict(
                num_layers=1,
                head_dim=4,
                node_ffn_dim=4,
                edge_msg_dim=4,
                edge_ffn_dim=3,
                chunk_size=2,
                triangular_heads=2,
            ),
        ),
        (
            "et",
            dict(
                num_layers=1,
                head_dim=4,
                ffn_dim=5,
                ln_epsilon=1e-3,
                layout="released_code",
                ffn_chunk_size=2,
                node_readout="rowcol",
            ),
        ),
    ],
)
@pytest.mark.slow
def test_options_are_config_field_names(kind, options):
  """Factory options reach RTConfig / ETConfig under their own names."""
  node_fts, edge_fts, graph_fts, adj, hidden = _inputs()
  t = _transform(kind, **options)
  params = t.init(
      jax.random.PRNGKey(0), node_fts, edge_fts, graph_fts, adj, hidden
  )
  nodes, edges = t.apply(
      params, None, node_fts, edge_fts, graph_fts, adj, hidden
  )
  assert nodes.shape == (B, N, OUT)
  width = options.get("edge_dim", 2 * options["head_dim"])
  assert edges.shape == (B, N, N, width)
  if kind == "et":
    ffn = [v for k, v in params.items() if k.endswith("ffn_hidden")]
    assert ffn and ffn[0]["kernel"].shape == (width, 5)


@pytest.mark.parametrize(
    "kind, rates",
    [
        # The fast tier keeps the RT; the layers test their own dropout.
        pytest.param(
            "et", dict(attention_dropout_rate=0.5), marks=pytest.mark.slow
        ),  # Weights only.
        pytest.param("et", dict(dropout_rate=0.5), marks=pytest.mark.slow),
        ("rt", dict(dropout_rate=0.5)),
    ],
)
def test_dropout_draws_in_training_only(kind, rates):
  """Any dropout rate > 0 (ET's attention-weight dropout alone too) makes
  training draw masks from the rng; evaluation is deterministic."""
  args = _inputs()
  t = _transform(kind, **_tiny(kind), **rates)
  params = t.init(jax.random.PRNGKey(0), *args)
  train = lambda seed: t.apply(
      params, jax.random.PRNGKey(seed), *args, is_training=True
  )[0]
  assert not np.allclose(train(1), train(2))
  np.testing.assert_array_equal(
      t.apply(params, None, *args)[0], t.apply(params, None, *args)[0]
  )


@pytest.mark.parametrize("kind", sorted(processors.PROCESSORS))
@pytest.mark.slow
def test_jit_equals_eager(kind):
  args = _inputs()
  t = _transform(kind, graph_vec="core", **_tiny(kind))
  params = t.init(jax.random.PRNGKey(0), *args)
  eager = t.apply(params, None, *args)
  jitted = jax.jit(t.apply)(params, None, *args)
  for a, b in zip(eager, jitted):
    if a is None:
      assert b is None
    else:
      np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(
    "kind, chunks",
    [
        # The layers' own chunked == full tests are fast; these slow.
        pytest.param(
            "rt_triangular", dict(chunk_size=2), marks=pytest.mark.slow
        ),
        pytest.param(
            "et",
            dict(chunk_size=2, ffn_chunk_size=3),
            marks=pytest.mark.slow,
        ),
        pytest.param("floyd", dict(chunk_size=2), marks=pytest.mark.slow),
    ],
)
def test_chunked_equals_unchunked(kind, chunks):
  """The pivot (and ET's FFN) chunking is a memory option only: node and
  edge outputs and the parameter gradients equal the unchunked processor's
  (on perturbed parameters: FloydNet's zero-initialised output maps make a
  fresh stack the identity)."""
  args = _inputs(seed=3)
  sizes = {k: v for k, v in _tiny(kind).items() if "chunk" not in k}
  # One chunk of every pivot (RTConfig has no None chunk_size).
  unchunked = N if kind == "rt_triangular" else None
  full = _transform(kind, **sizes, **{k: unchunked for k in chunks})
  chunked = _transform(kind, **sizes, **chunks)
  params = full.init(jax.random.PRNGKey(0), *args)
  leaves, treedef = jax.tree_util.tree_flatten(params)
  keys = jax.random.split(jax.random.PRNGKey(1), len(leaves))
  params = jax.tree_util.tree_unflatten(
      treedef,
      [l + 0.3 * jax.random.normal(k, l.shape) for l, k in zip(leaves, keys)],
  )

  def loss(t):
    def fn(p):
      nodes, edges = t.apply(p, None, *args)
      return jnp.sum(jnp.sin(nodes)) + jnp.sum(jnp.cos(edges)), (nodes, edges)

    return jax.jit(jax.value_and_grad(fn, has_aux=True))(params)

  (_, want), want_grads = loss(full)
  (_, got), got_grads = loss(chunked)
  for a, b in zip(
      jax.tree_util.tree_leaves((got, got_grads)),
      jax.tree_util.tree_leaves((want, want_grads)),
  ):
    np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-4)


class _Identity(nn.Module):
  """A pair-state stack that returns its input."""

  @nn.compact
  def __call__(self, x_BxUxUxD, deterministic=True):
    return x_BxUxUxD


class _IdentityPairState(PairStateProcessor):
  """The pair-state processor around `_Identity`: its outputs are the
  encoded pairs x_ij and their readouts."""

  def stack_module(self):
    return _Identity()


@pytest.mark.parametrize("graph_vec", ["cat", "core"])
@pytest.mark.parametrize("node_readout", ["diagonal", "rowcol"])
def test_pair_state_encoding_and_readout_match_a_loop(graph_vec, node_readout):
  """x_ij = W_e e_ij + b_e + W_h h_ij + W_a n_i + W_b n_j (+ W_g g with
  'cat'; with 'core' a node N whose features are W_c [g; g_h] + b_c and
  whose pairs' edge inputs are zero), n = [node_fts, hidden]; the node
  output is node_out of x_ii ('diagonal') or of the mean of row i and
  column i ('rowcol'), the graph output ('core') node_out of node N's."""
  d = 6
  config = types.SimpleNamespace(edge_width=d, dropout_rate=0.0)
  node_fts, edge_fts, graph_fts, adj, hidden = _inputs(3)
  edge_hidden = jax.random.normal(jax.random.PRNGKey(4), (B, N, N, d))
  graph_hidden = jax.random.normal(jax.random.PRNGKey(5), (B, OUT))
  t = hk.transform(
      lambda *a: _IdentityPairState(
          OUT, config, graph_vec=graph_vec, node_readout=node_readout
      )(*a, edge_hidden=edge_hidden, graph_hidden=graph_hidden,
        return_state=True)  # fmt: skip
  )
  args = (node_fts, edge_fts, graph_fts, adj, hidden)
  params = t.init(jax.random.PRNGKey(0), *args)
  state = t.apply(params, None, *args)
  p = {k.split("/")[-1]: v for k, v in params.items()}
  lin = lambda name, x: x @ p[name]["w"] + p[name].get("b", 0.0)
  n_feats = np.concatenate([node_fts, hidden], -1)
  u = N + (graph_vec == "core")
  x = np.zeros((B, u, u, d), np.float32)
  for b in range(B):
    nodes = list(n_feats[b])
    if graph_vec == "core":
      nodes.append(
          lin("core_in", np.concatenate([graph_fts[b], graph_hidden[b]]))
      )
    for i in range(u):
      for j in range(u):
        real = i < N and j < N
        e = edge_fts[b, i, j] if real else np.zeros(edge_fts.shape[-1])
        h = edge_hidden[b, i, j] if real else np.zeros(d)
        x[b, i, j] = (
            lin("edge_in", e)
            + lin("edge_hidden_in", h)
            + lin("row_in", nodes[i])
            + lin("col_in", nodes[j])
        )
        if graph_vec == "cat":
          x[b, i, j] += lin("graph_in", graph_fts[b])
  if node_readout == "diagonal":
    read = np.stack([x[:, i, i] for i in range(u)], 1)
  else:
    read = 0.5 * (x.mean(2) + x.mean(1))
  out = lin("node_out", read)
  np.testing.assert_allclose(state.edges, x[:, :N, :N], rtol=1e-5, atol=1e-5)
  np.testing.assert_allclose(state.nodes, out[:, :N], rtol=1e-5, atol=1e-5)
  if graph_vec == "core":
    np.testing.assert_allclose(state.graph, out[:, N], rtol=1e-5, atol=1e-5)
  else:
    assert state.graph is None
