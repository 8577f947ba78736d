r"""What one Edge Transformer training pass spends its time on (wall clock).

  python -m experiments.bench.et_parts --output=results/bench_et_parts.json

At the CLRS benchmark size (`experiments.bench.processors` ENTRIES['et']:
batch 32, n = 16, 3 tied layers of 12 heads x 16, FFN 4D), times the
forward+backward pass (`jax.vjp` with a fixed cotangent) of:
  stack            the EdgeTransformer stack (eq. 3, three layer applications);
  stack_core_free  the same stack with the O(N^3) pivot sum (eq. 4-8) replaced
                   by a nearly free stand-in, o = q * k + V^1 x * V^2 x: one
                   element-wise pass, and each projection gets its own
                   cotangent, so XLA can neither drop nor merge any of their
                   GEMMs (a plain sum would let it share their backward
                   GEMMs). Every projection, LayerNorm and FFN still runs, so
                   stack - stack_core_free is what the triangular sum costs,
                   and stack_core_free / stack bounds what any faster
                   triangular kernel could gain;
  core             the pivot sum alone (`triangular_attention_core`);
  ffn              one layer's transition LN_2 -> FFN (row-chunked, remat);
and the forward rate of the FFN's first GEMM in isolation (GFLOP/s): the
dense throughput XLA reaches on this machine; also XLA's FLOP count of the
pivot sum's forward+backward (one chunk, so no loop body is counted once for
several). Variants are compiled once and
timed in alternating rounds (minimum and median over rounds). Timings, not
FLOP counts: those are `experiments.bench.flops_processors`.
"""

import contextlib
import functools
import time

from absl import app
from absl import flags
import jax
import jax.numpy as jnp
import numpy as np

from relational_jax.layers import triangular
from relational_jax.models import edge_transformer as etm
from relational_jax.training import reporting

FLAGS = flags.FLAGS


def _define_flags():
  """Flags of the script (defined when run as a script, so importing this
  module next to other experiments defines no clashing flag names)."""
  flags.DEFINE_integer("batch_size", 32, "Graphs per batch.")
  flags.DEFINE_integer("nodes", 16, "Nodes per graph.")
  flags.DEFINE_integer("num_heads", 12, "Heads H.")
  flags.DEFINE_integer("head_dim", 16, "Head width K (edge width D = H K).")
  flags.DEFINE_integer("rounds", 7, "Alternating timing rounds.")
  flags.DEFINE_string("output", "results/bench_et_parts.json", "JSON output.")


def _free_core(q, k, v1, v2, node_mask_BxL=None, **unused):
  """Stand-in for the pivot sum: o = q * k + V^1 x * V^2 x, one pass over
  the four projections (no O(N^3) work; each projection's cotangent differs,
  so none of their GEMMs is dropped or shared)."""
  del node_mask_BxL, unused
  return q * k + (v1 if v2 is None else v1 * v2)


@contextlib.contextmanager
def _core_replaced(core):
  saved = triangular.triangular_attention_core
  triangular.triangular_attention_core = core
  try:
    yield
  finally:
    triangular.triangular_attention_core = saved


def _vjp_pass(f, *primals):
  """jit(forward + backward of f at primals with a fixed cotangent)."""
  out = jax.eval_shape(f, *primals)
  cotangent = jax.tree_util.tree_map(
      lambda s: jax.random.normal(jax.random.PRNGKey(7), s.shape, s.dtype), out
  )
  return jax.jit(lambda *p: jax.vjp(f, *p)[1](cotangent)), primals


def build_passes(batch_size, nodes, config):
  """{name: (jitted pass, args)}, each compiled (the core-free stack is traced
  with the stand-in in place)."""
  d = config.edge_width
  key = jax.random.PRNGKey(0)
  x_BxNxNxD = jax.random.normal(key, (batch_size, nodes, nodes, d))
  stack = etm.EdgeTransformer(config)
  params = stack.init(jax.random.PRNGKey(1), x_BxNxNxD)
  passes = {"stack": _vjp_pass(stack.apply, params, x_BxNxNxD)}
  with _core_replaced(_free_core):
    passes["stack_core_free"] = _vjp_pass(stack.apply, params, x_BxNxNxD)
    jax.block_until_ready(
        passes["stack_core_free"][0](*passes["stack_core_free"][1])
    )

  heads_BxNxNxHxK = [
      jax.random.normal(
          jax.random.PRNGKey(i),
          (batch_size, nodes, nodes, config.num_heads, config.head_dim),
      )
      for i in range(4)
  ]
  core = functools.partial(
      triangular.triangular_attention_core, chunk_size=config.chunk_size
  )
  passes["core"] = _vjp_pass(core, *heads_BxNxNxHxK)

  layer_params = params["params"]["layer"]
  transition_params = {
      name: layer_params[name] for name in ("ln_ffn", "ffn_hidden", "ffn_out")
  }
  ffn_dim = config.ffn_dim or 4 * d
  transition = functools.partial(
      etm._transition,
      ffn_width=ffn_dim,
      width=d,
      dropout_rate=0.0,  # pylint: disable=protected-access
      layout=config.layout,
      ln_epsilon=config.ln_epsilon,
      dtype=jnp.float32,
      param_dtype=jnp.float32,
  )
  ffn = lambda p, u: etm._row_chunked(
      transition,
      p,
      u,
      None,  # pylint: disable=protected-access
      config.ffn_chunk_size,
  )
  passes["ffn"] = _vjp_pass(ffn, transition_params, x_BxNxNxD)

  rows = batch_size * nodes * nodes
  a = jax.random.normal(key, (rows, d))
  w = jax.random.normal(key, (d, ffn_dim))
  passes["gemm"] = (jax.jit(jnp.matmul), (a, w))
  for f, args in passes.values():
    jax.block_until_ready(f(*args))
  return passes, 2.0 * rows * d * ffn_dim


def core_gflop(batch_size, nodes, config) -> float:
  """XLA's count of the pivot sum's forward+backward FLOPs (all pivots in one
  chunk: XLA counts a loop body once, so chunking would undercount)."""
  f, args = _vjp_pass(
      functools.partial(triangular.triangular_attention_core, chunk_size=None),
      *[
          jnp.zeros(
              (batch_size, nodes, nodes, config.num_heads, config.head_dim)
          )
      ]
      * 4,
  )
  cost = f.lower(*args).compile().cost_analysis()
  cost = cost[0] if isinstance(cost, (list, tuple)) else cost
  return float(cost["flops"]) / 1e9


def time_passes(passes, rounds):
  """Seconds per call of each pass, rounds alternated (order reversed every
  other round)."""
  times = {name: [] for name in passes}
  names = list(passes)
  for r in range(rounds):
    for name in (names if r % 2 == 0 else names[::-1]):
      f, args = passes[name]
      started = time.perf_counter()
      jax.block_until_ready(f(*args))
      times[name].append(time.perf_counter() - started)
  return times


def run(batch_size: int, nodes: int, config: etm.ETConfig, rounds: int) -> dict:
  """Builds, times and summarises the passes (the JSON written by main)."""
  passes, gemm_flops = build_passes(batch_size, nodes, config)
  times = time_passes(passes, rounds)
  ms = {
      name: {"min": 1e3 * min(t), "median": 1e3 * float(np.median(t))}
      for name, t in times.items()
  }
  stack, free = ms["stack"]["min"], ms["stack_core_free"]["min"]
  return {
      "batch_size": batch_size,
      "nodes": nodes,
      "config": {
          "num_layers": config.num_layers,
          "num_heads": config.num_heads,
          "head_dim": config.head_dim,
          "tied": config.tied,
          "chunk_size": config.chunk_size,
          "ffn_chunk_size": config.ffn_chunk_size,
      },
      "rounds": rounds,
      "jax": jax.__version__,
      "device_kind": jax.devices()[0].device_kind,
      "timing": (
          "forward+backward (jax.vjp) per call; one process, passes "
          "alternated; min and median over rounds"
      ),
      "ms": ms,
      "core_share_of_stack": 1.0 - free / stack,
      "stack_core_free_over_stack": free / stack,
      "gemm_gflop_per_s": gemm_flops / 1e9 / (ms["gemm"]["min"] / 1e3),
      "core_gflop_per_layer": core_gflop(batch_size, nodes, config),
  }


def main(argv):
  del argv
  config = etm.ETConfig(num_heads=FLAGS.num_heads, head_dim=FLAGS.head_dim)
  result = run(FLAGS.batch_size, FLAGS.nodes, config, FLAGS.rounds)
  reporting.write_json(FLAGS.output, result)
  for name, m in result["ms"].items():
    print(f"{name:16s} {m['min']:8.1f} ms (median {m['median']:.1f})")
  print(
      f"core share of the stack {result['core_share_of_stack']:.1%}; "
      f"GEMM {result['gemm_gflop_per_s']:.0f} GFLOP/s"
  )


if __name__ == "__main__":
  _define_flags()
  app.run(main)
