"""The RT authors' Haiku parameters -> our Relational Transformer trees.

Their code: github.com/CameronDiao/relational-transformer (a fork of CLRS;
the layer in clrs/_src/base_modules/Basic_Transformer_jax.py, the processor
`RT` in clrs/_src/processors.py). Inputs are Haiku parameters,
{module path: {'w' | 'b' | 'scale' | 'offset': array}}, or the same flattened
to {'module/path/name': array}. tests/fidelity checks that the converted
parameters compute their outputs (layer, stack, processor and the whole
CLRS model, to 1e-5).

Their hk.Linear stores w as (in, out), as Flax does: no transposes. Their
module names come from creation order. In one layer L (their `Basic_RT`,
named 'rt_layer{l}/rt_layer{l}' in their processor), with A =
L/rt_attention_layer:

  A/linear, A/linear_1, A/linear_2   node query, key, value (eq. 3-4)
      -> attention/query_node, key_node, value_node, kernels D x H x K
         (their heads split the output axis head-major, as ours)
  A/linear_3, A/linear_4             edge query, key
      -> attention/edge_qk, kernel E x 2 x H x K ([..., 0] query, 1 key)
  A/linear_5                         edge value
      -> attention/value_edge_kernel, value_edge_bias
  Their q_ij = (n_i W + b_n) + (e_ij W + b_e) adds both biases as ours does,
  so every bias maps unchanged.
  L/linear, L/layer_norm             -> node_update/w1, ln_1   (eq. 17)
  L/linear_1, L/linear_2, L/layer_norm_1 -> node_update/w2, w3, ln_2 (eq. 18)
  L/linear_3 reads concat(e_ij, e_ji, n_j, n_i) (row blocks in that order)
      -> edge_update/w4_e_ij (with the bias), w4_e_ji, w4_n_j, w4_n_i (eq. 5)
  L/linear_4, L/layer_norm_2         -> edge_update/w5, ln_1   (eq. 6)
  L/linear_5, L/linear_6, L/layer_norm_3 -> edge_update/w6, w7, ln_2 (eq. 7)
  hk.LayerNorm scale / offset        -> Flax scale / bias.

Their processor reads concat(node_fts, hidden[, graph_fts]) with 'linear'
(our node_in) and concat(edge_fts, edge_hidden[, graph_fts]) with
'linear_1', which ours splits by input block: edge_in (with the bias),
edge_hidden_in, edge_graph_in ('cat'). With graph_vec='core' their
'linear_2' on concat(graph_fts, graph_hidden) is our core_in; their core
node's edges are zeros after encoding, ours a learned constant `core_edge`,
set to zeros here (attention is permutation-equivariant, so only the core
node's position, first in theirs and last in ours, differs).

In their whole CLRS model (BaselineModel) the encoders and decoders under
'net/~_construct_encoders_decoders/' keep their names in ours, except node
pointers decoded from edges: their 'algo_0_<name>_dec_linear' is our
'algo_0_<name>_ptr_from_edges/linear'.
"""

from typing import Any, Mapping, Optional

import numpy as np

from relational_jax.interop.common import Reader
from relational_jax.models.relational_transformer import RTConfig

__all__ = [
    "convert_layer",
    "convert_stack",
    "convert_processor",
    "convert_clrs_net",
    "GRAPH_VECS",
]

Params = Mapping[str, Any]

GRAPH_VECS = ("cat", "core")
# Their BaselineModel's module prefixes.
ENCODERS_DECODERS = "net/~_construct_encoders_decoders/"
PROCESSOR = "net/rt/"
_POINTER_TYPES = ("pointer", "permutation_pointer")


def _dense(reader, name, shape_in=None, shape_out=None):
  return {
      "kernel": reader.take(f"{name}/w", (shape_in, shape_out)),
      "bias": reader.take(f"{name}/b", (shape_out,)),
  }


def _layer_norm(reader, name, width):
  return {
      "LayerNorm_0": {
          "scale": reader.take(f"{name}/scale", (width,)),
          "bias": reader.take(f"{name}/offset", (width,)),
      }
  }


def _layer(reader, prefix, num_heads, edge_update, width=None, edge_width=None):
  """One Basic_RT layer under `prefix` ('' or 'rt_layer0/rt_layer0/')."""
  a = f"{prefix}rt_attention_layer"
  d = reader.take(f"{a}/linear/w", (width, None)).shape[0]
  e = reader.take(f"{a}/linear_3/w", (edge_width, d)).shape[0]
  if d % num_heads:
    raise ValueError(
        f"{reader.what}: node width {d} (from {a + '/linear/w'!r}) is not "
        f"divisible by num_heads={num_heads}"
    )
  k = d // num_heads

  def heads(name, rows):
    return {
        "kernel": (
            reader.take(f"{name}/w", (rows, d)).reshape(rows, num_heads, k)
        ),
        "bias": reader.take(f"{name}/b", (d,)).reshape(num_heads, k),
    }

  edge_q, edge_k = (reader.take(f"{a}/linear_{i}/w", (e, d)) for i in (3, 4))
  edge_q_bias, edge_k_bias = (
      reader.take(f"{a}/linear_{i}/b", (d,)) for i in (3, 4)
  )
  attention = {
      "query_node": heads(f"{a}/linear", d),
      "key_node": heads(f"{a}/linear_1", d),
      "value_node": heads(f"{a}/linear_2", d),
      "edge_qk": {
          "kernel": (
              np.stack([edge_q, edge_k], axis=1).reshape(e, 2, num_heads, k)
          ),
          "bias": np.stack([edge_q_bias, edge_k_bias]).reshape(2, num_heads, k),
      },
      "value_edge_kernel": (
          reader.take(f"{a}/linear_5/w", (e, d)).reshape(e, num_heads, k)
      ),
      "value_edge_bias": (
          reader.take(f"{a}/linear_5/b", (d,)).reshape(num_heads, k)
      ),
  }
  node_update = {
      "w1": _dense(reader, f"{prefix}linear", d, d),
      "ln_1": _layer_norm(reader, f"{prefix}layer_norm", d),
      "w2": _dense(reader, f"{prefix}linear_1", d),
      "w3": _dense(reader, f"{prefix}linear_2", None, d),
      "ln_2": _layer_norm(reader, f"{prefix}layer_norm_1", d),
  }
  tree = {"attention": attention, "node_update": node_update}
  if edge_update:
    w4 = reader.take(f"{prefix}linear_3/w", (2 * e + 2 * d, None))
    tree["edge_update"] = {  # w4's rows: [e_ij | e_ji | n_j | n_i]
        "w4_e_ij": {
            "kernel": w4[:e],
            "bias": reader.take(f"{prefix}linear_3/b", (w4.shape[1],)),
        },
        "w4_e_ji": {"kernel": w4[e : 2 * e]},
        "w4_n_j": {"kernel": w4[2 * e : 2 * e + d]},
        "w4_n_i": {"kernel": w4[2 * e + d :]},
        "w5": _dense(reader, f"{prefix}linear_4", w4.shape[1], e),
        "ln_1": _layer_norm(reader, f"{prefix}layer_norm_2", e),
        "w6": _dense(reader, f"{prefix}linear_5", e),
        "w7": _dense(reader, f"{prefix}linear_6", None, e),
        "ln_2": _layer_norm(reader, f"{prefix}layer_norm_3", e),
    }
  return tree


def _check_config(config: RTConfig) -> None:
  unsupported = {
      "tied": (config.tied, False),
      "use_edges": (config.use_edges, True),
      "use_ln": (config.use_ln, True),
      "triangular_heads": (config.triangular_heads, 0),
  }
  wrong = {k: v for k, (v, want) in unsupported.items() if v != want}
  if wrong:
    raise ValueError(
        f"the RT authors' code has no counterpart for RTConfig {wrong} "
        "(it needs tied=False, use_edges=True, use_ln=True, "
        "triangular_heads=0)"
    )


def convert_layer(
    params: Params, num_heads: int, *, edge_update: bool = True
) -> dict:
  """Their `Basic_RT` layer -> our `RelationalTransformerLayer`'s params.

  Args:
    params: the parameters of one of their layers, module paths relative to
      it ('rt_attention_layer/linear', 'linear', 'layer_norm', ...); use
      `common.select(params, 'rt/rt_layer0/rt_layer0/')` to take one layer
      out of their processor.
    num_heads: H; the node width D is read from the parameters.
    edge_update: False for their disable_edge_updates=True (then their
      edge-update parameters must be absent).

  Returns:
    The 'params' collection of `RelationalTransformerLayer(num_heads=H,
    head_dim=D // H, node_ffn_dim, edge_msg_dim, edge_ffn_dim (as theirs),
    edge_update=edge_update)`.

  Raises:
    ValueError: a missing or unexpected key, or a shape that does not fit.
  """
  reader = Reader(params, "RT layer", "/")
  tree = _layer(reader, "", num_heads, edge_update)
  reader.finish()
  return tree


def convert_stack(params: Params, config: RTConfig) -> dict:
  """Their stack of `Basic_RT` layers -> our `RelationalTransformer`'s params.

  Args:
    params: their layers 'rt_layer{l}/rt_layer{l}/...', l < num_layers (the
      names inside their processor, without its 'rt/').
    config: our configuration; num_layers, num_heads, head_dim, edge_dim and
      edge_update must match theirs (untied, edges on, LayerNorm on).

  Returns:
    The 'params' collection of `RelationalTransformer(config)`.

  Raises:
    ValueError: a missing or unexpected key, a shape that does not fit the
      config, or a config option their code does not have.
  """
  _check_config(config)
  reader = Reader(params, "RT stack", "/")
  tree = {
      f"layer_{i}": _layer(
          reader,
          f"rt_layer{i}/rt_layer{i}/",
          config.num_heads,
          config.edge_update,
          config.node_width,
          config.edge_width,
      )
      for i in range(config.num_layers)
  }
  reader.finish()
  return tree


def _processor(reader, prefix, config, graph_vec, graph_features, name):
  if graph_vec not in GRAPH_VECS:
    raise ValueError(
        f"graph_vec must be one of {GRAPH_VECS}, got {graph_vec!r}"
    )
  if graph_vec == "cat" and graph_features is None:
    raise ValueError("graph_vec='cat' needs graph_features (their width)")
  d, e = config.node_width, config.edge_width
  w = reader.take(f"{prefix}linear_1/w", (None, e))
  edge_features = w.shape[0] - e - (graph_features if graph_vec == "cat" else 0)
  if edge_features < 1:
    raise ValueError(
        f"{reader.what}: {prefix + 'linear_1/w'!r} has {w.shape[0]} rows, too "
        f"few for edge features + edge hidden ({e}) + graph features "
        f"({graph_features})"
    )
  flat = {
      f"{name}/node_in": {
          "w": reader.take(f"{prefix}linear/w", (None, d)),
          "b": reader.take(f"{prefix}linear/b", (d,)),
      },
      f"{name}/edge_in": {
          "w": w[:edge_features],
          "b": reader.take(f"{prefix}linear_1/b", (e,)),
      },
      f"{name}/edge_hidden_in": {"w": w[edge_features : edge_features + e]},
  }
  if graph_vec == "cat":
    flat[f"{name}/edge_graph_in"] = {"w": w[edge_features + e :]}
  else:
    flat[f"{name}/core_in"] = {
        "w": reader.take(f"{prefix}linear_2/w", (None, d)),
        "b": reader.take(f"{prefix}linear_2/b", (d,)),
    }
    flat[name] = {"core_edge": np.zeros((e,), w.dtype)}
  for i in range(config.num_layers):
    layer = _layer(
        reader,
        f"{prefix}rt_layer{i}/rt_layer{i}/",
        config.num_heads,
        config.edge_update,
        d,
        e,
    )

    def walk(tree, path):
      for key, value in tree.items():
        if isinstance(value, dict):
          walk(value, f"{path}/{key}")
        else:
          flat.setdefault(path, {})[key] = value

    walk(layer, f"{name}/stack/layer_{i}")
  return flat


def convert_processor(
    params: Params,
    config: RTConfig,
    *,
    graph_vec: str = "cat",
    graph_features: Optional[int] = None,
    module: str = "rt_clrs_processor",
) -> dict:
  """Their CLRS processor `RT` -> our `RelationalTransformerProcessor`'s.

  Args:
    params: their processor's parameters, module paths relative to it
      ('linear', 'linear_1', ['linear_2',] 'rt_layer{l}/rt_layer{l}/...');
      `common.select(params, 'rt/')` takes them out of a larger tree.
    config: our RTConfig (as `convert_stack`).
    graph_vec: 'cat' or 'core', as theirs.
    graph_features: the width of the graph features (needed with 'cat', to
      split their edge encoder's input rows).
    module: our processor's Haiku module path: '<name>_clrs_processor' for
      a processor constructed with `name` (CLRS appends the tag; the
      processor factory passes its kind, e.g. 'rt'); inside
      `processors.CarryModel` it is 'net/<name>_clrs_processor'.

  Returns:
    Haiku parameters {module path: {name: array}} of
    `processors.RelationalTransformerProcessor(out_size=config.node_width,
    config, graph_vec, name=...)` (their processor has no output
    projection, so out_size must be the node width).

  Raises:
    ValueError: a missing or unexpected key, a shape that does not fit, or
      a config option their code does not have.
  """
  _check_config(config)
  reader = Reader(params, "RT processor", "/")
  flat = _processor(reader, "", config, graph_vec, graph_features, module)
  reader.finish()
  return flat


def convert_clrs_net(
    params: Params,
    config: RTConfig,
    *,
    spec: Mapping[str, tuple],
    graph_vec: str = "cat",
    ptr_from_edges: bool = True,
    processor_module: str = "rt_clrs_processor",
) -> dict:
  """Their whole CLRS `BaselineModel` (one algorithm) -> our `CarryModel`'s.

  Args:
    params: their model's Haiku parameters: encoders and decoders under
      'net/~_construct_encoders_decoders/', the processor under 'net/rt/'.
    config: our processor's RTConfig (as `convert_stack`).
    spec: the algorithm's CLRS spec {name: (stage, location, type)}; node
      pointers are found in it.
    graph_vec: 'cat' or 'core', as theirs.
    ptr_from_edges: theirs decodes node pointers from edge vectors (their
      run.py's RT setting); ours must be configured the same.
    processor_module: our processor's Haiku module name inside the net,
      '<name>_clrs_processor' (see `convert_processor`; the path is
      'net/<processor_module>').

  Returns:
    Haiku parameters {module path: {name: array}} of
    `processors.CarryModel` built with that processor, for algorithm index
    0 (graph features are encoded to the hidden width, as in CLRS).

  Raises:
    ValueError: a missing or unexpected key (anything outside the two
      prefixes above), a shape that does not fit, or a config option their
      code does not have.
  """
  _check_config(config)
  reader = Reader(params, "RT CLRS model", "/")
  node_pointers = {
      name
      for name, (_, location, type_) in spec.items()
      if location == "node" and type_ in _POINTER_TYPES
  }
  mapped = {}
  widths = set()
  for full in reader.names():
    if not full.startswith(ENCODERS_DECODERS):
      continue
    module, key = full.rsplit("/", 1)
    short = module[len(ENCODERS_DECODERS) :]
    if ptr_from_edges and any(
        short == f"algo_0_{p}_dec_linear" for p in node_pointers
    ):
      short = short[: -len("_dec_linear")] + "_ptr_from_edges/linear"
    value = reader.take(full)
    if short.endswith("_enc_linear") and key == "w":
      widths.add(value.shape[1])
    mapped.setdefault(ENCODERS_DECODERS + short, {})[key] = value
  if len(widths) != 1:
    raise ValueError(
        f"{reader.what}: expected one hidden width among the encoders "
        f"'{ENCODERS_DECODERS}*_enc_linear/w', found {sorted(widths)}"
    )
  (hidden,) = widths
  mapped.update(
      _processor(
          reader,
          PROCESSOR,
          config,
          graph_vec,
          hidden,
          f"net/{processor_module}",
      )
  )
  reader.finish()
  return mapped
