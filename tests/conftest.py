"""Test configuration: CPU, and cheap XLA compilation (tests are compile-bound).

JAX_PLATFORMS defaults to cpu; set it ('' for any, or 'cuda') to run the
tests elsewhere, as experiments.bench.gpu_check does. On the CPU, the XLA
flags lower LLVM optimisation effort and use XLA's older CPU loop emitters;
they change speed, not results beyond float rounding. A compilation cache
is shared by the session's modules and subprocesses. All are set before JAX
is imported.
"""

import atexit
import os
import pathlib
import shutil
import tempfile

os.environ.setdefault("JAX_PLATFORMS", "cpu")
if os.environ["JAX_PLATFORMS"] == "cpu":
  # CPU compiler flags only: with them set, every test process died at
  # start on an H200 with jaxlib 0.11.2 (docs/performance.md, GPU).
  os.environ.setdefault(
      "XLA_FLAGS",
      "--xla_backend_optimization_level=0"
      " --xla_llvm_disable_expensive_passes=true"
      " --xla_cpu_use_fusion_emitters=false",
  )
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
if "JAX_COMPILATION_CACHE_DIR" not in os.environ:
  # One compilation cache for the session and the processes its tests
  # start: many modules and subprocesses compile the same small programs
  # (each module's compiled programs are dropped when it ends). It starts
  # empty and is removed at exit, so no run reads another's programs.
  _CACHE = tempfile.mkdtemp(prefix="relational_jax_tests_xla_")
  atexit.register(shutil.rmtree, _CACHE, ignore_errors=True)
  os.environ["JAX_COMPILATION_CACHE_DIR"] = _CACHE
  os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0.1")

import pytest  # noqa: E402

# dm-clrs with its TensorFlow stand-ins even where TensorFlow is installed
# (`processors.tf_free`): every process of the suite starts 5-15 s sooner.
# Registered here, before any test module's `import clrs`; the tests of the
# TensorFlow path unset it in their subprocesses.
os.environ.setdefault("RELATIONAL_JAX_SKIP_TENSORFLOW", "1")
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
