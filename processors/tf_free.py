"""Import dm-clrs where TensorFlow is absent.

dm-clrs 2.0.3 imports `tensorflow` and `tensorflow_datasets` at import time,
but needs them only for its downloadable TFDS dataset (`clrs.create_dataset`,
`CLRSDataset`) and for clrs_text generation. relational_jax samples CLRS data
on the fly and never uses those, and GPU/TPU images often lack TensorFlow.

`ensure_clrs_importable()` (called when `processors` is imported) changes
nothing where TensorFlow and TensorFlow Datasets are installed: dm-clrs
imports the real packages. Only where one of them is absent (or fails to
import) does it register small stand-ins that satisfy dm-clrs's import-time
use, and it says so once through absl logging; anything that would really
need TensorFlow then raises `TensorFlowMissingError` saying so.
`tensorflow_stubbed()` tells which case applies.

With the environment variable `RELATIONAL_JAX_SKIP_TENSORFLOW=1` the
stand-ins are used even where TensorFlow is installed (unless it is already
imported): a process then starts 5-15 s sooner on 2 cores (the test suite sets
it). `0` or unset: the default above. Either way TensorFlow's
C++ start-up lines are held back and dm-clrs's per-sampler warnings moved
to DEBUG (`relational_jax.console`; --verbosity=1 shows both).
"""

import dataclasses
import importlib
import importlib.util
import os
import sys
import types

from absl import logging

from relational_jax import console

_STUBBED = []


class TensorFlowMissingError(ImportError):
  pass


SKIP_ENV = "RELATIONAL_JAX_SKIP_TENSORFLOW"


def skip_requested() -> bool:
  """Whether `SKIP_ENV` asks for the stand-ins ('1'; '0' or unset: no).

  Raises:
    ValueError: any other value, naming it and the valid ones.
  """
  value = os.environ.get(SKIP_ENV, "0")
  if value not in ("0", "1"):
    raise ValueError(
        f"{SKIP_ENV}={value!r}: valid values are '0' (import TensorFlow where "
        "installed) and '1' (dm-clrs without TensorFlow)."
    )
  return value == "1"


def _fail(qualname):
  why = (
      f"which {SKIP_ENV}=1 kept from being imported"
      if skip_requested()
      else "which is not installed"
  )
  raise TensorFlowMissingError(
      f"{qualname} needs TensorFlow, {why}. relational_jax samples CLRS data "
      "on the fly and does not need it; install tensorflow and "
      f"tensorflow-datasets (and leave {SKIP_ENV} unset) to use dm-clrs's "
      "downloadable dataset."
  )


class _StubMeta(type):
  """Attributes of a stand-in are stand-ins; calling one raises."""

  def __getattr__(cls, name):
    if name.startswith("__"):
      raise AttributeError(name)
    return _stub_class(f"{cls.__qualname__}.{name}")

  def __call__(cls, *args, **kwargs):
    _fail(cls.__qualname__)


def _stub_class(qualname):
  return _StubMeta(qualname.rsplit(".", 1)[-1], (), {"__qualname__": qualname})


class _StubModule(types.ModuleType):

  def __getattr__(self, name):
    if name.startswith("__"):
      raise AttributeError(name)
    return _stub_class(f"{self.__name__}.{name}")


@dataclasses.dataclass
class _BuilderConfig:
  name: str = ""


class _GeneratorBasedBuilder:

  def __init__(self, *args, **kwargs):
    _fail("tensorflow_datasets.core.GeneratorBasedBuilder")


class _Version(str):
  pass


class _TensorSpec:
  """dm-clrs's clrs_text builds TensorSpecs at import time; inert here."""

  def __init__(self, *args, **kwargs):
    self.args, self.kwargs = args, kwargs


def _install_stubs(missing):
  if "tensorflow" in missing:
    tf = _StubModule("tensorflow")
    tf.TensorSpec = _TensorSpec
    sys.modules["tensorflow"] = tf
  if "tensorflow_datasets" in missing:
    tfds = _StubModule("tensorflow_datasets")
    core = _StubModule("tensorflow_datasets.core")
    core.BuilderConfig = _BuilderConfig
    core.GeneratorBasedBuilder = _GeneratorBasedBuilder
    core.Version = _Version
    tfds.core = core
    sys.modules["tensorflow_datasets"] = tfds
    sys.modules["tensorflow_datasets.core"] = core


def _importable(name: str) -> bool:
  """True if `name` is installed and imports (a real, working package)."""
  if name in sys.modules:
    return True
  if importlib.util.find_spec(name) is None:
    return False
  try:
    importlib.import_module(name)
  except ImportError:  # Installed but broken (or shadowed): treat as absent.
    return False
  return True


def ensure_clrs_importable() -> list:
  """Imports dm-clrs; returns the names stubbed (empty where TensorFlow is
  installed).

  TensorFlow's start-up lines (written straight to fd 2 by its C++ logging)
  are held back while it is imported, and dm-clrs's per-sampler warnings
  are moved to the DEBUG level: see `relational_jax.console`."""
  console.install_log_filters()
  if "clrs" in sys.modules:
    return list(_STUBBED)
  with console.NativeCapture("importing TensorFlow and dm-clrs"):
    missing = _import_clrs()
  if missing and not skip_requested():  # Asked for: nothing to say.
    logging.warning(
        "%s not importable: installed import-time stand-ins so that dm-clrs "
        "imports (relational_jax samples CLRS data on the fly and does not "
        "need TensorFlow; clrs.create_dataset and other TFDS features raise "
        "TensorFlowMissingError).",
        " and ".join(missing),
    )
  return list(_STUBBED)


def _import_clrs() -> list:
  """Imports dm-clrs (with stand-ins where needed); returns what is stubbed."""
  skip = skip_requested() and "tensorflow" not in sys.modules
  missing = [
      name
      for name in ("tensorflow", "tensorflow_datasets")
      if skip or not _importable(name)
  ]
  if not missing:
    import clrs  # pylint: disable=g-import-not-at-top,unused-import,redefined-outer-name

    return []
  _install_stubs(missing)
  _STUBBED.extend(missing)
  import clrs  # pylint: disable=g-import-not-at-top,unused-import
  # dm-clrs keeps its references; the rest of the process sees TensorFlow
  # as absent again (e.g. `importlib.util.find_spec('tensorflow')` is None).
  for name in list(sys.modules):
    if name.split(".")[0] in missing:
      del sys.modules[name]
  return missing


def tensorflow_stubbed() -> bool:
  return bool(_STUBBED)
