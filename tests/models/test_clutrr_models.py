"""CLUTRR graph classifiers: shapes, node-relabelling invariance, bad configs."""

import jax
import numpy as np
import pytest

from relational_jax.data import clutrr as data_lib
from relational_jax.data import clutrr_generator
from relational_jax.models import clutrr as models
from relational_jax.models.edge_transformer import ETConfig
from relational_jax.models.floyd import FloydConfig
from relational_jax.models.relational_transformer import RTConfig

TINY = {
    "et": lambda: models.ClutrrEdgeTransformer(
        ETConfig(
            num_layers=2,
            num_heads=2,
            head_dim=4,
            chunk_size=None,
            ffn_chunk_size=None,
        )
    ),
    "et_value": lambda: models.ClutrrEdgeTransformer(
        ETConfig(
            num_layers=2, num_heads=2, head_dim=4, ablation="value", tied=False
        )
    ),
    "et_attention": lambda: models.ClutrrEdgeTransformer(
        ETConfig(num_layers=1, num_heads=2, head_dim=4, ablation="attention"),
        head_layers=1,
    ),
    "rat": lambda: models.ClutrrRAT(
        models.RATConfig(num_layers=2, num_heads=2, d_model=8)
    ),
    "rt": lambda: models.ClutrrRT(
        RTConfig(
            num_layers=2,
            num_heads=2,
            head_dim=4,
            node_ffn_dim=8,
            edge_msg_dim=8,
            edge_ffn_dim=8,
            tied=True,
        )
    ),
    "rt_nodes_learned": lambda: models.ClutrrRT(
        RTConfig(
            num_layers=1,
            num_heads=2,
            head_dim=4,
            node_ffn_dim=8,
            edge_msg_dim=8,
            edge_ffn_dim=8,
        ),
        readout="nodes",
        node_init="learned",
    ),
    "floyd": lambda: models.ClutrrFloyd(
        FloydConfig(num_layers=2, num_heads=2, head_dim=4, chunk_size=None)
    ),
    "floyd_post_chunked": lambda: models.ClutrrFloyd(
        FloydConfig(
            num_layers=2,
            num_heads=2,
            head_dim=4,
            chunk_size=2,
            norm_position="post",
            use_bias=True,
        ),
        head_layers=1,
    ),
}


def _random_like(params, seed=1, scale=0.3):
  leaves, tree = jax.tree_util.tree_flatten(params)
  keys = jax.random.split(jax.random.PRNGKey(seed), len(leaves))
  return jax.tree_util.tree_unflatten(
      tree,
      [
          x + scale * jax.random.normal(k, x.shape, x.dtype)
          for x, k in zip(leaves, keys)
      ],
  )


def _batch(num_nodes=7):
  rows = clutrr_generator.generate_rows(3, 2, seed=1)
  rows += clutrr_generator.generate_rows(5, 2, seed=2)
  return data_lib.to_arrays(data_lib.examples_from_rows(rows), num_nodes)


# The fast tier keeps one RT and one FloydNet model.
_SLOW = (
    "et",
    "et_attention",
    "et_value",
    "rat",
    "rt_nodes_learned",
    "floyd_post_chunked",
)


@pytest.mark.parametrize(
    "name",
    [
        pytest.param(n, marks=pytest.mark.slow) if n in _SLOW else n
        for n in sorted(TINY)
    ],
)
def test_shapes_and_node_relabelling_invariance(name):
  a = _batch()
  model = TINY[name]()
  params = jax.jit(model.init)(
      jax.random.PRNGKey(0), a["edge_labels"], a["query"], a["node_mask"]
  )
  apply = jax.jit(model.apply)  # One program a shape, not op by op.
  if name.startswith("floyd"):
    # FloydNet zero-initialises its mix, attention output and FFN output
    # maps (a pre-norm stack starts as the identity): random parameters, so
    # the checks below see the attention.
    params = _random_like(params)
  logits = np.asarray(
      apply(params, a["edge_labels"], a["query"], a["node_mask"])
  )
  assert logits.shape == (4, data_lib.NUM_RELATIONS)
  assert np.all(np.isfinite(logits))
  # Relabel the nodes (padding included) by one permutation per example:
  # the same graph and query, so the same logits.
  rng = np.random.default_rng(0)
  labels, query, mask = (
      a["edge_labels"].copy(),
      a["query"].copy(),
      a["node_mask"].copy(),
  )
  for b in range(len(labels)):
    perm = rng.permutation(labels.shape[1])  # new id of node i: perm[i]
    inv = np.argsort(perm)
    labels[b] = a["edge_labels"][b][np.ix_(inv, inv)]
    mask[b] = a["node_mask"][b][inv]
    query[b] = perm[a["query"][b]]
  relabelled = np.asarray(apply(params, labels, query, mask))
  np.testing.assert_allclose(relabelled, logits, rtol=1e-4, atol=1e-4)
  # A different query (reversed pair) gives different logits.
  other = np.asarray(
      apply(params, a["edge_labels"], a["query"][:, ::-1], a["node_mask"])
  )
  assert not np.allclose(other, logits)
  # More padding nodes: the same logits.
  big = _batch(num_nodes=9)
  padded = np.asarray(
      apply(params, big["edge_labels"], big["query"], big["node_mask"])
  )
  np.testing.assert_allclose(padded, logits, rtol=1e-4, atol=1e-4)


def test_bad_configs_raise():
  with pytest.raises(ValueError, match="num_heads=3 must divide d_model=8"):
    models.RATConfig(num_heads=3, d_model=8)
  with pytest.raises(ValueError, match="RATConfig.num_layers"):
    models.RATConfig(num_layers=0)
  with pytest.raises(ValueError, match="dropout_rate"):
    models.RATConfig(dropout_rate=1.0)
  a = _batch()
  bad_readout = models.ClutrrRT(
      RTConfig(num_layers=1, num_heads=2, head_dim=4), readout="pool"
  )
  with pytest.raises(ValueError, match="readout"):
    bad_readout.init(
        jax.random.PRNGKey(0), a["edge_labels"], a["query"], a["node_mask"]
    )
  bad_head = models.ClutrrRAT(
      models.RATConfig(num_layers=1, num_heads=2, d_model=8), head_layers=3
  )
  with pytest.raises(ValueError, match="head_layers must be 1 or 2"):
    bad_head.init(
        jax.random.PRNGKey(0), a["edge_labels"], a["query"], a["node_mask"]
    )
  with pytest.raises(ValueError, match="query_Bx2"):
    TINY["rat"]().init(
        jax.random.PRNGKey(0),
        a["edge_labels"],
        a["query"][:, :1],
        a["node_mask"],
    )


@pytest.mark.parametrize("name", ["et", "rat", "rt"])
@pytest.mark.slow
def test_jit_equals_eager(name):
  """Logits jitted and eager, random parameters (ClutrrFloyd's: below)."""
  a = _batch()
  args = (a["edge_labels"], a["query"], a["node_mask"])
  model = TINY[name]()
  params = _random_like(model.init(jax.random.PRNGKey(0), *args))
  np.testing.assert_allclose(
      np.asarray(jax.jit(model.apply)(params, *args)),
      np.asarray(model.apply(params, *args)),
      rtol=1e-5,
      atol=1e-5,
  )


def test_floyd_jit_dropout_and_config_check():
  """ClutrrFloyd: jitted logits equal eager ones; dropout acts only when not
  deterministic; a config of another model is refused by name."""
  a = _batch()
  model = models.ClutrrFloyd(
      FloydConfig(num_layers=1, num_heads=2, head_dim=4, dropout_rate=0.5)
  )
  params = _random_like(
      model.init(
          jax.random.PRNGKey(0), a["edge_labels"], a["query"], a["node_mask"]
      )
  )
  args = (a["edge_labels"], a["query"], a["node_mask"])
  eager = np.asarray(model.apply(params, *args))
  jitted = np.asarray(jax.jit(model.apply)(params, *args))
  assert eager.shape == (4, data_lib.NUM_RELATIONS)
  np.testing.assert_allclose(jitted, eager, rtol=1e-5, atol=1e-5)
  dropped = np.asarray(
      model.apply(
          params,
          *args,
          deterministic=False,
          rngs={"dropout": jax.random.PRNGKey(3)},
      )
  )
  assert np.all(np.isfinite(dropped)) and not np.allclose(dropped, eager)
  bad = models.ClutrrFloyd(ETConfig(num_layers=1, num_heads=2, head_dim=4))
  with pytest.raises(ValueError, match="config must be a FloydConfig"):
    bad.init(jax.random.PRNGKey(0), *args)


@pytest.mark.parametrize(
    "model_cls, wanted",
    [(models.ClutrrRAT, "RATConfig"), (models.ClutrrRT, "RTConfig")],
)
def test_a_config_of_another_model_is_refused_naming_both(model_cls, wanted):
  a = _batch()
  args = (a["edge_labels"], a["query"], a["node_mask"])
  bad = model_cls(FloydConfig(num_layers=1, num_heads=2, head_dim=4))
  with pytest.raises(
      ValueError, match=f"config must be a {wanted} instance, got FloydConfig"
  ):
    bad.init(jax.random.PRNGKey(0), *args)
