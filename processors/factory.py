"""`get_processor_factory`: a drop-in superset of `clrs.get_processor_factory`.

Every CLRS kind (`CLRS_KINDS`) is delegated to CLRS unchanged. Our kinds are
the table `PROCESSORS`: kind -> `ProcessorSpec` (the Haiku processor class,
its config dataclass and what the kind fixes), so a new processor is its
module plus one entry here (or `register(kind, spec)` from outside the
library; docs/extending.md). A kind's options are its config dataclass's
field names, passed through unrenamed, plus the spec's processor options
(`graph_vec`, and `node_readout` for the pair-state kinds).
"""

import dataclasses
from typing import Any, Callable, Dict, Mapping, Optional, Tuple

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

# The processor kinds of dm-clrs 2.0.3 (`clrs._src.processors.get_processor_factory`);
# the last nine, `CLRS_TRIPLET_KINDS`, are those it gives nb_triplet_fts.
CLRS_TRIPLET_KINDS = (
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
) + CLRS_TRIPLET_KINDS
# The factory arguments each dm-clrs kind reads (2.0.3): nb_heads the GAT
# kinds; nb_triplet_fts the kinds with triplet messages (gpgn, gpgn_mask and
# gmpnn are given it but compute none); use_ln all but the MemNets.
CLRS_ARGUMENT_READERS = {
    "nb_heads": ("gat", "gat_full", "gatv2", "gatv2_full"),
    "nb_triplet_fts": tuple(
        k for k in CLRS_TRIPLET_KINDS if k.startswith("triplet_")
    ),
    "use_ln": tuple(k for k in CLRS_KINDS if not k.startswith("memnet")),
}

# Config fields that come from `get_processor_factory`'s own arguments, not
# from options, where the config has them: {config field: argument}
# (num_heads from nb_heads, default 12; use_ln from use_ln). A CLRS run config
# holds them once, as `config.processor.<argument>`, not in a model section.
DEFAULT_NUM_HEADS = 12
ARGUMENT_FIELDS = {"num_heads": "nb_heads", "use_ln": "use_ln"}


@dataclasses.dataclass(frozen=True)
class ProcessorSpec:
  """One of our processor kinds.

  Attributes:
    processor: the Haiku processor class (CLRS `Processor` contract), built
      as `processor(out_size, config, name=kind, **choices)`.
    config: its config dataclass. The kind's options are its fields, except
      `num_heads` and `use_ln` (`ARGUMENT_FIELDS`: set from the factory's
      `nb_heads` and `use_ln` where the config has them; `arguments()`),
      the `withheld` ones and the `fixed` ones.
    section: the CLRS run config's section holding these options
      (`config.<section>`; kinds of one config dataclass share one). Heads
      and layer norm are not in it: a CLRS run config sets them for every
      kind as `config.processor.nb_heads` and `config.processor.use_ln`.
    family: the section's kinds in messages ('RT').
    withheld: config fields that are not options of this kind: `fixed`'s
      value, else the config's default.
    fixed: {config field: the value this kind sets}.
    choices: processor options besides the config's fields, {name: valid
      values}, the first the default (`config.processor.<name>` in a CLRS run
      config).
    heads_default: config fields defaulting to the kind's num_heads (0 in a
      CLRS run config means that default).
    run_defaults: the CLRS run config section's values where they differ
      from the config dataclass's defaults (options only: not the
      `ARGUMENT_FIELDS`).
  """

  processor: Callable[..., clrs.processors.Processor]
  config: type
  section: str
  family: str
  withheld: Tuple[str, ...] = ()
  fixed: Mapping[str, Any] = dataclasses.field(default_factory=dict)
  choices: Mapping[str, Tuple[str, ...]] = dataclasses.field(
      default_factory=dict
  )
  heads_default: Tuple[str, ...] = ()
  run_defaults: Mapping[str, Any] = dataclasses.field(default_factory=dict)

  def __post_init__(self):
    arguments = sorted(set(self.run_defaults) & set(ARGUMENT_FIELDS))
    if arguments:
      raise ValueError(
          f"run_defaults {arguments} are set from get_processor_factory's "
          f"arguments {[ARGUMENT_FIELDS[a] for a in arguments]}, not from "
          "the model section; run_defaults name options only."
      )

  def fields(self) -> Tuple[str, ...]:
    return tuple(f.name for f in dataclasses.fields(self.config))

  def arguments(self) -> Tuple[str, ...]:
    """The `get_processor_factory` arguments this kind reads ('nb_heads',
    'use_ln': those whose `ARGUMENT_FIELDS` field its config has)."""
    fields = self.fields()
    return tuple(a for f, a in ARGUMENT_FIELDS.items() if f in fields)

  def options(self) -> Tuple[str, ...]:
    """The option names `get_processor_factory` accepts for this kind."""
    taken = set(ARGUMENT_FIELDS) | set(self.withheld) | set(self.fixed)
    return tuple(f for f in self.fields() if f not in taken) + tuple(
        self.choices
    )


# RTConfig fields that an RT kind fixes or leaves at their defaults.
RT_KIND_FIELDS = ("use_edges", "edge_update")
# RTConfig fields of the edge update alone (the widths of W_4 and W_6).
RT_EDGE_UPDATE_FIELDS = ("edge_msg_dim", "edge_ffn_dim")
# RTConfig fields of the triangular edge attention ('rt_triangular' only).
RT_TRIANGULAR_FIELDS = ("chunk_size", "triangular_heads")
_PAIR_STATE_CHOICES = {
    "graph_vec": GRAPH_VEC_CHOICES,
    "node_readout": NODE_READOUTS,
}
# The pair-state kinds in a CLRS run at ET's width: 12 heads (nb_heads's
# default) x 16, 3 layers.
_PAIR_STATE_RUN_DEFAULTS = {"head_dim": 16, "num_layers": 3}


def _rt(
    triangular: bool = False, unread: Tuple[str, ...] = (), **fixed
) -> ProcessorSpec:
  """An RT kind: RTConfig with `fixed`; the triangular edge attention's
  fields are options of 'rt_triangular' only; `unread`: the RTConfig fields
  `fixed` leaves unread (no option of the kind)."""
  return ProcessorSpec(
      RelationalTransformerProcessor,
      RTConfig,
      section="rt",
      family="RT",
      withheld=RT_KIND_FIELDS
      + (() if triangular else RT_TRIANGULAR_FIELDS)
      + unread,
      fixed=fixed,
      choices={"graph_vec": GRAPH_VEC_CHOICES},
      heads_default=("triangular_heads",) if triangular else (),
  )


def _pair_state(
    processor, config, section, family, unread: Tuple[str, ...] = ()
) -> ProcessorSpec:
  """A pair-state kind (`processors.pair_state`): `config`'s stack;
  `unread`: config fields the processor never reads (no options)."""
  return ProcessorSpec(
      processor,
      config,
      section=section,
      family=family,
      withheld=unread,
      choices=_PAIR_STATE_CHOICES,
      run_defaults=_PAIR_STATE_RUN_DEFAULTS,
  )


# Our kinds. A new processor: its module under processors/ and one entry.
PROCESSORS: Dict[str, ProcessorSpec] = {
    "rt": _rt(),
    # The RT paper's ablations: only the edge update reads the edge widths,
    # and without edges E sizes nothing.
    "rt_no_edge_update": _rt(unread=RT_EDGE_UPDATE_FIELDS, edge_update=False),
    "transformer": _rt(
        unread=RT_EDGE_UPDATE_FIELDS + ("edge_dim",),
        use_edges=False,
        edge_update=False,
    ),
    # RT whose edge update also attends over triangles; triangular_heads
    # defaults to nb_heads.
    "rt_triangular": _rt(triangular=True),
    # The Edge Transformer (Bergen et al. 2021) over the pair state.
    "et": _pair_state(EdgeTransformerProcessor, ETConfig, "et", "ET"),
    # FloydNet (Yu, Zeng & Ye 2026): pivotal attention over the pair state.
    # CLRS graphs are unpadded: FloydConfig's padding option is unread.
    "floyd": _pair_state(
        FloydProcessor,
        FloydConfig,
        "floyd",
        "FloydNet",
        unread=("zero_padded_pairs",),
    ),
}


def _kinds_of(section: str) -> Tuple[str, ...]:
  return tuple(k for k, s in PROCESSORS.items() if s.section == section)


# The built-in kinds by family, read from the table (RT_KINDS: the RTConfig
# fields each RT kind fixes).
RT_KINDS = {k: dict(PROCESSORS[k].fixed) for k in _kinds_of("rt")}
ET_KINDS = _kinds_of("et")
FLOYD_KINDS = _kinds_of("floyd")


def all_kinds() -> Tuple[str, ...]:
  return CLRS_KINDS + tuple(PROCESSORS)


def register(kind: str, spec: ProcessorSpec) -> None:
  """Adds our kind `kind` to `PROCESSORS` (a new name only)."""
  if kind in all_kinds():
    raise ValueError(f"Processor kind {kind!r} already exists.")
  PROCESSORS[kind] = spec


def sections() -> Dict[str, Tuple[ProcessorSpec, Tuple[str, ...]]]:
  """{CLRS run config section: (its first kind's spec, every kind reading
  it)}, in table order."""
  out = {}
  for kind, spec in PROCESSORS.items():
    first, kinds = out.get(spec.section, (spec, ()))
    out[spec.section] = (first, kinds + (kind,))
  return out


def _check_options(kind, options, valid):
  unknown = sorted(set(options) - set(valid))
  if unknown:
    raise ValueError(
        f"Unknown option(s) {unknown} for processor kind {kind!r}; valid "
        f"options are {sorted(valid)}."
    )


def _factory(kind, spec, use_ln, nb_heads, options):
  """The factory of our kind `kind` (`spec`) with `options`."""
  _check_options(kind, options, spec.options())
  options = dict(options)
  choices = {}
  for name, valid in spec.choices.items():
    choices[name] = options.pop(name, valid[0])
    shapes.check_choice(choices[name], valid, name)
  if not use_ln and "use_ln" not in spec.fields():
    raise ValueError(
        f"use_ln=False: processor kind {kind!r} has no LayerNorm switch (its "
        f"norms are {spec.config.__name__} fields); pass use_ln=True."
    )
  num_heads = DEFAULT_NUM_HEADS if nb_heads is None else nb_heads
  for name in spec.heads_default:
    options.setdefault(name, num_heads)
    if options[name] < 1:  # 0 would build another kind under this name.
      raise ValueError(
          f"processor kind {kind!r} needs {name} >= 1 (omit it for "
          f"nb_heads), got {options[name]}."
      )
  arguments = {"num_heads": num_heads, "use_ln": use_ln}
  config = spec.config(
      **{k: v for k, v in arguments.items() if k in spec.fields()},
      **options,
      **spec.fixed,
  )

  def _build(out_size: int):
    return spec.processor(out_size, config, name=kind, **choices)

  return _build


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
      of ours (`PROCESSORS`): 'rt', 'rt_no_edge_update', 'transformer',
      'rt_triangular', 'et', 'floyd'.
    use_ln: for CLRS kinds as in CLRS; for ours, the config's `use_ln` where
      it has one (the RT kinds: the paper's RT always uses LayerNorm, keep
      True); 'et' and 'floyd' have none (their norms are config fields):
      False is refused for them.
    nb_triplet_fts: used by CLRS triplet kinds only (part of the CLRS contract).
    nb_heads: attention heads (CLRS GAT kinds; ours: the config's num_heads,
      default 12).
    **options: for our kinds, by name, the fields of the kind's model config
      that it reads (`RTConfig` for the RT kinds, `ETConfig` for 'et',
      `FloydConfig` for 'floyd'; not num_heads and use_ln, the arguments
      above) and its processor options: `graph_vec` ('cat' | 'core') and,
      for 'et' and 'floyd', `node_readout` ('diagonal' | 'rowcol').
      `PROCESSORS[kind].options()` lists them; a field the kind does not
      read (e.g. edge_msg_dim for 'rt_no_edge_update') is refused. CLRS
      kinds take no options.

  Raises:
    ValueError: unknown kind, unknown option, or an option given to a CLRS kind.
  """
  if kind in CLRS_KINDS:
    if options:
      raise ValueError(
          f"Processor kind {kind!r} is a CLRS kind and takes no extra options; "
          f"got {sorted(options)}. Options apply to our kinds "
          f"{list(PROCESSORS)}."
      )
    return clrs.get_processor_factory(
        kind, use_ln=use_ln, nb_triplet_fts=nb_triplet_fts, nb_heads=nb_heads
    )
  if kind in PROCESSORS:
    return _factory(kind, PROCESSORS[kind], use_ln, nb_heads, options)
  raise ValueError(
      f"Unknown processor kind {kind!r}; valid kinds are {list(all_kinds())}."
  )
