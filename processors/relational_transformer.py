"""The Relational Transformer as a CLRS processor (Haiku, lifting the Flax stack).

Axis letters (`relational_jax.layers.shapes`): B batch, N nodes, U nodes
with the core node (N + 1 with graph_vec='core', else N), D node width, E
edge width, O output width (out_size, CLRS's hidden width; also the graph
hidden's), Z input feature width.

Contract (CLRS `Processor`): `__call__(node_fts, edge_fts, graph_fts, adj_mat,
hidden, **kwargs) -> (nodes_BxNxout, edges_BxNxNxE)`. Our extended network
(`processors.nets.CarryNet`) also passes the previous step's `edge_hidden` and
`graph_hidden` and asks for the new graph hidden with `return_state=True`; in
stock CLRS those arguments are absent and treated as zeros.
"""

import math
from typing import NamedTuple, Optional, Tuple

import haiku as hk
import jax
import jax.numpy as jnp
from clrs._src import processors as clrs_processors

from processors import linear as linear_lib
from relational_jax.layers import shapes
from relational_jax.models.relational_transformer import RelationalTransformer
from relational_jax.models.relational_transformer import RTConfig

Array = jax.Array

GRAPH_VEC_CHOICES = ("cat", "core")


class ProcessorState(NamedTuple):
  """What one processor step hands to the next algorithm step."""

  nodes: Array  # BxNxout
  edges: Optional[Array]  # BxNxNxE
  graph: Optional[Array]  # BxO


class StepInputs(NamedTuple):
  """One step's inputs (`CarryingProcessor.step`), the carried state filled
  in."""

  node_fts: Array  # BxNxZ
  edge_fts: Array  # BxNxNxZ
  graph_fts: Array  # BxZ
  adj_mat: Array  # BxNxN
  hidden: Array  # BxNxO, the CLRS node hidden
  edge_hidden: Array  # BxNxNxE
  graph_hidden: Array  # BxO


class CarryingProcessor(clrs_processors.Processor):
  """A processor whose edge and graph hiddens CarryNet carries between steps.

  Subclasses take `out_size` (the CLRS hidden width), a config (its
  `edge_width`: E, the carried edge hidden's) and the `graph_vec` mode ('cat'
  or 'core'), and implement `step`.
  """

  carries_state = True

  def __init__(self, out_size: int, config, graph_vec: str, name: str):
    super().__init__(name=name)
    shapes.check_choice(graph_vec, GRAPH_VEC_CHOICES, "graph_vec")
    self.out_size = out_size
    self.config = config
    self.graph_vec = graph_vec

  def step(
      self, inputs: StepInputs, is_training: bool
  ) -> Tuple[Array, Optional[Array]]:
    """One processor step on checked inputs -> (out_BxUxO, edges_BxUxUxE).

    U is N + 1 with graph_vec='core' (the core node at index N), else N;
    edges_BxUxUxE may be None (no edge state). Subclasses decorate it with
    `hk.name_like("__call__")` so that its modules are named as in
    `__call__`.
    """
    raise NotImplementedError

  def __call__(
      self,
      node_fts: Array,
      edge_fts: Array,
      graph_fts: Array,
      adj_mat: Array,
      hidden: Array,
      edge_hidden: Optional[Array] = None,
      graph_hidden: Optional[Array] = None,
      return_state: bool = False,
      is_training: bool = False,
      **unused_kwargs,
  ):
    """The CLRS contract (module docstring): the inputs' shapes checked and
    missing carried state (stock CLRS, the first step) as zeros, `step`,
    then the readouts of the real nodes (the core node's output is the graph
    hidden)."""
    shapes.check_shape(node_fts, ("B", "N", None), "node_fts")
    b, n, _ = node_fts.shape
    shapes.check_shape(edge_fts, (b, n, n, None), "edge_fts")
    shapes.check_shape(graph_fts, (b, None), "graph_fts")
    shapes.check_shape(adj_mat, (b, n, n), "adj_mat")
    shapes.check_shape(hidden, (b, n, None), "hidden")
    e_size = self.config.edge_width
    if edge_hidden is None:
      edge_hidden = jnp.zeros((b, n, n, e_size), node_fts.dtype)
    shapes.check_shape(edge_hidden, (b, n, n, e_size), "edge_hidden")
    if graph_hidden is None:
      graph_hidden = jnp.zeros((b, self.out_size), node_fts.dtype)
    shapes.check_shape(graph_hidden, (b, self.out_size), "graph_hidden")
    inputs = StepInputs(
        node_fts,
        edge_fts,
        graph_fts,
        adj_mat,
        hidden,
        edge_hidden,
        graph_hidden,
    )
    out_BxUxO, edges_BxUxUxE = self.step(inputs, is_training)
    nodes_BxNxO = out_BxUxO[:, :n]
    edges_BxNxNxE = None
    if edges_BxUxUxE is not None:
      edges_BxNxNxE = edges_BxUxUxE[:, :n, :n]
    # Only the core node has a graph hidden to carry; with 'cat' the graph
    # features are re-read at every step (as the RT authors' code does).
    graph_BxO = out_BxUxO[:, n] if self.graph_vec == "core" else None
    if return_state:
      return ProcessorState(nodes_BxNxO, edges_BxNxNxE, graph_BxO)
    return nodes_BxNxO, edges_BxNxNxE

  @hk.name_like("__call__")
  def with_core_node(
      self, n_BxNxW: Array, inputs: StepInputs, width: int
  ) -> Array:
    """BxUxW: the node inputs BxNxW with, for graph_vec='core', the core node
    appended at index N, a linear map ('core_in') of [graph_fts,
    graph_hidden]."""
    if self.graph_vec != "core":
      return n_BxNxW
    g_BxZ = jnp.concatenate([inputs.graph_fts, inputs.graph_hidden], axis=-1)
    core_Bx1xW = hk.Linear(width, name="core_in")(g_BxZ)[:, None]
    return jnp.concatenate([n_BxNxW, core_Bx1xW], axis=1)

  @hk.name_like("__call__")
  def run_stack(
      self, stack_module, *args, dropout_rate: float, is_training: bool
  ):
    """Applies the Flax `stack_module`, lifted as 'stack', to `args`; dropout
    (from the 'dropout' rng) only in training with dropout_rate > 0."""
    stack = hk.experimental.flax.lift(stack_module, name="stack")
    deterministic = not (is_training and dropout_rate > 0.0)
    kwargs = {} if deterministic else {"rngs": {"dropout": hk.next_rng_key()}}
    return stack(*args, deterministic=deterministic, **kwargs)


class RelationalTransformerProcessor(CarryingProcessor):
  """RT processor: [node_fts, hidden, graph] and [edge_fts, edge_hidden, graph]
  are projected to widths D and E, run through the RT stack, and projected
  back to `out_size` for the nodes.

  graph_vec (RT paper section 5.1.4):
    'cat':  the graph features are tiled onto the node and edge inputs; there
            is no graph hidden to carry (`graph` is None).
    'core': a dedicated core node (index N) receives the graph features and
            the carried graph hidden; its output is the new graph hidden, and
            its edges carry a learned constant instead of input features.
  """

  def __init__(
      self,
      out_size: int,
      config: RTConfig,
      graph_vec: str = "cat",
      name: str = "rt",
  ):
    super().__init__(out_size, config, graph_vec, name)

  @hk.name_like("__call__")
  def step(self, inputs: StepInputs, is_training: bool):
    graph_fts = inputs.graph_fts
    b, n = inputs.node_fts.shape[:2]
    cfg = self.config
    e_size = cfg.edge_width

    n_in_BxNxZ = jnp.concatenate([inputs.node_fts, inputs.hidden], axis=-1)
    if self.graph_vec == "cat":  # tile the graph features onto every node
      n_in_BxNxZ = jnp.concatenate(
          [
              n_in_BxNxZ,
              jnp.broadcast_to(graph_fts[:, None], (b, n, graph_fts.shape[-1])),
          ],
          axis=-1,
      )
    n_BxNxD = hk.Linear(cfg.node_width, name="node_in")(n_in_BxNxZ)
    e_BxNxNxE = None
    if cfg.use_edges:  # the standard-transformer ablation sees no edges
      # A linear map of [edge_fts, edge_hidden (, graph_fts)], computed per
      # block so the graph term is projected once per graph, not per edge;
      # with init 'diao' every block is drawn with the whole map's fan-in,
      # as the authors' one Linear over the concatenation.
      fan_in = inputs.edge_fts.shape[-1] + e_size
      if self.graph_vec == "cat":
        fan_in += graph_fts.shape[-1]
      w_init = (
          hk.initializers.TruncatedNormal(1.0 / math.sqrt(fan_in))
          if cfg.init == "diao"
          else None
      )
      linear = lambda name, bias=False: linear_lib.Linear(
          e_size, with_bias=bias, w_init=w_init, name=name
      )
      e_BxNxNxE = linear("edge_in", True)(inputs.edge_fts)
      e_BxNxNxE += linear("edge_hidden_in")(inputs.edge_hidden)
      if self.graph_vec == "cat":
        e_BxNxNxE += linear("edge_graph_in")(graph_fts)[:, None, None]
    n_BxUxD = self.with_core_node(n_BxNxD, inputs, cfg.node_width)
    e_BxUxUxE, adj_BxUxU = e_BxNxNxE, inputs.adj_mat
    if self.graph_vec == "core":
      # Core edges carry no input features: a learned constant vector.
      if e_BxNxNxE is not None:
        core_edge_E = hk.get_parameter("core_edge", (e_size,), init=jnp.zeros)
        e_BxUxUxE = jnp.pad(e_BxNxNxE, ((0, 0), (0, 1), (0, 1), (0, 0)))
        is_core_UxU = jnp.zeros((n + 1, n + 1), bool).at[n, :].set(True)
        is_core_UxU = is_core_UxU.at[:, n].set(True)
        e_BxUxUxE = jnp.where(
            is_core_UxU[None, :, :, None], core_edge_E, e_BxUxUxE
        )
      # The core node is connected to every node.
      adj_BxUxU = jnp.pad(
          inputs.adj_mat, ((0, 0), (0, 1), (0, 1)), constant_values=1.0
      )

    n_BxUxD, e_BxUxUxE = self.run_stack(
        RelationalTransformer(cfg),
        n_BxUxD,
        e_BxUxUxE,
        adj_BxUxU,
        dropout_rate=cfg.dropout_rate,
        is_training=is_training,
    )
    out_BxUxO = n_BxUxD
    if cfg.node_width != self.out_size:
      out_BxUxO = hk.Linear(self.out_size, name="node_out")(n_BxUxD)
    return out_BxUxO, e_BxUxUxE
