"""Relation-aware self-attention and a pairwise edge scorer.

References
  [MH20] Mohammadshahi & Henderson 2020, "Graph-to-Graph Transformer for
         transition-based dependency parsing", sec. 3.2 eq. 3-4 (graph
         inputs) and sec. 3.3 eq. 5 (graph outputs from token pairs).
  [S18]  Shaw, Uszkoreit & Vaswani 2018, "Self-attention with relative
         position representations" (the same key/value terms for offsets).
  [DM17] Dozat & Manning 2017, "Deep biaffine attention for neural
         dependency parsing" (the biaffine scorer option).

Relation labels are integer ids r_ij in [0, R) (BxNxN); the one-hot p_ij of
[MH20] times W^L is an embedding lookup W^L[r_ij]. By convention id 0 means
"no relation".
"""

import math

import flax.linen as nn
import jax
import jax.numpy as jnp

from relational_jax.layers import shapes

SCORERS = ("mlp", "biaffine")
# The hidden activation of kind='mlp'. [MH20] eq. 5 says "MLPs with one
# hidden layer"; their released classifiers use nn.LeakyReLU() (slope 0.01).
SCORER_ACTIVATIONS = {
    "relu": jax.nn.relu,
    "leaky_relu": lambda x: jax.nn.leaky_relu(x, negative_slope=0.01),
}


def relations_from_parents(parents_BxN, mask_BxN=None):
  """Dependency-style relation ids from parent pointers ([MH20] sec. 3.2).

  r_ij = 1 if j is the parent of i (dep -> head), 2 if i is the parent of j
  (head -> dep), 0 otherwise (none). A negative parent means "no parent".
  """
  shapes.check_shape(parents_BxN, ("B", "N"), "parents")
  num_n = parents_BxN.shape[1]
  j_N = jnp.arange(num_n)
  dep_to_head_BxNxN = parents_BxN[:, :, None] == j_N[None, None, :]
  head_to_dep_BxNxN = jnp.swapaxes(dep_to_head_BxNxN, 1, 2)
  rel_BxNxN = jnp.where(
      dep_to_head_BxNxN, 1, jnp.where(head_to_dep_BxNxN, 2, 0)
  ).astype(jnp.int32)
  if mask_BxN is not None:
    pair_BxNxN = mask_BxN[:, :, None] & mask_BxN[:, None, :]
    rel_BxNxN = jnp.where(pair_BxNxN, rel_BxNxN, 0)
  return rel_BxNxN


class RelationAwareAttention(nn.Module):
  """Multi-head relation-aware self-attention, [MH20] eq. 3-4 / [S18].

    e_ij = (x_i W^Q)(x_j W^K + p_ij W^L_1)^T / sqrt(d)          eq. 3
    z_i  = sum_j alpha_ij (x_j W^V + p_ij W^L_2),
    alpha_ij = softmax_j(e_ij)                                   eq. 4

  per head (d = K, the head width); heads are concatenated and mixed by an
  output map. W^L_1, W^L_2 are R x H x K tables. Neither term materialises a
  BxNxNxHxK tensor: the key term projects each query onto the R relation
  keys and gathers, the value term sums attention per relation id.

  The defaults are the paper's equations. The authors' released code
  (github.com/alirezamshi-zz/G2GTr, senttr/parser/utils/graph.py
  `BertGraphSelfAttention`, statetr/model.py `BertSelfAttention`) computes
  a different function; three options give it
  (`relational_jax.interop.g2g_torch.ATTENTION_OPTIONS`):
    qkv_bias=True             biased query, key and value maps (nn.Linear).
    scale_relation_keys=False e_ij = q_i.k_j / sqrt(d) + q_i.W^L_1[r_ij]: the
                              relation term is added after the scaling, not
                              inside it as in eq. 3.
    shared_relations=True     W^L_1, W^L_2 are R x K tables shared by all
                              heads (their nn.Embedding(3, head_size)).
  """

  d_model: int
  num_heads: int
  num_relations: int
  dropout_rate: float = 0.0
  qkv_bias: bool = False
  scale_relation_keys: bool = True
  shared_relations: bool = False

  def setup(self):
    if self.num_relations <= 0:
      raise ValueError(
          f"num_relations must be positive, got {self.num_relations}."
      )
    self.head_dim = shapes.check_divides(
        self.d_model, self.num_heads, "d_model"
    )
    hk = (self.num_heads, self.head_dim)
    bias = self.qkv_bias
    self.query = nn.DenseGeneral(hk, use_bias=bias, name="query")
    self.key = nn.DenseGeneral(hk, use_bias=bias, name="key")
    self.value = nn.DenseGeneral(hk, use_bias=bias, name="value")
    rel_init = nn.initializers.normal(stddev=1.0 / math.sqrt(self.head_dim))
    rel_shape = (self.num_relations,) + hk
    if self.shared_relations:  # R x K, the same for every head.
      rel_shape = (self.num_relations, self.head_dim)
    self.rel_key = self.param("rel_key", rel_init, rel_shape)  # W^L_1
    self.rel_value = self.param("rel_value", rel_init, rel_shape)  # W^L_2
    self.out = nn.DenseGeneral(self.d_model, axis=(-2, -1), name="out")
    self.dropout = nn.Dropout(self.dropout_rate)

  def _per_head(self, table):
    """An R x H x K view of a relation table (R x K when shared)."""
    if not self.shared_relations:
      return table
    return jnp.broadcast_to(
        table[:, None, :], (self.num_relations, self.num_heads, self.head_dim)
    )

  def __call__(
      self, x_BxNxD, relations_BxNxN, mask_BxN=None, deterministic: bool = True
  ):
    shapes.check_shape(x_BxNxD, ("B", "N", self.d_model), "inputs")
    num_b, num_n = x_BxNxD.shape[:2]
    shapes.check_shape(relations_BxNxN, (num_b, num_n, num_n), "relations")
    if mask_BxN is not None:
      shapes.check_shape(mask_BxN, (num_b, num_n), "mask")
    q_BxNxHxK = self.query(x_BxNxD)
    k_BxNxHxK = self.key(x_BxNxD)
    v_BxNxHxK = self.value(x_BxNxD)

    # eq. 3: q_i . k_j  +  q_i . W^L_1[r_ij].
    rel_key_RxHxK = self._per_head(self.rel_key)
    content_BxHxNxN = jnp.einsum("bihk,bjhk->bhij", q_BxNxHxK, k_BxNxHxK)
    q_rel_BxHxNxR = jnp.einsum("bihk,rhk->bhir", q_BxNxHxK, rel_key_RxHxK)
    rel_BxHxNxN = jnp.broadcast_to(
        relations_BxNxN[:, None], (num_b, self.num_heads, num_n, num_n)
    )
    relation_BxHxNxN = jnp.take_along_axis(q_rel_BxHxNxR, rel_BxHxNxN, axis=-1)
    root_d = math.sqrt(self.head_dim)
    if self.scale_relation_keys:  # eq. 3
      e_BxHxNxN = (content_BxHxNxN + relation_BxHxNxN) / root_d
    else:  # the released code: the relation term unscaled
      e_BxHxNxN = content_BxHxNxN / root_d + relation_BxHxNxN
    if mask_BxN is not None:
      e_BxHxNxN = jnp.where(
          mask_BxN[:, None, None, :].astype(bool),
          e_BxHxNxN,
          jnp.finfo(e_BxHxNxN.dtype).min,
      )
    alpha_BxHxNxN = jax.nn.softmax(e_BxHxNxN, axis=-1)
    alpha_BxHxNxN = self.dropout(alpha_BxHxNxN, deterministic=deterministic)

    # eq. 4: sum_j alpha_ij v_j  +  sum_r (sum_{j: r_ij = r} alpha_ij) W^L_2[r].
    z_BxNxHxK = jnp.einsum("bhij,bjhk->bihk", alpha_BxHxNxN, v_BxNxHxK)
    onehot_BxNxNxR = jax.nn.one_hot(
        relations_BxNxN, self.num_relations, dtype=alpha_BxHxNxN.dtype
    )
    alpha_BxHxNxR = jnp.einsum("bhij,bijr->bhir", alpha_BxHxNxN, onehot_BxNxNxR)
    z_BxNxHxK = z_BxNxHxK + jnp.einsum(
        "bhir,rhk->bihk", alpha_BxHxNxR, self._per_head(self.rel_value)
    )
    return self.out(z_BxNxHxK)


class PairwiseEdgeScorer(nn.Module):
  """Edge-label logits from the two tokens' output embeddings ([MH20] 3.3).

  kind='mlp' (the one-hidden-layer classifier of [MH20] eq. 5):
    s_ij = W_2 act(W_1 [h_i; h_j] + b_1) + b_2
  with act = ReLU (activation='relu', default) or LeakyReLU with slope 0.01
  (activation='leaky_relu': the authors' released Relation classifier,
  senttr/parser/parser.py `Classifier`, statetr/model.py `LabelClassifier`).
  kind='biaffine' ([DM17]):
    s_ijl = h_i^T U_l h_j + w_l . [h_i; h_j] + b_l
  Returns BxNxNxY logits for the directed pair (i, j).
  """

  num_labels: int
  kind: str = "mlp"
  hidden_dim: int = 64
  activation: str = "relu"  # kind='mlp' only; one of SCORER_ACTIVATIONS.

  @nn.compact
  def __call__(self, h_BxNxD):
    shapes.check_choice(self.kind, SCORERS, "edge scorer kind")
    shapes.check_choice(
        self.activation, SCORER_ACTIVATIONS, "edge scorer activation"
    )
    if self.kind != "mlp" and self.activation != "relu":
      raise ValueError(
          f"activation={self.activation!r} applies to kind='mlp' only; "
          f"kind={self.kind!r} has no hidden layer."
      )
    shapes.check_shape(h_BxNxD, ("B", "N", "D"), "hiddens")
    if self.num_labels <= 0:
      raise ValueError(f"num_labels must be positive, got {self.num_labels}.")
    if self.kind == "mlp":
      # W_1 [h_i; h_j] = W_1a h_i + W_1b h_j, without building [h_i; h_j].
      head_BxNxF = nn.Dense(self.hidden_dim, name="first")(h_BxNxD)
      tail_BxNxF = nn.Dense(self.hidden_dim, use_bias=False, name="second")(
          h_BxNxD
      )
      hid_BxNxNxF = SCORER_ACTIVATIONS[self.activation](
          head_BxNxF[:, :, None, :] + tail_BxNxF[:, None, :, :]
      )
      return nn.Dense(self.num_labels, name="out")(hid_BxNxNxF)
    width = h_BxNxD.shape[-1]
    u_YxDxD = self.param(
        "bilinear",
        nn.initializers.lecun_normal(batch_axis=(0,)),
        (self.num_labels, width, width),
    )
    bilinear_BxNxNxY = jnp.einsum(
        "bid,yde,bje->bijy", h_BxNxD, u_YxDxD, h_BxNxD
    )
    head_BxNxY = nn.Dense(self.num_labels, name="first")(h_BxNxD)
    tail_BxNxY = nn.Dense(self.num_labels, use_bias=False, name="second")(
        h_BxNxD
    )
    return (
        bilinear_BxNxNxY + head_BxNxY[:, :, None, :] + tail_BxNxY[:, None, :, :]
    )
