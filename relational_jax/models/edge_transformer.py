"""Edge Transformer (Bergen, O'Donnell & Bahdanau, NeurIPS 2021): layer, stack, inputs, heads.

Axis letters: B batch, N nodes or tokens, D width, H heads, C classes,
F feed-forward hidden width (F = ffn_factor * D, 4D in the paper).

Paper section 3:
  eq. 3   X' = FFN(LN(X + TriangularAttention(LN(X))))
  eq. 4-9 triangular attention (relational_jax.layers.triangular)
  eq. 10  sequence input: x_ii = e(t_i) + a(0),  x_ij = a(i - j) for i != j
  Tied layers (one layer's weights applied L times, as in the Universal
  Transformer) by default; "Untied Edge Transformer" otherwise.
  Outputs: a linear layer per edge x_ij; node labels from the loop edge x_ii.

On eq. 3 versus the released code. Eq. 3 has one residual (around the
attention) and no residual around the FFN. The authors' released code
(bergen/EdgeTransformer, `EdgeTransformerLayer.forward`, layernorm_pos='pre')
computes instead
  Y = LN_1(X);  Z = LN_2(Y + TA(Y));  X' = Z + FFN(Z)
i.e. the attention residual starts from LN(X), and the FFN has a residual.
`layout='paper'` (default) is eq. 3 as printed; `layout='released_code'` is
the released code's form.
"""

import functools
from typing import Any, Optional

import flax.linen as nn
import jax
import jax.numpy as jnp

from relational_jax.layers import shapes
from relational_jax.layers.triangular import TriangularAttention

__all__ = [
    "EdgeTransformerLayer", "EdgeTransformer", "GraphEdgeEmbedding",
    "SequenceEdgeEmbedding", "EdgeClassifier", "NodeClassifier",
    "ParentPointerHead", "LAYOUTS",
]

Array = jax.Array

LAYOUTS = ("paper", "released_code")

# Logit given to padded pointer targets (the softmax is taken in fp32).
_MASK_LOGIT = -1e9


def _check_square(x, name):
  shapes.check_shape(x, ("B", "N", "N", "D"), name)
  shapes.check_equal(
      x.shape[1], x.shape[2],
      f"{name} must have equal node axes 1 and 2 (got shape {tuple(x.shape)})")


class EdgeTransformerLayer(nn.Module):
  """One Edge Transformer layer, eq. 3.

  layout='paper':          X' = FFN(LN_2(X + Drop(TA(LN_1(X)))))
  layout='released_code':  Y = LN_1(X); Z = LN_2(Y + Drop(TA(Y)));
                           X' = Z + Drop(FFN(Z))
  FFN(z) = W_2 Drop(ReLU(W_1 z)), hidden width ffn_factor * D (4D, sec. 3).

  Attributes:
    num_heads: heads of the triangular attention (must divide D).
    ffn_factor: FFN hidden width as a multiple of D.
    dropout_rate: dropout on the attention output and the FFN hidden (and,
      with layout='released_code', the FFN output).
    ablation, chunk_size, impl: passed to `TriangularAttention`.
    layout: 'paper' or 'released_code' (see the module docstring).
    ffn_chunk_size: rows i per block of the "transition" LN_2 -> FFN
      (-> residual), which is applied block by block and rematerialised in
      the backward pass, so only one block's B x chunk x N x F hidden
      activations are ever live (instead of the whole B x N x N x F hidden,
      its ReLU and their gradients). Exact: the same math as unchunked. None:
      one block, no remat. Need not divide N. With dropout, each block draws
      its own mask (same distribution, a different random stream than None).
  """
  num_heads: int
  ffn_factor: int = 4
  dropout_rate: float = 0.0
  ablation: str = "none"
  chunk_size: Optional[int] = 8
  impl: str = "chunked"
  layout: str = "paper"
  ffn_chunk_size: Optional[int] = 4
  dtype: Optional[Any] = None
  param_dtype: Any = jnp.float32

  @nn.compact
  def __call__(self, x_BxNxNxD: Array, node_mask_BxN: Optional[Array] = None,
               *, node_time_BxN: Optional[Array] = None,
               deterministic: bool = True) -> Array:
    """node_time_BxN: optional causal node times (see `TriangularAttention`)."""
    shapes.check_choice(self.layout, LAYOUTS, "layout")
    _check_square(x_BxNxNxD, "x_BxNxNxD")
    if self.ffn_chunk_size is not None and (
        not isinstance(self.ffn_chunk_size, int) or self.ffn_chunk_size <= 0):
      raise ValueError(f"ffn_chunk_size must be a positive int or None, got "
                       f"{self.ffn_chunk_size!r}.")
    d = x_BxNxNxD.shape[-1]
    dtype = self.dtype or x_BxNxNxD.dtype
    norm = lambda name: nn.LayerNorm(dtype=dtype, param_dtype=self.param_dtype,
                                     name=name)
    drop = lambda y: nn.Dropout(self.dropout_rate)(
        y, deterministic=deterministic)

    y_BxNxNxD = norm("ln_attention")(x_BxNxNxD)
    a_BxNxNxD = TriangularAttention(
        num_heads=self.num_heads, ablation=self.ablation,
        chunk_size=self.chunk_size, impl=self.impl, dtype=dtype,
        param_dtype=self.param_dtype, name="attention")(
            y_BxNxNxD, node_mask_BxN, node_time_BxN)
    residual_BxNxNxD = x_BxNxNxD if self.layout == "paper" else y_BxNxNxD
    u_BxNxNxD = residual_BxNxNxD + drop(a_BxNxNxD)

    # The transition LN_2 -> FFN (-> residual) is pure per edge, so it runs
    # on row chunks with the submodules' parameters applied functionally.
    modules = dict(
        ln_ffn=norm("ln_ffn"),
        ffn_hidden=nn.Dense(self.ffn_factor * d, dtype=dtype,
                            param_dtype=self.param_dtype, name="ffn_hidden"),
        ffn_out=nn.Dense(d, dtype=dtype, param_dtype=self.param_dtype,
                         name="ffn_out"))
    if self.is_initializing():  # Creates the parameters (as a direct call).
      probe_1xD = jnp.zeros((1, d), dtype)
      modules["ln_ffn"](probe_1xD)
      modules["ffn_out"](modules["ffn_hidden"](probe_1xD))
    params = {name: m.variables["params"] for name, m in modules.items()}
    use_dropout = not deterministic and self.dropout_rate > 0.0
    rng = self.make_rng("dropout") if use_dropout else None
    transition = functools.partial(
        _transition, ffn_width=self.ffn_factor * d, width=d,
        dropout_rate=self.dropout_rate if use_dropout else 0.0,
        layout=self.layout, dtype=dtype, param_dtype=self.param_dtype)
    return _row_chunked(transition, params, u_BxNxNxD, rng,
                        self.ffn_chunk_size)


def _transition(params, u_BxRxNxD, rng, *, ffn_width, width, dropout_rate,
                layout, dtype, param_dtype):
  """LN_2, FFN and (released_code) residual on a block of rows (eq. 3)."""
  def drop(y, salt):
    if rng is None:
      return y
    return nn.Dropout(dropout_rate).apply(
        {}, y, deterministic=False,
        rngs={"dropout": jax.random.fold_in(rng, salt)})

  z_BxRxNxD = nn.LayerNorm(dtype=dtype, param_dtype=param_dtype).apply(
      {"params": params["ln_ffn"]}, u_BxRxNxD)
  h_BxRxNxF = nn.Dense(ffn_width, dtype=dtype, param_dtype=param_dtype).apply(
      {"params": params["ffn_hidden"]}, z_BxRxNxD)
  h_BxRxNxF = drop(nn.relu(h_BxRxNxF), 0)
  f_BxRxNxD = nn.Dense(width, dtype=dtype, param_dtype=param_dtype).apply(
      {"params": params["ffn_out"]}, h_BxRxNxF)
  if layout == "paper":
    return f_BxRxNxD
  return z_BxRxNxD + drop(f_BxRxNxD, 1)


def _row_chunked(fn, params, u_BxNxNxD, rng, chunk_size):
  """fn(params, rows, rng) applied to blocks of `chunk_size` rows i.

  Each block is rematerialised (`jax.checkpoint`) in the backward pass, so
  only one block's FFN hidden activations (B x chunk x N x F) are live at a
  time; the saved residual is u itself. The blocks are read and written in
  place (dynamic slices of the loop-invariant u); when chunk_size does not
  divide N the last block starts at N - chunk_size and rewrites the rows it
  shares with the previous block with identical values (without dropout).
  With dropout each block draws its mask from rng folded with the block
  index. chunk_size None (or >= N): one block, no loop.
  """
  n = u_BxNxNxD.shape[1]
  if chunk_size is None or chunk_size >= n:
    return fn(params, u_BxNxNxD,
              None if rng is None else jax.random.fold_in(rng, 0))
  num_chunks = -(-n // chunk_size)

  @jax.checkpoint
  def block(params, u_BxNxNxD, start, index):
    rows_BxCxNxD = jax.lax.dynamic_slice_in_dim(u_BxNxNxD, start, chunk_size,
                                                axis=1)
    return fn(params, rows_BxCxNxD,
              None if rng is None else jax.random.fold_in(rng, index))

  out_shape = jax.eval_shape(
      lambda p, u: fn(p, u[:, :chunk_size], rng), params, u_BxNxNxD)

  def step(out_BxNxNxD, index):
    start = jnp.minimum(index * chunk_size, n - chunk_size)
    rows_BxCxNxD = block(params, u_BxNxNxD, start, index)
    return jax.lax.dynamic_update_slice_in_dim(out_BxNxNxD, rows_BxCxNxD,
                                               start, axis=1), None

  out_BxNxNxD = jnp.zeros(u_BxNxNxD.shape[:-1] + out_shape.shape[-1:],
                          out_shape.dtype)
  out_BxNxNxD, _ = jax.lax.scan(step, out_BxNxNxD, jnp.arange(num_chunks))
  return out_BxNxNxD


class EdgeTransformer(nn.Module):
  """A stack of `num_layers` Edge Transformer layers (eq. 3), section 3.

  tied=True (the paper's default, Universal-Transformer style): one layer's
  parameters ("layer") applied num_layers times. tied=False: the "Untied Edge
  Transformer", parameters "layer_0" ... "layer_{L-1}".
  Other attributes are those of `EdgeTransformerLayer`.
  """
  num_layers: int
  num_heads: int
  tied: bool = True
  ffn_factor: int = 4
  dropout_rate: float = 0.0
  ablation: str = "none"
  chunk_size: Optional[int] = 8
  impl: str = "chunked"
  layout: str = "paper"
  ffn_chunk_size: Optional[int] = 4
  dtype: Optional[Any] = None
  param_dtype: Any = jnp.float32

  def _layer(self, name):
    return EdgeTransformerLayer(
        num_heads=self.num_heads, ffn_factor=self.ffn_factor,
        dropout_rate=self.dropout_rate, ablation=self.ablation,
        chunk_size=self.chunk_size, impl=self.impl, layout=self.layout,
        ffn_chunk_size=self.ffn_chunk_size, dtype=self.dtype, param_dtype=self.param_dtype, name=name)

  @nn.compact
  def __call__(self, x_BxNxNxD: Array, node_mask_BxN: Optional[Array] = None,
               *, node_time_BxN: Optional[Array] = None,
               deterministic: bool = True) -> Array:
    """node_time_BxN: optional causal node times (see `TriangularAttention`);
    the FFN is per edge, so the whole stack is causal."""
    if not isinstance(self.num_layers, int) or self.num_layers < 1:
      raise ValueError(f"num_layers must be a positive int, got "
                       f"{self.num_layers!r}.")
    _check_square(x_BxNxNxD, "x_BxNxNxD")
    if self.tied:
      layer = self._layer("layer")
      for _ in range(self.num_layers):
        x_BxNxNxD = layer(x_BxNxNxD, node_mask_BxN,
                          node_time_BxN=node_time_BxN,
                          deterministic=deterministic)
    else:
      for i in range(self.num_layers):
        x_BxNxNxD = self._layer(f"layer_{i}")(
            x_BxNxNxD, node_mask_BxN, node_time_BxN=node_time_BxN,
            deterministic=deterministic)
    return x_BxNxNxD


# ----------------------------------------------------------------------------
# Inputs (section 3, "Input & Output").
# ----------------------------------------------------------------------------


class GraphEdgeEmbedding(nn.Module):
  """Labelled graph input: x^0_ij = embedding of the label of edge (i, j).

  Attributes:
    num_labels: size of the label vocabulary (include a 'no edge' label).
    features: D.
  """
  num_labels: int
  features: int
  param_dtype: Any = jnp.float32

  @nn.compact
  def __call__(self, labels_BxNxN: Array) -> Array:
    shapes.check_shape(labels_BxNxN, ("B", "N", "N"), "labels_BxNxN")
    shapes.check_equal(labels_BxNxN.shape[1], labels_BxNxN.shape[2],
                       "labels_BxNxN node axes 1 and 2")
    return nn.Embed(self.num_labels, self.features,
                    param_dtype=self.param_dtype, name="label")(labels_BxNxN)


class SequenceEdgeEmbedding(nn.Module):
  """Sequence input, eq. 10: x_ii = e(t_i) + a(0), x_ij = a(i - j) (i != j).

  a is a learned relative-position embedding (Shaw et al., 2018) of the offset
  i - j clipped to [-max_distance, max_distance] (2 * max_distance + 1 rows).

  Attributes:
    vocab_size: token vocabulary of e.
    features: D.
    max_distance: offsets beyond this share the boundary embedding.
  """
  vocab_size: int
  features: int
  max_distance: int = 16
  param_dtype: Any = jnp.float32

  @nn.compact
  def __call__(self, tokens_BxN: Array) -> Array:
    shapes.check_shape(tokens_BxN, ("B", "N"), "tokens_BxN")
    if self.max_distance < 0:
      raise ValueError(f"max_distance must be >= 0, got {self.max_distance}.")
    n = tokens_BxN.shape[1]
    positions_N = jnp.arange(n)
    offset_NxN = positions_N[:, None] - positions_N[None, :]            # i - j
    offset_NxN = jnp.clip(offset_NxN, -self.max_distance, self.max_distance)
    a_NxNxD = nn.Embed(2 * self.max_distance + 1, self.features,
                       param_dtype=self.param_dtype, name="relative_position")(
                           offset_NxN + self.max_distance)
    e_BxNxD = nn.Embed(self.vocab_size, self.features,
                       param_dtype=self.param_dtype, name="token")(tokens_BxN)
    diagonal_NxN = jnp.eye(n, dtype=e_BxNxD.dtype)
    return (a_NxNxD[None]
            + diagonal_NxN[None, :, :, None] * e_BxNxD[:, :, None, :])


# ----------------------------------------------------------------------------
# Heads (section 3, "Input & Output").
# ----------------------------------------------------------------------------


class EdgeClassifier(nn.Module):
  """Per-edge logits: a linear layer on every x_ij -> BxNxNxC."""
  num_classes: int
  param_dtype: Any = jnp.float32

  @nn.compact
  def __call__(self, x_BxNxNxD: Array) -> Array:
    _check_square(x_BxNxNxD, "x_BxNxNxD")
    return nn.Dense(self.num_classes, param_dtype=self.param_dtype,
                    name="logits")(x_BxNxNxD)


class NodeClassifier(nn.Module):
  """Node logits from the loop edges x_ii (the diagonal) -> BxNxC."""
  num_classes: int
  param_dtype: Any = jnp.float32

  @nn.compact
  def __call__(self, x_BxNxNxD: Array) -> Array:
    _check_square(x_BxNxNxD, "x_BxNxNxD")
    x_BxNxD = jnp.einsum("biid->bid", x_BxNxNxD)
    return nn.Dense(self.num_classes, param_dtype=self.param_dtype,
                    name="logits")(x_BxNxD)


class ParentPointerHead(nn.Module):
  """Parent pointers: logits[b, i, j] = w . x_ji + c, a softmax over j.

  Padded candidates j (node_mask_BxN False) get a logit of -1e9. The returned
  logits are fp32.

  Attributes:
    from_column: True (default): the score of j as i's parent reads edge
      (j, i), x_ji. False: reads x_ij, as the authors' COGS parser does
      (`decode_parent` on outputs[b, i, j]).
  """
  from_column: bool = True
  param_dtype: Any = jnp.float32

  @nn.compact
  def __call__(self, x_BxNxNxD: Array,
               node_mask_BxN: Optional[Array] = None) -> Array:
    _check_square(x_BxNxNxD, "x_BxNxNxD")
    b, n = x_BxNxNxD.shape[:2]
    score_BxNxN = nn.Dense(1, param_dtype=self.param_dtype, name="score")(
        x_BxNxNxD)[..., 0].astype(jnp.float32)       # score[b, r, s] of x_rs
    logits_BxNxN = (jnp.swapaxes(score_BxNxN, 1, 2) if self.from_column
                    else score_BxNxN)
    if node_mask_BxN is not None:
      shapes.check_shape(node_mask_BxN, (b, n), "node_mask_BxN")
      candidate_Bx1xN = node_mask_BxN.astype(bool)[:, None, :]
      logits_BxNxN = jnp.where(candidate_Bx1xN, logits_BxNxN, _MASK_LOGIT)
    return logits_BxNxN
