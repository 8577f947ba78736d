"""The Graph2Graph Transformer authors' PyTorch state dicts -> our trees.

Their code: github.com/alirezamshi-zz/G2GTr (Mohammadshahi & Henderson
2020). Its graph-input attention is `BertGraphSelfAttention`
(senttr/parser/utils/graph.py, the Sentence Transformer) and
`BertSelfAttention` with `graph_input` (statetr/model.py, the State
Transformer): the same function under the same parameter names. Its graph
output (the Relation classifier on two tokens' output embeddings) is
`Classifier` (senttr/parser/parser.py, their parser's `mlp_rel`) and
`LabelClassifier` (statetr/model.py). Inputs are state dicts as numpy arrays,
`{k: v.numpy() for k, v in module.state_dict().items()}`.

Attention: one BERT attention block's entries (their
`encoder.layer.{l}.attention.` with the prefix removed, e.g. by
`interop.select(sd, "bert.encoder.layer.0.attention.", ".")`) ->
`RelationAwareAttention(d_model, num_heads, num_relations,
**ATTENTION_OPTIONS)`. torch.nn.Linear stores weight as (out, in): our kernel
is weight.T, with the width split head-major into H x K.
  self.query/key/value    -> query/key/value  (kernel D x H x K, bias H x K)
  self.dp_relation_k      -> rel_key          (R x K; R x H x K, the same
                                               for every head, with
                                               shared_relations=False)
  self.dp_relation_v      -> rel_value        (likewise)
  output.dense            -> out              (kernel H x K x D, bias D: the
                                               first map of their
                                               BertSelfOutput)
Not accepted (ValueError): `output.LayerNorm.*` (their residual LayerNorm
after the attention, which is not part of RelationAwareAttention: convert it
with the layer around it and leave it out here) and their optional LayerNorm
of the relation keys / values (`self.layernorm_key_layer.*`,
`self.layernorm_value_layer.*`, statetr's `self.LayerNormKeys.*`; off by
default and in their released run scripts), which ours does not compute.

Relation ids. Their parser states build the graph input (`graph_arc`) with
0 = none, 1 = i is the head of j, 2 = j is the head of i (senttr/parser/
model.py `State.update`, statetr/utils.py `prepare_graph`); with
relation_ids='theirs' (default) those ids are fed to ours unchanged.
`relation_aware.relations_from_parents` numbers the two directions the other
way round (1 = j is the parent of i); relation_ids='relations_from_parents'
reorders the tables' rows to its ids.

Classifier: their `Classifier(2 D, F, Y)` (entries `layer1.*`, `layer2.*`,
e.g. `select(sd, "mlp_rel.", ".")`) -> `PairwiseEdgeScorer(num_labels=Y,
hidden_dim=F, **SCORER_OPTIONS)`:
  layer1.weight[:, :D]    -> first/kernel     (and layer1.bias -> first/bias)
  layer1.weight[:, D:]    -> second/kernel
  layer2                  -> out
Their input is the concatenation [g_s2; g_s1] of the second and first
stack tokens' embeddings (`State.feature_label`): our logits s_ij are theirs
for i = s2, j = s1.

Nothing else is dropped. tests/fidelity checks the converted parameters
against their code (outputs and gradients, to 1e-5).
"""

from typing import Any, Mapping

import numpy as np

from relational_jax.interop.common import Reader
from relational_jax.interop.common import torch_linear

__all__ = [
    "ATTENTION_OPTIONS",
    "SCORER_OPTIONS",
    "RELATION_IDS",
    "convert_attention",
    "convert_relation_classifier",
]

Params = Mapping[str, Any]

# RelationAwareAttention options under which ours computes their function
# (see its docstring): biased q / k / v maps, the relation key term added
# after the 1 / sqrt(d) scaling (senttr/parser/utils/graph.py lines 181-185,
# statetr/model.py lines 336-342), relation tables shared by the heads.
ATTENTION_OPTIONS = dict(
    qkv_bias=True, scale_relation_keys=False, shared_relations=True
)
# PairwiseEdgeScorer options of their Relation classifier (nn.LeakyReLU()).
SCORER_OPTIONS = dict(kind="mlp", activation="leaky_relu")
RELATION_IDS = ("theirs", "relations_from_parents")

_UNSUPPORTED = (
    "self.layernorm_key_layer.",
    "self.layernorm_value_layer.",
    "self.LayerNormKeys.",
)


def convert_attention(
    state_dict: Params,
    num_heads: int,
    *,
    shared_relations: bool = True,
    relation_ids: str = "theirs",
) -> dict:
  """Their graph-input attention block -> our `RelationAwareAttention`.

  Args:
    state_dict: 'self.query.weight', ..., 'self.dp_relation_k.weight',
      'self.dp_relation_v.weight', 'output.dense.weight', 'output.dense.bias'
      (one layer's `attention.` entries without `output.LayerNorm.*`).
    num_heads: their num_attention_heads.
    shared_relations: our module's `shared_relations` (True: their R x K
      tables as they are; False: tiled to R x H x K, which computes the same
      function but cannot be mapped back by `to_authors`).
    relation_ids: 'theirs' or 'relations_from_parents' (see the module
      docstring); the latter needs R = 3.

  Returns:
    The 'params' collection of `RelationAwareAttention(D, num_heads, R,
    **ATTENTION_OPTIONS)` (with `shared_relations` as given).

  Raises:
    ValueError: a missing or unexpected key, a shape that does not fit
      num_heads, their relation LayerNorm (not computed by ours), or an
      unknown relation_ids.
  """
  if relation_ids not in RELATION_IDS:
    raise ValueError(
        f"Unknown relation_ids {relation_ids!r}; valid choices are "
        f"{list(RELATION_IDS)}."
    )
  reader = Reader(state_dict, "G2GTr attention", ".")
  unsupported = [n for n in reader.names() if n.startswith(_UNSUPPORTED)]
  if unsupported:
    raise ValueError(
        f"G2GTr attention: {unsupported} belong to their LayerNorm of the "
        "relation keys / values (--layernorm_key / --layernorm_value), which "
        "RelationAwareAttention does not compute"
    )
  d = reader.take("self.query.weight", (None, None)).shape[0]
  if num_heads <= 0 or d % num_heads:
    raise ValueError(
        f"G2GTr attention: width {d} is not a multiple of num_heads {num_heads}"
    )
  k = d // num_heads
  tree = {
      name: torch_linear(reader, f"self.{name}", d, d, out_shape=(num_heads, k))
      for name in ("query", "key", "value")
  }
  for ours, theirs in (("rel_key", "k"), ("rel_value", "v")):
    table = reader.take(f"self.dp_relation_{theirs}.weight", (None, k))
    if relation_ids == "relations_from_parents":
      if table.shape[0] != 3:
        raise ValueError(
            "relation_ids='relations_from_parents' needs their 3 relation "
            f"ids, got {table.shape[0]}"
        )
      table = table[np.array([0, 2, 1])]
    if not shared_relations:
      table = np.broadcast_to(
          table[:, None, :], (table.shape[0], num_heads, k)
      ).copy()
    tree[ours] = table
  tree["out"] = torch_linear(
      reader, "output.dense", d, d, in_shape=(num_heads, k)
  )
  reader.finish()
  return tree


def convert_relation_classifier(state_dict: Params) -> dict:
  """Their Relation classifier (`Classifier` / `LabelClassifier`) -> ours.

  Args:
    state_dict: 'layer1.weight' (F x 2 D), 'layer1.bias', 'layer2.weight'
      (Y x F), 'layer2.bias'.

  Returns:
    The 'params' collection of `PairwiseEdgeScorer(num_labels=Y,
    hidden_dim=F, **SCORER_OPTIONS)`.

  Raises:
    ValueError: a missing or unexpected key, or an odd input width.
  """
  reader = Reader(state_dict, "G2GTr relation classifier", ".")
  hidden, width = reader.take("layer1.weight", (None, None)).shape
  if width % 2:
    raise ValueError(
        f"G2GTr relation classifier: layer1 input width {width} is not "
        "2 x the token width"
    )
  d = width // 2
  first = torch_linear(reader, "layer1", hidden, width)
  labels = reader.take("layer2.weight", (None, hidden)).shape[0]
  tree = {
      "first": {"kernel": first["kernel"][:d], "bias": first["bias"]},
      "second": {"kernel": first["kernel"][d:]},
      "out": torch_linear(reader, "layer2", labels, hidden),
  }
  reader.finish()
  return tree
