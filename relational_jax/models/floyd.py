"""FloydNet (Yu, Zeng & Ye 2026, arXiv 2601.19094): pivotal attention blocks.

Config (`FloydConfig`), block (`PivotalAttentionBlock`) and stack
(`FloydTransformer`) on a pair state x_BxNxNxD; the attention itself is
`relational_jax.layers.pivotal` (its module docstring has the equation).

Axis letters (`relational_jax.layers.shapes`): B batch, N nodes, D the pair
state width, H heads, K head width (D = H * K), F the FFN hidden width
(`ffn_expansion_ratio` x D).

The block follows the authors' `PivotalAttentionBlock` (ocx-lab/FloydNet,
src/floydnet/transformer.py). With X^T the pair state with its node axes
swapped (x^T_ij = x_ji) and M a D x D map initialised to zero (the
"symmetric mix"; M = 0 without it), PA the pivotal attention with its
output map, and FFN(z) = W_2 act(W_1 z):

  pre:   X <- X + Drop(PA(N_1(X + M X^T)))
         X <- X + Drop(FFN(N_2(X))) * ffn_scale
  post:  X <- N_1(X + Drop(PA(X + M X^T)))
         X <- N_2(X + Drop(FFN(X))) * ffn_scale

(post-norm scales after N_2, as theirs). ffn_scale is a learned scalar
(initially 1). Dropout (one rate) acts on the attention weights, the
attention output and the FFN output. Initialisation as theirs:
Xavier-uniform for the q/k/v map and W_1, zeros for M, the attention output
map and W_2, zero biases; so a pre-norm block starts as the identity. Norms:
'layernorm', 'rmsnorm' (epsilon 1e-5, PyTorch's default, as theirs),
'affine' (x * w + b, w = 1, b = 0 initially) or 'none'. Their 'batchnorm'
choice (BatchNorm1d) cannot take a B x N x N x D pair state in their own
block and is not offered.
"""

import dataclasses
from typing import Any, Optional

import flax.linen as nn
import jax
import jax.numpy as jnp

from relational_jax.layers import dense as dense_lib
from relational_jax.layers import shapes
from relational_jax.layers.pivotal import IMPLS
from relational_jax.layers.pivotal import PivotalAttention

__all__ = [
    "FloydConfig",
    "PivotalAttentionBlock",
    "FloydTransformer",
    "Affine",
    "canonical_norm",
    "NORMS",
    "NORM_POSITIONS",
    "ACTIVATIONS",
]

Array = jax.Array

NORMS = ("layernorm", "rmsnorm", "affine", "none")
NORM_POSITIONS = ("pre", "post")
ACTIVATIONS = ("relu", "gelu", "silu")
# The authors' other spellings of the norms (their create_norm).
_NORM_ALIASES = {"ln": "layernorm", "rms": "rmsnorm", "identity": "none"}

_ACTIVATION_FNS = {
    "relu": nn.relu,
    "gelu": lambda x: nn.gelu(x, approximate=False),  # torch.nn.GELU()
    "silu": nn.silu,
}


def canonical_norm(norm: str) -> str:
  """Our name of a norm choice (the authors' aliases 'ln', 'rms' and
  'identity' accepted, case-insensitive); ValueError for others."""
  name = str(norm).lower()
  name = _NORM_ALIASES.get(name, name)
  if name == "batchnorm" or name == "bn":
    raise ValueError(
        "norm 'batchnorm' is not supported: the authors' BatchNorm1d cannot "
        "take the B x N x N x D pair state either; valid choices are "
        f"{list(NORMS)}."
    )
  shapes.check_choice(name, NORMS, "norm")
  return name


def _check_positive_int(value, name, extra=""):
  if isinstance(value, bool) or not isinstance(value, int) or value < 1:
    raise ValueError(f"{name} must be a positive int{extra}, got {value!r}.")


@dataclasses.dataclass(frozen=True)
class FloydConfig:
  """FloydNet hyperparameters; validated on construction.

  Fields (the authors' `PivotalAttentionBlock` argument in brackets):
    num_layers: blocks in the stack (untied, as their model's `depth`).
    num_heads, head_dim: H and K; the pair state width is D = H * K
      (`edge_width`) [embed_dim = D, num_heads].
    ffn_expansion_ratio: F = ratio x D [ffn_expansion_ratio, 4].
    dropout_rate: attention weights, attention output and FFN output
      [dropout].
    use_bias: biases on every linear map [bias, False].
    norm_position: 'pre' or 'post' [norm_position].
    activation: 'relu', 'gelu' (exact erf form) or 'silu' [activation_fn].
    norm: 'layernorm', 'rmsnorm', 'affine' or 'none' [norm_fn].
    symmetric_mix: add M X^T before the attention [enable_symmetric_mix].
    use_ffn: the FFN sub-block [enable_ffn].
    softmax_cap: > 0 caps the scores (their functional's option; their block
      leaves it off).
    chunk_size: pivots per chunk of the online softmax (None, or any size
      >= N: all at once; config flags cannot set None, so pass such a size
      there).
    impl: the attention's computation, 'chunked' (XLA), 'pallas' (a Pallas
      forward kernel, the chunked backward) or 'pallas_fused' (Pallas
      kernels forward and backward); the Pallas impls: no dropout in
      training, an attn_mask only boolean of whole pivots, as
      `pivotal_attention_core`; interpret mode on CPU.
    ln_epsilon: epsilon of layernorm / rmsnorm (1e-5, as theirs).
    zero_padded_pairs: the stack multiplies the state by the pair mask
      (both nodes real) after every block, as their FloydNet model does.
  """

  num_layers: int = 4
  num_heads: int = 8
  head_dim: int = 16
  ffn_expansion_ratio: int = 4
  dropout_rate: float = 0.0
  use_bias: bool = False
  norm_position: str = "pre"
  activation: str = "relu"
  norm: str = "layernorm"
  symmetric_mix: bool = True
  use_ffn: bool = True
  softmax_cap: float = -1.0
  chunk_size: Optional[int] = 8
  impl: str = "chunked"
  ln_epsilon: float = 1e-5
  zero_padded_pairs: bool = True

  def __post_init__(self):
    shapes.check_bool_fields(self)
    for name in ("num_layers", "num_heads", "head_dim", "ffn_expansion_ratio"):
      _check_positive_int(getattr(self, name), f"FloydConfig.{name}")
    if self.chunk_size is not None:
      _check_positive_int(self.chunk_size, "FloydConfig.chunk_size", " or None")
    shapes.check_choice(self.norm_position, NORM_POSITIONS, "norm_position")
    shapes.check_choice(self.activation, ACTIVATIONS, "activation")
    shapes.check_choice(self.impl, IMPLS, "impl")
    canonical_norm(self.norm)
    if not 0.0 <= self.dropout_rate < 1.0:
      raise ValueError(
          "FloydConfig.dropout_rate must be in [0, 1), got"
          f" {self.dropout_rate}."
      )
    if not self.ln_epsilon > 0.0:
      raise ValueError(
          f"FloydConfig.ln_epsilon must be positive, got {self.ln_epsilon}."
      )

  @property
  def edge_width(self) -> int:
    """D = num_heads * head_dim."""
    return self.num_heads * self.head_dim


class Affine(nn.Module):
  """x * scale + bias per feature (the authors' 'affine' norm)."""

  param_dtype: Any = jnp.float32

  @nn.compact
  def __call__(self, x_xD: Array) -> Array:
    d = x_xD.shape[-1]
    scale = self.param(
        "scale", nn.initializers.ones_init(), (d,), self.param_dtype
    )
    bias = self.param(
        "bias", nn.initializers.zeros_init(), (d,), self.param_dtype
    )
    return x_xD * scale.astype(x_xD.dtype) + bias.astype(x_xD.dtype)


class PivotalAttentionBlock(nn.Module):
  """One FloydNet block (module docstring): symmetric mix, pivotal attention
  and FFN, pre- or post-norm.

  Parameters: 'mix' (M), 'norm_attention' (N_1), 'attention'
  (`PivotalAttention`: 'qkv', 'out'), 'norm_ffn' (N_2), 'ffn_hidden' (W_1),
  'ffn_out' (W_2), 'ffn_scale'. Attributes as `FloydConfig`'s fields.
  """

  num_heads: int
  dropout_rate: float = 0.0
  use_bias: bool = False
  ffn_expansion_ratio: int = 4
  norm_position: str = "pre"
  activation: str = "relu"
  norm: str = "layernorm"
  symmetric_mix: bool = True
  use_ffn: bool = True
  softmax_cap: float = -1.0
  chunk_size: Optional[int] = 8
  impl: str = "chunked"
  ln_epsilon: float = 1e-5
  dtype: Optional[Any] = None
  param_dtype: Any = jnp.float32

  @classmethod
  def from_config(
      cls, config: FloydConfig, **kwargs
  ) -> "PivotalAttentionBlock":
    """The block of `config` (kwargs: name, dtype, param_dtype)."""
    return cls(
        num_heads=config.num_heads,
        dropout_rate=config.dropout_rate,
        use_bias=config.use_bias,
        ffn_expansion_ratio=config.ffn_expansion_ratio,
        norm_position=config.norm_position,
        activation=config.activation,
        norm=config.norm,
        symmetric_mix=config.symmetric_mix,
        use_ffn=config.use_ffn,
        softmax_cap=config.softmax_cap,
        chunk_size=config.chunk_size,
        impl=config.impl,
        ln_epsilon=config.ln_epsilon,
        **kwargs,
    )

  def _make_norm(self, name: str, dtype):
    kind = canonical_norm(self.norm)
    if kind == "layernorm":
      return nn.LayerNorm(
          epsilon=self.ln_epsilon,
          use_fast_variance=False,
          dtype=dtype,
          param_dtype=self.param_dtype,
          name=name,
      )
    if kind == "rmsnorm":
      return nn.RMSNorm(
          epsilon=self.ln_epsilon,
          use_fast_variance=False,
          dtype=dtype,
          param_dtype=self.param_dtype,
          name=name,
      )
    if kind == "affine":
      return Affine(param_dtype=self.param_dtype, name=name)
    return lambda x: x

  @nn.compact
  def __call__(
      self,
      x_BxNxNxD: Array,
      node_mask_BxN: Optional[Array] = None,
      attn_mask: Optional[Array] = None,
      *,
      deterministic: bool = True,
  ) -> Array:
    """X' from pair states x_BxNxNxD.

    Args:
      x_BxNxNxD: pair states (x[b, i, j] is pair (i, j)).
      node_mask_BxN: optional, True for real nodes; padded nodes are never
        pivots, so real pairs do not see the padding (see
        `PivotalAttention`).
      attn_mask: optional, the authors' mask (broadcastable to
        (B, H, N, N, N), their (b, h, i, k, j) order; boolean True = masked,
        or additive).
      deterministic: False applies dropout (a 'dropout' rng).
    """
    shapes.check_choice(self.norm_position, NORM_POSITIONS, "norm_position")
    shapes.check_choice(self.activation, ACTIVATIONS, "activation")
    shapes.check_shape(x_BxNxNxD, ("B", "N", "N", "D"), "x_BxNxNxD")
    shapes.check_equal(
        x_BxNxNxD.shape[1],
        x_BxNxNxD.shape[2],
        "x_BxNxNxD must have equal node axes 1 and 2 (got shape "
        f"{tuple(x_BxNxNxD.shape)})",
    )
    _check_positive_int(self.ffn_expansion_ratio, "ffn_expansion_ratio")
    d = x_BxNxNxD.shape[-1]
    dtype = self.dtype or x_BxNxNxD.dtype
    x_BxNxNxD = x_BxNxNxD.astype(dtype)
    dense = lambda features, init, name: dense_lib.Dense(
        features,
        use_bias=self.use_bias,
        dtype=dtype,
        param_dtype=self.param_dtype,
        kernel_init=init,
        name=name,
    )
    zeros = nn.initializers.zeros_init()
    drop = lambda y: nn.Dropout(self.dropout_rate)(
        y, deterministic=deterministic
    )

    if self.symmetric_mix:  # M X^T, x^T_ij = x_ji
      mix_BxNxNxD = dense(d, zeros, "mix")(jnp.swapaxes(x_BxNxNxD, 1, 2))
    else:
      mix_BxNxNxD = 0.0
    attention = PivotalAttention(
        num_heads=self.num_heads,
        chunk_size=self.chunk_size,
        impl=self.impl,
        use_bias=self.use_bias,
        attention_dropout_rate=self.dropout_rate,
        softmax_cap=self.softmax_cap,
        dtype=dtype,
        param_dtype=self.param_dtype,
        name="attention",
    )
    attend = lambda z: drop(
        attention(z, node_mask_BxN, attn_mask, deterministic=deterministic)
    )
    norm_attention = self._make_norm("norm_attention", dtype)
    if self.norm_position == "pre":
      x_BxNxNxD = x_BxNxNxD + attend(norm_attention(x_BxNxNxD + mix_BxNxNxD))
    else:
      x_BxNxNxD = norm_attention(x_BxNxNxD + attend(x_BxNxNxD + mix_BxNxNxD))
    if not self.use_ffn:
      return x_BxNxNxD

    norm_ffn = self._make_norm("norm_ffn", dtype)
    hidden = dense(
        self.ffn_expansion_ratio * d,
        nn.initializers.xavier_uniform(),
        "ffn_hidden",
    )
    out = dense(d, zeros, "ffn_out")
    ffn = lambda z: drop(out(_ACTIVATION_FNS[self.activation](hidden(z))))
    ffn_scale = self.param(
        "ffn_scale", nn.initializers.ones_init(), (), self.param_dtype
    ).astype(dtype)
    if self.norm_position == "pre":
      return x_BxNxNxD + ffn(norm_ffn(x_BxNxNxD)) * ffn_scale
    return norm_ffn(x_BxNxNxD + ffn(x_BxNxNxD)) * ffn_scale


class FloydTransformer(nn.Module):
  """A stack of `config.num_layers` pivotal attention blocks ('block_{l}').

  With a node mask and `config.zero_padded_pairs`, the state of every pair
  with a padded node is set to zero after each block (as the authors'
  FloydNet model); real pairs never depend on padded ones (padded nodes are
  not pivots, and the mix and FFN act pair by pair or on the transposed real
  pair). The input width must be `config.edge_width`.
  """

  config: FloydConfig
  dtype: Optional[Any] = None
  param_dtype: Any = jnp.float32

  @nn.compact
  def __call__(
      self,
      x_BxNxNxD: Array,
      node_mask_BxN: Optional[Array] = None,
      attn_mask: Optional[Array] = None,
      *,
      deterministic: bool = True,
  ) -> Array:
    shapes.check_config_type(self.config, FloydConfig)
    shapes.check_shape(
        x_BxNxNxD,
        ("B", "N", "N", self.config.edge_width),
        "x_BxNxNxD (width num_heads * head_dim)",
    )
    pair_BxNxNx1 = None
    if node_mask_BxN is not None and self.config.zero_padded_pairs:
      node_BxN = jnp.asarray(node_mask_BxN).astype(bool)
      pair_BxNxNx1 = (node_BxN[:, :, None] & node_BxN[:, None, :])[..., None]
    for index in range(self.config.num_layers):
      x_BxNxNxD = PivotalAttentionBlock.from_config(
          self.config,
          dtype=self.dtype,
          param_dtype=self.param_dtype,
          name=f"block_{index}",
      )(x_BxNxNxD, node_mask_BxN, attn_mask, deterministic=deterministic)
      if pair_BxNxNx1 is not None:
        x_BxNxNxD = jnp.where(pair_BxNxNx1, x_BxNxNxD, 0.0)
    return x_BxNxNxD
