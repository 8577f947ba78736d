"""Pair-state processors: the shared CLRS processor of the pair-state stacks.

Axis letters (`relational_jax.layers.shapes`): B batch, N nodes, U nodes with
the core node (N + 1 with graph_vec='core', else N), D pair width (the
config's `edge_width`), O output width (out_size), Z input feature widths.

The pair state x_ij (Bergen et al. 2021, section 3) is built from the node
features of both ends, the edge features and the edge hidden carried from
the previous algorithm step:
  x_ij = W_e [edge_fts_ij] + W_h [edge_hidden_ij] + W_a n_i + W_b n_j (+ W_g g),
with n = [node_fts, hidden]. A stack of pair-state layers (the subclass's
`stack_module`: the Edge Transformer's triangular attention, FloydNet's
pivotal attention) maps it to a new pair state; the node output is read from
the diagonal x_ii ('diagonal') or from the mean of row i and column i
('rowcol'), and projected to `out_size`. The pair state itself is the edge
output, carried to the next step by CarryNet.

graph_vec as for the RT processor: 'cat' adds W_g g to every pair, 'core'
adds a core node (index N; its features are a linear map of [graph_fts,
graph_hidden], its pairs' edge features and edge hidden are zero) whose
node readout, projected to `out_size`, is the carried graph hidden.

Haiku parameters (under the processor's name): 'edge_in', 'edge_hidden_in',
'row_in', 'col_in', 'graph_in' ('cat') or 'core_in' ('core'), 'stack' (the
lifted Flax stack), 'node_out'.
"""

import flax.linen as nn
import haiku as hk
import jax.numpy as jnp

from processors.relational_transformer import CarryingProcessor
from processors.relational_transformer import StepInputs
from relational_jax.layers import shapes

NODE_READOUTS = ("diagonal", "rowcol")


class PairStateProcessor(CarryingProcessor):
  """The pair-state CLRS processor (module docstring); subclasses supply the
  stack (`stack_module`).

  The config must have `edge_width` (D, the pair state's and the carried
  edge hidden's width) and `dropout_rate` (and may have
  `attention_dropout_rate`: training draws dropout when either is > 0); the stack is called as
  `stack(x_BxUxUxD, deterministic=...)` and returns the new BxUxUxD pair
  state, drawing dropout from the 'dropout' rng.
  """

  def __init__(
      self,
      out_size: int,
      config,
      graph_vec: str = "cat",
      node_readout: str = "diagonal",
      name: str = "pair_state",
  ):
    super().__init__(out_size, config, graph_vec, name)
    shapes.check_choice(node_readout, NODE_READOUTS, "node_readout")
    self.node_readout = node_readout

  def stack_module(self) -> nn.Module:
    """The Flax stack on the BxUxUxD pair state (built from `self.config`)."""
    raise NotImplementedError

  @hk.name_like("__call__")
  def step(self, inputs: StepInputs, is_training: bool):
    cfg = self.config
    d = cfg.edge_width
    edge_fts, edge_hidden = inputs.edge_fts, inputs.edge_hidden

    n_BxNxZ = jnp.concatenate([inputs.node_fts, inputs.hidden], axis=-1)
    n_BxUxZ = self.with_core_node(n_BxNxZ, inputs, n_BxNxZ.shape[-1])
    if self.graph_vec == "core":
      pad = ((0, 0), (0, 1), (0, 1), (0, 0))
      edge_fts, edge_hidden = jnp.pad(edge_fts, pad), jnp.pad(edge_hidden, pad)
    # x_ij = W_e e_ij + W_h h_ij + W_a n_i + W_b n_j (+ W_g g).
    x_BxUxUxD = (
        hk.Linear(d, name="edge_in")(edge_fts)
        + hk.Linear(d, with_bias=False, name="edge_hidden_in")(edge_hidden)
        + hk.Linear(d, with_bias=False, name="row_in")(n_BxUxZ)[:, :, None]
        + hk.Linear(d, with_bias=False, name="col_in")(n_BxUxZ)[:, None, :]
    )
    if self.graph_vec == "cat":
      x_BxUxUxD += hk.Linear(d, with_bias=False, name="graph_in")(
          inputs.graph_fts
      )[:, None, None]

    rates = (cfg.dropout_rate, getattr(cfg, "attention_dropout_rate", 0.0))
    x_BxUxUxD = self.run_stack(
        self.stack_module(),
        x_BxUxUxD,
        dropout_rate=max(rates),
        is_training=is_training,
    )
    if self.node_readout == "diagonal":
      nodes_BxUxD = jnp.diagonal(x_BxUxUxD, axis1=1, axis2=2).swapaxes(1, 2)
    else:  # mean of the node's row and column
      nodes_BxUxD = 0.5 * (x_BxUxUxD.mean(axis=2) + x_BxUxUxD.mean(axis=1))
    out_BxUxO = hk.Linear(self.out_size, name="node_out")(nodes_BxUxD)
    return out_BxUxO, x_BxUxUxD
