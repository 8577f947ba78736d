"""Edge Transformer (Bergen, O'Donnell & Bahdanau, NeurIPS 2021).

Config (`ETConfig`), layer, stack, inputs and heads.

Axis letters (`relational_jax.layers.shapes`): B batch, N nodes or tokens,
D width (the edge state width), H heads, K head width, F feed-forward hidden
width (`ffn_dim`, 4D in the paper), C rows in one chunk, Y output classes.

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
the released code's form. LayerNorm epsilon is 1e-5 (`ln_epsilon`), as the
authors' PyTorch code (PyTorch's default); Flax's default is 1e-6.

One `ETConfig` holds the layer and stack hyperparameters; it is used by
`EdgeTransformer`, the CLRS processor (`processors.edge_transformer`) and
the encoder-decoder (`relational_jax.models.et_seq2seq`).
"""

import dataclasses
import functools
from typing import Any, Optional

import flax.linen as nn
import jax
import jax.numpy as jnp

from relational_jax.layers import dense as dense_lib
from relational_jax.layers import init as init_lib
from relational_jax.layers import shapes
from relational_jax.layers.triangular import ABLATIONS
from relational_jax.layers.triangular import IMPLS
from relational_jax.layers.triangular import TriangularAttention

__all__ = [
    "ETConfig",
    "EdgeTransformerLayer",
    "EdgeTransformer",
    "GraphEdgeEmbedding",
    "SequenceEdgeEmbedding",
    "EdgeClassifier",
    "NodeClassifier",
    "ParentPointerHead",
    "LAYOUTS",
]

Array = jax.Array

LAYOUTS = ("paper", "released_code")

# Logit given to padded pointer targets (the softmax is taken in fp32).
_MASK_LOGIT = -1e9


@dataclasses.dataclass(frozen=True)
class ETConfig:
  """Edge Transformer hyperparameters; validated on construction.

  Fields:
    num_layers: L, layer applications of the stack.
    num_heads, head_dim: H and K; the edge state width is D = H * K
      (`edge_width`).
    ffn_dim: F, the FFN hidden width; None means 4 D, as the paper (sec. 3).
    tied: one layer's weights applied L times (the paper's default) or the
      "Untied Edge Transformer".
    ablation: 'none', 'value' or 'attention' (paper sec. 4.5).
    chunk_size: pivots per chunk of the triangular attention's online
      softmax (None, or any size >= N: all at once; config flags cannot set
      None, so pass such a size there).
    impl: 'chunked', 'pallas', 'pallas_fused' or 'reference' (see
      `TriangularAttention`).
    layout: 'paper' (eq. 3) or 'released_code' (module docstring).
    ffn_chunk_size: rows per block of the row-chunked, rematerialised FFN
      (None, or any size >= N: one block); see `EdgeTransformerLayer`.
    dropout_rate: dropout on the attention output and the FFN hidden.
    attention_dropout_rate: dropout on the triangular attention weights (the
      ET authors' code uses dropout_rate there too; see
      `TriangularAttention.attention_dropout_rate`).
    ln_epsilon: LayerNorm epsilon, 1e-5 as the authors' code (Flax's default
      is 1e-6).
    init: 'flax' or 'bergen' (the ET authors' initialisation of the layers,
      and of the embeddings and heads of the models that read it;
      `relational_jax.layers.init.ET_INITS`).
  """

  num_layers: int = 3
  num_heads: int = 12
  head_dim: int = 16
  ffn_dim: Optional[int] = None
  tied: bool = True
  ablation: str = "none"
  chunk_size: Optional[int] = 8
  impl: str = "chunked"
  layout: str = "paper"
  ffn_chunk_size: Optional[int] = 4
  dropout_rate: float = 0.0
  attention_dropout_rate: float = 0.0
  ln_epsilon: float = 1e-5
  init: str = "flax"

  def __post_init__(self):
    shapes.check_bool_fields(self)
    for name in ("num_layers", "num_heads", "head_dim"):
      _check_positive_int(getattr(self, name), f"ETConfig.{name}")
    for name in ("ffn_dim", "chunk_size", "ffn_chunk_size"):
      if getattr(self, name) is not None:
        _check_positive_int(getattr(self, name), f"ETConfig.{name}", " or None")
    shapes.check_choice(self.ablation, ABLATIONS, "ablation")
    shapes.check_choice(self.impl, IMPLS, "impl")
    shapes.check_choice(self.layout, LAYOUTS, "layout")
    shapes.check_choice(self.init, init_lib.ET_INITS, "init")
    for name in ("dropout_rate", "attention_dropout_rate"):
      if not 0.0 <= getattr(self, name) < 1.0:
        raise ValueError(
            f"ETConfig.{name} must be in [0, 1), got {getattr(self, name)}."
        )
    if not self.ln_epsilon > 0.0:
      raise ValueError(
          f"ETConfig.ln_epsilon must be positive, got {self.ln_epsilon}."
      )

  @property
  def edge_width(self) -> int:
    """D = num_heads * head_dim."""
    return self.num_heads * self.head_dim


def _check_positive_int(value, name, extra=""):
  if isinstance(value, bool) or not isinstance(value, int) or value < 1:
    raise ValueError(f"{name} must be a positive int{extra}, got {value!r}.")


def _check_square(x, name):
  shapes.check_shape(x, ("B", "N", "N", "D"), name)
  shapes.check_equal(
      x.shape[1],
      x.shape[2],
      f"{name} must have equal node axes 1 and 2 (got shape {tuple(x.shape)})",
  )


class EdgeTransformerLayer(nn.Module):
  """One Edge Transformer layer, eq. 3.

  layout='paper':          X' = FFN(LN_2(X + Drop(TA(LN_1(X)))))
  layout='released_code':  Y = LN_1(X); Z = LN_2(Y + Drop(TA(Y)));
                           X' = Z + Drop(FFN(Z))
  FFN(z) = W_2 Drop(ReLU(W_1 z)), hidden width ffn_dim (4D by default,
  sec. 3). The width D is the input's (num_heads must divide it).

  The full pass is `__call__`. Incremental decoding (`et_seq2seq`) uses the
  two halves on its own edges: `project(x)` (LN_1, then q, k, V^1, V^2 of
  eq. 6-8) and `update(x, o)` (W^o of eq. 9 on the aggregated heads o, the
  residual, LN_2 and the FFN); `__call__` is project -> aggregation over the
  pivots -> update.

  Attributes:
    num_heads: heads of the triangular attention (must divide D).
    ffn_dim: FFN hidden width F (any positive int); None: 4 D.
    dropout_rate: dropout on the attention output and the FFN hidden (and,
      with layout='released_code', the FFN output).
    attention_dropout_rate: dropout on the attention weights (passed to
      `TriangularAttention`).
    ablation, chunk_size, impl: passed to `TriangularAttention`.
    layout: 'paper' or 'released_code' (see the module docstring).
    ffn_chunk_size: rows i per block of the "transition" LN_2 -> FFN
      (-> residual), which is applied block by block and rematerialised in
      the backward pass, so only one block's B x chunk x N x F hidden
      activations are ever live (instead of the whole B x N x N x F hidden,
      its ReLU and their gradients). Exact: the same math as unchunked. None:
      one block, no remat. Need not divide N. With dropout, each block draws
      its own mask (same distribution, a different random stream than None).
    ln_epsilon: LayerNorm epsilon, 1e-5 as the authors' code (Flax's
      default is 1e-6).
    init_scheme: 'flax' or 'bergen' (`ETConfig.init`).
  """

  num_heads: int
  ffn_dim: Optional[int] = None
  dropout_rate: float = 0.0
  attention_dropout_rate: float = 0.0
  ablation: str = "none"
  chunk_size: Optional[int] = 8
  impl: str = "chunked"
  layout: str = "paper"
  ffn_chunk_size: Optional[int] = 4
  ln_epsilon: float = 1e-5
  init_scheme: str = "flax"  # Not `init`: that is Module.init.
  dtype: Optional[Any] = None
  param_dtype: Any = jnp.float32

  @classmethod
  def from_config(cls, config: ETConfig, **kwargs) -> "EdgeTransformerLayer":
    """The layer of `config` (kwargs: name, dtype, param_dtype)."""
    return cls(
        num_heads=config.num_heads,
        ffn_dim=config.ffn_dim,
        dropout_rate=config.dropout_rate,
        attention_dropout_rate=config.attention_dropout_rate,
        ablation=config.ablation,
        chunk_size=config.chunk_size,
        impl=config.impl,
        layout=config.layout,
        ffn_chunk_size=config.ffn_chunk_size,
        ln_epsilon=config.ln_epsilon,
        init_scheme=config.init,
        **kwargs,
    )

  def _ffn_width(self, width: int) -> int:
    return 4 * width if self.ffn_dim is None else self.ffn_dim

  @nn.compact
  def _submodules(self, width: int, dtype) -> dict:
    """The layer's submodules for width D (created on first use).

    Flax allows one compact method per module; `project`, `update` and
    `__call__` all reach the parameters through this one, so the parameter
    names live in one place.
    """
    norm = lambda name: nn.LayerNorm(
        epsilon=self.ln_epsilon,
        dtype=dtype,
        param_dtype=self.param_dtype,
        name=name,
    )
    hidden = init_lib.et_linear(self.init_scheme, width)
    out = init_lib.et_linear(self.init_scheme, self._ffn_width(width))
    return dict(
        ln_attention=norm("ln_attention"),
        attention=TriangularAttention(
            num_heads=self.num_heads,
            ablation=self.ablation,
            chunk_size=self.chunk_size,
            impl=self.impl,
            attention_dropout_rate=self.attention_dropout_rate,
            dtype=dtype,
            param_dtype=self.param_dtype,
            init_scheme=self.init_scheme,
            name="attention",
        ),
        ln_ffn=norm("ln_ffn"),
        ffn_hidden=dense_lib.Dense(
            self._ffn_width(width),
            dtype=dtype,
            param_dtype=self.param_dtype,
            kernel_init=hidden["kernel"],
            bias_init=hidden["bias"],
            name="ffn_hidden",
        ),
        ffn_out=dense_lib.Dense(
            width,
            dtype=dtype,
            param_dtype=self.param_dtype,
            kernel_init=out["kernel"],
            bias_init=out["bias"],
            name="ffn_out",
        ),
        dropout=nn.Dropout(self.dropout_rate, name="dropout"),
    )

  def _check(self):
    shapes.check_choice(self.layout, LAYOUTS, "layout")
    if self.ffn_chunk_size is not None and (
        not isinstance(self.ffn_chunk_size, int) or self.ffn_chunk_size <= 0
    ):
      raise ValueError(
          "ffn_chunk_size must be a positive int or None, got "
          f"{self.ffn_chunk_size!r}."
      )
    if self.ffn_dim is not None and (
        not isinstance(self.ffn_dim, int) or self.ffn_dim <= 0
    ):
      raise ValueError(
          f"ffn_dim must be a positive int or None, got {self.ffn_dim!r}."
      )

  def _norm_attention(self, x_xD: Array) -> Array:
    """LN_1(x) of edge states `...xD`."""
    dtype = self.dtype or x_xD.dtype
    return self._submodules(x_xD.shape[-1], dtype)["ln_attention"](x_xD)

  def project(self, x_xD: Array):
    """(q, k, V^1 y, V^2 y) of y = LN_1(x) for edge states x `...xD` (eq. 6-8).

    Each is `...xHxK` (V^2 y is None for the value ablation); see
    `TriangularAttention.project` for which axis is the pivot.
    """
    dtype = self.dtype or x_xD.dtype
    modules = self._submodules(x_xD.shape[-1], dtype)
    return modules["attention"].project(self._norm_attention(x_xD))

  def update(
      self, x_xD: Array, o_xHxK: Array, deterministic: bool = True
  ) -> Array:
    """X' of edges with input state x and aggregated attention heads o.

    o[..., h, :] = sum_l alpha^h_ilj v^h_ilj (eq. 4-8, before W^o). Applies
    W^o (eq. 9), the residual (from x, or from LN_1(x) with
    layout='released_code'), then the transition LN_2 -> FFN (-> residual),
    row-chunked along axis 1 (`ffn_chunk_size`).
    """
    self._check()
    d = x_xD.shape[-1]
    dtype = self.dtype or x_xD.dtype
    modules = self._submodules(d, dtype)
    drop = lambda y: modules["dropout"](y, deterministic=deterministic)
    a_xD = modules["attention"].output(o_xHxK.astype(dtype))
    residual_xD = x_xD if self.layout == "paper" else self._norm_attention(x_xD)
    u_xD = residual_xD + drop(a_xD)

    # The transition LN_2 -> FFN (-> residual) is pure per edge, so it runs
    # on row chunks with the submodules' parameters applied functionally.
    transition_modules = {
        name: modules[name] for name in ("ln_ffn", "ffn_hidden", "ffn_out")
    }
    if self.is_initializing():  # Creates the parameters (as a direct call).
      probe_1xD = jnp.zeros((1, d), dtype)
      transition_modules["ln_ffn"](probe_1xD)
      transition_modules["ffn_out"](transition_modules["ffn_hidden"](probe_1xD))
    params = {
        name: m.variables["params"] for name, m in transition_modules.items()
    }
    use_dropout = not deterministic and self.dropout_rate > 0.0
    rng = self.make_rng("dropout") if use_dropout else None
    transition = functools.partial(
        _transition,
        ffn_width=self._ffn_width(d),
        width=d,
        dropout_rate=self.dropout_rate if use_dropout else 0.0,
        layout=self.layout,
        ln_epsilon=self.ln_epsilon,
        dtype=dtype,
        param_dtype=self.param_dtype,
    )
    return _row_chunked(transition, params, u_xD, rng, self.ffn_chunk_size)

  def __call__(
      self,
      x_BxNxNxD: Array,
      node_mask_BxN: Optional[Array] = None,
      *,
      node_time_BxN: Optional[Array] = None,
      deterministic: bool = True,
  ) -> Array:
    """node_time_BxN: optional causal node times (see `TriangularAttention`)."""
    self._check()
    _check_square(x_BxNxNxD, "x_BxNxNxD")
    d = x_BxNxNxD.shape[-1]
    dtype = self.dtype or x_BxNxNxD.dtype
    attention = self._submodules(d, dtype)["attention"]
    # Eq. 3: the heads of TA(LN_1(X)) before W^o (eq. 4-8), then `update`
    # (W^o of eq. 9, the residual and the transition).
    o_BxNxNxHxK = attention.aggregate(
        self._norm_attention(x_BxNxNxD),
        node_mask_BxN,
        node_time_BxN,
        deterministic,
    )
    return self.update(x_BxNxNxD, o_BxNxNxHxK, deterministic)


def _transition(
    params,
    u_BxCxNxD,
    rng,
    *,
    ffn_width,
    width,
    dropout_rate,
    layout,
    ln_epsilon,
    dtype,
    param_dtype,
):
  """LN_2, FFN and (released_code) residual on a block of C rows (eq. 3).

  Also used on any `...xD` block (incremental decoding's rows and columns).
  The modules are unbound (parent=None) and applied to `params`.
  """

  def drop(y, salt):
    if rng is None:
      return y
    return nn.Dropout(dropout_rate, parent=None).apply(
        {},
        y,
        deterministic=False,
        rngs={"dropout": jax.random.fold_in(rng, salt)},
    )

  z_BxCxNxD = nn.LayerNorm(
      epsilon=ln_epsilon, dtype=dtype, param_dtype=param_dtype, parent=None
  ).apply({"params": params["ln_ffn"]}, u_BxCxNxD)
  h_BxCxNxF = dense_lib.Dense(
      ffn_width, dtype=dtype, param_dtype=param_dtype, parent=None
  ).apply({"params": params["ffn_hidden"]}, z_BxCxNxD)
  h_BxCxNxF = drop(nn.relu(h_BxCxNxF), 0)
  f_BxCxNxD = dense_lib.Dense(
      width, dtype=dtype, param_dtype=param_dtype, parent=None
  ).apply({"params": params["ffn_out"]}, h_BxCxNxF)
  if layout == "paper":
    return f_BxCxNxD
  return z_BxCxNxD + drop(f_BxCxNxD, 1)


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
    return fn(
        params, u_BxNxNxD, None if rng is None else jax.random.fold_in(rng, 0)
    )
  num_chunks = -(-n // chunk_size)

  @jax.checkpoint
  def block(params, u_BxNxNxD, start, index):
    rows_BxCxNxD = jax.lax.dynamic_slice_in_dim(
        u_BxNxNxD, start, chunk_size, axis=1
    )
    return fn(
        params,
        rows_BxCxNxD,
        None if rng is None else jax.random.fold_in(rng, index),
    )

  out_shape = jax.eval_shape(
      lambda p, u: fn(p, u[:, :chunk_size], rng), params, u_BxNxNxD
  )

  def step(out_BxNxNxD, index):
    start = jnp.minimum(index * chunk_size, n - chunk_size)
    rows_BxCxNxD = block(params, u_BxNxNxD, start, index)
    return (
        jax.lax.dynamic_update_slice_in_dim(
            out_BxNxNxD, rows_BxCxNxD, start, axis=1
        ),
        None,
    )

  out_BxNxNxD = jnp.zeros(
      u_BxNxNxD.shape[:-1] + out_shape.shape[-1:], out_shape.dtype
  )
  out_BxNxNxD, _ = jax.lax.scan(step, out_BxNxNxD, jnp.arange(num_chunks))
  return out_BxNxNxD


class EdgeTransformer(nn.Module):
  """A stack of `config.num_layers` Edge Transformer layers (eq. 3), section 3.

  config.tied=True (the paper's default, Universal-Transformer style): one
  layer's parameters ("layer") applied num_layers times. tied=False: the
  "Untied Edge Transformer", parameters "layer_0" ... "layer_{L-1}".
  The input width must be `config.edge_width`.
  """

  config: ETConfig
  dtype: Optional[Any] = None
  param_dtype: Any = jnp.float32

  @nn.compact
  def _layers(self) -> list:
    """The layer module of each of the num_layers applications."""
    make = lambda name: EdgeTransformerLayer.from_config(
        self.config, dtype=self.dtype, param_dtype=self.param_dtype, name=name
    )
    if self.config.tied:
      return [make("layer")] * self.config.num_layers
    return [make(f"layer_{i}") for i in range(self.config.num_layers)]

  def layer(self, application: int) -> EdgeTransformerLayer:
    """The (bound) layer used at application `application` (0-based); its
    `project` / `update` serve incremental decoding."""
    return self._layers()[application]

  def __call__(
      self,
      x_BxNxNxD: Array,
      node_mask_BxN: Optional[Array] = None,
      *,
      node_time_BxN: Optional[Array] = None,
      deterministic: bool = True,
  ) -> Array:
    """node_time_BxN: optional causal node times (see `TriangularAttention`);
    the FFN is per edge, so the whole stack is causal."""
    shapes.check_config_type(self.config, ETConfig)
    _check_square(x_BxNxNxD, "x_BxNxNxD")
    shapes.check_shape(
        x_BxNxNxD,
        (None, None, None, self.config.edge_width),
        "x_BxNxNxD (width num_heads * head_dim)",
    )
    for layer in self._layers():
      x_BxNxNxD = layer(
          x_BxNxNxD,
          node_mask_BxN,
          node_time_BxN=node_time_BxN,
          deterministic=deterministic,
      )
    return x_BxNxNxD


# ----------------------------------------------------------------------------
# Inputs (section 3, "Input & Output").
# ----------------------------------------------------------------------------


class GraphEdgeEmbedding(nn.Module):
  """Labelled graph input: x^0_ij = embedding of the label of edge (i, j).

  Attributes:
    num_labels: size of the label vocabulary (include a 'no edge' label).
    features: D.
    init_scheme: 'flax' or 'bergen' (`ETConfig.init`: Xavier uniform, the
      table belonging to the authors' encoder).
  """

  num_labels: int
  features: int
  param_dtype: Any = jnp.float32
  init_scheme: str = "flax"

  @nn.compact
  def __call__(self, labels_BxNxN: Array) -> Array:
    shapes.check_shape(labels_BxNxN, ("B", "N", "N"), "labels_BxNxN")
    shapes.check_equal(
        labels_BxNxN.shape[1],
        labels_BxNxN.shape[2],
        "labels_BxNxN node axes 1 and 2",
    )
    return nn.Embed(
        self.num_labels,
        self.features,
        param_dtype=self.param_dtype,
        embedding_init=init_lib.et_embedding(
            self.init_scheme, inside_encoder=True
        ),
        name="label",
    )(labels_BxNxN)


class SequenceEdgeEmbedding(nn.Module):
  """Sequence input, eq. 10: x_ii = e(t_i) + a(0), x_ij = a(i - j) (i != j).

  a is a learned relative-position embedding (Shaw et al., 2018) of the offset
  i - j clipped to [-max_distance, max_distance] (2 * max_distance + 1 rows).

  Attributes:
    vocab_size: token vocabulary of e.
    features: D.
    max_distance: offsets beyond this share the boundary embedding.
    init_scheme: 'flax' or 'bergen' (`ETConfig.init`: a Xavier uniform, as
      in the authors' encoder; e PyTorch's N(0, 1), their word embedding).
  """

  vocab_size: int
  features: int
  max_distance: int = 16
  param_dtype: Any = jnp.float32
  init_scheme: str = "flax"

  @nn.compact
  def _tables(self) -> dict:
    """The embeddings a ('relative_position') and e ('token')."""
    if self.max_distance < 0:
      raise ValueError(f"max_distance must be >= 0, got {self.max_distance}.")
    return dict(
        relative_position=nn.Embed(
            2 * self.max_distance + 1,
            self.features,
            param_dtype=self.param_dtype,
            embedding_init=init_lib.et_embedding(self.init_scheme, True),
            name="relative_position",
        ),
        token=nn.Embed(
            self.vocab_size,
            self.features,
            param_dtype=self.param_dtype,
            embedding_init=init_lib.et_embedding(self.init_scheme, False),
            name="token",
        ),
    )

  def relative(self, offsets: Array) -> Array:
    """a(offset) for integer offsets i - j of any shape -> `...xD` (clipped
    to [-max_distance, max_distance])."""
    offsets = jnp.clip(offsets, -self.max_distance, self.max_distance)
    return self._tables()["relative_position"](offsets + self.max_distance)

  def token(self, tokens: Array) -> Array:
    """e(t) for token ids of any shape -> `...xD`."""
    return self._tables()["token"](tokens)

  def __call__(self, tokens_BxN: Array) -> Array:
    shapes.check_shape(tokens_BxN, ("B", "N"), "tokens_BxN")
    n = tokens_BxN.shape[1]
    positions_N = jnp.arange(n)
    a_NxNxD = self.relative(
        positions_N[:, None] - positions_N[None, :]
    )  # i - j
    e_BxNxD = self.token(tokens_BxN)
    diagonal_NxN = jnp.eye(n, dtype=e_BxNxD.dtype)
    return (
        a_NxNxD[None] + diagonal_NxN[None, :, :, None] * e_BxNxD[:, :, None, :]
    )


# ----------------------------------------------------------------------------
# Heads (section 3, "Input & Output").
# ----------------------------------------------------------------------------


def output_dense(
    features: int,
    init_scheme: str,
    fan_in: int,
    name: str,
    param_dtype: Any = jnp.float32,
) -> nn.Dense:
  """A Dense layer on Edge Transformer states `fan_in` wide, initialised by
  `init_lib.et_output(init_scheme, fan_in)` (PyTorch's Linear defaults
  under 'bergen')."""
  inits = init_lib.et_output(init_scheme, fan_in)
  return nn.Dense(
      features,
      param_dtype=param_dtype,
      kernel_init=inits["kernel"],
      bias_init=inits["bias"],
      name=name,
  )


class EdgeClassifier(nn.Module):
  """Per-edge logits: a linear layer on every x_ij -> BxNxNxY."""

  num_classes: int
  param_dtype: Any = jnp.float32
  init_scheme: str = "flax"  # ETConfig.init; 'bergen': PyTorch's defaults.

  def _readout(self, x_BxNxNxD: Array) -> Array:
    """The states the linear layer classifies: every edge."""
    return x_BxNxNxD

  @nn.compact
  def __call__(self, x_BxNxNxD: Array) -> Array:
    _check_square(x_BxNxNxD, "x_BxNxNxD")
    x_xD = self._readout(x_BxNxNxD)
    return output_dense(
        self.num_classes,
        self.init_scheme,
        x_xD.shape[-1],
        "logits",
        self.param_dtype,
    )(x_xD)


class NodeClassifier(EdgeClassifier):
  """Node logits from the loop edges x_ii (the diagonal) -> BxNxY."""

  def _readout(self, x_BxNxNxD: Array) -> Array:
    return jnp.einsum("biid->bid", x_BxNxNxD)


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
  init_scheme: str = "flax"  # ETConfig.init; 'bergen': PyTorch's defaults.

  @nn.compact
  def __call__(
      self, x_BxNxNxD: Array, node_mask_BxN: Optional[Array] = None
  ) -> Array:
    _check_square(x_BxNxNxD, "x_BxNxNxD")
    b, n = x_BxNxNxD.shape[:2]
    score = output_dense(
        1, self.init_scheme, x_BxNxNxD.shape[-1], "score", self.param_dtype
    )
    score_BxNxN = score(x_BxNxNxD)[..., 0].astype(jnp.float32)  # of x_rs
    logits_BxNxN = (
        jnp.swapaxes(score_BxNxN, 1, 2) if self.from_column else score_BxNxN
    )
    if node_mask_BxN is not None:
      shapes.check_shape(node_mask_BxN, (b, n), "node_mask_BxN")
      candidate_Bx1xN = node_mask_BxN.astype(bool)[:, None, :]
      logits_BxNxN = jnp.where(candidate_Bx1xN, logits_BxNxN, _MASK_LOGIT)
    return logits_BxNxN
