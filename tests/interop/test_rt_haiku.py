"""relational_jax.interop.rt_haiku on the RT authors' parameters (goldens)."""

import dataclasses
import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from relational_jax.interop import rt_haiku
from relational_jax.interop import select
from relational_jax.interop import to_authors
from relational_jax.layers.relational import RelationalTransformerLayer
from relational_jax.models.relational_transformer import RelationalTransformer
from relational_jax.models.relational_transformer import RTConfig
from experiments.compare import goldens as peer_goldens
from tests.interop import goldens

KEY = jax.random.PRNGKey(0)


def _spec(x):
  return jax.ShapeDtypeStruct(x.shape, x.dtype)


def _stack_case():
  meta, inputs, params = goldens.load("rt_stack")
  sizes = meta["sizes"]
  return (
      peer_goldens.rt_config(sizes, edge_dim=sizes["edge_width"]),
      inputs,
      params,
  )


@pytest.mark.parametrize("case", ["rt_layer", "rt_layer_no_edge_update"])
def test_layer_matches_our_init(case):
  meta, inputs, params = goldens.load(case)
  sizes = meta["sizes"]
  edge_update = not sizes["disable_edge_updates"]
  cfg = peer_goldens.rt_config(sizes)
  layer = RelationalTransformerLayer(
      num_heads=cfg.num_heads,
      head_dim=cfg.head_dim,
      node_ffn_dim=cfg.node_ffn_dim,
      edge_msg_dim=cfg.edge_msg_dim,
      edge_ffn_dim=cfg.edge_ffn_dim,
      edge_update=edge_update,
  )
  converted = rt_haiku.convert_layer(
      select(params, "rt_layer0/rt_layer0/"),
      sizes["heads"],
      edge_update=edge_update,
  )
  init = jax.eval_shape(
      layer.init, KEY, _spec(inputs["nodes"]), _spec(inputs["edges"])
  )
  goldens.assert_same_shapes(converted, init["params"])


def test_stack_matches_our_init_and_inverts():
  cfg, inputs, params = _stack_case()
  converted = rt_haiku.convert_stack(params, cfg)
  init = jax.eval_shape(
      RelationalTransformer(cfg).init,
      KEY,
      _spec(inputs["nodes"]),
      _spec(inputs["edges"]),
  )
  goldens.assert_same_shapes(converted, init["params"])
  back = to_authors(lambda p: rt_haiku.convert_stack(p, cfg), params, converted)
  assert set(back) == set(params)
  for name, value in params.items():
    np.testing.assert_array_equal(back[name], value, err_msg=name)


def test_nested_haiku_params_are_accepted():
  cfg, _, params = _stack_case()
  nested = {}
  for name, value in params.items():
    module, key = name.rsplit("/", 1)
    nested.setdefault(module, {})[key] = value
  flat = rt_haiku.convert_stack(params, cfg)
  from_nested = rt_haiku.convert_stack(nested, cfg)
  assert jax.tree_util.tree_all(
      jax.tree_util.tree_map(np.array_equal, flat, from_nested)
  )


def test_missing_key_is_named():
  cfg, _, params = _stack_case()
  name = "rt_layer1/rt_layer1/linear_6/w"
  with pytest.raises(ValueError, match="missing key.*rt_layer1/linear_6/w"):
    rt_haiku.convert_stack(goldens.without(params, name), cfg)


def test_unexpected_keys_are_named():
  cfg, _, params = _stack_case()
  extra = dict(params, **{"rt_layer0/rt_layer0/linear_9/w": np.zeros((2, 2))})
  with pytest.raises(ValueError, match="unexpected.*linear_9/w"):
    rt_haiku.convert_stack(extra, cfg)
  # A layer more than the config has is unexpected too.
  with pytest.raises(ValueError, match="unexpected.*rt_layer1/rt_layer1/"):
    rt_haiku.convert_stack(params, dataclasses.replace(cfg, num_layers=1))


def test_edge_update_keys_are_unexpected_without_edge_updates():
  meta, _, params = goldens.load("rt_layer")
  with pytest.raises(ValueError, match="unexpected.*linear_3/w"):
    rt_haiku.convert_layer(
        select(params, "rt_layer0/rt_layer0/"),
        meta["sizes"]["heads"],
        edge_update=False,
    )


def test_shape_and_config_mismatches_raise():
  cfg, _, params = _stack_case()
  with pytest.raises(ValueError, match="rt_attention_layer/linear/w.*shape"):
    rt_haiku.convert_stack(params, dataclasses.replace(cfg, head_dim=5))
  with pytest.raises(ValueError, match="tied"):
    rt_haiku.convert_stack(params, dataclasses.replace(cfg, tied=True))
  with pytest.raises(ValueError, match="not divisible by num_heads=5"):
    rt_haiku.convert_layer(select(params, "rt_layer0/rt_layer0/"), 5)


@pytest.mark.parametrize("case", ["rt_processor_cat", "rt_processor_core"])
def test_processor_matches_our_init(case):
  import haiku as hk  # pylint: disable=g-import-not-at-top
  import processors  # pylint: disable=g-import-not-at-top

  meta, inputs, params = goldens.load(case)
  sizes = meta["sizes"]
  cfg = peer_goldens.rt_config(sizes)
  graph_vec = sizes["graph_vec"]
  names = ("node_fts", "edge_fts", "graph_fts", "adj_mat", "hidden")

  def fn(node_fts, edge_fts, graph_fts, adj_mat, hidden, e_hidden, g_hidden):
    processor = processors.RelationalTransformerProcessor(
        cfg.node_width, cfg, graph_vec=graph_vec, name="rt"
    )
    return processor(
        node_fts,
        edge_fts,
        graph_fts,
        adj_mat,
        hidden,
        edge_hidden=e_hidden,
        graph_hidden=g_hidden,
    )

  args = [_spec(inputs[k]) for k in names + ("e_hidden", "g_hidden")]
  init = jax.eval_shape(hk.transform(fn).init, KEY, *args)
  converted = rt_haiku.convert_processor(
      select(params, "rt/"),
      cfg,
      graph_vec=graph_vec,
      graph_features=inputs["graph_fts"].shape[-1],
  )
  goldens.assert_same_shapes(converted, {k: dict(v) for k, v in init.items()})


def test_processor_cat_needs_graph_features():
  meta, _, params = goldens.load("rt_processor_cat")
  with pytest.raises(ValueError, match="graph_features"):
    rt_haiku.convert_processor(
        select(params, "rt/"), peer_goldens.rt_config(meta["sizes"])
    )


@pytest.mark.parametrize(
    "case", ["rt_net_binary_search", "rt_net_bellman_ford"]
)
def test_clrs_net_names_and_inverse(case):
  meta, _, params = goldens.load(case)
  sizes = meta["sizes"]
  spec = {k: tuple(v) for k, v in meta["spec"].items()}
  convert = functools.partial(
      rt_haiku.convert_clrs_net,
      config=RTConfig(
          num_layers=sizes["num_layers"],
          num_heads=sizes["nb_heads"],
          head_dim=sizes["head_size"],
          node_ffn_dim=sizes["node_hid_size"],
          edge_msg_dim=sizes["edge_hid_size_1"],
          edge_ffn_dim=sizes["edge_hid_size_2"],
      ),
      spec=spec,
      graph_vec=sizes["graph_vec"],
      ptr_from_edges=sizes["ptr_from_edges"],
  )
  converted = convert(params)
  pointers = [
      n
      for n, (_, loc, typ) in spec.items()
      if loc == "node" and typ == "pointer"
  ]
  assert pointers
  for name in pointers:
    module = f"{rt_haiku.ENCODERS_DECODERS}algo_0_{name}_ptr_from_edges/linear"
    assert set(converted[module]) == {"w", "b"}
  assert "net/rt_clrs_processor/stack/layer_1/attention" in converted
  back = to_authors(convert, params, converted)
  assert set(back) == set(params)
  for name, value in params.items():
    np.testing.assert_array_equal(back[name], value, err_msg=name)
  with pytest.raises(ValueError, match="unexpected.*net/other/w"):
    convert(dict(params, **{"net/other/w": jnp.zeros(1)}))
