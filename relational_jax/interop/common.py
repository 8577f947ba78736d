"""Helpers shared by the converters: flat names, sub-mappings, the inverse.

The authors' parameters arrive as plain mappings of name -> array: a PyTorch
state dict converted with `{k: v.numpy() for k, v in sd.items()}` (names
joined by '.'), or Haiku parameters `{module path: {name: array}}` (joined by
'/' here). Every converter reads them through a `Reader`, which accounts for
each name: a name the converter needs and does not find, and a name it
neither uses nor knowingly drops, both raise ValueError naming them.
"""

from typing import Any, Callable, Iterable, Mapping, Optional, Sequence

import jax
import numpy as np

__all__ = ["flatten", "select", "to_authors"]

Params = Mapping[str, Any]


def flatten(params: Params, sep: str) -> dict[str, np.ndarray]:
  """Nested mappings -> one flat {joined name: array}.

  Args:
    params: name -> array, or name -> nested mapping (e.g. Haiku's
      {module path: {parameter name: array}}); both may mix.
    sep: the separator joining the levels ('/' for Haiku, '.' for PyTorch).

  Returns:
    {full name: numpy array}; arrays keep their dtype.

  Raises:
    ValueError: two entries flatten to the same name.
  """
  flat = {}

  def walk(mapping, path):
    for key, value in mapping.items():
      name = f"{path}{sep}{key}" if path else str(key)
      if isinstance(value, Mapping):
        walk(value, name)
      elif name in flat:
        raise ValueError(f"parameter name {name!r} appears twice")
      else:
        flat[name] = np.asarray(value)

  walk(params, "")
  return flat


def select(params: Params, prefix: str, sep: str = "/") -> dict[str, Any]:
  """The entries under `prefix`, with the prefix removed.

  Use it to hand one sub-module of a larger checkpoint to a converter, e.g.
  `select(state_dict, "encoder.", ".")` for the encoder of the ET authors'
  COGS parser. Entries outside the prefix are left out on purpose (they
  belong to modules the converter is not given).

  Args:
    params: flat or nested name -> array mapping.
    prefix: the leading part of the names to keep, including its trailing
      separator ('rt/', 'encoder.').
    sep: the separator used when flattening nested mappings.

  Returns:
    {name without the prefix: array}.

  Raises:
    ValueError: no name starts with `prefix`.
  """
  flat = flatten(params, sep)
  chosen = {
      k[len(prefix) :]: v for k, v in flat.items() if k.startswith(prefix)
  }
  if not chosen:
    raise ValueError(
        f"no parameter name starts with {prefix!r}; names start with "
        f"{sorted({k.split(sep)[0] for k in flat})}"
    )
  return chosen


class Reader:
  """Reads the authors' parameters by name and accounts for every name.

  `take` returns a named array (ValueError if it is missing or has an
  unexpected shape), `drop` marks names the converter knowingly leaves out
  (documented in each converter), and `finish` raises ValueError listing
  every name that was neither taken nor dropped.
  """

  def __init__(self, params: Params, what: str, sep: str):
    self.params = flatten(params, sep)
    self.what = what
    self.used = set()

  def has(self, name: str) -> bool:
    return name in self.params

  def names(self) -> list[str]:
    return sorted(self.params)

  def take(
      self, name: str, shape: Optional[Sequence[Optional[int]]] = None
  ) -> np.ndarray:
    """The array `name`; `shape` (None entries match any size) is checked."""
    if name not in self.params:
      raise ValueError(
          f"{self.what}: missing key {name!r} in the authors' parameters"
      )
    value = self.params[name]
    if shape is not None and (
        value.ndim != len(shape)
        or any(s is not None and s != v for s, v in zip(shape, value.shape))
    ):
      want = tuple("?" if s is None else s for s in shape)
      raise ValueError(
          f"{self.what}: key {name!r} has shape {value.shape}, expected "
          f"{want} for the given configuration"
      )
    self.used.add(name)
    return value

  def take_optional(
      self, name: str, default: np.ndarray, shape=None
  ) -> np.ndarray:
    return self.take(name, shape) if name in self.params else default

  def drop(self, names: Iterable[str]) -> None:
    """Marks names (where present) as knowingly not converted."""
    self.used.update(n for n in names if n in self.params)

  def drop_if(self, predicate: Callable[[str], bool]) -> None:
    self.used.update(n for n in self.params if predicate(n))

  def finish(self) -> None:
    unexpected = sorted(set(self.params) - self.used)
    if unexpected:
      raise ValueError(
          f"{self.what}: unexpected key(s) in the authors' parameters: "
          f"{unexpected}"
      )


LINEAR_BIAS = ("required", "optional", "none")


def torch_linear(
    reader: Reader,
    name: str,
    rows: Optional[int] = None,
    cols: Optional[int] = None,
    *,
    bias: str = "required",
    in_shape: Optional[Sequence[int]] = None,
    out_shape: Optional[Sequence[int]] = None,
) -> dict[str, np.ndarray]:
  """The torch.nn.Linear `name` (`name.weight`, out x in = rows x cols, None
  matching any size) as our Dense / DenseGeneral tree: kernel weight.T,
  reshaped to in_shape + (out,) or (in,) + out_shape; the bias (`bias`:
  'required', 'optional' (zeros where absent) or 'none' (no bias entry))
  reshaped to out_shape."""
  if bias not in LINEAR_BIAS:
    raise ValueError(f"bias must be one of {LINEAR_BIAS}, got {bias!r}.")
  weight = reader.take(f"{name}.weight", (rows, cols))
  out_features = weight.shape[0]
  kernel = weight.T
  if in_shape is not None:
    kernel = kernel.reshape(tuple(in_shape) + (out_features,))
  if out_shape is not None:
    kernel = kernel.reshape(kernel.shape[:1] + tuple(out_shape))
  tree = {"kernel": kernel}
  if bias != "none":
    shape = (out_features,)
    b = (
        reader.take(f"{name}.bias", shape)
        if bias == "required"
        else reader.take_optional(
            f"{name}.bias", np.zeros(shape, weight.dtype), shape
        )
    )
    tree["bias"] = b if out_shape is None else b.reshape(tuple(out_shape))
  return tree


def to_authors(
    convert: Callable[[dict[str, np.ndarray]], Any],
    authors_params: Params,
    tree: Any,
    sep: str = "/",
) -> dict[str, np.ndarray]:
  """Maps a tree shaped like a converter's output back to the authors' names.

  The converters only slice, reshape, stack and regroup, so one converter
  is inverted by converting element ids (1, 2, ... over the authors'
  parameters) and scattering the values of `tree` back to those ids. Use it
  to compare our gradients (or updated parameters) with theirs, or to write
  our parameters under their names.

  Args:
    convert: a converter taking a flat mapping of the authors' names, e.g.
      `lambda p: rt_haiku.convert_stack(p, config)`.
    authors_params: the authors' parameters (their names and shapes).
    tree: a tree with the structure and shapes of `convert(authors_params)`.
    sep: the separator for nested `authors_params` ('/' Haiku, '.' PyTorch).

  Returns:
    {their name: array of their shape}, for every name the converter uses;
    names it knowingly drops (e.g. the ET authors' unused `linears.4`) are
    left out. Entries of `tree` that come from no name of theirs (zero
    biases, `core_edge`) are not returned.

  Raises:
    ValueError: `tree` is not shaped like the converter's output, or a name
      of theirs is only partly covered or covered twice.
  """
  flat = flatten(authors_params, sep)
  ids, offset = {}, 1
  for name, value in sorted(flat.items()):
    ids[name] = np.arange(
        offset, offset + value.size, dtype=np.float64
    ).reshape(value.shape)
    offset += value.size
  mapped = convert(ids)
  mapped_leaves, mapped_def = jax.tree_util.tree_flatten(mapped)
  leaves, treedef = jax.tree_util.tree_flatten(tree)
  if mapped_def != treedef:
    raise ValueError(
        "the tree does not have the structure of the converter's output:\n"
        f"converter: {mapped_def}\ntree:      {treedef}"
    )
  dtype = np.result_type(*[np.asarray(leaf).dtype for leaf in leaves])
  values = np.zeros(offset, dtype)
  hits = np.zeros(offset, np.int64)
  for id_leaf, leaf in zip(mapped_leaves, leaves):
    index = np.asarray(id_leaf).astype(np.int64).ravel()
    value = np.asarray(leaf).ravel()
    if value.shape != index.shape:
      raise ValueError(
          f"a leaf of the tree has {value.size} elements where the "
          f"converter's output has {index.size}"
      )
    keep = index > 0
    values[index[keep]] = value[keep]
    np.add.at(hits, index[keep], 1)
  out = {}
  for name, id_array in ids.items():
    count = hits[id_array.astype(np.int64)]
    if not count.any():
      continue
    if not (count == 1).all():
      raise ValueError(
          f"{name!r}: {int((count == 0).sum())} element(s) not covered and "
          f"{int((count > 1).sum())} covered more than once by the converter"
      )
    out[name] = values[id_array.astype(np.int64)]
  return out
