"""A jit with cheap XLA CPU compile options, shared by the seq2seq tests
(they check semantics, not XLA's optimisations)."""

import jax


def _fast_compile_options():
  """XLA options that make CPU compiles several times faster (these tests
  check semantics, not XLA's optimisations); {} where jax does not take
  them."""
  options = {
      "xla_backend_optimization_level": 0,
      "xla_cpu_use_fusion_emitters": False,
      "xla_llvm_disable_expensive_passes": True,
  }
  try:
    jax.jit(lambda x: x + 1, compiler_options=options)(0)
  except Exception:  # Older jax (no compiler_options) or unknown flags.
    return {}
  return options


FAST_COMPILE = _fast_compile_options()


def jit(fn):
  if FAST_COMPILE:
    return jax.jit(fn, compiler_options=FAST_COMPILE)
  return jax.jit(fn)
