"""Our processors inside stock CLRS BaselineModel and inside our CarryModel."""

import clrs
import jax
import numpy as np
import pytest

import processors
from relational_jax.training.clrs import data as clrs_data

HIDDEN = 16
RT_TINY = dict(
    num_layers=1, head_dim=4, node_ffn_dim=4, edge_msg_dim=4, edge_ffn_dim=4
)
ET_TINY = dict(num_layers=1, head_dim=4, chunk_size=3)
FLOYD_TINY = dict(num_layers=1, head_dim=4, chunk_size=3)


@pytest.fixture(scope="module")
def data():
  stream = clrs_data.TrainStream("bellman_ford", [5], batch_size=4, seed=0)
  return stream.spec, next(stream)


def _model(
    model_cls, spec, feedback, kind="rt", lr=3e-3, graph_vec=None, **kwargs
):
  options = (
      RT_TINY
      if kind in processors.RT_KINDS
      else ET_TINY
      if kind in processors.ET_KINDS
      else FLOYD_TINY
      if kind in processors.FLOYD_KINDS
      else {}
  )
  if kind in processors.PROCESSORS:  # The sizes the kind reads.
    readable = processors.PROCESSORS[kind].options()
    options = {k: v for k, v in options.items() if k in readable}
  if graph_vec is not None:
    options = dict(options, graph_vec=graph_vec)
  factory = processors.get_processor_factory(
      kind, use_ln=True, nb_triplet_fts=4, nb_heads=2, **options
  )
  model = model_cls(
      spec,
      feedback,
      factory,
      hidden_dim=HIDDEN,
      encode_hints=True,
      decode_hints=True,
      learning_rate=lr,
      **kwargs,
  )
  model.init(feedback.features, seed=0)
  return model


def _losses(model, feedback, steps=6):
  return [
      float(model.feedback(jax.random.PRNGKey(s), feedback))
      for s in range(steps)
  ]


def _raw_outputs(model, params, feedback):
  out, _ = model.net_fn.apply(
      params,
      jax.random.PRNGKey(0),
      [feedback.features],
      repred=True,
      algorithm_index=0,
      return_hints=False,
      return_all_outputs=False,
  )
  return out


def _zero_carried_edge_rows(params):
  """Zeroes the processor's input projection of the carried edge hidden."""
  params = jax.tree_util.tree_map(np.array, params)
  (key,) = [k for k in params if k.endswith("/edge_hidden_in")]
  params[key]["w"][:] = 0.0
  return params


def _zero_carried_graph_rows(params):
  """Zeroes the rows of the core node's input projection (graph_vec='core':
  [graph_fts, graph_hidden] W) that read the carried graph hidden."""
  params = jax.tree_util.tree_map(np.array, params)
  (key,) = [k for k in params if k.endswith("/core_in")]
  params[key]["w"][-HIDDEN:] = 0.0
  return params


@pytest.mark.slow
def test_stock_baseline_model_trains_rt(data):
  spec, feedback = data
  model = _model(clrs.models.BaselineModel, spec, feedback)
  losses = _losses(model, feedback)
  assert np.all(np.isfinite(losses))
  assert losses[-1] < losses[0]
  # Stock CLRS drops the edge output: the processor reads no carried edge
  # hidden (zeros), so the weights that read it get no gradient at all.
  grads = jax.grad(model._loss)(  # pylint: disable=protected-access
      model.params, jax.random.PRNGKey(0), feedback, 0
  )
  (key,) = [k for k in grads if k.endswith("/edge_hidden_in")]
  np.testing.assert_array_equal(grads[key]["w"], 0.0)
  preds, _ = model.predict(jax.random.PRNGKey(1), feedback.features)
  assert 0.0 <= clrs.evaluate(feedback.outputs, preds)["score"] <= 1.0


@pytest.mark.parametrize("graph_vec", ["cat", "core"])
@pytest.mark.slow
def test_carry_model_trains_and_uses_the_carried_edge_state(data, graph_vec):
  spec, feedback = data
  factory_opts = dict(RT_TINY, graph_vec=graph_vec)
  factory = processors.get_processor_factory(
      "rt", use_ln=True, nb_triplet_fts=4, nb_heads=2, **factory_opts
  )
  model = processors.CarryModel(
      spec,
      feedback,
      factory,
      hidden_dim=HIDDEN,
      encode_hints=True,
      decode_hints=True,
      learning_rate=3e-3,
      ptr_from_edges=True,
  )
  model.init(feedback.features, seed=0)
  losses = _losses(model, feedback)
  assert np.all(np.isfinite(losses)) and losses[-1] < losses[0]
  params = model.params
  # Pointers come from the edge decoder only: logits over the nodes j.
  assert any("algo_0_pi_ptr_from_edges" in k for k in params)
  assert not any("algo_0_pi_dec_linear" in k for k in params)
  out = _raw_outputs(model, params, feedback)
  b, n = feedback.features.inputs[0].data.shape[:2]
  assert out["pi"].shape == (b, n, n)
  assert np.all(np.isfinite(out["pi"]))
  # The next step reads the previous step's edge hidden: removing that input
  # changes the predictions.
  zeroed = _raw_outputs(model, _zero_carried_edge_rows(params), feedback)
  assert not np.allclose(out["pi"], zeroed["pi"], atol=1e-5)


@pytest.mark.parametrize("kind", ["rt", "et", "floyd"])
@pytest.mark.slow
def test_carry_model_carries_the_edge_and_graph_hiddens(data, kind):
  """Each step reads the previous step's edge hidden and (graph_vec 'core')
  graph hidden: zeroing the weights that read either changes the
  predictions, and the carried edge weights get a gradient (in stock CLRS
  none: test_stock_baseline_model_trains_rt)."""
  spec, feedback = data
  model = _model(
      processors.CarryModel,
      spec,
      feedback,
      kind=kind,
      graph_vec="core",
      ptr_from_edges=True,
  )
  # Noise in every parameter, as after training: FloydNet's zero-initialised
  # output maps make its fresh stack the identity, so no pair reads another.
  leaves, tree = jax.tree_util.tree_flatten(model.params)
  keys = jax.random.split(jax.random.PRNGKey(5), len(leaves))
  params = jax.tree_util.tree_unflatten(
      tree,
      [x + 0.1 * jax.random.normal(k, x.shape) for x, k in zip(leaves, keys)],
  )
  out = _raw_outputs(model, params, feedback)
  for zero in (_zero_carried_edge_rows, _zero_carried_graph_rows):
    zeroed = _raw_outputs(model, zero(params), feedback)
    assert not np.allclose(out["pi"], zeroed["pi"], atol=1e-5), zero.__name__
  grads = jax.grad(model._loss)(  # pylint: disable=protected-access
      params, jax.random.PRNGKey(0), feedback, 0
  )
  (key,) = [k for k in grads if k.endswith("/edge_hidden_in")]
  assert np.abs(grads[key]["w"]).max() > 0


@pytest.mark.slow  # Traces two CLRS models before the error (3 s).
def test_a_processor_without_state_or_edges_is_refused(data):
  """carry_state with a processor that carries nothing (dm-clrs's mpnn), or
  ptr_from_edges with one that returns no edges (the 'transformer'
  ablation), is an error naming the fix, not a silent fallback."""
  spec, feedback = data
  with pytest.raises(ValueError, match=r"MPNN carries no state.*carry_state"):
    _model(processors.CarryModel, spec, feedback, kind="mpnn")
  with pytest.raises(ValueError, match=r"returns none; set ptr_from_edges"):
    _model(
        processors.CarryModel,
        spec,
        feedback,
        kind="transformer",
        ptr_from_edges=True,
    )


def test_carry_model_with_a_clrs_kind_matches_stock(data):
  spec, feedback = data
  ours = _model(
      processors.CarryModel, spec, feedback, kind="mpnn", carry_state=False
  )
  stock = _model(clrs.models.BaselineModel, spec, feedback, kind="mpnn")
  a = _raw_outputs(ours, stock.params, feedback)
  b = _raw_outputs(stock, stock.params, feedback)
  for k in a:
    np.testing.assert_allclose(a[k], b[k], rtol=1e-5, atol=1e-6)


@pytest.mark.slow
def test_scalar_hint_gradient_off_is_stock_clrs(data):
  """Hard-postprocessed SCALAR hints fed back (bellman_ford's `d`): with
  scalar_hint_gradient=False the loss and every gradient are stock CLRS's
  (its stop_gradient). The default True (the RT authors' fork, whose
  gradient flows there) is checked against their code in
  tests/fidelity (rt_net_bellman_ford, noisy_grad/*). hint_teacher_forcing
  0: every step feeds its predictions back."""
  spec, feedback = data
  opts = dict(kind="mpnn", hint_teacher_forcing=0.0, hint_repred_mode="hard")
  stock = _model(clrs.models.BaselineModel, spec, feedback, **opts)
  ours = _model(
      processors.CarryModel,
      spec,
      feedback,
      scalar_hint_gradient=False,
      carry_state=False,
      **opts,
  )
  results = []
  for model in (stock, ours):
    fn = jax.value_and_grad(model._loss)  # pylint: disable=protected-access
    results.append(fn(stock.params, jax.random.PRNGKey(0), feedback, 0))
  (want_loss, want), (loss, got) = results
  np.testing.assert_allclose(loss, want_loss, rtol=1e-6)
  for a, b in zip(
      jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want)
  ):
    np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize(
    "kind, model_cls",
    [
        ("et", clrs.models.BaselineModel),
        ("rt_triangular", clrs.models.BaselineModel),
        ("rt_triangular", processors.CarryModel),
    ],
)
@pytest.mark.slow
def test_triangular_kinds_train_in_clrs_models(data, kind, model_cls):
  spec, feedback = data
  model = _model(model_cls, spec, feedback, kind=kind)
  losses = _losses(model, feedback, steps=3)
  assert np.all(np.isfinite(losses)) and losses[-1] < losses[0]
