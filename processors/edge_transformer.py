"""The Edge Transformer as a CLRS processor (Haiku, lifting the Flax ET stack).

The pair-state processor of `processors.pair_state` (pair state x_ij = W_e
e_ij + W_h h_ij + W_a n_i + W_b n_j (+ W_g g), node readout 'diagonal' (the
ET paper's, Bergen et al. 2021) or 'rowcol', the pair state carried to the
next step by CarryNet: no published ET-on-CLRS carries it) with L (tied) ET
layers as its stack. The layer and stack hyperparameters are
`relational_jax.models.edge_transformer.ETConfig`; `graph_vec` and
`node_readout` are processor arguments.
"""

import flax.linen as nn

from processors.pair_state import NODE_READOUTS
from processors.pair_state import PairStateProcessor
from relational_jax.models.edge_transformer import ETConfig
from relational_jax.models.edge_transformer import EdgeTransformer

__all__ = ["EdgeTransformerProcessor", "NODE_READOUTS"]


class EdgeTransformerProcessor(PairStateProcessor):
  """ET processor; `graph_vec` as for the RT processor ('cat' tiles the graph
  features onto every pair, 'core' adds a core node whose node readout is
  the carried graph hidden); `node_readout` 'diagonal' (x_ii) or 'rowcol'
  (mean of row i and column i)."""

  def __init__(
      self,
      out_size: int,
      config: ETConfig,
      graph_vec: str = "cat",
      node_readout: str = "diagonal",
      name: str = "et",
  ):
    super().__init__(out_size, config, graph_vec, node_readout, name)

  def stack_module(self) -> nn.Module:
    return EdgeTransformer(self.config)
