"""Shape checks used on entry to every layer, and the axis-letter glossary.

Array names end in their axes, e.g. `q_BxNxLxHxK` (nanodo style). One letter
means one thing throughout relational_jax and processors:

  B  batch
  N  nodes or tokens of a graph / sequence (the ET encoder-decoder's joint
     graph has N = S + T nodes)
  I, J  node axes where the two ends of an edge (i, j) are told apart
     (size N; e.g. one new row BxJxD and one new column BxIxD)
  L  pivot nodes l of triangular attention (a triangle (i, l, j); L = N)
  C  one chunk of an axis (`chunk_size` pivots, or FFN rows)
  U  nodes of a CLRS processor including its core node (N + 1 with
     graph_vec='core', else N)
  S  source tokens; in attention modules, key/value positions (source,
     cache slots)
  T  target tokens (decoder inputs, or decoded tokens); in attention
     modules, query positions
  M  encoder memory entries (what a decoder cross-attends to)
  A  decoder-layer applications (one cache each)
  D  width: node / token / model width, or the ET pair-state width
  E  RT edge width
  H  heads;  K  head width (D = H * K)
  F  feed-forward hidden width (`ffn_dim`, `node_ffn_dim`, `edge_ffn_dim`)
  G  RT edge message width (`edge_msg_dim`, the paper's d_eh1)
  O  a CLRS processor's output width (out_size, CLRS's hidden width)
  Z  input feature width (concatenated inputs of a processor)
  V  vocabulary;  Y  output classes or edge labels
  R  relation ids or relative offsets (rows of a relation / offset table)
  P  raw tree-position width n*k;  Q  learned tree-encoding parameters p

Configs name hyperparameters `*_dim` (num_heads, head_dim, ffn_dim, ...);
`node_width` / `edge_width` properties give resulting array widths.
"""

import dataclasses
from typing import Optional, Sequence, Union

import jax.numpy as jnp
import numpy as np

Dim = Optional[Union[int, str]]


def check_shape(x, expected: Sequence[Dim], name: str) -> None:
  """Raises ValueError if `x` does not have the `expected` shape.

  `expected` holds ints (must match), None (any size) or a letter naming the
  axis in the error message (any size; equal letters are not cross-checked
  here, use `check_equal` for that).
  """
  shape = tuple(jnp.shape(x))
  if len(shape) != len(expected):
    raise ValueError(
        f"{name} must have rank {len(expected)} (axes {_axes(expected)}), "
        f"got shape {shape}."
    )
  for axis, (got, want) in enumerate(zip(shape, expected)):
    if isinstance(want, int) and got != want:
      raise ValueError(
          f"{name} axis {axis} must have size {want} (axes {_axes(expected)}), "
          f"got shape {shape}."
      )


def check_equal(a: int, b: int, what: str) -> None:
  if a != b:
    raise ValueError(f"{what}: sizes differ ({a} != {b}).")


def check_divides(width: int, heads: int, what: str = "width") -> int:
  """Returns width // heads, or raises if heads does not divide width."""
  if heads <= 0:
    raise ValueError(f"num_heads must be positive, got {heads}.")
  if width % heads:
    raise ValueError(
        f"num_heads={heads} must divide the {what} {width}; valid head counts "
        f"are {[h for h in range(1, width + 1) if width % h == 0]}."
    )
  return width // heads


def check_choice(value, choices: Sequence, name: str) -> None:
  if value not in choices:
    raise ValueError(
        f"Unknown {name} {value!r}; valid choices are {list(choices)}."
    )


def check_config_type(config, cls: type, name: str = "config") -> None:
  """Raises ValueError unless `config` is a `cls` (naming both types)."""
  if not isinstance(config, cls):
    raise ValueError(
        f"{name} must be a {cls.__name__} instance, got "
        f"{type(config).__name__}."
    )


def check_bool_fields(config) -> None:
  """Raises ValueError naming a field of the dataclass `config` declared
  `bool` whose value is not one (a string such as 'no' is truthy)."""
  for field in dataclasses.fields(config):
    value = getattr(config, field.name)
    if field.type in (bool, "bool") and not isinstance(value, (bool, np.bool_)):
      raise ValueError(
          f"{type(config).__name__}.{field.name} must be a bool, got {value!r}."
      )


def _axes(expected: Sequence[Dim]) -> str:
  return "x".join("?" if d is None else str(d) for d in expected)
