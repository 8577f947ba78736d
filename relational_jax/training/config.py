"""One config, written once: `ml_collections.ConfigDict`s built from dataclasses.

A training config is a `ConfigDict` (as in the Flax examples and nanodo). Its
model sections are made from the model's own config dataclass by `section`
(every field with a default, declared once in `RTConfig`, `ETConfig`,
`Seq2SeqConfig`, ...), and are handed on unchanged by `instantiate`: no field
is restated or renamed between a flag and the model.

On the command line every leaf is `--config.<path>=value`
(`ml_collections.config_flags`).
"""

import dataclasses
import json
import os
import typing
from typing import (
    Any,
    Callable,
    Dict,
    Iterable,
    Mapping,
    Optional,
    Sequence,
    Tuple,
    Union,
)

from absl import flags
import ml_collections
from ml_collections import config_dict

from relational_jax.training import errors

ConfigDict = ml_collections.ConfigDict

_PLAIN = (bool, int, float, str)


def _plain_type(hint) -> Any:
  """The override type of a dataclass field annotation, or None when the
  field is not a plain value (arrays, dtypes, callables)."""
  if hint in _PLAIN:
    return hint
  origin, args = typing.get_origin(hint), typing.get_args(hint)
  if origin is Union and type(None) in args:  # Optional[X]
    rest = [a for a in args if a is not type(None)]
    return _plain_type(rest[0]) if len(rest) == 1 else None
  if origin in (tuple, Tuple, Sequence, list) or hint in (tuple, list):
    return tuple
  return None


def section(cls, exclude: Iterable[str] = ()) -> ConfigDict:
  """A ConfigDict of every defaulted plain field of dataclass `cls`.

  Optional fields whose default is None become typed placeholders, so
  `--config.<path>=3` works on them. Fields without a default (data-derived
  ones such as vocabulary sizes) and fields in `exclude` are left out; they
  are passed to `instantiate` by the code that knows them."""
  hints = typing.get_type_hints(cls)
  out = {}
  for field in dataclasses.fields(cls):
    if field.name in exclude or not field.init:
      continue
    if dataclasses.is_dataclass(hints[field.name]):
      default = None
    elif field.default is not dataclasses.MISSING:
      default = field.default
    elif field.default_factory is not dataclasses.MISSING:
      default = field.default_factory()
    else:
      continue
    if dataclasses.is_dataclass(hints[field.name]):  # a nested config
      out[field.name] = section(hints[field.name])
      continue
    kind = _plain_type(hints[field.name])
    if kind is None:
      continue
    if default is None:
      out[field.name] = config_dict.placeholder(kind)
    else:
      out[field.name] = tuple(default) if kind is tuple else default
  return ConfigDict(out)


def to_dict(value: Any) -> Any:
  """Plain nested dicts (JSON-ready) of a ConfigDict or mapping."""
  if isinstance(value, ConfigDict):
    value = value.to_dict()
  if isinstance(value, Mapping):
    return {k: to_dict(v) for k, v in value.items()}
  if isinstance(value, (tuple, list)):
    return [to_dict(v) for v in value]
  return value


def from_dict(raw: Mapping) -> ConfigDict:
  """The ConfigDict of a `to_dict` record (JSON lists become tuples)."""

  def convert(v):
    if isinstance(v, Mapping):
      return {k: convert(x) for k, x in v.items()}
    if isinstance(v, list):
      return tuple(convert(x) for x in v)
    return v

  return ConfigDict(convert(raw))


def instantiate(cls, values: Union[ConfigDict, Mapping], **fixed):
  """`cls(**values, **fixed)`, naming unknown fields and the valid ones;
  nested dataclass fields are built from their sub-sections."""
  values = to_dict(values)
  names = {f.name for f in dataclasses.fields(cls) if f.init}
  unknown = sorted(set(values) - names)
  if unknown:
    raise ValueError(
        f"unknown {cls.__name__} field(s) {unknown}; valid "
        f"fields are {sorted(names)}."
    )
  hints = typing.get_type_hints(cls)
  kwargs = {}
  for k, v in values.items():
    if dataclasses.is_dataclass(hints[k]) and isinstance(v, Mapping):
      v = instantiate(hints[k], v)  # a nested config section
    kwargs[k] = tuple(v) if isinstance(v, list) else v
  kwargs.update(fixed)
  return cls(**kwargs)


def get_path(config: ConfigDict, path: str) -> Any:
  node = config
  for part in path.split("."):
    node = node[part]
  return node


def set_path(config: ConfigDict, path: str, value: Any) -> None:
  *parents, last = path.split(".")
  node = config
  for part in parents:
    node = node[part]
  node[last] = value


def override(
    config: ConfigDict,
    overrides: Mapping[str, Any],
) -> ConfigDict:
  """A copy of `config` with dotted-path `overrides` (unknown paths raise)."""
  out = ConfigDict(config.to_dict())
  for path, value in overrides.items():
    try:
      get_path(out, path)
    except (KeyError, AttributeError) as e:
      raise ValueError(
          f"unknown config path {path!r}; top-level keys are "
          f"{sorted(out.keys())}."
      ) from e
    try:
      set_path(out, path, value)
    except TypeError as e:  # ConfigDict's type lock: one line, not a trace.
      current = get_path(out, path)
      raise ValueError(
          f"config path {path!r} takes a {type(current).__name__} (now "
          f"{current!r}), got {value!r}."
      ) from e
  return out


def diff(
    saved: Mapping, current: Mapping, prefix: str = ""
) -> Dict[str, Tuple]:
  """{path: (saved, current)} of the leaves that differ between two dicts."""
  out = {}
  for key in sorted(set(saved) | set(current)):
    a, b = saved.get(key), current.get(key)
    path = f"{prefix}{key}"
    if isinstance(a, Mapping) and isinstance(b, Mapping):
      out.update(diff(a, b, path + "."))
    elif a != b:
      out[path] = (a, b)
  return out


def check_unselected_sections(
    config: ConfigDict,
    defaults: ConfigDict,
    sections: Iterable[str],
    selected: str,
    selector: str = "model",
) -> None:
  """Raises ValueError where a section of `sections` other than `selected`
  (the one `config.<selector>` builds) differs from `defaults`: nothing
  reads it, so the change would be silently ignored."""
  for name in sections:
    if name == selected:
      continue
    changed = diff(to_dict(defaults[name]), to_dict(config[name]), name + ".")
    if changed:
      raise ValueError(
          f"{sorted(changed)} are read by {selector}={name!r} only, not by "
          f"{selector}={selected!r}: leave them at their defaults "
          f"{[changed[p][0] for p in sorted(changed)]}."
      )


def flatten(tree: Mapping, prefix: str = "") -> Dict[str, Any]:
  """{'a.b': leaf} of a nested dict."""
  out = {}
  for key, value in tree.items():
    path = f"{prefix}{key}"
    if isinstance(value, Mapping) and value:
      out.update(flatten(value, path + "."))
    else:
      out[path] = value
  return out


def _is_under(path: str, prefixes: Sequence[str]) -> bool:
  return any(path == p or path.startswith(p + ".") for p in prefixes)


def check_same_fields(
    saved: Mapping, current: Mapping, free: Sequence[str] = ()
) -> None:
  """Raises `errors.OtherFormatError` where config record `saved` lacks a
  field of `current` or has one it does not (outside the path prefixes
  `free`): a record of another version, which `scripts/migrate_workdir.py`
  converts (the message's `<workdir>` is its work directory)."""
  saved_paths, now_paths = set(flatten(saved)), set(flatten(current))
  missing = sorted(p for p in now_paths - saved_paths if not _is_under(p, free))
  extra = sorted(p for p in saved_paths - now_paths if not _is_under(p, free))
  if missing or extra:
    raise errors.OtherFormatError(
        "its fields are not this version's ("
        + "; ".join(
            f"{what}: {', '.join(paths[:6])}{' ...' if len(paths) > 6 else ''}"
            for what, paths in (("missing", missing), ("unknown", extra))
            if paths
        )
        + "); convert the work directory once with `python3 "
        f"{errors.MIGRATE} <workdir>`"
    )


def resume_conflicts(
    saved: Mapping,
    current: Mapping,
    *,
    free: Sequence[str] = (),
) -> Dict[str, Tuple]:
  """{path: (saved, current)} of the config fields in which a work
  directory's saved record differs from the current one and that a resumed
  run may not change.

  Args:
    saved, current: config records (`to_dict`), with the same fields
      outside `free` (`check_same_fields`).
    free: path prefixes that may change on resume.
  """
  check_same_fields(saved, current, free)
  flat_saved, flat_now = flatten(saved), flatten(current)
  return {
      path: (flat_saved[path], flat_now[path])
      for path in sorted(flat_now)
      if not _is_under(path, free) and flat_saved[path] != flat_now[path]
  }


def selected_resume_conflicts(
    saved: Mapping,
    config: ConfigDict,
    free: Sequence[str],
    models: Sequence[str],
) -> Dict[str, Tuple]:
  """`resume_conflicts` of `config`, whose `model` selects one of the
  sections `models`, ignoring the sections it does not select (which
  `check_unselected_sections` keeps at their defaults)."""
  unused = tuple(m for m in models if m != config.model)
  return resume_conflicts(saved, to_dict(config), free=tuple(free) + unused)


def raise_resume_conflicts(
    changed: Mapping[str, Tuple], config_path: str, free: Sequence[str] = ()
) -> None:
  """Raises `errors.UserError` (a ValueError: the mains print it as one line,
  exit 2) naming every field of `changed` (`resume_conflicts`); the one
  resume refusal of every task. Nothing if `changed` is empty."""
  if changed:
    raise errors.UserError(
        f"the work directory's config ({config_path}) differs from this "
        f"run's config in {len(changed)} field(s) that cannot change on "
        "resume: "
        + "; ".join(
            f"{path}: saved {a!r}, now {b!r}"
            for path, (a, b) in changed.items()
        )
        + ". Use a new work directory, or the saved values (fields that may "
        f"change: {', '.join(free) or 'none'})."
    )


def check_and_save(
    config: ConfigDict,
    workdir: str,
    resumable: Tuple[str, ...],
    conflicts: Optional[Callable[[Dict], Dict[str, Tuple]]] = None,
    save: bool = True,
) -> None:
  """Refuses a work dir whose `config.json` differs from `config` outside
  the path prefixes `resumable` (`resume_conflicts`, or `conflicts(saved
  record)`, a task's own comparison), or is not in today's format
  (`errors.OtherFormatError`, naming the file); then, with `save`, saves `config`
  there (`save_config`)."""
  from relational_jax.training import reporting  # pylint: disable=g-import-not-at-top

  path = os.path.join(workdir, "config.json")
  current = to_dict(config)
  if os.path.exists(path):
    saved = reporting.read_json(path)
    try:
      if conflicts is None:
        changed = resume_conflicts(saved, current, free=resumable)
      else:
        changed = conflicts(saved)
    except errors.OtherFormatError as e:
      raise errors.OtherFormatError(
          f"{path} is not in this version's format: "
          + str(e).replace("<workdir>", workdir)
      ) from None
    raise_resume_conflicts(changed, path, resumable)
  if save:
    save_config(config, workdir)


def save_config(config: ConfigDict, workdir: str) -> None:
  """Writes `config`'s record to `<workdir>/config.json` (process 0: every
  process checked it; one writes)."""
  from relational_jax.parallel import distributed  # pylint: disable=g-import-not-at-top
  from relational_jax.training import reporting  # pylint: disable=g-import-not-at-top

  if distributed.is_primary():
    reporting.write_json(os.path.join(workdir, "config.json"), to_dict(config))


def dumps(config: ConfigDict) -> str:
  return json.dumps(to_dict(config), indent=1, sort_keys=True)
