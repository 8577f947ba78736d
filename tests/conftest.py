"""Test configuration: CPU, and cheap XLA compilation (tests are compile-bound).

The XLA flags lower LLVM optimisation effort; they change speed, not results
beyond float rounding. They are set before JAX is imported.
"""

import os
import pathlib

os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ.setdefault(
    "XLA_FLAGS",
    "--xla_backend_optimization_level=0"
    " --xla_llvm_disable_expensive_passes=true",
)
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import importlib.util  # noqa: E402

import pytest  # noqa: E402

if importlib.util.find_spec("tensorflow") is None:
  # Light install (docs/install.md): register dm-clrs's TensorFlow stand-ins
  # before any test module's `import clrs`. Where TensorFlow is installed,
  # nothing is imported here.
  import processors  # noqa: E402,F401

REPO = pathlib.Path(__file__).resolve().parents[1]
# The official data files shipped with the package (relational_jax/data/paths).
OFFICIAL_DATA = REPO / "relational_jax" / "data" / "official"


@pytest.fixture
def official_data():
  return OFFICIAL_DATA


@pytest.fixture(autouse=True, scope="module")
def _free_compiled_programs():
  """Drops JAX's compiled programs after each test module: the whole suite
  runs in one process, and the thousands of executables it compiles would
  otherwise all stay in memory (a full run once crashed inside XLA's CPU
  compiler after ~20 minutes, while every module passes on its own)."""
  yield
  import jax  # pylint: disable=g-import-not-at-top

  jax.clear_caches()
