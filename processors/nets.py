"""`CarryNet`: the CLRS network with node, edge and graph hiddens carried.

Stock `clrs._src.nets.Net` carries only the node hidden from one algorithm step
to the next; the processor's edge output reaches that step's decoders and is
dropped. Following the RT paper (section 5.1.2, "Enhancements of CLRS-30's
framework"), this subclass carries the processor's edge and graph hiddens
too, and can decode node pointers from edge vectors alone
(`ptr_from_edges`): logit_ij = w . e_t[i, j] + b, softmax over j.

Decoder inputs with carried state (`decode_previous_hiddens`, default as the
RT authors' nets.py): e_t = [edge_fts, previous edge hidden, new edge hidden]
and g_t = [graph_fts, previous graph hidden, new graph hidden] (zeros for the
previous hiddens at the first step), as CLRS feeds node decoders
[node_fts, previous node hidden, new node hidden]. With
`decode_previous_hiddens=False`, e_t = [edge_fts, new edge hidden] and the
graph decoders see graph_fts, as stock CLRS.

Re-encoded SCALAR hint predictions (`scalar_hint_gradient`): with hard
postprocessing (`hint_repred_mode='hard'`), dm-clrs 2.0.3 stops the gradient
through a SCALAR hint prediction that is fed back as the next step's input;
the RT authors' 2022 fork (its decoders.postprocess passes scalars through)
does not. Default True, as the fork: the gradient flows. Soft
postprocessing keeps it either way, as in CLRS.

The carried state lives in the scan state's `hiddens` field as a dict
{'node', 'edge', 'graph'}; at the first step CLRS hands us its zero node
hidden and the processor treats the missing edge and graph hiddens as zeros.
Processors that cannot take carried state (all CLRS kinds) get exactly the
stock inputs, and only their node hidden is carried, as in CLRS.
"""

import haiku as hk
import jax
import jax.numpy as jnp
import numpy as np
from clrs._src import decoders
from clrs._src import encoders
from clrs._src import nets
from clrs._src import probing
from clrs._src import specs

_Location = specs.Location
_Type = specs.Type
_NODE_POINTERS = (_Type.POINTER, _Type.PERMUTATION_POINTER)


class CarryNet(nets.Net):
  """A CLRS `Net` whose processor state (nodes, edges, graph) persists."""

  def __init__(
      self,
      *args,
      ptr_from_edges: bool = False,
      carry_state: bool = True,
      decode_previous_hiddens: bool = True,
      scalar_hint_gradient: bool = True,
      **kwargs,
  ):
    super().__init__(*args, **kwargs)
    self.scalar_hint_gradient = scalar_hint_gradient
    self.carry_state = carry_state
    self.decode_previous_hiddens = decode_previous_hiddens
    if self.debug:
      raise ValueError(
          "CarryNet does not support debug=True (its hiddens are "
          "a dict of node/edge/graph arrays)."
      )
    self.ptr_from_edges = ptr_from_edges

  def _construct_encoders_decoders(self):
    """CLRS encoders and decoders; with `ptr_from_edges`, node-pointer
    decoders are replaced by an `EdgePointerDecoder` (named like CLRS's
    per-algorithm decoders so CLRS's per-algorithm gradient filter keeps it)."""
    encoders_, decoders_ = super()._construct_encoders_decoders()
    if self.ptr_from_edges:
      for algo_idx, (spec, decs) in enumerate(zip(self.spec, decoders_)):
        for name in list(decs):
          _, loc, typ = spec[name]
          if loc == _Location.NODE and typ in _NODE_POINTERS:
            decs[name] = EdgePointerDecoder(
                typ, name=f"algo_{algo_idx}_{name}_ptr_from_edges"
            )
    return encoders_, decoders_

  def _msg_passing_step(self, *args, **kwargs):
    """CLRS's step; with `scalar_hint_gradient` its hard postprocessing of
    fed-back hints keeps the SCALAR predictions' gradient (see the module
    docstring). CLRS's step looks `decoders` up in its module at call time,
    so it sees `_SCALAR_GRADIENT_DECODERS` while this call traces it."""
    if not self.scalar_hint_gradient or nets.decoders is not decoders:
      return super()._msg_passing_step(*args, **kwargs)
    nets.decoders = _SCALAR_GRADIENT_DECODERS
    try:
      return super()._msg_passing_step(*args, **kwargs)
    finally:
      nets.decoders = decoders

  def _one_step_pred(
      self,
      inputs,
      hints,
      hidden,
      batch_size,
      nb_nodes,
      lstm_state,
      spec,
      encs,
      decs,
      repred,
  ):
    if isinstance(hidden, dict):
      state = hidden
    else:  # First step: CLRS's zero node hidden.
      state = {"node": hidden}

    # ENCODE: as CLRS, by the CLRS encoders.
    node_fts = jnp.zeros((batch_size, nb_nodes, self.hidden_dim))
    edge_fts = jnp.zeros((batch_size, nb_nodes, nb_nodes, self.hidden_dim))
    graph_fts = jnp.zeros((batch_size, self.hidden_dim))
    adj_mat = jnp.repeat(jnp.eye(nb_nodes)[None], batch_size, axis=0)
    trajectories = [inputs] + ([hints] if self.encode_hints else [])
    for trajectory in trajectories:
      for dp in trajectory:
        dp = encoders.preprocess(dp, nb_nodes)
        adj_mat = encoders.accum_adj_mat(dp, adj_mat)
        encoder = encs[dp.name]
        edge_fts = encoders.accum_edge_fts(encoder, dp, edge_fts)
        node_fts = encoders.accum_node_fts(encoder, dp, node_fts)
        graph_fts = encoders.accum_graph_fts(encoder, dp, graph_fts)

    # PROCESS: pass and collect the carried state.
    carries = self.carry_state and getattr(
        self.processor, "carries_state", False
    )
    if self.carry_state and not carries:
      raise ValueError(
          "carry_state=True, but the processor "
          f"{type(self.processor).__name__} carries no state (a "
          "`processors.CarryingProcessor` does: our kinds); set "
          "carry_state=False and ptr_from_edges=False for it."
      )
    node_h, edge_h, graph_h = (
        state["node"],
        state.get("edge"),
        state.get("graph"),
    )
    nxt_edge = None
    for _ in range(self.nb_msg_passing_steps):
      if carries:
        out = self.processor(
            node_fts,
            edge_fts,
            graph_fts,
            adj_mat,
            node_h,
            edge_hidden=edge_h,
            graph_hidden=graph_h,
            return_state=True,
            is_training=not repred,
            batch_size=batch_size,
            nb_nodes=nb_nodes,
        )
        node_h, edge_h, graph_h = out.nodes, out.edges, out.graph
        nxt_edge = edge_h
      else:
        node_h, nxt_edge = self.processor(
            node_fts,
            edge_fts,
            graph_fts,
            adj_mat,
            node_h,
            batch_size=batch_size,
            nb_nodes=nb_nodes,
        )
    if not repred:  # dropout only in training, as CLRS
      node_h = hk.dropout(hk.next_rng_key(), self._dropout_prob, node_h)
    if self.use_lstm:
      node_h, nxt_lstm_state = jax.vmap(self.lstm)(node_h, lstm_state)
    else:
      nxt_lstm_state = None

    h_t = jnp.concatenate([node_fts, state["node"], node_h], axis=-1)
    previous = carries and self.decode_previous_hiddens
    if nxt_edge is None:
      e_t = edge_fts
    elif previous:
      prev_edge = (
          state["edge"]
          if state.get("edge") is not None
          else jnp.zeros_like(nxt_edge)
      )
      e_t = jnp.concatenate([edge_fts, prev_edge, nxt_edge], axis=-1)
    else:
      e_t = jnp.concatenate([edge_fts, nxt_edge], axis=-1)
    g_t = graph_fts
    if previous and graph_h is not None:
      prev_graph = (
          state["graph"]
          if state.get("graph") is not None
          else jnp.zeros_like(graph_h)
      )
      g_t = jnp.concatenate([graph_fts, prev_graph, graph_h], axis=-1)

    # DECODE: CLRS decoders, except node pointers when ptr_from_edges.
    edge_ptr_names = [
        name
        for name, dec in decs.items()
        if isinstance(dec, EdgePointerDecoder)
    ]
    if edge_ptr_names and nxt_edge is None:
      raise ValueError(
          "ptr_from_edges=True decodes node pointers from the processor's "
          f"edge hiddens, but {type(self.processor).__name__} "
          f"({self.processor.name!r}) returns none; set ptr_from_edges=False "
          "for it."
      )
    stock_decs = {k: v for k, v in decs.items() if k not in edge_ptr_names}
    hint_preds, output_preds = decoders.decode_fts(
        decoders=stock_decs,
        spec=spec,
        h_t=h_t,
        adj_mat=adj_mat,
        edge_fts=e_t,
        graph_fts=g_t,
        inf_bias=self.processor.inf_bias,
        inf_bias_edge=self.processor.inf_bias_edge,
        repred=repred,
    )
    # e_t's blocks, not e_t: the edge pointer decoders read each block with
    # its slice of their weights, so e_t (B x N x N x 3E with carried
    # hiddens) is neither written nor kept for the backward pass when no
    # stock decoder reads it (XLA drops the unused concatenation).
    e_blocks = (
        [edge_fts]
        if nxt_edge is None
        else (
            [edge_fts, prev_edge, nxt_edge]
            if previous
            else [edge_fts, nxt_edge]
        )
    )
    for name in edge_ptr_names:
      stage = spec[name][0]
      preds = decs[name](e_blocks, repred)
      if stage == specs.Stage.OUTPUT:
        output_preds[name] = preds
      else:
        hint_preds[name] = preds

    new_state = {"node": node_h}
    if carries:
      if edge_h is not None:
        new_state["edge"] = edge_h
      new_state["graph"] = graph_h
    return new_state, output_preds, hint_preds, nxt_lstm_state


class EdgePointerDecoder(hk.Module):
  """Node-pointer logits from edge vectors only:
  logit[b, i, j] = w . e_t[b, i, j] + c (the RT authors' decoders.py,
  `ptr_from_edges`; c shifts every logit of a row alike, so the softmax
  ignores it, but their Linear has it).

  Node i points to node j with probability softmax_j(logit[b, i, :]). For
  permutation pointers the logits go through the same log-Sinkhorn operator
  (with Gumbel noise in training) as CLRS's own pointer decoder.
  """

  def __init__(self, typ: str, name: str):
    super().__init__(name=name)
    self.typ = typ

  def __call__(self, e_t_blocks, repred: bool):
    """Logits from e_t given as its feature blocks [..., BxNxNxF_k] (e_t is
    their concatenation on the last axis; one array is one block)."""
    if not isinstance(e_t_blocks, (list, tuple)):
      e_t_blocks = [e_t_blocks]
    logits_BxNxN = _BlockLinear(name="linear")(e_t_blocks)
    if self.typ == _Type.PERMUTATION_POINTER:
      logits_BxNxN = decoders.log_sinkhorn(
          x=logits_BxNxN,
          steps=10,
          temperature=0.1,
          zero_diagonal=True,
          noise_rng_key=None if repred else hk.next_rng_key(),
      )
    return logits_BxNxN


class _BlockLinear(hk.Module):
  """hk.Linear(1) of the concatenation of `blocks` (same parameters 'w'
  (sum F_k, 1) and 'b' (1,), same initialiser), computed block by block:
  sum_k block_k . w[rows of block k] + b, without the concatenation."""

  def __call__(self, blocks):
    widths = [x.shape[-1] for x in blocks]
    fan_in = sum(widths)
    w_F = hk.get_parameter(
        "w",
        [fan_in, 1],
        blocks[0].dtype,
        init=hk.initializers.TruncatedNormal(stddev=1.0 / np.sqrt(fan_in)),
    )[:, 0]
    b = hk.get_parameter("b", [1], blocks[0].dtype, init=jnp.zeros)
    offsets = np.cumsum([0] + widths)
    out_BxNxN = b[0]
    for x_BxNxNxF, lo, hi in zip(blocks, offsets[:-1], offsets[1:]):
      out_BxNxN = out_BxNxN + jnp.einsum("bijf,f->bij", x_BxNxNxF, w_F[lo:hi])
    return out_BxNxN


class _ScalarGradientDecodersModule:
  """`clrs._src.decoders` with a `postprocess` whose SCALAR results keep
  their gradient (the RT authors' fork); every other name is CLRS's."""

  def __getattr__(self, name):
    return getattr(decoders, name)

  @staticmethod
  def postprocess(spec, preds, **kwargs):
    result = decoders.postprocess(spec, preds, **kwargs)
    for name, point in result.items():
      if spec[name][2] == _Type.SCALAR:
        result[name] = _with_data(point, preds[name])
    return result


def _with_data(point, data):
  """`point` with its data replaced by `data`."""
  return probing.DataPoint(
      name=point.name, location=point.location, type_=point.type_, data=data
  )


_SCALAR_GRADIENT_DECODERS = _ScalarGradientDecodersModule()
