"""Edge Transformer parser for the graph form of COGS (Bergen et al. 2021,
sec. 4.4 and appendix A.3; the graph form of Ontanon et al. 2021).

Input: token ids BxN (`relational_jax.data.cogs_graph.graphs_to_arrays`,
PAD = 0) and a node mask BxN. The edge states start as eq. 10 of the paper,
x_ii = e(t_i) + a(0), x_ij = a(i - j) (`SequenceEdgeEmbedding`, relative
offsets clipped to +-16 as the authors' `SpatialRelationsBuilder`), run
through an `EdgeTransformer(ETConfig)` stack, and are read out by

* one `NodeClassifier` (a linear layer on x_ii) per label field of
  `cogs_graph.LABEL_FIELDS` (role, category, noun_type, verb_name);
* a `ParentPointerHead`: logits[b, i, j] = w . x_ji + c, a softmax over the
  candidate parents j of token i (a token without a parent points at
  itself: `parent_or_self`). `parent_from_column=False` reads x_ij instead,
  as the authors' released `cogs/model.py` does.

Output: a dict {'parent': BxNxN, 'role': BxNxY_role, ...} of fp32 logits.

Axis letters (`relational_jax.layers.shapes`): B batch, N tokens, D width,
Y labels of one field.
"""

from typing import Dict, Optional, Tuple

import flax.linen as nn
import jax
import jax.numpy as jnp

from relational_jax.data.cogs_graph import LABEL_FIELDS
from relational_jax.layers import shapes
from relational_jax.models.edge_transformer import EdgeTransformer
from relational_jax.models.edge_transformer import ETConfig
from relational_jax.models.edge_transformer import NodeClassifier
from relational_jax.models.edge_transformer import ParentPointerHead
from relational_jax.models.edge_transformer import SequenceEdgeEmbedding

__all__ = ["CogsGraphEdgeTransformer", "HEADS"]

Array = jax.Array

#: Output heads, in the order of the returned dict.
HEADS: Tuple[str, ...] = ("parent",) + LABEL_FIELDS


class CogsGraphEdgeTransformer(nn.Module):
  """Edge Transformer tagger/parser for COGS graphs.

  Attributes:
    config: the stack's `ETConfig` (D = num_heads * head_dim).
    vocab_size: input token vocabulary (PAD included).
    label_sizes: vocabulary size of each field of `LABEL_FIELDS`, in order.
    max_distance: relative offsets beyond this share an embedding (16).
    parent_from_column: True: parent logits read x_ji (paper); False: x_ij
      (authors' code).
  """

  config: ETConfig
  vocab_size: int
  label_sizes: Tuple[int, ...]
  max_distance: int = 16
  parent_from_column: bool = True

  @nn.compact
  def __call__(
      self,
      tokens_BxN: Array,
      node_mask_BxN: Optional[Array] = None,
      deterministic: bool = True,
  ) -> Dict[str, Array]:
    shapes.check_config_type(self.config, ETConfig)
    if len(self.label_sizes) != len(LABEL_FIELDS):
      raise ValueError(
          "label_sizes needs one size per field of "
          f"{LABEL_FIELDS}, got {tuple(self.label_sizes)}."
      )
    shapes.check_shape(tokens_BxN, ("B", "N"), "tokens_BxN")
    if node_mask_BxN is not None:
      shapes.check_shape(node_mask_BxN, tokens_BxN.shape, "node_mask_BxN")
    x_BxNxNxD = SequenceEdgeEmbedding(
        self.vocab_size,
        self.config.edge_width,
        max_distance=self.max_distance,
        init_scheme=self.config.init,
        name="embed",
    )(tokens_BxN)
    x_BxNxNxD = EdgeTransformer(self.config, name="et")(
        x_BxNxNxD, node_mask_BxN, deterministic=deterministic
    )
    out = {
        "parent": ParentPointerHead(
            from_column=self.parent_from_column,
            init_scheme=self.config.init,
            name="parent",
        )(x_BxNxNxD, node_mask_BxN)
    }
    for field, size in zip(LABEL_FIELDS, self.label_sizes):
      out[field] = NodeClassifier(
          int(size), init_scheme=self.config.init, name=field
      )(x_BxNxNxD).astype(jnp.float32)
    return out
