"""The comparisons, by name: the only place the entry point finds one.

A new comparison is a module with a `protocol.Comparison` subclass and one
line here.
"""

from typing import Mapping, Tuple

from experiments.compare import clrs_rt
from experiments.compare import cogs_graph_et
from experiments.compare import clutrr_et
from experiments.compare import protocol
from experiments.compare import scan_relative_universal
from relational_jax.layers.shapes import check_choice

COMPARISONS: Mapping[str, protocol.Comparison] = {
    "clrs_rt": clrs_rt.ClrsRt(),
    "clutrr_et": clutrr_et.ClutrrEt(),
    "cogs_graph_et": cogs_graph_et.CogsGraphEt(),
    "scan_relative_universal": scan_relative_universal.ScanRelativeUniversal(),
}


def names() -> Tuple[str, ...]:
  return tuple(sorted(COMPARISONS))


def get(name: str) -> protocol.Comparison:
  """The comparison `name`.

  Raises:
    ValueError: naming it and the registered comparisons.
  """
  check_choice(name, names(), "comparison")
  return COMPARISONS[name]
