"""A stack of Relational Transformer layers (Diao & Loynd, ICLR 2023).

Axis letters (`relational_jax.layers.shapes`): B batch, N nodes, D node
width, E edge width.
"""

import dataclasses
from typing import Optional, Tuple

import flax.linen as nn
import jax
import jax.numpy as jnp

from relational_jax.layers import init as init_lib
from relational_jax.layers import shapes
from relational_jax.layers.relational import RelationalTransformerLayer
from relational_jax.layers.relational import attention_mask

Array = jax.Array


@dataclasses.dataclass(frozen=True)
class RTConfig:
  """Sizes and switches of a Relational Transformer.

  Defaults are the paper's tuned CLRS values (Table 2): 3 layers, 12 heads of
  width 16 (node width D = 192), d_nh 32, d_eh1 16, d_eh2 8.

  Fields (`*_dim` are hyperparameters; the properties `node_width` and
  `edge_width` are the resulting array widths D and E):
    num_layers: L.
    num_heads, head_dim: H and K; the node width is D = H * K.
    node_ffn_dim: d_nh, the node feed-forward hidden width (W_2).
    edge_msg_dim: d_eh1, the edge message width (W_4).
    edge_ffn_dim: d_eh2, the edge feed-forward hidden width (W_6).
    edge_dim: E; None means E = D.
    use_edges: False is the standard-transformer ablation.
    edge_update: False is the no-edge-update ablation.
    tied: one layer's parameters applied `num_layers` times.
    use_adjacency: restrict attention to the input adjacency (the authors'
      code attends densely).
    triangular_heads: > 0 makes the edge update also attend over triangles
      (our 'rt_triangular').
    chunk_size: pivots per chunk of that triangular attention.
    dropout_rate, use_ln: dropout and LayerNorm switches.
    ln_epsilon: LayerNorm epsilon, 1e-5 as the authors' code (Flax's default
      is 1e-6).
    init: parameter initialisation (`relational_jax.layers.init.RT_INITS`):
      'diao' (default) the authors' code's, Haiku's default over each
      linear map's input as they concatenate it; 'flax' LeCun normal per
      kernel (this library's initialisation before the clrs_rt comparison
      found the difference).
  """

  num_layers: int = 3
  num_heads: int = 12
  head_dim: int = 16
  node_ffn_dim: int = 32
  edge_msg_dim: int = 16
  edge_ffn_dim: int = 8
  edge_dim: Optional[int] = None
  use_edges: bool = True
  edge_update: bool = True
  tied: bool = False
  use_adjacency: bool = False
  triangular_heads: int = 0
  chunk_size: int = 8
  dropout_rate: float = 0.0
  use_ln: bool = True
  ln_epsilon: float = 1e-5
  init: str = "diao"

  def __post_init__(self):
    shapes.check_bool_fields(self)
    for name in (
        "num_layers",
        "num_heads",
        "head_dim",
        "node_ffn_dim",
        "edge_msg_dim",
        "edge_ffn_dim",
    ):
      value = getattr(self, name)
      if not isinstance(value, int) or value < 1:
        raise ValueError(
            f"RTConfig.{name} must be a positive int, got {value!r}."
        )
    if not isinstance(self.triangular_heads, int) or self.triangular_heads < 0:
      raise ValueError(
          "RTConfig.triangular_heads must be an int >= 0, got "
          f"{self.triangular_heads!r}."
      )
    if not isinstance(self.chunk_size, int) or self.chunk_size < 1:
      raise ValueError(
          "RTConfig.chunk_size must be a positive int (pivots per chunk; one "
          f"chunk of N pivots is unchunked), got {self.chunk_size!r}."
      )
    if self.triangular_heads and not (self.use_edges and self.edge_update):
      raise ValueError(
          f"RTConfig.triangular_heads={self.triangular_heads} is read by the "
          "edge update only, which runs with use_edges=True and "
          f"edge_update=True (got use_edges={self.use_edges}, edge_update="
          f"{self.edge_update}); set triangular_heads=0."
      )
    if self.triangular_heads and self.edge_width % self.triangular_heads:
      raise ValueError(
          f"RTConfig.triangular_heads={self.triangular_heads} must divide the "
          f"edge width {self.edge_width}."
      )
    if self.edge_dim is not None and (
        not isinstance(self.edge_dim, int) or self.edge_dim < 1
    ):
      raise ValueError(
          "RTConfig.edge_dim must be a positive int or None, got "
          f"{self.edge_dim!r}."
      )
    if not 0.0 <= self.dropout_rate < 1.0:
      raise ValueError(
          f"RTConfig.dropout_rate must be in [0, 1), got {self.dropout_rate}."
      )
    shapes.check_choice(self.init, init_lib.RT_INITS, "RTConfig.init")
    if not self.ln_epsilon > 0.0:
      raise ValueError(
          f"RTConfig.ln_epsilon must be positive, got {self.ln_epsilon}."
      )

  @property
  def node_width(self) -> int:
    """D = num_heads * head_dim."""
    return self.num_heads * self.head_dim

  @property
  def edge_width(self) -> int:
    """E: edge_dim, or D when edge_dim is None."""
    return self.edge_dim or self.node_width


class RelationalTransformer(nn.Module):
  """L Relational Transformer layers (untied by default, tied as an option).

  Called on node vectors n_BxNxD (D = num_heads * head_dim) and edge vectors
  e_BxNxNxE; returns the updated (n, e). With `config.use_edges=False` the
  edges pass through unchanged and attention is standard self-attention.
  """

  config: RTConfig
  dtype: Optional[jnp.dtype] = None
  param_dtype: jnp.dtype = jnp.float32

  @nn.compact
  def __call__(
      self,
      n_BxNxD: Array,
      e_BxNxNxE: Optional[Array] = None,
      adjacency_BxNxN: Optional[Array] = None,
      node_mask_BxN: Optional[Array] = None,
      deterministic: bool = True,
  ) -> Tuple[Array, Optional[Array]]:
    cfg = self.config
    shapes.check_shape(n_BxNxD, ("B", "N", cfg.node_width), "n_BxNxD")
    b, n, _ = n_BxNxD.shape
    if e_BxNxNxE is not None:
      shapes.check_shape(e_BxNxNxE, (b, n, n, cfg.edge_width), "e_BxNxNxE")
    if node_mask_BxN is not None:
      shapes.check_shape(node_mask_BxN, (b, n), "node_mask_BxN")
    if adjacency_BxNxN is not None:
      shapes.check_shape(adjacency_BxNxN, (b, n, n), "adjacency_BxNxN")
    mask_BxNxN = attention_mask(
        adjacency_BxNxN if cfg.use_adjacency else None, node_mask_BxN
    )

    make_layer = lambda name: RelationalTransformerLayer(
        num_heads=cfg.num_heads,
        head_dim=cfg.head_dim,
        node_ffn_dim=cfg.node_ffn_dim,
        edge_msg_dim=cfg.edge_msg_dim,
        edge_ffn_dim=cfg.edge_ffn_dim,
        use_edges=cfg.use_edges,
        edge_update=cfg.edge_update,
        triangular_heads=cfg.triangular_heads,
        chunk_size=cfg.chunk_size,
        dropout_rate=cfg.dropout_rate,
        use_ln=cfg.use_ln,
        ln_epsilon=cfg.ln_epsilon,
        init_scheme=cfg.init,
        dtype=self.dtype,
        param_dtype=self.param_dtype,
        name=name,
    )
    if cfg.tied:
      shared = make_layer("layer_tied")
      layers = [shared] * cfg.num_layers
    else:
      layers = [make_layer(f"layer_{i}") for i in range(cfg.num_layers)]
    for layer in layers:
      n_BxNxD, e_BxNxNxE = layer(
          n_BxNxD, e_BxNxNxE, mask_BxNxN, deterministic, node_mask_BxN
      )
    return n_BxNxD, e_BxNxNxE
