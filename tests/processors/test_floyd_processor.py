"""The FloydNet processor ('floyd'): factory options, equivariance, the carried
pair state, and training inside CLRS networks (ours and stock)."""

import clrs
import haiku as hk
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import processors
from processors.relational_transformer import ProcessorState
from relational_jax.models.floyd import FloydConfig
from relational_jax.training.clrs import data as clrs_data

B, N, F, OUT = 2, 5, 16, 16
HEADS = 2
TINY = dict(num_layers=2, head_dim=4, chunk_size=3)
D = HEADS * TINY["head_dim"]


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


def _transform(nb_heads=HEADS, **options):
  factory = processors.get_processor_factory(
      "floyd", use_ln=True, nb_triplet_fts=4, nb_heads=nb_heads, **options
  )
  return hk.transform(lambda *a, **kw: factory(OUT)(*a, **kw))


def _init(t, args, noise=0.2):
  """Parameters with noise added: FloydNet zero-initialises its output maps,
  so a fresh stack is the identity and would test nothing."""
  params = t.init(jax.random.PRNGKey(0), *args)
  leaves, tree = jax.tree_util.tree_flatten(params)
  keys = jax.random.split(jax.random.PRNGKey(1), len(leaves))
  return jax.tree_util.tree_unflatten(
      tree,
      [x + noise * jax.random.normal(k, x.shape) for x, k in zip(leaves, keys)],
  )


def test_floyd_is_a_kind_of_ours():
  assert processors.FLOYD_KINDS == ("floyd",)
  assert "floyd" in processors.all_kinds()
  assert issubclass(processors.FloydProcessor, processors.PairStateProcessor)
  assert issubclass(
      processors.EdgeTransformerProcessor, processors.PairStateProcessor
  )


def test_nb_heads_and_options_reach_the_floyd_config():
  def config_of(**kwargs):
    return hk.transform(
        lambda: processors.get_processor_factory(
            "floyd", use_ln=True, nb_triplet_fts=8, **kwargs
        )(OUT).config
    ).apply({}, None)

  default = config_of()
  assert default == FloydConfig(num_heads=12)  # 12 heads, as our other kinds
  got = config_of(
      nb_heads=3,
      num_layers=1,
      norm_position="post",
      activation="gelu",
      norm="rmsnorm",
      symmetric_mix=False,
      chunk_size=None,
  )
  assert got == FloydConfig(
      num_heads=3,
      num_layers=1,
      norm_position="post",
      activation="gelu",
      norm="rmsnorm",
      symmetric_mix=False,
      chunk_size=None,
  )


def test_option_errors_name_the_valid_options():
  make = lambda **kw: processors.get_processor_factory(
      "floyd", use_ln=True, nb_triplet_fts=8, **kw
  )
  with pytest.raises(
      ValueError,
      match=(
          r"Unknown option\(s\) \['depth', 'tied'\] for processor kind "
          r"'floyd'; valid options are \['activation', 'chunk_size', "
          r"'dropout_rate', 'ffn_expansion_ratio', 'graph_vec', 'head_dim', "
          r"'impl', 'ln_epsilon', 'node_readout', 'norm', 'norm_position', "
          r"'num_layers', 'softmax_cap', 'symmetric_mix', 'use_bias', "
          r"'use_ffn'\]"
      ),
  ):
    make(depth=2, tied=True)
  with pytest.raises(ValueError, match=r"Unknown option\(s\) \['num_heads'\]"):
    make(num_heads=4)  # from nb_heads
  with pytest.raises(ValueError, match=r"Unknown node_readout 'max'"):
    make(node_readout="max")
  with pytest.raises(ValueError, match=r"Unknown graph_vec 'sum'"):
    make(graph_vec="sum")
  with pytest.raises(ValueError, match=r"Unknown activation 'tanh'"):
    make(activation="tanh")
  with pytest.raises(ValueError, match=r"norm 'batchnorm' is not supported"):
    make(norm="batchnorm")


@pytest.mark.parametrize("node_readout", ["diagonal", "rowcol"])
@pytest.mark.parametrize("graph_vec", ["cat", "core"])
@pytest.mark.slow
def test_processor_is_node_permutation_equivariant(graph_vec, node_readout):
  args = _inputs()
  node_fts, edge_fts, graph_fts, adj, hidden = args
  t = _transform(graph_vec=graph_vec, node_readout=node_readout, **TINY)
  params = _init(t, args)
  perm = np.random.RandomState(1).permutation(N)
  pe = lambda x: x[:, perm][:, :, perm]
  nodes, edges = t.apply(params, None, *args)
  p_nodes, p_edges = t.apply(
      params,
      None,
      node_fts[:, perm],
      pe(edge_fts),
      graph_fts,
      pe(adj),
      hidden[:, perm],
  )
  assert nodes.shape == (B, N, OUT) and edges.shape == (B, N, N, D)
  np.testing.assert_allclose(p_nodes, nodes[:, perm], rtol=1e-4, atol=1e-5)
  np.testing.assert_allclose(p_edges, pe(edges), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("graph_vec", ["cat", "core"])
@pytest.mark.slow
def test_the_carried_pair_state_has_width_d_and_is_read(graph_vec):
  args = _inputs()
  t = _transform(graph_vec=graph_vec, **TINY)
  params = _init(t, args)
  assert params["floyd_clrs_processor/edge_hidden_in"]["w"].shape == (D, D)
  run = lambda **kw: t.apply(params, None, *args, return_state=True, **kw)
  base = run()
  assert isinstance(base, ProcessorState)
  assert base.edges.shape == (B, N, N, D)
  # Missing carried state means zeros.
  zeros = run(
      edge_hidden=jnp.zeros((B, N, N, D)), graph_hidden=jnp.zeros((B, OUT))
  )
  np.testing.assert_allclose(base.nodes, zeros.nodes, rtol=1e-6)
  with_edges = run(edge_hidden=base.edges)
  assert not np.allclose(with_edges.nodes, base.nodes, atol=1e-4)
  if graph_vec == "cat":
    assert base.graph is None
  else:  # the core node's output is the graph hidden
    assert base.graph.shape == (B, OUT)
    with_graph = run(graph_hidden=base.graph)
    assert not np.allclose(with_graph.nodes, base.nodes, atol=1e-4)
  with pytest.raises(ValueError, match=r"edge_hidden axis 3 must have size 8"):
    run(edge_hidden=jnp.zeros((B, N, N, OUT)))


@pytest.mark.slow
def test_dropout_applies_in_training_only():
  args = _inputs()
  t = _transform(dropout_rate=0.5, **TINY)
  params = _init(t, args)
  key = jax.random.PRNGKey(3)
  evaluation = t.apply(params, key, *args)[0]
  np.testing.assert_array_equal(evaluation, t.apply(params, None, *args)[0])
  training = t.apply(params, key, *args, is_training=True)[0]
  assert not np.allclose(training, evaluation, atol=1e-4)


@pytest.fixture(scope="module")
def data():
  stream = clrs_data.TrainStream("bellman_ford", [5], batch_size=4, seed=0)
  return stream.spec, next(stream)


def _model(model_cls, spec, feedback, **kwargs):
  factory = processors.get_processor_factory(
      "floyd",
      use_ln=True,
      nb_triplet_fts=4,
      nb_heads=HEADS,
      num_layers=1,
      head_dim=4,
      chunk_size=3,
  )
  model = model_cls(
      spec,
      feedback,
      factory,
      hidden_dim=16,
      encode_hints=True,
      decode_hints=True,
      learning_rate=3e-3,
      **kwargs
  )
  model.init(feedback.features, seed=0)
  return model


@pytest.mark.slow
def test_trains_in_carry_model_with_pointers_from_edges(data):
  spec, feedback = data
  model = _model(
      processors.CarryModel,
      spec,
      feedback,
      carry_state=True,
      ptr_from_edges=True,
  )
  params = model.params
  # The carried edge hidden is the D-wide pair state, read back by the
  # processor, and node pointers come from the edge vectors.
  (key,) = [
      k for k in params if k.endswith("floyd_clrs_processor/edge_hidden_in")
  ]
  assert params[key]["w"].shape == (D, D)
  assert any("algo_0_pi_ptr_from_edges" in k for k in params)
  assert not any("algo_0_pi_dec_linear" in k for k in params)
  losses = [
      float(model.feedback(jax.random.PRNGKey(s), feedback)) for s in range(2)
  ]
  assert np.all(np.isfinite(losses))


@pytest.mark.slow
def test_trains_in_stock_clrs_baseline_model(data):
  spec, feedback = data
  model = _model(clrs.models.BaselineModel, spec, feedback)
  loss = float(model.feedback(jax.random.PRNGKey(0), feedback))
  assert np.isfinite(loss)
  preds, _ = model.predict(jax.random.PRNGKey(1), feedback.features)
  assert 0.0 <= clrs.evaluate(feedback.outputs, preds)["score"] <= 1.0
