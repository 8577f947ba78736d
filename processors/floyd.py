"""FloydNet as a CLRS processor (Haiku, lifting the Flax pivotal attention
stack).

The pair-state processor of `processors.pair_state` (pair state x_ij = W_e
e_ij + W_h h_ij + W_a n_i + W_b n_j (+ W_g g), node readout 'diagonal' or
'rowcol', the pair state carried to the next step by CarryNet) with
`relational_jax.models.floyd.FloydTransformer` (Yu, Zeng & Ye 2026: pivotal
attention blocks) as its stack. The block and stack hyperparameters are
`FloydConfig` (D = num_heads * head_dim); `graph_vec` and `node_readout` are
processor arguments. CLRS batches have no padded nodes, so the stack gets no
node mask; like the ET processor, it attends over all pairs whatever the
adjacency.
"""

import flax.linen as nn

from processors.pair_state import PairStateProcessor
from relational_jax.models.floyd import FloydConfig
from relational_jax.models.floyd import FloydTransformer

__all__ = ["FloydProcessor"]


class FloydProcessor(PairStateProcessor):
  """FloydNet processor; `graph_vec` 'cat' or 'core' and `node_readout`
  'diagonal' or 'rowcol' as for `EdgeTransformerProcessor`."""

  def __init__(
      self,
      out_size: int,
      config: FloydConfig,
      graph_vec: str = "cat",
      node_readout: str = "diagonal",
      name: str = "floyd",
  ):
    super().__init__(out_size, config, graph_vec, node_readout, name)

  def stack_module(self) -> nn.Module:
    return FloydTransformer(self.config)
