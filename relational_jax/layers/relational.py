"""Relational attention and edge updates (Relational Transformer, Diao & Loynd, ICLR 2023).

Axis letters (`relational_jax.layers.shapes`): B batch, N nodes (query i /
key j), D node width, E edge width, H heads, K head width (D = H * K), F
feed-forward hidden width (d_nh, d_eh2), G edge message width (d_eh1).

LayerNorm epsilon: `ln_epsilon`, default 1e-5 as the authors' code (Haiku's
LayerNorm default); Flax's default is 1e-6.

Equations implemented (numbers from the paper):
  eq. 3-4   q_ij = n_i W^Q_n + e_ij W^Q_e,  k_ij = n_j W^K_n + e_ij W^K_e,
            v_ij = n_j W^V_n + e_ij W^V_e,
            a_ij = softmax_j(q_ij . k_ij / sqrt(K)),  m_i = sum_j a_ij v_ij.
  eq. 17-18 u_i = LN(m_i W_1 + n_i),  n_i' = LN(ReLU(u_i W_2) W_3 + u_i).
  eq. 5-7   m_ij = ReLU([e_ij, e_ji, n_i', n_j'] W_4),
            u_ij = LN(m_ij W_5 + e_ij),  e_ij' = LN(ReLU(u_ij W_6) W_7 + u_ij).

Initialisation: `init_scheme` (`relational_jax.layers.init.RT_INITS`),
'diao' by default: the authors' Haiku default over each linear map's
input as their code concatenates it (W_4's four blocks share the fan-in
2E + 2D); 'flax' is LeCun normal per kernel.
"""

import functools
from typing import Optional, Tuple

import flax.linen as nn
import jax
import jax.numpy as jnp

from relational_jax.layers import dense as dense_lib
from relational_jax.layers import init as init_lib
from relational_jax.layers import shapes
from relational_jax.layers.triangular import TriangularAttention

Array = jax.Array

# Added to masked logits before the (fp32) softmax.
_MASK_LOGIT = -1e9


def attention_mask(
    adjacency_BxNxN: Optional[Array], node_mask_BxN: Optional[Array]
) -> Optional[Array]:
  """Combines an adjacency mask and a node padding mask into a BxNxN mask.

  Entry [b, i, j] is True where query node i may attend to key node j: the
  edge is present (if an adjacency is given) and node j is real (if a node
  mask is given).
  """
  mask = None
  if adjacency_BxNxN is not None:
    mask = adjacency_BxNxN.astype(bool)
  if node_mask_BxN is not None:
    b, n = node_mask_BxN.shape
    keys_BxNxN = jnp.broadcast_to(
        node_mask_BxN.astype(bool)[:, None, :], (b, n, n)
    )
    mask = keys_BxNxN if mask is None else jnp.logical_and(mask, keys_BxNxN)
  return mask


class RelationalAttention(nn.Module):
  """Multi-head relational attention, RT eq. 3-4.

  With `use_edges=False` (or no edges passed) this is standard multi-head
  self-attention (the RT paper's "standard transformer" ablation).

  Attributes:
    num_heads: H.
    head_dim: K; defaults to D // H (D must then divide by H).
    use_edges: condition Q, K, V on e_ij (eq. 4).
    init_scheme: 'diao' (the authors' initialisation) or 'flax' (module
      docstring).
  """

  num_heads: int
  head_dim: Optional[int] = None
  use_edges: bool = True
  init_scheme: str = "diao"
  dtype: Optional[jnp.dtype] = None
  param_dtype: jnp.dtype = jnp.float32

  @nn.compact
  def __call__(
      self,
      n_BxNxD: Array,
      e_BxNxNxE: Optional[Array] = None,
      mask_BxNxN: Optional[Array] = None,
  ) -> Array:
    """Returns the aggregated messages m_BxNx(H*K) (eq. 3-4, heads concatenated).

    Args:
      n_BxNxD: node vectors.
      e_BxNxNxE: edge vectors, e[b, i, j] is the edge from i to j.
      mask_BxNxN: optional boolean mask, True where i may attend to j
        (adjacency restriction and/or padding, see `attention_mask`).
    """
    shapes.check_shape(n_BxNxD, ("B", "N", "D"), "n_BxNxD")
    b, n, d = n_BxNxD.shape
    if self.head_dim is None:
      k_size = shapes.check_divides(d, self.num_heads, "node width D")
    else:
      k_size = self.head_dim
    h = self.num_heads
    if self.use_edges and e_BxNxNxE is not None:
      shapes.check_shape(e_BxNxNxE, (b, n, n, None), "e_BxNxNxE")
    if mask_BxNxN is not None:  # Batch 1 broadcasts over the batch.
      batch = b if mask_BxNxN.ndim and mask_BxNxN.shape[0] != 1 else 1
      shapes.check_shape(mask_BxNxN, (batch, n, n), "mask_BxNxN")
    shapes.check_choice(self.init_scheme, init_lib.RT_INITS, "init_scheme")

    def proj(features, name, fan_in):
      return nn.DenseGeneral(
          features,
          dtype=self.dtype,
          param_dtype=self.param_dtype,
          kernel_init=init_lib.rt_kernel(self.init_scheme, fan_in),
          name=name,
      )

    # Node terms: n_i W_n for queries, n_j W_n for keys and values.
    qn_BxNxHxK = proj((h, k_size), "query_node", d)(n_BxNxD)
    kn_BxNxHxK = proj((h, k_size), "key_node", d)(n_BxNxD)
    vn_BxNxHxK = proj((h, k_size), "value_node", d)(n_BxNxD)
    scale = 1.0 / jnp.sqrt(jnp.asarray(k_size, jnp.float32))

    use_edges = self.use_edges and e_BxNxNxE is not None
    if use_edges:
      # Edge terms e_ij W^Q_e and e_ij W^K_e in one GEMM, added to the node
      # terms (eq. 4); logits are q_ij . k_ij per head.
      qke_BxNxNx2xHxK = proj((2, h, k_size), "edge_qk", e_BxNxNxE.shape[-1])(
          e_BxNxNxE
      )
      q_BxNxNxHxK = qn_BxNxHxK[:, :, None] + qke_BxNxNx2xHxK[..., 0, :, :]
      k_BxNxNxHxK = kn_BxNxHxK[:, None, :] + qke_BxNxNx2xHxK[..., 1, :, :]
      # A multiply-reduce rather than an einsum: XLA fuses the adds above into
      # it, so q_ij and k_ij are never written out (and neither are their
      # gradients).
      logits_BxHxNxN = jnp.moveaxis(
          jnp.sum(q_BxNxNxHxK * k_BxNxNxHxK, axis=-1), -1, 1
      )
    else:
      logits_BxHxNxN = jnp.einsum("bihk,bjhk->bhij", qn_BxNxHxK, kn_BxNxHxK)

    logits_BxHxNxN = logits_BxHxNxN.astype(jnp.float32) * scale
    if mask_BxNxN is not None:
      logits_BxHxNxN = jnp.where(
          mask_BxNxN[:, None].astype(bool), logits_BxHxNxN, _MASK_LOGIT
      )
    a_BxHxNxN = jax.nn.softmax(logits_BxHxNxN, axis=-1).astype(vn_BxNxHxK.dtype)

    # m_i = sum_j a_ij (n_j W^V_n + e_ij W^V_e). The edge part is computed as
    # (sum_j a_ij e_ij) W^V_e + b^V_e (the weights sum to 1), which equals
    # eq. 3-4 exactly without projecting all N^2 edges to values.
    m_BxNxHxK = jnp.einsum("bhij,bjhk->bihk", a_BxHxNxN, vn_BxNxHxK)
    if use_edges:
      e_size = e_BxNxNxE.shape[-1]
      # W^V_e maps E to H*K: its fan-in is E under either scheme.
      ve_init = (
          init_lib.haiku_linear_kernel(e_size)
          if self.init_scheme == "diao"
          else nn.initializers.lecun_normal(in_axis=0, out_axis=(1, 2))
      )
      w_ve_ExHxK = self.param(
          "value_edge_kernel", ve_init, (e_size, h, k_size), self.param_dtype
      )
      b_ve_HxK = self.param(
          "value_edge_bias",
          nn.initializers.zeros,
          (h, k_size),
          self.param_dtype,
      )
      ea_BxNxHxE = jnp.einsum(
          "bhij,bije->bihe", a_BxHxNxN, e_BxNxNxE.astype(a_BxHxNxN.dtype)
      )
      m_BxNxHxK = (
          m_BxNxHxK
          + jnp.einsum(
              "bihe,ehk->bihk", ea_BxNxHxE, w_ve_ExHxK.astype(ea_BxNxHxE.dtype)
          )
          + b_ve_HxK
      )
    return m_BxNxHxK.reshape(b, n, h * k_size)


@functools.partial(jax.custom_vjp, nondiff_argnums=(3,))
def _layer_norm(x, scale, bias, epsilon):
  """LayerNorm over the last axis (statistics in fp32), y = x_hat * scale + bias."""
  return _layer_norm_fwd(x, scale, bias, epsilon)[0]


def _layer_norm_fwd(x, scale, bias, epsilon):
  x32 = x.astype(jnp.float32)
  mean = jnp.mean(x32, axis=-1, keepdims=True)
  centred = x32 - mean
  inv = jax.lax.rsqrt(
      jnp.mean(centred * centred, axis=-1, keepdims=True) + epsilon
  )
  x_hat = centred * inv
  out_dtype = jnp.result_type(x.dtype, scale.dtype)
  y = x_hat * scale.astype(jnp.float32) + bias.astype(jnp.float32)
  return y.astype(out_dtype), (x_hat, inv, scale, bias, jnp.zeros((), x.dtype))


def _layer_norm_bwd(epsilon, residuals, dy):
  del epsilon
  x_hat, inv, scale, bias, x_token = residuals
  dy32 = dy.astype(jnp.float32)
  g = dy32 * scale.astype(jnp.float32)
  dx = inv * (
      g
      - jnp.mean(g, axis=-1, keepdims=True)
      - x_hat * jnp.mean(g * x_hat, axis=-1, keepdims=True)
  )
  lead = tuple(range(dy.ndim - 1))
  dscale = jnp.sum(dy32 * x_hat, axis=lead).astype(scale.dtype)
  dbias = jnp.sum(dy32, axis=lead).astype(bias.dtype)
  return dx.astype(x_token.dtype), dscale, dbias


_layer_norm.defvjp(_layer_norm_fwd, _layer_norm_bwd)


class _LayerNorm(nn.Module):
  """nn.LayerNorm's function and parameters (scale, bias) with a hand-written
  VJP: the forward saves x_hat and 1/sigma only (Flax's saves the broadcast
  scale * 1/sigma as a full-size tensor), and the backward is one pass."""

  epsilon: float = 1e-5
  dtype: Optional[jnp.dtype] = None  # None: that of x and the parameters.
  param_dtype: jnp.dtype = jnp.float32

  @nn.compact
  def __call__(self, x):
    features = x.shape[-1]
    scale = self.param(
        "scale", nn.initializers.ones, (features,), self.param_dtype
    )
    bias = self.param(
        "bias", nn.initializers.zeros, (features,), self.param_dtype
    )
    y = _layer_norm(x, scale, bias, self.epsilon)
    return y if self.dtype is None else y.astype(self.dtype)


class _MaybeLayerNorm(nn.Module):
  use_ln: bool = True
  epsilon: float = 1e-5
  dtype: Optional[jnp.dtype] = None
  param_dtype: jnp.dtype = jnp.float32

  @nn.compact
  def __call__(self, x):
    if not self.use_ln:
      return x
    # Named as nn.LayerNorm would be, so parameter paths are unchanged.
    return _LayerNorm(
        epsilon=self.epsilon,
        dtype=self.dtype,
        param_dtype=self.param_dtype,
        name="LayerNorm_0",
    )(x)


def _norm_of(update: nn.Module, name: str) -> _MaybeLayerNorm:
  """The LayerNorm `name` of a node or edge update, with its use_ln,
  ln_epsilon, dtype and param_dtype."""
  return _MaybeLayerNorm(
      update.use_ln,
      update.ln_epsilon,
      dtype=update.dtype,
      param_dtype=update.param_dtype,
      name=name,
  )


class NodeUpdate(nn.Module):
  """Transformer node update after attention, RT appendix eq. 17-18 (post-LN).

  u_i = LN(m_i W_1 + n_i);  n_i' = LN(ReLU(u_i W_2) W_3 + u_i), W_2: D -> d_nh.

  Attributes:
    ffn_dim: d_nh, the hidden width F of W_2.
    ln_epsilon: LayerNorm epsilon, 1e-5 as the authors' code (Flax's
      default is 1e-6).
    init_scheme: 'diao' or 'flax' (module docstring).
  """

  ffn_dim: int
  dropout_rate: float = 0.0
  use_ln: bool = True
  ln_epsilon: float = 1e-5
  init_scheme: str = "diao"
  dtype: Optional[jnp.dtype] = None
  param_dtype: jnp.dtype = jnp.float32

  @nn.compact
  def __call__(
      self, m_BxNxD: Array, n_BxNxD: Array, deterministic: bool = True
  ) -> Array:
    d = n_BxNxD.shape[-1]
    shapes.check_choice(self.init_scheme, init_lib.RT_INITS, "init_scheme")
    dense = lambda size, name, fan_in: dense_lib.Dense(
        size,
        dtype=self.dtype,
        param_dtype=self.param_dtype,
        kernel_init=init_lib.rt_kernel(self.init_scheme, fan_in),
        name=name,
    )
    drop = nn.Dropout(self.dropout_rate)
    norm = lambda name: _norm_of(self, name)
    u_BxNxD = norm("ln_1")(
        drop(
            dense(d, "w1", m_BxNxD.shape[-1])(m_BxNxD),
            deterministic=deterministic,
        )
        + n_BxNxD
    )
    f_BxNxF = nn.relu(dense(self.ffn_dim, "w2", d)(u_BxNxD))
    return norm("ln_2")(
        drop(dense(d, "w3", self.ffn_dim)(f_BxNxF), deterministic=deterministic)
        + u_BxNxD
    )


class EdgeUpdate(nn.Module):
  """Edge update from (e_ij, e_ji, n_i', n_j'), RT eq. 5-7.

  m_ij = ReLU([e_ij, e_ji, n_i, n_j] W_4)                 (W_4: 2E + 2D -> d_eh1)
  u_ij = LN(m_ij W_5 + e_ij);  e_ij' = LN(ReLU(u_ij W_6) W_7 + u_ij)   (W_6: E -> d_eh2)

  W_4 is applied as four blocks (one per concatenated input), which equals the
  concatenation exactly but keeps the node terms at O(B N D) cost.

  With `triangular_heads > 0` (our 'rt_triangular', the RT paper's stated
  future work), the edge also attends over the triangles through it: the
  Edge Transformer's triangular attention (ET eq. 4-9) of the edge state is
  added to the residual, u_ij = LN(m_ij W_5 + TA(e)_ij + e_ij); O(N^3) time,
  O(N^2) memory (pivot-chunked).

  Attributes:
    msg_dim: d_eh1, the message width G (output of W_4).
    ffn_dim: d_eh2, the hidden width F of W_6.
    triangular_heads: heads of the optional triangular attention (0: none).
    chunk_size: pivots per chunk of that triangular attention.
    ln_epsilon: LayerNorm epsilon, 1e-5 as the authors' code (Flax's
      default is 1e-6).
    init_scheme: 'diao' or 'flax' (module docstring); W_4's blocks share
      the fan-in 2E + 2D under 'diao'. The optional triangular attention
      (ours) keeps Flax's initialisation.
  """

  msg_dim: int
  ffn_dim: int
  triangular_heads: int = 0
  chunk_size: int = 8
  dropout_rate: float = 0.0
  use_ln: bool = True
  ln_epsilon: float = 1e-5
  init_scheme: str = "diao"
  dtype: Optional[jnp.dtype] = None
  param_dtype: jnp.dtype = jnp.float32

  @nn.compact
  def __call__(
      self,
      e_BxNxNxE: Array,
      n_BxNxD: Array,
      deterministic: bool = True,
      node_mask_BxN: Optional[Array] = None,
  ) -> Array:
    shapes.check_shape(n_BxNxD, ("B", "N", "D"), "n_BxNxD")
    b, n, _ = n_BxNxD.shape
    shapes.check_shape(e_BxNxNxE, (b, n, n, None), "e_BxNxNxE")
    shapes.check_choice(self.init_scheme, init_lib.RT_INITS, "init_scheme")
    e_size, d = e_BxNxNxE.shape[-1], n_BxNxD.shape[-1]
    dense = lambda size, name, fan_in, bias=True: dense_lib.Dense(
        size,
        use_bias=bias,
        dtype=self.dtype,
        param_dtype=self.param_dtype,
        kernel_init=init_lib.rt_kernel(self.init_scheme, fan_in),
        name=name,
    )
    w4_fan_in = 2 * e_size + 2 * d  # of the concatenated [e_ij, e_ji, n_i, n_j]
    drop = nn.Dropout(self.dropout_rate)
    # Blocks of W_4 acting on e_ij, e_ji, n_i and n_j (eq. 6). The e_ji block
    # is bias-free and linear, so it is applied to e_ij and the G-wide result
    # transposed ((e^T W)_ij = (e W)_ji), not the E-wide edges.
    w4 = lambda name, bias=False: dense(self.msg_dim, name, w4_fan_in, bias)
    pre_BxNxNxG = (
        w4("w4_e_ij", True)(e_BxNxNxE)
        + jnp.swapaxes(w4("w4_e_ji")(e_BxNxNxE), 1, 2)
        + w4("w4_n_i")(n_BxNxD)[:, :, None]
        + w4("w4_n_j")(n_BxNxD)[:, None, :]
    )
    m_BxNxNxG = nn.relu(pre_BxNxNxG)
    res_BxNxNxE = drop(
        dense(e_size, "w5", self.msg_dim)(m_BxNxNxG),
        deterministic=deterministic,
    )
    if self.triangular_heads:
      res_BxNxNxE += drop(
          TriangularAttention(
              num_heads=self.triangular_heads,
              chunk_size=self.chunk_size,
              dtype=self.dtype,
              param_dtype=self.param_dtype,
              name="triangular",
          )(e_BxNxNxE, node_mask_BxN),
          deterministic=deterministic,
      )
    norm = lambda name: _norm_of(self, name)
    u_BxNxNxE = norm("ln_1")(res_BxNxNxE + e_BxNxNxE)
    f_BxNxNxF = nn.relu(dense(self.ffn_dim, "w6", e_size)(u_BxNxNxE))
    return norm("ln_2")(
        drop(
            dense(e_size, "w7", self.ffn_dim)(f_BxNxNxF),
            deterministic=deterministic,
        )
        + u_BxNxNxE
    )


class RelationalTransformerLayer(nn.Module):
  """One RT layer: relational attention + node update, then the edge update.

  Nodes are updated before edges (RT section 3.2), so the edge update sees the
  new node vectors n'.

  Attributes:
    num_heads, head_dim: attention heads; H * K must equal the node width D.
    node_ffn_dim: d_nh, hidden width of the node feed-forward (W_2).
    edge_msg_dim, edge_ffn_dim: d_eh1 and d_eh2 (W_4 and W_6 widths).
    use_edges: False gives the standard-transformer ablation (edges ignored).
    edge_update: False gives the "no edge updates" ablation.
    triangular_heads, chunk_size: see `EdgeUpdate`.
    ln_epsilon: LayerNorm epsilon, 1e-5 as the authors' code (Flax's
      default is 1e-6).
    init_scheme: 'diao' or 'flax' (module docstring).
  """

  num_heads: int
  head_dim: Optional[int] = None
  node_ffn_dim: int = 32
  edge_msg_dim: int = 16
  edge_ffn_dim: int = 8
  use_edges: bool = True
  edge_update: bool = True
  triangular_heads: int = 0
  chunk_size: int = 8
  dropout_rate: float = 0.0
  use_ln: bool = True
  ln_epsilon: float = 1e-5
  init_scheme: str = "diao"
  dtype: Optional[jnp.dtype] = None
  param_dtype: jnp.dtype = jnp.float32

  @nn.compact
  def __call__(
      self,
      n_BxNxD: Array,
      e_BxNxNxE: Optional[Array] = None,
      mask_BxNxN: Optional[Array] = None,
      deterministic: bool = True,
      node_mask_BxN: Optional[Array] = None,
  ) -> Tuple[Array, Optional[Array]]:
    d = n_BxNxD.shape[-1]
    k_size = self.head_dim or shapes.check_divides(
        d, self.num_heads, "node width D"
    )
    if self.num_heads * k_size != d:
      raise ValueError(
          f"num_heads * head_dim = {self.num_heads} * {k_size} must equal the "
          f"node width D = {d}."
      )
    kw = dict(dtype=self.dtype, param_dtype=self.param_dtype)
    m_BxNxD = RelationalAttention(
        self.num_heads,
        k_size,
        self.use_edges,
        self.init_scheme,
        name="attention",
        **kw,
    )(n_BxNxD, e_BxNxNxE, mask_BxNxN)
    n_BxNxD = NodeUpdate(
        self.node_ffn_dim,
        self.dropout_rate,
        self.use_ln,
        self.ln_epsilon,
        self.init_scheme,
        name="node_update",
        **kw,
    )(m_BxNxD, n_BxNxD, deterministic)
    if self.use_edges and self.edge_update and e_BxNxNxE is not None:
      e_BxNxNxE = EdgeUpdate(
          self.edge_msg_dim,
          self.edge_ffn_dim,
          self.triangular_heads,
          self.chunk_size,
          self.dropout_rate,
          self.use_ln,
          self.ln_epsilon,
          self.init_scheme,
          name="edge_update",
          **kw,
      )(e_BxNxNxE, n_BxNxD, deterministic, node_mask_BxN)
    return n_BxNxD, e_BxNxNxE
