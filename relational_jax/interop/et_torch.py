"""The ET authors' PyTorch state dicts -> our Edge Transformer trees.

Their code: github.com/bergen/EdgeTransformer, cogs/model.py (biased
projections, sequence input) and clutrr/model.py (unbiased projections,
labelled-graph input). Inputs are state dicts as numpy arrays,
`{k: v.numpy() for k, v in module.state_dict().items()}`. Their layer is
the released code's form of eq. 3, so our modules must use
layout='released_code' (`ETConfig.layout`). tests/fidelity checks that the
converted parameters compute their outputs (attention, layer and stacks, to
1e-5).

torch.nn.Linear stores weight as (out, in): our kernel is weight.T. Their
EdgeAttention has six D x D linears `linears.0..5`; in its forward they are
left_k, right_k, left_v, right_v, query and the output map, and the scores
pair left_k of x_il with right_k of x_lj. So:
  linears.0 (left_k, on x_il)  -> query        W^q (eq. 6)
  linears.1 (right_k, on x_lj) -> key          W^k (eq. 7)
  linears.2 / linears.3        -> value_left / value_right  V^1 / V^2 (eq. 8)
  linears.5                    -> out          W^o (eq. 9; kernel H x K x D)
  linears.4 is computed and never used: it is dropped.
Their lesion_scores (scores q_il . k_ij) is our ablation='attention'; their
lesion_values (values from left_v x_il only) is our ablation='value', where
linears.3 is unused and dropped. Heads split the output axis head-major, as
ours. clutrr's linears have no bias: ours get zero biases.
Layer: norm1 -> ln_attention, edge_attention -> attention, norm2 -> ln_ffn,
linear1 -> ffn_hidden, linear2 -> ffn_out; LayerNorm weight / bias -> scale /
bias. Stacks: layers.{l} -> layer_{l} (untied); tied (their share_layers)
applies layers.0 every round: layers.0 -> layer, and the other clones, kept
in their state dict but never applied, are dropped.
Inputs: clutrr's embedding.weight -> our GraphEdgeEmbedding label table.
Their whole CLUTRR model (clutrr/model.py `EdgeTransformer`: encoder.* as
above, decoder2vocab.0 / .3, their get_mlp(D, Y) on x^L of the query edge ->
head/hidden / head/logits) -> our `ClutrrEdgeTransformer`,
`convert_clutrr_et`.
RAT (their CLUTRR baseline, clutrr/rat.py, `RAT` with update_relations=False
and zero_init=True, their train.py defaults) -> our `ClutrrRAT(RATConfig)`,
`convert_clutrr_rat`. Their relation keys / values are an embedding then a
biased linear map, computed once and read by every layer (encoder
`embedding`, `relation_key_map`, `relation_value_map`); ours are tables:
  rel_key[r] = embedding[r] @ relation_key_map.weight.T + relation_key_map.bias
split head-major into H x K (`rat_relation_table`), rel_value likewise, the
same tables in every layer. Per layer: rel_attention.linears.0/1/2 -> query /
key / value (biased: RATConfig.qkv_bias=True), linears.3 -> out, norm1 /
norm2 / linear1 / linear2 as the ET layer. decoder2vocab.0 / .3 (their
get_mlp(2 D, Y)) -> head/hidden / head/logits. Dropped: each layer's
rel_attention.relation_key_map / relation_value_map / left_linear /
right_linear, linear_graph1/2 and norm_graph1/2 (built always, used only with
update_relations=True, which has the same names: such a state dict is not
ours to convert), and with share_layers the unused clones layers.1.. .
cogs' 'relational' input, x_ij = rel(M + clip(j - i, -M, M)) + [i == j]
word_emb(t_i) with M = 16: ours indexes the offset i - j by row
(i - j) + M, so our row m is their row 2M - m; their last two rows (source /
target relation ids of another input mode) are unused and dropped.
Their whole COGS parser (cogs/model.py `Parser`: word_emb, encoder.*,
decode_parent on x_ij and the label classifiers on x_ii) -> our
`CogsGraphEdgeTransformer` with parent_from_column=False:
`convert_cogs_parser`.
Their CFQ encoder-decoder (cfq-semantic-parsing/model.py) -> our
`EdgeTransformerSeq2Seq` with `first_token_vectors=True`: `convert_cfq_seq2seq`
(its docstring has the mapping).
"""

from typing import Any, Mapping, Optional

import numpy as np

from relational_jax.interop.common import Reader
from relational_jax.interop.common import torch_linear
from relational_jax.layers.shapes import check_config_type
from relational_jax.layers.triangular import ABLATIONS
from relational_jax.models.clutrr import NUM_EDGE_LABELS
from relational_jax.models.clutrr import NUM_RELATIONS
from relational_jax.models.clutrr import RATConfig
from relational_jax.models.edge_transformer import ETConfig
from relational_jax.models.et_seq2seq import ETSeq2SeqConfig

__all__ = [
    "convert_attention",
    "convert_layer",
    "convert_stack",
    "convert_graph_encoder",
    "convert_sequence_encoder",
    "convert_clutrr_rat",
    "convert_clutrr_et",
    "convert_cogs_parser",
    "COGS_LABEL_CLASSIFIERS",
    "convert_cfq_seq2seq",
    "rat_relation_table",
    "RAT_RELATION_NAMES",
]

Params = Mapping[str, Any]

_ROLES = {"query": 0, "key": 1, "value_left": 2, "value_right": 3}
# cogs EdgeTransformerEncoder entries the 'relational' input never reads:
# the 'positional' input's projections and two buffers.
_COGS_UNUSED = (
    "left_linear.weight",
    "left_linear.bias",
    "right_linear.weight",
    "right_linear.bias",
    "pe.pe",
    "spatial_relations_builder.relations",
)


def _dense(reader, name, out_shape=None, in_shape=None, rows=None, cols=None):
  """Their Linear layers, bias optional (their CLUTRR maps have none)."""
  return torch_linear(
      reader,
      name,
      rows,
      cols,
      bias="optional",
      in_shape=in_shape,
      out_shape=out_shape,
  )


def _layer_norm(reader, name, width):
  return {
      "scale": reader.take(f"{name}.weight", (width,)),
      "bias": reader.take(f"{name}.bias", (width,)),
  }


def _attention(reader, prefix, num_heads, ablation, width=None, cfq=False):
  if ablation not in ABLATIONS:
    raise ValueError(f"ablation must be one of {ABLATIONS}, got {ablation!r}")
  d = reader.take(f"{prefix}linears.0.weight", (width, width)).shape[0]
  if d % num_heads:
    raise ValueError(
        f"{reader.what}: width {d} (from {prefix + 'linears.0.weight'!r}) is "
        f"not divisible by num_heads={num_heads}"
    )
  heads = (num_heads, d // num_heads)
  roles = dict(_ROLES)
  # cfq: five linears, the fourth the output map, and two unused reductions.
  unused, out = ([], 4) if cfq else ([4], 5)
  if cfq:
    reader.drop(
        f"{prefix}reduce_dim_{kv}.{p}"
        for kv in ("key", "value")
        for p in ("weight", "bias")
    )
  if ablation == "value":
    del roles["value_right"]
    unused.append(3)
  tree = {
      role: _dense(reader, f"{prefix}linears.{i}", heads, None, d, d)
      for role, i in roles.items()
  }
  tree["out"] = _dense(reader, f"{prefix}linears.{out}", None, heads, d, d)
  reader.drop(
      f"{prefix}linears.{i}.{p}" for i in unused for p in ("weight", "bias")
  )
  return tree


def _layer(
    reader, prefix, num_heads, ablation, width=None, ffn=None, cfq=False
):
  attention = _attention(
      reader, f"{prefix}edge_attention.", num_heads, ablation, width, cfq
  )
  d = attention["out"]["kernel"].shape[-1]
  hidden = _dense(reader, f"{prefix}linear1", rows=ffn, cols=d)
  return {
      "ln_attention": _layer_norm(reader, f"{prefix}norm1", d),
      "attention": attention,
      "ln_ffn": _layer_norm(reader, f"{prefix}norm2", d),
      "ffn_hidden": hidden,
      "ffn_out": _dense(
          reader, f"{prefix}linear2", rows=d, cols=hidden["kernel"].shape[1]
      ),
  }


def _check_config(config: ETConfig) -> None:
  if config.layout != "released_code":
    raise ValueError(
        "the ET authors' layer is layout='released_code' (see "
        f"relational_jax.models.edge_transformer); got {config.layout!r}"
    )


def _stack(reader, prefix, config, cfq=False):
  _check_config(config)
  d = config.num_heads * config.head_dim
  ffn = config.ffn_dim or 4 * d

  def layer(i):
    return _layer(
        reader,
        f"{prefix}layers.{i}.",
        config.num_heads,
        config.ablation,
        d,
        ffn,
        cfq,
    )

  if config.tied:
    tree = {"layer": layer(0)}
    clones = tuple(f"{prefix}layers.{i}." for i in range(1, config.num_layers))
    reader.drop_if(lambda name: name.startswith(clones))
    return tree
  return {f"layer_{i}": layer(i) for i in range(config.num_layers)}


def convert_attention(
    state_dict: Params, num_heads: int, *, ablation: str = "none"
) -> dict:
  """Their `EdgeAttention` -> our `TriangularAttention`'s params.

  Args:
    state_dict: their attention module's state dict ('linears.0.weight',
      ...; biases optional, as in clutrr).
    num_heads: H; the width D is read from the weights.
    ablation: 'none'; 'attention' for their lesion_scores=True; 'value' for
      their lesion_values=True.

  Returns:
    The 'params' collection of `TriangularAttention(num_heads=H,
    ablation=ablation)`.

  Raises:
    ValueError: a missing or unexpected key, or a shape that does not fit.
  """
  reader = Reader(state_dict, "ET attention", ".")
  tree = _attention(reader, "", num_heads, ablation)
  reader.finish()
  return tree


def convert_layer(
    state_dict: Params, num_heads: int, *, ablation: str = "none"
) -> dict:
  """Their `EdgeTransformerLayer` (layernorm_pos='pre') -> ours.

  Args:
    state_dict: one layer's state dict ('edge_attention.linears.0.weight',
      'linear1.weight', 'norm1.weight', ...).
    num_heads: H.
    ablation: as `convert_attention`.

  Returns:
    The 'params' collection of `EdgeTransformerLayer(num_heads=H,
    layout='released_code', ablation=ablation)` with ffn_dim their
    ff_factor x D (ffn_dim=None is 4 D, their default ff_factor).

  Raises:
    ValueError: a missing or unexpected key, or a shape that does not fit.
  """
  reader = Reader(state_dict, "ET layer", ".")
  tree = _layer(reader, "", num_heads, ablation)
  reader.finish()
  return tree


def convert_stack(state_dict: Params, config: ETConfig) -> dict:
  """Their stack of layers ('layers.{l}. ...') -> our `EdgeTransformer`'s.

  Args:
    state_dict: the layers' entries of their encoder's state dict, and
      nothing else (see `convert_graph_encoder` and
      `convert_sequence_encoder` for whole encoders).
    config: our ETConfig: layout='released_code'; num_layers (their
      num_message_rounds), num_heads, head_dim, ffn_dim, ablation as theirs;
      tied=True for their share_layers=True.

  Returns:
    The 'params' collection of `EdgeTransformer(config)`.

  Raises:
    ValueError: a missing or unexpected key, a shape that does not fit the
      config, or layout != 'released_code'.
  """
  reader = Reader(state_dict, "ET stack", ".")
  tree = _stack(reader, "", config)
  reader.finish()
  return tree


def convert_graph_encoder(state_dict: Params, config: ETConfig) -> dict:
  """Their clutrr `EdgeTransformerEncoder` -> our embedding and stack.

  Args:
    state_dict: the encoder's state dict ('embedding.weight', 'layers.*');
      from their whole model, `common.select(sd, 'encoder.', '.')`.
    config: as `convert_stack`.

  Returns:
    {'embed': params of `GraphEdgeEmbedding(num_labels, D)`, 'et': params
    of `EdgeTransformer(config)`}: the 'embed' and 'et' entries of
    `models.clutrr.ClutrrEdgeTransformer`'s params (`convert_clutrr_et`
    converts their whole model, the output MLP decoder2vocab included).

  Raises:
    ValueError: a missing or unexpected key, a shape that does not fit the
      config, or layout != 'released_code'.
  """
  reader = Reader(state_dict, "ET clutrr encoder", ".")
  d = config.num_heads * config.head_dim
  tree = {
      "embed": {
          "label": {"embedding": reader.take("embedding.weight", (None, d))}
      },
      "et": _stack(reader, "", config),
  }
  reader.finish()
  return tree


def convert_sequence_encoder(
    state_dict: Params,
    config: ETConfig,
    *,
    token_embedding: np.ndarray,
    max_distance: Optional[int] = None,
) -> dict:
  """Their cogs `EdgeTransformerEncoder` ('relational' input) -> ours.

  Args:
    state_dict: the encoder's state dict ('layers.*',
      'spatial_relations_builder.rel_embeddings.weight'; the 'positional'
      input's left_linear / right_linear and the buffers pe.pe and
      spatial_relations_builder.relations are not read and are dropped);
      from their parser, `common.select(sd, 'encoder.', '.')`.
    config: as `convert_stack`.
    token_embedding: the V x D token table, their parser's
      'word_emb.weight' (it lives outside the encoder).
    max_distance: M; None reads it from the relation table (2M + 3 rows,
      M = 16 in their code).

  Returns:
    {'embed': params of `SequenceEdgeEmbedding(vocab_size=V, features=D,
    max_distance=M)`, 'et': params of `EdgeTransformer(config)`}: the
    'embed' and 'et' entries of `models.cogs_graph.CogsGraphEdgeTransformer`'s
    params (`convert_cogs_parser` converts their whole parser, the output
    classifiers included).

  Raises:
    ValueError: a missing or unexpected key, a shape that does not fit the
      config, or layout != 'released_code'.
  """
  reader = Reader(state_dict, "ET cogs encoder", ".")
  d = config.num_heads * config.head_dim
  table = reader.take(
      "spatial_relations_builder.rel_embeddings.weight", (None, d)
  )
  if max_distance is None:
    max_distance = (table.shape[0] - 3) // 2
  if max_distance < 0 or table.shape[0] < 2 * max_distance + 1:
    raise ValueError(
        f"{reader.what}: the relation table has {table.shape[0]} rows, too "
        f"few for max_distance={max_distance}"
    )
  token_embedding = np.asarray(token_embedding)
  if token_embedding.ndim != 2 or token_embedding.shape[1] != d:
    raise ValueError(
        f"token_embedding has shape {token_embedding.shape}, expected (V, {d})"
    )
  reader.drop(_COGS_UNUSED)
  tree = {
      "embed": {
          "relative_position": {
              "embedding": table[
                  2 * max_distance - np.arange(2 * max_distance + 1)
              ]
          },
          "token": {"embedding": token_embedding},
      },
      "et": _stack(reader, "", config),
  }
  reader.finish()
  return tree


# Their parser's classifiers of the node labels (cogs/model.py `Parser`), in
# the order of our `models.cogs_graph.LABEL_FIELDS`.
COGS_LABEL_CLASSIFIERS = (
    ("role", "decode_role"),
    ("category", "decode_category"),
    ("noun_type", "decode_noun_type"),
    ("verb_name", "decode_verb_name"),
)


def convert_cogs_parser(
    state_dict: Params, config: ETConfig, *, max_distance: Optional[int] = None
) -> dict:
  """Their whole COGS `Parser` (cogs/model.py, model_type='edge_transformer',
  'relational' input) -> our `CogsGraphEdgeTransformer(config,
  parent_from_column=False)`'s params.

  Args:
    state_dict: the parser's state dict: 'word_emb.weight', 'encoder.*' (as
      `convert_sequence_encoder`), decode_parent (-> 'parent': the pointer
      score on x_ij) and the label classifiers (`COGS_LABEL_CLASSIFIERS`: on
      the loop edges x_ii).
    config, max_distance: as `convert_sequence_encoder`.

  Returns:
    The 'params' collection of `CogsGraphEdgeTransformer` with
    vocab_size and label_sizes as their tables' rows and
    parent_from_column=False (their scores read x_ij).

  Raises:
    ValueError: a missing or unexpected key, a shape that does not fit the
      config, or layout != 'released_code'.
  """
  reader = Reader(state_dict, "ET cogs parser", ".")
  encoder = {k: v for k, v in state_dict.items() if k.startswith("encoder.")}
  tree = convert_sequence_encoder(
      {k[len("encoder.") :]: v for k, v in encoder.items()},
      config,
      token_embedding=reader.take("word_emb.weight", (None, None)),
      max_distance=max_distance,
  )
  reader.drop(tuple(encoder))
  d = config.num_heads * config.head_dim
  tree["parent"] = {"score": torch_linear(reader, "decode_parent", 1, d)}
  for ours, theirs in COGS_LABEL_CLASSIFIERS:
    size = reader.take(f"{theirs}.bias", (None,)).shape[0]
    tree[ours] = {"logits": torch_linear(reader, theirs, size, d)}
  reader.finish()
  return tree


def convert_cfq_seq2seq(state_dict: Params, config: ETSeq2SeqConfig) -> dict:
  """Their CFQ encoder-decoder -> our `EdgeTransformerSeq2Seq(config)`.

  Their cfq-semantic-parsing/model.py `EdgeTransfomerForConditionalGeneration`
  with input_encoding='relational' and decode_from='i_to_i' (their
  defaults). Each stack's attention has five linears: left_k, right_k,
  left_v, right_v (our query, key, value_left, value_right) and linears.4,
  the output map; reduce_dim_key / reduce_dim_value are built and never
  used (dropped), as are the stacks' left_linear / right_linear (the
  'pairwise-sum' input). One token table, 'emb.weight', serves source and
  target: it becomes both our token tables. Each stack's relation table
  (2M + 3 rows, M = their max_rel_len = 32) holds the offsets j - i in rows
  0..2M (our row m is their row 2M - m, as `convert_sequence_encoder`), then
  the decoder's source->target and target->source relations (our cross
  rows 0 and 1; the encoder's two are unused). Each stack's bos_vector is
  our src_first / tgt_first; lm_head has no bias (ours: zeros).

  Args:
    state_dict: their whole model's state dict.
    config: ours: first_token_vectors=True, src_vocab_size = tgt_vocab_size
      = their vocab_size, max_distance = M, et.layout='released_code',
      et.num_layers = num_decoder_layers = their num_message_rounds,
      et.tied = their share_layers, et.ffn_dim = expand_ff x D.

  Returns:
    The 'params' collection of `EdgeTransformerSeq2Seq(config)`.

  Raises:
    ValueError: a config that cannot hold their model, a missing or
      unexpected key, or a shape that does not fit.
  """
  if not config.first_token_vectors:
    raise ValueError(
        "their model adds a learned vector to the first source token and "
        "the first decoder input: ETSeq2SeqConfig(first_token_vectors=True)"
    )
  if config.src_vocab_size != config.tgt_vocab_size:
    raise ValueError(
        "their source and target share one token table: src_vocab_size "
        f"{config.src_vocab_size} != tgt_vocab_size {config.tgt_vocab_size}"
    )
  reader = Reader(state_dict, "ET cfq seq2seq", ".")
  d = config.et.num_heads * config.et.head_dim
  m = config.max_distance
  tokens = reader.take("emb.weight", (config.src_vocab_size, d))
  offsets = 2 * m - np.arange(2 * m + 1)

  def relations(stack):
    return reader.take(
        f"{stack}.spatial_relations_builder.rel_embeddings.weight",
        (2 * m + 3, d),
    )

  encoder_relations, decoder_relations = relations("encoder"), relations(
      "decoder"
  )
  reader.drop(
      f"{stack}.{side}_linear.{p}"
      for stack in ("encoder", "decoder")
      for side in ("left", "right")
      for p in ("weight", "bias")
  )
  tree = {
      "src_embed": {
          "relative_position": {"embedding": encoder_relations[offsets]},
          "token": {"embedding": tokens},
      },
      "tgt_embed": {
          "relative_position": {"embedding": decoder_relations[offsets]},
          "token": {"embedding": tokens},
      },
      "cross": {"embedding": decoder_relations[2 * m + 1 :]},
      "encoder": _stack(reader, "encoder.", config.et, cfq=True),
      "decoder": _stack(reader, "decoder.", config.decoder_et, cfq=True),
      "out": {
          "kernel": reader.take("lm_head.weight", (config.tgt_vocab_size, d)).T,
          "bias": np.zeros((config.tgt_vocab_size,), np.float32),
      },
      "src_first": reader.take("encoder.bos_vector", (d,)),
      "tgt_first": reader.take("decoder.bos_vector", (d,)),
  }
  reader.finish()
  return tree


# ----------------------------------------------------------------------------
# RAT (clutrr/rat.py) -> models.clutrr.ClutrrRAT.
# ----------------------------------------------------------------------------

# Their parameters behind our relation tables (rel_key, rel_value): a
# product, not a slice, so `common.to_authors` cannot map gradients back to
# them; use `rat_relation_table`'s VJP (experiments/compare/goldens.py does).
RAT_RELATION_NAMES = (
    "encoder.embedding.weight",
    "encoder.relation_key_map.weight",
    "encoder.relation_key_map.bias",
    "encoder.relation_value_map.weight",
    "encoder.relation_value_map.bias",
)
# Built in every layer, read only with update_relations=True.
_RAT_UNUSED = (
    "rel_attention.relation_key_map.",
    "rel_attention.relation_value_map.",
    "rel_attention.left_linear.",
    "rel_attention.right_linear.",
    "linear_graph1.",
    "linear_graph2.",
    "norm_graph1.",
    "norm_graph2.",
)


def rat_relation_table(embedding, weight, bias, num_heads):
  """Their relation keys (or values) per label -> our R x H x K table.

  embedding @ weight.T + bias (R x D; their `relation_key_map` of the label
  embedding, rat.py `RelationTransformerEncoder.forward`), split head-major
  as their `graphs_k.view(..., num_heads, d_k)`. Numpy or jax arrays (the
  golden runner differentiates it)."""
  table = embedding @ weight.T + bias
  return table.reshape(table.shape[0], num_heads, table.shape[1] // num_heads)


def _rows(what, rows, size, available):
  if rows is None:
    if size != available:
      raise ValueError(
          f"RAT: {what} has {available} rows, ours {size}; pass "
          f"{what}_rows (their row of each of our ids)"
      )
    return np.arange(size)
  rows = np.asarray(rows)
  if (
      rows.shape != (size,)
      or not np.issubdtype(rows.dtype, np.integer)
      or rows.min() < 0
      or rows.max() >= available
  ):
    raise ValueError(
        f"RAT: {what}_rows must be {size} ints in [0, {available}), got "
        f"{rows.tolist()}"
    )
  return rows


def convert_clutrr_rat(
    state_dict: Params,
    config: RATConfig,
    *,
    label_rows=None,
    class_rows=None,
) -> dict:
  """Their CLUTRR `RAT` (clutrr/rat.py) -> our `ClutrrRAT(config)`'s params.

  Args:
    state_dict: their whole model's state dict ('encoder.embedding.weight',
      'encoder.relation_key_map.*', 'encoder.layers.{l}.*',
      'decoder2vocab.*'), a RAT with update_relations=False (their default;
      the same names with update_relations=True compute another function)
      and zero_init=True (their default).
    config: our RATConfig: num_layers (their num_message_rounds), num_heads,
      d_model (their dim), ffn_dim (their ff_factor x dim; None is 4 dim),
      tied (their share_layers) as theirs; qkv_bias=True (their biased
      maps; the default).
    label_rows: their embedding row of each of our NUM_EDGE_LABELS label ids
      (their train.py numbers the facts' labels 1.. in the order of a Python
      set and uses 0 for "no edge" and padding, ours `NO_EDGE`); None: the
      same ids, their table having exactly NUM_EDGE_LABELS rows.
    class_rows: their output of each of our NUM_RELATIONS classes; None:
      the same ids, NUM_RELATIONS outputs.

  Returns:
    The 'params' collection of `ClutrrRAT(config, head_layers=2)` (their
    get_mlp head is our two-layer head).

  Raises:
    ValueError: a missing or unexpected key, a shape that does not fit the
      config, qkv_bias=False, or bad label_rows / class_rows.
  """
  check_config_type(config, RATConfig)
  if not config.qkv_bias:
    raise ValueError(
        "their query / key / value maps are biased (rat.py "
        "RelationAttention.linears): convert to RATConfig(qkv_bias=True)"
    )
  reader = Reader(state_dict, "ET clutrr RAT", ".")
  d, heads = config.d_model, config.num_heads
  k = d // heads
  ffn = config.ffn_dim or 4 * d
  embedding = reader.take("encoder.embedding.weight", (None, d))
  embedding = embedding[
      _rows("label", label_rows, NUM_EDGE_LABELS, embedding.shape[0])
  ]
  tables = {
      ours: rat_relation_table(
          embedding,
          reader.take(f"encoder.{theirs}.weight", (d, d)),
          reader.take(f"encoder.{theirs}.bias", (d,)),
          heads,
      )
      for ours, theirs in (
          ("rel_key", "relation_key_map"),
          ("rel_value", "relation_value_map"),
      )
  }

  def layer(i):
    prefix = f"encoder.layers.{i}."
    linear = f"{prefix}rel_attention.linears."
    attention = {
        role: torch_linear(reader, f"{linear}{j}", d, d, out_shape=(heads, k))
        for j, role in enumerate(("query", "key", "value"))
    }
    attention["out"] = torch_linear(
        reader, f"{linear}3", d, d, in_shape=(heads, k)
    )
    attention.update({name: t.copy() for name, t in tables.items()})
    reader.drop_if(
        lambda n: n.startswith(tuple(prefix + u for u in _RAT_UNUSED))
    )
    return {
        "attention": attention,
        "ln_attention": _layer_norm(reader, f"{prefix}norm1", d),
        "ffn_hidden": torch_linear(reader, f"{prefix}linear1", ffn, d),
        "ffn_out": torch_linear(reader, f"{prefix}linear2", d, ffn),
        "ln_ffn": _layer_norm(reader, f"{prefix}norm2", d),
    }

  if config.tied:
    tree = {"layer": layer(0)}
    clones = tuple(f"encoder.layers.{i}." for i in range(1, config.num_layers))
    reader.drop_if(lambda name: name.startswith(clones))
  else:
    tree = {f"layer_{i}": layer(i) for i in range(config.num_layers)}
  tree["head"] = _clutrr_head(reader, 2 * d, class_rows)
  reader.finish()
  return tree


def _clutrr_head(reader, width, class_rows):
  """Their get_mlp(width, Y) (decoder2vocab.0 / .3) -> our two-layer
  `QueryHead`, its outputs picked by `class_rows`."""
  out = reader.take("decoder2vocab.3.weight", (None, width))
  rows = _rows("class", class_rows, NUM_RELATIONS, out.shape[0])
  return {
      "hidden": torch_linear(reader, "decoder2vocab.0", width, width),
      "logits": {
          "kernel": out[rows].T,
          "bias": reader.take("decoder2vocab.3.bias", (out.shape[0],))[rows],
      },
  }


def convert_clutrr_et(
    state_dict: Params,
    config: ETConfig,
    *,
    label_rows=None,
    class_rows=None,
) -> dict:
  """Their whole CLUTRR `EdgeTransformer` (clutrr/model.py: the encoder,
  then decoder2vocab on x^L of each query edge) -> our
  `ClutrrEdgeTransformer(config)`'s params.

  Args:
    state_dict: their model's state dict ('encoder.embedding.weight',
      'encoder.layers.{l}.*', 'decoder2vocab.*'), built with
      flat_attention=False (their default).
    config: as `convert_stack` (layout='released_code'; tied is their
      share_layers, num_layers their num_message_rounds).
    label_rows, class_rows: as `convert_clutrr_rat`.

  Returns:
    The 'params' collection of `ClutrrEdgeTransformer(config,
    head_layers=2)` (their get_mlp head is our two-layer head).

  Raises:
    ValueError: a missing or unexpected key, a shape that does not fit the
      config, layout != 'released_code', or bad label_rows / class_rows.
  """
  reader = Reader(state_dict, "ET clutrr model", ".")
  d = config.num_heads * config.head_dim
  embedding = reader.take("encoder.embedding.weight", (None, d))
  rows = _rows("label", label_rows, NUM_EDGE_LABELS, embedding.shape[0])
  tree = {
      "embed": {"label": {"embedding": embedding[rows]}},
      "et": _stack(reader, "encoder.", config),
      "head": _clutrr_head(reader, d, class_rows),
  }
  reader.finish()
  return tree
