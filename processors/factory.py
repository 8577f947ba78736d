"""`get_processor_factory`: a drop-in superset of `clrs.get_processor_factory`.

Every CLRS kind is delegated to CLRS unchanged; our kinds build
`RelationalTransformerProcessor`s, `EdgeTransformerProcessor`s and
`FloydProcessor`s. Their options are the `RTConfig` / `ETConfig` /
`FloydConfig` field names, passed through unrenamed, plus the processor
options graph_vec and node_readout.
"""

import dataclasses
from typing import Callable, Optional

import clrs

from processors.edge_transformer import EdgeTransformerProcessor
from processors.floyd import FloydProcessor
from processors.pair_state import NODE_READOUTS
from processors.relational_transformer import GRAPH_VEC_CHOICES
from processors.relational_transformer import RelationalTransformerProcessor
from relational_jax.layers import shapes
from relational_jax.models.edge_transformer import ETConfig
from relational_jax.models.floyd import FloydConfig
from relational_jax.models.relational_transformer import RTConfig

# The processor kinds of dm-clrs 2.0.3 (`clrs._src.processors.get_processor_factory`).
CLRS_KINDS = (
    "deepsets",
    "gat",
    "gat_full",
    "gatv2",
    "gatv2_full",
    "memnet_full",
    "memnet_masked",
    "mpnn",
    "pgn",
    "pgn_mask",
    "triplet_mpnn",
    "triplet_pgn",
    "triplet_pgn_mask",
    "gpgn",
    "gpgn_mask",
    "gmpnn",
    "triplet_gpgn",
    "triplet_gpgn_mask",
    "triplet_gmpnn",
)

# Our kinds and the RTConfig fields they fix.
RT_KINDS = {
    "rt": {},
    "rt_no_edge_update": {"edge_update": False},
    "transformer": {"use_edges": False, "edge_update": False},
    # RT whose edge update also attends over triangles; triangular_heads
    # defaults to nb_heads.
    "rt_triangular": {},
}
# The Edge Transformer (Bergen et al. 2021) over the pair state.
ET_KINDS = ("et",)
# FloydNet (Yu, Zeng & Ye 2026): pivotal attention over the pair state.
FLOYD_KINDS = ("floyd",)

# Options our kinds accept besides the RTConfig / ETConfig / FloydConfig
# fields.
_RT_PROCESSOR_OPTIONS = ("graph_vec",)
_PAIR_STATE_PROCESSOR_OPTIONS = ("graph_vec", "node_readout")
# The pair-state kinds: their processor class and config dataclass.
_PAIR_STATE_KINDS = {
    **{kind: (EdgeTransformerProcessor, ETConfig) for kind in ET_KINDS},
    **{kind: (FloydProcessor, FloydConfig) for kind in FLOYD_KINDS},
}


def all_kinds():
  return CLRS_KINDS + tuple(RT_KINDS) + ET_KINDS + FLOYD_KINDS


def _check_options(kind, options, valid):
  unknown = sorted(set(options) - set(valid))
  if unknown:
    raise ValueError(
        f"Unknown option(s) {unknown} for processor kind {kind!r}; valid "
        f"options are {sorted(valid)}."
    )


def get_processor_factory(
    kind: str,
    use_ln: bool,
    nb_triplet_fts: int,
    nb_heads: Optional[int] = None,
    **options,
) -> Callable[[int], clrs.processors.Processor]:
  """Returns a CLRS processor factory `out_size -> Processor`.

  Args:
    kind: a CLRS kind (behaves exactly as `clrs.get_processor_factory`) or one
      of ours: 'rt', 'rt_no_edge_update', 'transformer', 'rt_triangular',
      'et', 'floyd'.
    use_ln: for CLRS kinds as in CLRS; for ours, whether the RT layers use
      LayerNorm (the paper's RT always does: keep True).
    nb_triplet_fts: used by CLRS triplet kinds only (part of the CLRS contract).
    nb_heads: attention heads (CLRS GAT kinds; ours default to 12).
    **options: for our kinds, `graph_vec` ('cat' | 'core') and, by the same
      names, any field of the model config: for the RT kinds an `RTConfig`
      field (num_layers, head_dim, node_ffn_dim, edge_msg_dim, edge_ffn_dim,
      edge_dim, tied, use_adjacency, dropout_rate, ln_epsilon;
      'rt_triangular' also triangular_heads, chunk_size), for 'et' an
      `ETConfig` field (num_layers, head_dim, ffn_dim, tied, ablation,
      chunk_size, impl, layout, ffn_chunk_size, dropout_rate, ln_epsilon)
      and the processor option `node_readout` ('diagonal' | 'rowcol'), for
      'floyd' a `FloydConfig` field (num_layers, head_dim,
      ffn_expansion_ratio, dropout_rate, use_bias, norm_position,
      activation, norm, symmetric_mix, use_ffn, softmax_cap, chunk_size,
      ln_epsilon, zero_padded_pairs) and `node_readout`. num_heads comes
      from `nb_heads`; 'et' and 'floyd' do not read `use_ln` (their norms
      are config fields). CLRS kinds take no options.

  Raises:
    ValueError: unknown kind, unknown option, or an option given to a CLRS kind.
  """
  if kind in CLRS_KINDS:
    if options:
      raise ValueError(
          f"Processor kind {kind!r} is a CLRS kind and takes no extra options; "
          f"got {sorted(options)}. Options apply to our kinds {list(RT_KINDS)}."
      )
    return clrs.get_processor_factory(
        kind, use_ln=use_ln, nb_triplet_fts=nb_triplet_fts, nb_heads=nb_heads
    )
  num_heads = 12 if nb_heads is None else nb_heads
  if kind in RT_KINDS:
    fixed = {"use_edges", "edge_update", "use_ln", "num_heads"}
    if kind != "rt_triangular":
      fixed |= {"triangular_heads", "chunk_size"}
    _check_options(
        kind,
        options,
        ({f.name for f in dataclasses.fields(RTConfig)} - fixed)
        | set(_RT_PROCESSOR_OPTIONS),
    )
    options = dict(options)
    graph_vec = options.pop("graph_vec", "cat")
    shapes.check_choice(graph_vec, GRAPH_VEC_CHOICES, "graph_vec")
    if kind == "rt_triangular":
      options.setdefault("triangular_heads", num_heads)
    config = RTConfig(
        num_heads=num_heads, use_ln=use_ln, **options, **RT_KINDS[kind]
    )

    def _factory(out_size: int):
      return RelationalTransformerProcessor(
          out_size, config, graph_vec=graph_vec, name=kind
      )

    return _factory
  if kind in _PAIR_STATE_KINDS:
    processor_cls, config_cls = _PAIR_STATE_KINDS[kind]
    _check_options(
        kind,
        options,
        ({f.name for f in dataclasses.fields(config_cls)} - {"num_heads"})
        | set(_PAIR_STATE_PROCESSOR_OPTIONS),
    )
    options = dict(options)
    graph_vec = options.pop("graph_vec", "cat")
    shapes.check_choice(graph_vec, GRAPH_VEC_CHOICES, "graph_vec")
    node_readout = options.pop("node_readout", "diagonal")
    shapes.check_choice(node_readout, NODE_READOUTS, "node_readout")
    pair_config = config_cls(num_heads=num_heads, **options)

    def _pair_state_factory(out_size: int):
      return processor_cls(
          out_size,
          pair_config,
          graph_vec=graph_vec,
          node_readout=node_readout,
          name=kind,
      )

    return _pair_state_factory
  raise ValueError(
      f"Unknown processor kind {kind!r}; valid kinds are {list(all_kinds())}."
  )
