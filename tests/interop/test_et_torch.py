"""relational_jax.interop.et_torch on the ET authors' parameters (goldens):
their Edge Transformer (cogs, clutrr), their CLUTRR RAT baseline and their
CFQ encoder-decoder."""

import dataclasses

import jax
import numpy as np
import pytest

from experiments.compare import goldens as compare_goldens
from relational_jax.data.clutrr import NUM_EDGE_LABELS
from relational_jax.data.clutrr import NUM_RELATIONS
from relational_jax.interop import et_torch
from relational_jax.interop import to_authors
from relational_jax.layers.triangular import TriangularAttention
from relational_jax.models.clutrr import ClutrrEdgeTransformer
from relational_jax.models.clutrr import ClutrrRAT
from relational_jax.models.clutrr import RATConfig
from relational_jax.models.cogs_graph import CogsGraphEdgeTransformer
from relational_jax.models.edge_transformer import ETConfig
from relational_jax.models.edge_transformer import EdgeTransformer
from relational_jax.models.edge_transformer import EdgeTransformerLayer
from relational_jax.models.edge_transformer import GraphEdgeEmbedding
from relational_jax.models.edge_transformer import SequenceEdgeEmbedding
from tests.interop import goldens

KEY = jax.random.PRNGKey(0)


def _spec(shape, dtype=np.float32):
  return jax.ShapeDtypeStruct(tuple(shape), dtype)


def _config(sizes):
  return ETConfig(
      num_layers=sizes["num_layers"],
      num_heads=sizes["heads"],
      head_dim=sizes["width"] // sizes["heads"],
      tied=sizes["tied"],
      layout="released_code",
  )


def _edges(sizes):
  n, d = sizes["nodes"], sizes["width"]
  return _spec((sizes["batch"], n, n, d))


@pytest.mark.parametrize(
    "case",
    [
        "et_attention",
        "et_attention_value_ablation",
        "et_attention_attention_ablation",
    ],
)
def test_attention_matches_our_init(case):
  meta, _, params = goldens.load(case)
  sizes = meta["sizes"]
  module = TriangularAttention(
      num_heads=sizes["heads"], ablation=sizes["ablation"]
  )
  convert = lambda p: et_torch.convert_attention(
      p, sizes["heads"], ablation=sizes["ablation"]
  )
  converted = convert(params)
  init = jax.eval_shape(module.init, KEY, _edges(sizes))
  goldens.assert_same_shapes(converted, init["params"])
  # Their unused projections are dropped: linears.4 always, linears.3 with
  # the value ablation; every other element comes back unchanged.
  back = to_authors(convert, params, converted)
  unused = {4, 3} if sizes["ablation"] == "value" else {4}
  assert set(back) == {k for k in params if int(k.split(".")[1]) not in unused}
  for name, value in back.items():
    np.testing.assert_array_equal(value, params[name], err_msg=name)


def test_layer_matches_our_init():
  meta, _, params = goldens.load("et_layer")
  sizes = meta["sizes"]
  module = EdgeTransformerLayer(
      num_heads=sizes["heads"], layout="released_code"
  )
  init = jax.eval_shape(module.init, KEY, _edges(sizes))
  goldens.assert_same_shapes(
      et_torch.convert_layer(params, sizes["heads"]), init["params"]
  )


@pytest.mark.parametrize(
    "case", ["et_stack_tied_graph", "et_stack_untied_graph"]
)
def test_graph_encoder_matches_our_init(case):
  meta, inputs, params = goldens.load(case)
  sizes = meta["sizes"]
  config = _config(sizes)
  converted = et_torch.convert_graph_encoder(params, config)
  labels = _spec(inputs["labels"].shape, np.int32)
  embed = GraphEdgeEmbedding(
      num_labels=sizes["num_labels"], features=sizes["width"]
  )
  goldens.assert_same_shapes(
      converted["embed"], jax.eval_shape(embed.init, KEY, labels)["params"]
  )
  init = jax.eval_shape(EdgeTransformer(config).init, KEY, _edges(sizes))
  goldens.assert_same_shapes(converted["et"], init["params"])


def test_tied_stack_drops_the_unused_clones_only():
  meta, _, params = goldens.load("et_stack_tied_graph")
  config = _config(meta["sizes"])
  assert config.tied and config.num_layers == 3
  layer0 = {k: v for k, v in params.items() if k.startswith("layers.0.")}
  # Their share_layers model keeps num_message_rounds clones; only layers.0
  # is applied.
  with_clones = dict(params)
  for i in (1, 2):
    with_clones.update(
        {k.replace("layers.0.", f"layers.{i}."): v for k, v in layer0.items()}
    )
  converted = et_torch.convert_graph_encoder(with_clones, config)
  assert set(converted["et"]) == {"layer"}
  beyond = dict(
      with_clones, **{"layers.3.norm1.weight": layer0["layers.0.norm1.weight"]}
  )
  with pytest.raises(ValueError, match=r"unexpected.*layers\.3\.norm1\.weight"):
    et_torch.convert_graph_encoder(beyond, config)
  # Untied, the clones are layers of their own, beyond num_layers=1 here.
  untied = dataclasses.replace(config, tied=False, num_layers=1)
  with pytest.raises(ValueError, match=r"unexpected.*layers\.1\."):
    et_torch.convert_graph_encoder(with_clones, untied)


def _cogs_buffers(width, prefix=""):
  """The two buffers a real state dict of their cogs encoder holds beside
  its parameters (the goldens hold parameters only)."""
  return {
      f"{prefix}pe.pe": np.zeros((1, 200, width), np.float32),
      f"{prefix}spatial_relations_builder.relations": np.zeros(
          (150, 150), np.int64
      ),
  }


def test_sequence_encoder_fills_our_cogs_model():
  meta, inputs, params = goldens.load("et_stack_untied_sequence")
  sizes = meta["sizes"]
  config = _config(sizes)
  # Their 'positional' projections ride along in the golden; add the two
  # buffers a real state dict has too.
  assert "left_linear.weight" in params
  state_dict = dict(params, **_cogs_buffers(sizes["width"]))
  converted = et_torch.convert_sequence_encoder(
      state_dict, config, token_embedding=inputs["token_table"]
  )
  m = sizes["max_relative_distance"]
  table = params["spatial_relations_builder.rel_embeddings.weight"]
  relative = converted["embed"]["relative_position"]["embedding"]
  np.testing.assert_array_equal(relative[m], table[m])  # offset 0
  np.testing.assert_array_equal(relative[m + 1], table[m - 1])  # i - j = 1
  tokens = _spec(inputs["tokens"].shape, np.int32)
  embed = SequenceEdgeEmbedding(
      vocab_size=sizes["vocab"], features=sizes["width"], max_distance=m
  )
  goldens.assert_same_shapes(
      converted["embed"], jax.eval_shape(embed.init, KEY, tokens)["params"]
  )
  model = CogsGraphEdgeTransformer(
      config,
      vocab_size=sizes["vocab"],
      label_sizes=(3, 3, 3, 3),
      max_distance=m,
  )
  ours = jax.eval_shape(model.init, KEY, tokens)["params"]
  goldens.assert_same_shapes(converted["embed"], ours["embed"])
  goldens.assert_same_shapes(converted["et"], ours["et"])


def test_cogs_parser_fills_our_whole_cogs_model():
  """Their whole parser, the buffers of a real state dict added: the tree
  is our init's, every parameter but the relation table's two unused rows
  and the unread ones maps back unchanged; a missing classifier or an
  extra layer is named."""
  meta, inputs, params = goldens.load("et_cogs_parser")
  sizes = meta["sizes"]
  config = _config(sizes)
  state_dict = dict(params, **_cogs_buffers(sizes["width"], "encoder."))
  converted = et_torch.convert_cogs_parser(state_dict, config)
  model = compare_goldens.cogs_parser_model(meta)
  tokens = _spec(inputs["tokens"].shape, np.int32)
  goldens.assert_same_shapes(
      converted, jax.eval_shape(model.init, KEY, tokens)["params"]
  )
  for ours, theirs in et_torch.COGS_LABEL_CLASSIFIERS:
    np.testing.assert_array_equal(
        converted[ours]["logits"]["kernel"], params[f"{theirs}.weight"].T
    )
  np.testing.assert_array_equal(
      converted["parent"]["score"]["kernel"][:, 0],
      params["decode_parent.weight"][0],
  )
  with pytest.raises(ValueError, match=r"missing key.*decode_verb_name"):
    et_torch.convert_cogs_parser(
        goldens.without(params, "decode_verb_name.bias"), config
    )
  with pytest.raises(ValueError, match=r"unexpected.*layers\.1\."):
    et_torch.convert_cogs_parser(
        params, dataclasses.replace(config, num_layers=1)
    )


def test_missing_and_unexpected_keys_are_named():
  meta, _, params = goldens.load("et_stack_untied_graph")
  config = _config(meta["sizes"])
  with pytest.raises(ValueError, match=r"missing key.*layers\.2\.norm2\.bias"):
    et_torch.convert_graph_encoder(
        goldens.without(params, "layers.2.norm2.bias"), config
    )
  with pytest.raises(ValueError, match=r"missing key.*embedding\.weight"):
    et_torch.convert_graph_encoder(
        goldens.without(params, "embedding.weight"), config
    )
  extra = dict(params, **{"decoder2vocab.0.weight": np.zeros((8, 8))})
  with pytest.raises(ValueError, match=r"unexpected.*decoder2vocab\.0\.weight"):
    et_torch.convert_graph_encoder(extra, config)
  # The stack alone: the embedding is not its parameter.
  with pytest.raises(ValueError, match=r"unexpected.*'embedding\.weight'"):
    et_torch.convert_stack(params, config)


def test_config_mismatches_raise():
  meta, _, params = goldens.load("et_stack_untied_graph")
  config = _config(meta["sizes"])
  with pytest.raises(ValueError, match="released_code"):
    et_torch.convert_graph_encoder(
        params, dataclasses.replace(config, layout="paper")
    )
  with pytest.raises(ValueError, match=r"linear1\.weight.*shape"):
    et_torch.convert_graph_encoder(
        params, dataclasses.replace(config, ffn_dim=16)
    )
  with pytest.raises(ValueError, match="not divisible by num_heads=3"):
    et_torch.convert_layer(
        {
            k[len("layers.0.") :]: v
            for k, v in params.items()
            if k.startswith("layers.0.")
        },
        3,
    )


# ----------------------------------------------------------------------------
# Their CLUTRR RAT (clutrr/rat.py) -> ClutrrRAT.
# ----------------------------------------------------------------------------


def _rat(meta, **overrides):
  sizes = meta["sizes"]
  config = RATConfig(
      num_layers=sizes["num_layers"],
      num_heads=sizes["heads"],
      d_model=sizes["width"],
      tied=sizes["tied"],
  )
  return dataclasses.replace(config, **overrides)


def _rat_args(inputs):
  return (
      inputs["labels"],
      inputs["query"],
      ~inputs["padding_mask"],
  )


@pytest.mark.parametrize("case", ["rat_clutrr", "rat_clutrr_untied"])
def test_clutrr_rat_matches_our_init(case):
  meta, inputs, params = goldens.load(case)
  config = _rat(meta)
  converted = et_torch.convert_clutrr_rat(params, config)
  init = jax.eval_shape(ClutrrRAT(config).init, KEY, *_rat_args(inputs))
  goldens.assert_same_shapes(converted, init["params"])
  # Every layer reads the one pair of tables their encoder computes.
  heads = config.num_heads
  key = et_torch.rat_relation_table(
      params["encoder.embedding.weight"],
      params["encoder.relation_key_map.weight"],
      params["encoder.relation_key_map.bias"],
      heads,
  )
  layers = [k for k in converted if k != "head"]
  assert layers == (["layer"] if config.tied else ["layer_0", "layer_1"])
  for layer in layers:
    np.testing.assert_array_equal(converted[layer]["attention"]["rel_key"], key)
  # Everything else is a slice: it maps back to their values unchanged;
  # what is left is the relation parameters, the update_relations-only
  # modules and, tied, the unused clone.
  convert = lambda p: compare_goldens.rat_tree_without_tables(
      et_torch.convert_clutrr_rat(p, config)
  )
  back = to_authors(convert, params, convert(params), ".")
  for name, value in back.items():
    np.testing.assert_array_equal(value, params[name], err_msg=name)
  left = set(params) - set(back) - set(et_torch.RAT_RELATION_NAMES)
  assert left == set(meta["no_grad"])  # exactly the parameters they never read


def test_clutrr_rat_label_and_class_rows():
  """label_rows / class_rows: their ids in another order compute the same."""
  meta, inputs, params = goldens.load("rat_clutrr")
  config = _rat(meta)
  model = ClutrrRAT(config)
  want = model.apply(
      {"params": et_torch.convert_clutrr_rat(params, config)},
      *_rat_args(inputs),
  )
  rng = np.random.default_rng(0)
  label_perm = rng.permutation(NUM_EDGE_LABELS)  # our id -> their row
  class_perm = rng.permutation(NUM_RELATIONS)
  # Their row t holds our id `ours_of[t]`.
  ours_of = np.argsort(label_perm)
  got = model.apply(
      {
          "params": et_torch.convert_clutrr_rat(
              params, config, label_rows=label_perm, class_rows=class_perm
          )
      },
      ours_of[inputs["labels"]],
      inputs["query"],
      ~inputs["padding_mask"],
  )
  np.testing.assert_allclose(got, np.asarray(want)[:, class_perm], atol=1e-6)


def test_clutrr_rat_errors_are_named():
  meta, _, params = goldens.load("rat_clutrr_untied")
  config = _rat(meta)
  name = "encoder.layers.1.rel_attention.linears.0.bias"
  with pytest.raises(ValueError, match=r"missing key.*linears\.0\.bias"):
    et_torch.convert_clutrr_rat(goldens.without(params, name), config)
  with pytest.raises(ValueError, match=r"missing key.*relation_value_map"):
    et_torch.convert_clutrr_rat(
        goldens.without(params, "encoder.relation_value_map.bias"), config
    )
  with pytest.raises(ValueError, match=r"missing key.*decoder2vocab\.0"):
    et_torch.convert_clutrr_rat(
        goldens.without(params, "decoder2vocab.0.weight"), config
    )
  extra = dict(params, **{"encoder.pe.pe": np.zeros((1, 8), np.float32)})
  with pytest.raises(ValueError, match=r"unexpected.*encoder\.pe\.pe"):
    et_torch.convert_clutrr_rat(extra, config)
  # Untied with one layer: their second layer is not ours.
  with pytest.raises(ValueError, match=r"unexpected.*encoder\.layers\.1\."):
    et_torch.convert_clutrr_rat(
        params, dataclasses.replace(config, num_layers=1)
    )
  # Tied, the clones up to num_layers are dropped, a layer beyond is not.
  tied = dataclasses.replace(config, tied=True)
  assert set(et_torch.convert_clutrr_rat(params, tied)) == {"layer", "head"}
  with pytest.raises(ValueError, match=r"unexpected.*encoder\.layers\.1\."):
    et_torch.convert_clutrr_rat(params, dataclasses.replace(tied, num_layers=1))
  with pytest.raises(ValueError, match="qkv_bias=True"):
    et_torch.convert_clutrr_rat(
        params, dataclasses.replace(config, qkv_bias=False)
    )
  with pytest.raises(ValueError, match=r"linear1\.weight.*shape"):
    et_torch.convert_clutrr_rat(params, dataclasses.replace(config, ffn_dim=16))
  with pytest.raises(ValueError, match="RATConfig"):
    et_torch.convert_clutrr_rat(params, _config({**meta["sizes"], "width": 8}))
  small = dict(
      params,
      **{"encoder.embedding.weight": params["encoder.embedding.weight"][:20]},
  )
  with pytest.raises(ValueError, match="pass label_rows"):
    et_torch.convert_clutrr_rat(small, config)
  with pytest.raises(ValueError, match="label_rows must be"):
    et_torch.convert_clutrr_rat(
        small, config, label_rows=np.arange(NUM_EDGE_LABELS)
    )
  with pytest.raises(ValueError, match="class_rows must be"):
    et_torch.convert_clutrr_rat(params, config, class_rows=[0, 1])


def test_clutrr_et_maps_every_parameter_they_read_and_its_rows():
  """Their whole CLUTRR model: the tree is our init's; every parameter maps
  back unchanged; left over: the unused linears.4 and the tied clones (the
  parameters that get no gradient). label_rows / class_rows: their ids in
  another order compute the same."""
  meta, inputs, params = goldens.load("et_clutrr")
  config = _config(meta["sizes"])
  model = ClutrrEdgeTransformer(config)
  args = _rat_args(inputs)
  converted = et_torch.convert_clutrr_et(params, config)
  init = jax.eval_shape(model.init, KEY, *args)
  goldens.assert_same_shapes(converted, init["params"])
  convert = lambda p: et_torch.convert_clutrr_et(p, config)
  back = to_authors(convert, params, converted, ".")
  for name, value in back.items():
    np.testing.assert_array_equal(value, params[name], err_msg=name)
  assert set(params) - set(back) == set(meta["no_grad"])
  want = model.apply({"params": converted}, *args)
  rng = np.random.default_rng(1)
  label_perm = rng.permutation(NUM_EDGE_LABELS)  # our id -> their row
  class_perm = rng.permutation(NUM_RELATIONS)
  permuted = et_torch.convert_clutrr_et(
      params, config, label_rows=label_perm, class_rows=class_perm
  )
  got = model.apply(
      {"params": permuted}, np.argsort(label_perm)[args[0]], *args[1:]
  )
  np.testing.assert_allclose(got, np.asarray(want)[:, class_perm], atol=1e-6)


def test_clutrr_et_errors_are_named():
  meta, _, params = goldens.load("et_clutrr")
  config = _config(meta["sizes"])
  with pytest.raises(ValueError, match=r"missing key.*decoder2vocab\.3\.bias"):
    et_torch.convert_clutrr_et(
        goldens.without(params, "decoder2vocab.3.bias"), config
    )
  with pytest.raises(ValueError, match=r"unexpected.*encoder\.layers\.1\."):
    et_torch.convert_clutrr_et(
        params, dataclasses.replace(config, num_layers=1)
    )
  with pytest.raises(ValueError, match="layout='released_code'"):
    et_torch.convert_clutrr_et(
        params, dataclasses.replace(config, layout="paper")
    )
  with pytest.raises(ValueError, match="class_rows must be"):
    et_torch.convert_clutrr_et(params, config, class_rows=[0, 1])


def test_cfq_seq2seq_errors_are_named():
  meta, _, params = goldens.load("et_cfq_seq2seq")
  config = compare_goldens.et_cfq_config(meta["sizes"])
  tree = et_torch.convert_cfq_seq2seq(params, config)
  # One token table for both sides; each stack's relation table reversed.
  np.testing.assert_array_equal(
      tree["src_embed"]["token"]["embedding"], params["emb.weight"]
  )
  np.testing.assert_array_equal(
      tree["tgt_embed"]["token"]["embedding"], params["emb.weight"]
  )
  table = params["decoder.spatial_relations_builder.rel_embeddings.weight"]
  np.testing.assert_array_equal(
      tree["tgt_embed"]["relative_position"]["embedding"][0], table[64]
  )
  np.testing.assert_array_equal(tree["cross"]["embedding"], table[65:])
  with pytest.raises(ValueError, match=r"first_token_vectors=True"):
    et_torch.convert_cfq_seq2seq(
        params, dataclasses.replace(config, first_token_vectors=False)
    )
  with pytest.raises(ValueError, match=r"share one token table"):
    et_torch.convert_cfq_seq2seq(
        params, dataclasses.replace(config, tgt_vocab_size=12)
    )
  with pytest.raises(ValueError, match=r"missing key.*decoder\.bos_vector"):
    et_torch.convert_cfq_seq2seq(
        goldens.without(params, "decoder.bos_vector"), config
    )
  with pytest.raises(ValueError, match=r"rel_embeddings"):  # M = 16: 35 rows.
    et_torch.convert_cfq_seq2seq(
        params, dataclasses.replace(config, max_distance=16)
    )
