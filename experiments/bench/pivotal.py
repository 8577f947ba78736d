r"""Pivotal attention, ours against the FloydNet authors' PyTorch code.

  python3 -m experiments.bench.pivotal --floyd_reference=/tmp/peers/floyd \
      --reference_python=/tmp/torchvenv/bin/python \
      --output=results/bench_pivotal.json

What is timed: one forward and backward pass of the functional form,
y = pivotal_attention(q_ik, k_ij, k_jk, v_ij, v_jk) and the gradients of
sum(y * dy) with respect to the five inputs (each B x H x N x N x D, the
authors' layout and argument order), at every N of `--sizes`. Entries:

  ours            `relational_jax.layers.pivotal.pivotal_attention` with
                  `chunk_size=--chunk_size` (pivot chunks, online softmax,
                  hand-written VJP); jax.vjp, jitted;
  ours_unchunked  the same with chunk_size=None (one chunk of all N pivots);
  materialising   `pivotal_attention_reference`: all B H N^3 scores at once,
                  plain JAX autodiff (the authors' form, in JAX);
  theirs          the authors' `pivotal_attention` (ocx-lab/FloydNet,
                  src/floydnet/functional.py: the N^3 scores materialised,
                  torch autograd), run by
                  `experiments/compare/refs/pivotal_floyd_torch.py` in
                  `--reference_python` (a venv with torch and numpy).

Same numbers: both sides draw the inputs and the cotangent dy from
numpy.random.default_rng(--seed) in the same order, and the outputs and
gradients are compared at every N (max abs difference in the JSON).

Same CPU: ours and theirs run in worker processes pinned to the same first
`--threads` CPUs (sched_setaffinity, which sizes XLA:CPU's intra-op thread
pool), with torch.set_num_threads(--threads) on their side and
OMP_WAIT_POLICY=--omp_wait_policy (PASSIVE by default: torch's spinning
OpenMP threads lose their cores to other processes on a shared machine,
which made their call up to 60x slower at small N). After one
untimed call per entry and size (compilation), the timed calls alternate
between the entries, `--iters` calls at a time, for `--rounds` rounds (the
order reversed every other round), so that load from other processes hits
every entry alike. Reported: each entry's median and minimum call time per
size, theirs / ours, and the load average before and after.

Profile (`--profile`, on by default; after the timed rounds, in the driver
process on the same CPUs): the executed XLA:CPU ops of `ours` and
`materialising` at every N, ms per call by coarse kind (matmul,
transpose/copy, reduce, dynamic slice/update, elementwise) and the top
instructions.

Memory (the same JSON):
  xla_memory   XLA's buffer assignment of each of our compiled calls
               (`jit(...).lower(...).compile().memory_analysis()`):
               arguments, outputs (y and the five gradients) and temp, the
               extra memory the call needs beyond its inputs and outputs;
               ours over materialising = the ratio of temp bytes; also
               for the forward pass alone, at the larger N of
               `--memory_sizes` and, for ours, at every chunk size of
               `--memory_chunk_sizes` (compiled only, not run);
  torch_rss    their call's peak resident set growth (VmHWM, reset through
               /proc/self/clear_refs just before the call, minus the RSS
               then) in a fresh process per size, after a warm-up call at
               N = 4; torch's CPU allocator keeps no peak counter, so this
               is an upper bound that includes the gradients and y it
               returns (`gradient_bytes`, `output_bytes`).

The authors' code is never vendored: without `--floyd_reference` (a
checkout of github.com/ocx-lab/FloydNet with src/floydnet/functional.py)
their entry and their memory are skipped with a message and the rest runs.
"""

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Dict, List, Optional

from absl import app
from absl import flags

from experiments.bench import worker
from experiments.compare import reference as reference_lib

REPOSITORY = "ocx-lab/FloydNet"
MARKER = os.path.join("src", "floydnet", "functional.py")
ROLES = ("q_ik", "k_ij", "k_jk", "v_ij", "v_jk", "dy")
OUR_ENTRIES = ("ours", "ours_unchunked", "materialising")
_REPO = os.path.dirname(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
)
_REF_SCRIPT = os.path.join(
    _REPO, "experiments", "compare", "refs", "pivotal_floyd_torch.py"
)

FLAGS = flags.FLAGS


# -- Our side. ----------------------------------------------------------------


def make_inputs(batch, heads, n, head_dim, seed):
  """The six B x H x N x N x D float32 arrays (q_ik, k_ij, k_jk, v_ij, v_jk,
  dy), drawn as the authors' side draws them."""
  import numpy as np  # pylint: disable=g-import-not-at-top

  rng = np.random.default_rng(seed)
  return [
      rng.standard_normal((batch, heads, n, n, head_dim), dtype=np.float32)
      for _ in ROLES
  ]


def our_call(entry: str, chunk_size: Optional[int], forward_only=False):
  """(q_ik, k_ij, k_jk, v_ij, v_jk, dy) -> (y, five gradients), jitted;
  with `forward_only`, -> y (dy unused)."""
  import jax  # pylint: disable=g-import-not-at-top
  from relational_jax.layers import pivotal  # pylint: disable=g-import-not-at-top

  if entry == "ours":
    f = lambda *x: pivotal.pivotal_attention(*x, chunk_size=chunk_size)
  elif entry == "ours_unchunked":
    f = lambda *x: pivotal.pivotal_attention(*x, chunk_size=None)
  elif entry == "materialising":
    f = pivotal.pivotal_attention_reference
  else:
    raise ValueError(f"unknown entry {entry!r}; valid: {OUR_ENTRIES}")

  def call(q_ik, k_ij, k_jk, v_ij, v_jk, dy):
    if forward_only:
      return f(q_ik, k_ij, k_jk, v_ij, v_jk)
    y, vjp = jax.vjp(f, q_ik, k_ij, k_jk, v_ij, v_jk)
    return y, vjp(dy)

  return jax.jit(call)


def xla_memory(
    entry, chunk_size, batch, heads, n, head_dim, forward_only=False
) -> Dict:
  """XLA's compiled memory analysis of one of our calls (compiled, not
  run)."""
  import jax  # pylint: disable=g-import-not-at-top
  import jax.numpy as jnp  # pylint: disable=g-import-not-at-top

  spec = jax.ShapeDtypeStruct((batch, heads, n, n, head_dim), jnp.float32)
  call = our_call(entry, chunk_size, forward_only)
  stats = call.lower(*[spec] * 6).compile().memory_analysis()
  return {
      "argument_bytes": int(stats.argument_size_in_bytes),
      "output_bytes": int(stats.output_size_in_bytes),
      "alias_bytes": int(stats.alias_size_in_bytes),
      "temp_bytes": int(stats.temp_size_in_bytes),
  }


class OurSide:
  """Our entries at every size: `run` times calls, `save` writes outputs."""

  def __init__(self, batch, heads, head_dim, chunk_size, seed):
    self.shape = (batch, heads, head_dim)
    self.chunk_size, self.seed = chunk_size, seed
    self.calls = {e: our_call(e, chunk_size) for e in OUR_ENTRIES}
    self.inputs = {}

  def _inputs(self, n):
    import jax  # pylint: disable=g-import-not-at-top

    if n not in self.inputs:
      b, h, d = self.shape
      self.inputs[n] = [
          jax.device_put(x) for x in make_inputs(b, h, n, d, self.seed)
      ]
    return self.inputs[n]

  def run(self, entry: str, n: int, iters: int) -> List[float]:
    import jax  # pylint: disable=g-import-not-at-top

    inputs, times = self._inputs(n), []
    for _ in range(iters):
      start = time.perf_counter()
      jax.block_until_ready(self.calls[entry](*inputs))
      times.append(time.perf_counter() - start)
    return times

  def outputs(self, entry: str, n: int) -> Dict:
    import numpy as np  # pylint: disable=g-import-not-at-top

    y, grads = self.calls[entry](*self._inputs(n))
    out = {"y": np.asarray(y)}
    out.update({r: np.asarray(g) for r, g in zip(ROLES, grads)})
    return out


def _serve_ours():
  """Our worker: READY, then `run ENTRY N ITERS` / `save ENTRY N PATH` /
  `quit` on stdin (the authors' worker speaks the same, without ENTRY)."""
  import jax  # pylint: disable=g-import-not-at-top
  import numpy as np  # pylint: disable=g-import-not-at-top

  side = OurSide(
      FLAGS.batch_size, FLAGS.heads, FLAGS.head_dim, _chunk(), FLAGS.seed
  )
  print(
      "READY "
      + json.dumps({
          "jax": jax.__version__,
          "cpus": len(os.sched_getaffinity(0)),
          "device": str(jax.devices()[0]),
          "xla_flags": os.environ.get("XLA_FLAGS", ""),
      }),
      flush=True,
  )
  for line in sys.stdin:
    cmd = line.split()
    if not cmd or cmd[0] == "quit":
      break
    entry, n = cmd[1], int(cmd[2])
    if cmd[0] == "run":
      print("TIMES " + json.dumps(side.run(entry, n, int(cmd[3]))), flush=True)
    elif cmd[0] == "save":
      np.savez(cmd[3], **side.outputs(entry, n))
      print(f"SAVED {cmd[3]}", flush=True)
    else:
      raise SystemExit(f"unknown command {line!r}")


# -- The driver. --------------------------------------------------------------


def _chunk() -> Optional[int]:
  return None if FLAGS.chunk_size <= 0 else FLAGS.chunk_size


def _summary(times):
  return {
      "median_s": statistics.median(times),
      "min_s": min(times),
      "max_s": max(times),
      "n": len(times),
      "times_s": times,
  }


def _max_abs_diff(path_a, path_b):
  import numpy as np  # pylint: disable=g-import-not-at-top

  a, b = np.load(path_a), np.load(path_b)
  return {k: float(np.max(np.abs(a[k] - b[k]))) for k in a.files}


def _torch_memory(reference, python, cpus, env, n) -> Dict:
  out = subprocess.run(
      [
          python,
          _REF_SCRIPT,
          f"--reference={reference}",
          "--mode=memory",
          f"--threads={FLAGS.threads}",
          f"--batch={FLAGS.batch_size}",
          f"--heads={FLAGS.heads}",
          f"--head_dim={FLAGS.head_dim}",
          f"--seed={FLAGS.seed}",
          f"--n={n}",
      ],
      check=True,
      capture_output=True,
      text=True,
      env=env,
      cwd=_REPO,
      preexec_fn=lambda: os.sched_setaffinity(0, cpus),
  ).stdout
  line = [l for l in out.splitlines() if l.startswith("MEMORY ")][-1]
  return json.loads(line[len("MEMORY ") :])


def _op_category(primitive: str, instruction: str) -> str:
  """A coarse kind of one executed XLA:CPU op: 'matmul' (dot_general),
  'transpose/copy' (layout changes), 'reduce', 'dynamic slice/update'
  (chunk slicing and accumulation into slices) or 'elementwise'."""
  name = instruction.split(" ")[0]
  if primitive == "dot_general" or name.startswith("dot"):
    return "matmul"
  if "transpose" in name or primitive in ("transpose", "copy"):
    return "transpose/copy"
  if primitive.startswith("reduce") or "reduce" in name:
    return "reduce"
  if "dynamic" in name or primitive.startswith("dynamic"):
    return "dynamic slice/update"
  return "elementwise"


def profile_ours(entry: str, n: int, iters: int = 3, top: int = 12) -> Dict:
  """Executed XLA:CPU ops of one of our calls (experiments.bench.
  xla_op_profile): ms per call by coarse kind and the `top` instructions."""
  import collections  # pylint: disable=g-import-not-at-top

  import jax  # pylint: disable=g-import-not-at-top

  from experiments.bench import xla_op_profile  # pylint: disable=g-import-not-at-top

  b, h, d = FLAGS.batch_size, FLAGS.heads, FLAGS.head_dim
  inputs = [jax.device_put(x) for x in make_inputs(b, h, n, d, FLAGS.seed)]
  call = our_call(entry, _chunk())
  hlo = call.lower(*inputs).compile().as_text()
  jax.block_until_ready(call(*inputs))

  def run():
    for _ in range(iters):
      jax.block_until_ready(call(*inputs))

  wall_s, ops = xla_op_profile.traced_ops(run, hlo, iters, instructions=True)
  kinds, instructions = collections.Counter(), collections.Counter()
  for op_name, ms, instruction in ops:
    primitive = op_name.split("/")[-1]
    kinds[_op_category(primitive, instruction)] += ms
    instructions[f"{instruction} ({primitive})"] += ms
  total = sum(kinds.values())
  return {
      "wall_ms_per_call": wall_s * 1e3,
      "op_ms_per_call": total,
      "ms_by_kind": dict(kinds.most_common()),
      "share_by_kind": {k: v / total for k, v in kinds.most_common()},
      "top_instructions_ms": dict(instructions.most_common(top)),
      "note": (
          "op durations on the two threads overlap: shares, not sums, are"
          " the result"
      ),
  }


def _our_memory(n, forward_only=False) -> Dict:
  b, h, d = FLAGS.batch_size, FLAGS.heads, FLAGS.head_dim
  per = {
      e: xla_memory(e, _chunk(), b, h, n, d, forward_only) for e in OUR_ENTRIES
  }
  base = per["materialising"]["temp_bytes"]
  for e in OUR_ENTRIES:
    per[e]["temp_over_materialising"] = per[e]["temp_bytes"] / base
  per["scores_bytes"] = 4 * b * h * n**3  # one B x H x N^3 fp32 tensor
  per["pair_tensor_bytes"] = 4 * b * h * n * n * d  # one input
  return per


def memory_report(sizes, reference, python, cpus, env, log=print) -> Dict:
  """XLA memory of our entries at every size (forward + backward, and
  forward only; `--memory_sizes` compiled only), of ours per chunk size at
  the largest timed N; their RSS growth when `reference` is given."""
  b, h, d = FLAGS.batch_size, FLAGS.heads, FLAGS.head_dim
  report = {"xla_memory": {}, "xla_memory_forward_only": {}, "torch_rss": {}}
  all_sizes = sorted(set(sizes) | {int(n) for n in FLAGS.memory_sizes})
  for n in all_sizes:
    report["xla_memory_forward_only"][str(n)] = _our_memory(n, True)
    per = _our_memory(n)
    report["xla_memory"][str(n)] = per
    log(
        f"[bench.pivotal] N={n} XLA temp MB: "
        + ", ".join(
            f"{e} {per[e]['temp_bytes'] / 1e6:.1f}" for e in OUR_ENTRIES
        )
    )
    if reference and n in sizes:
      report["torch_rss"][str(n)] = _torch_memory(
          reference, python, cpus, env, n
      )
      log(
          f"[bench.pivotal] N={n} theirs RSS growth "
          f"{report['torch_rss'][str(n)]['rss_growth_bytes'] / 1e6:.1f} MB"
      )
  n = max(sizes)
  sweep = {}
  base = report["xla_memory"][str(n)]["materialising"]["temp_bytes"]
  for c in FLAGS.memory_chunk_sizes:
    m = xla_memory("ours", int(c), b, h, n, d)
    m["temp_over_materialising"] = m["temp_bytes"] / base
    sweep[str(c)] = m
  report["xla_memory_ours_by_chunk_size"] = {"n": n, "chunk_sizes": sweep}
  return report


def run_benchmark(reference: Optional[str], log=print) -> Dict:
  sizes = [int(s) for s in FLAGS.sizes]
  available = sorted(os.sched_getaffinity(0))
  if not 1 <= FLAGS.threads <= len(available):
    raise ValueError(
        f"--threads={FLAGS.threads}: valid values are 1..{len(available)}"
        " (the CPUs this process may use)."
    )
  cpus = set(available[: FLAGS.threads])
  threads = str(FLAGS.threads)
  env = dict(os.environ, OMP_NUM_THREADS=threads, MKL_NUM_THREADS=threads)
  if FLAGS.omp_wait_policy:
    env["OMP_WAIT_POLICY"] = FLAGS.omp_wait_policy
  scratch = tempfile.mkdtemp(prefix="bench_pivotal_")
  common = [
      f"--batch_size={FLAGS.batch_size}",
      f"--heads={FLAGS.heads}",
      f"--head_dim={FLAGS.head_dim}",
      f"--seed={FLAGS.seed}",
  ]
  ours_cmd = [
      sys.executable,
      "-m",
      "experiments.bench.pivotal",
      "--worker=ours",
      f"--chunk_size={FLAGS.chunk_size}",
  ] + common
  load_before = os.getloadavg()
  log(f"[bench.pivotal] workers on cpus {sorted(cpus)}; logs in {scratch}")
  workers = {
      "ours": worker.Worker(
          "ours", ours_cmd, cpus, env, os.path.join(scratch, "ours.log")
      )
  }
  entries = list(OUR_ENTRIES)
  if reference:
    theirs_cmd = [
        FLAGS.reference_python,
        _REF_SCRIPT,
        f"--reference={reference}",
        "--mode=bench",
        f"--threads={FLAGS.threads}",
        f"--batch={FLAGS.batch_size}",
        f"--heads={FLAGS.heads}",
        f"--head_dim={FLAGS.head_dim}",
        f"--seed={FLAGS.seed}",
    ]
    workers["theirs"] = worker.Worker(
        "theirs", theirs_cmd, cpus, env, os.path.join(scratch, "theirs.log")
    )
    entries.append("theirs")

  def ask(entry, verb, n, arg, tag):
    raw = tag == "SAVED"  # The saved file's path, not JSON.
    if entry == "theirs":
      return workers["theirs"].ask(f"{verb} {n} {arg}", tag, raw)
    return workers["ours"].ask(f"{verb} {entry} {n} {arg}", tag, raw)

  times = {n: {e: [] for e in entries} for n in sizes}
  rounds = {n: {e: [] for e in entries} for n in sizes}
  diffs = {}
  try:
    for n in sizes:
      for e in entries:  # compilation / allocator warm-up, untimed
        ask(e, "run", n, 1, "TIMES")
      for r in range(FLAGS.rounds):
        order = entries if r % 2 == 0 else entries[::-1]
        for e in order:
          t = ask(e, "run", n, FLAGS.iters, "TIMES")
          times[n][e] += t
          rounds[n][e].append(statistics.median(t))
        log(
            f"[bench.pivotal] N={n} round {r}: "
            + ", ".join(f"{e} {rounds[n][e][-1]:.4f} s" for e in entries)
        )
      saved = {
          e: ask(e, "save", n, os.path.join(scratch, f"{e}_{n}.npz"), "SAVED")
          for e in entries
      }
      pairs = [("ours", "materialising"), ("ours_unchunked", "materialising")]
      if "theirs" in saved:
        pairs += [("ours", "theirs"), ("materialising", "theirs")]
      diffs[str(n)] = {
          f"{a}_vs_{b}": _max_abs_diff(saved[a], saved[b]) for a, b in pairs
      }
      for e in saved.values():
        os.remove(e)
  finally:
    for w in workers.values():
      w.close()
  load_after = os.getloadavg()
  profiles = {}
  if FLAGS.profile:
    for n in sizes:
      profiles[str(n)] = {
          e: profile_ours(e, n) for e in ("ours", "materialising")
      }
      log(
          f"[bench.pivotal] N={n} profile of ours, ms by kind: "
          + ", ".join(
              f"{k} {v:.1f}"
              for k, v in profiles[str(n)]["ours"]["ms_by_kind"].items()
          )
      )
  memory = memory_report(
      sizes, reference, FLAGS.reference_python, cpus, env, log
  )

  result = {
      "what": (
          "pivotal attention forward + backward (y and the gradients of"
          " sum(y * dy) for q_ik, k_ij, k_jk, v_ij, v_jk), fp32, CPU"
      ),
      "shape": {
          "B": FLAGS.batch_size,
          "H": FLAGS.heads,
          "D": FLAGS.head_dim,
          "N": sizes,
      },
      "chunk_size": _chunk(),
      "threads": FLAGS.threads,
      "omp_wait_policy": FLAGS.omp_wait_policy or None,
      "cpus": sorted(cpus),
      "rounds": FLAGS.rounds,
      "iters_per_round": FLAGS.iters,
      "seed": FLAGS.seed,
      "timing": (
          "worker processes pinned to the same CPUs; entries alternated per"
          " round (order reversed every other round); one untimed call per"
          " entry and size first"
      ),
      "workers": {k: w.info for k, w in workers.items()},
      "reference": (
          {
              "repository": REPOSITORY,
              "path": reference,
              "commit": (
                  reference_lib.commit(reference)
                  or FLAGS.floyd_reference_commit
              ),
          }
          if reference
          else None
      ),
      "load_average_before": load_before,
      "load_average_after": load_after,
      "sizes": {},
      "max_abs_diff": diffs,
  }
  for n in sizes:
    per = {e: _summary(times[n][e]) for e in entries}
    for e in entries:
      per[e]["round_medians_s"] = rounds[n][e]
    cell = {"entries": per}
    if "theirs" in per:
      cell["theirs_over_ours"] = {
          e: per["theirs"]["median_s"] / per[e]["median_s"] for e in OUR_ENTRIES
      }
    result["sizes"][str(n)] = cell
  result.update(memory)
  result["xla_op_profile"] = profiles
  return result


def main(argv):
  del argv
  if FLAGS.worker:
    if FLAGS.worker != "ours":
      raise app.UsageError(f"--worker={FLAGS.worker!r}: valid value 'ours'.")
    _serve_ours()
    return
  reference = None
  if FLAGS.floyd_reference:
    if not os.path.isfile(os.path.join(FLAGS.floyd_reference, MARKER)):
      raise app.UsageError(
          f"--floyd_reference={FLAGS.floyd_reference} has no {MARKER}: not a"
          f" checkout of github.com/{REPOSITORY}."
      )
    reference = os.path.abspath(FLAGS.floyd_reference)
  else:
    print(
        "Skipping the authors' entry: no --floyd_reference (a checkout of"
        f" github.com/{REPOSITORY}, e.g. `fetch github:{REPOSITORY}` and"
        " check out its snapshot into a scratch directory).",
        file=sys.stderr,
    )
  from relational_jax.training import reporting  # pylint: disable=g-import-not-at-top

  result = run_benchmark(reference)
  os.makedirs(os.path.dirname(os.path.abspath(FLAGS.output)), exist_ok=True)
  reporting.write_json(FLAGS.output, result)
  for n, cell in result["sizes"].items():
    line = ", ".join(
        f"{e} {r['median_s'] * 1e3:.1f} ms" for e, r in cell["entries"].items()
    )
    ratio = cell.get("theirs_over_ours", {}).get("ours")
    extra = f"; theirs / ours x{ratio:.2f}" if ratio else ""
    mem = result["xla_memory"][n]["ours"]["temp_over_materialising"]
    print(f"N={n}: {line}{extra}; XLA temp ours / materialising {mem:.3f}")
  print(f"-> {FLAGS.output}")


def define_flags():
  """The command-line flags (defined only when run as a script, so that
  importing this module beside other absl entry points does not clash)."""
  flags.DEFINE_string(
      "floyd_reference",
      None,
      f"Checkout of github.com/{REPOSITORY} (with {MARKER}); without it the"
      " authors' entry is skipped.",
  )
  flags.DEFINE_string(
      "floyd_reference_commit",
      None,
      "Their commit, recorded when the checkout is not a git work tree.",
  )
  flags.DEFINE_string(
      "reference_python",
      "/tmp/torchvenv/bin/python",
      "Python of the authors' environment (torch, numpy).",
  )
  flags.DEFINE_list("sizes", ["32", "64"], "Node counts N.")
  flags.DEFINE_integer("batch_size", 8, "B.")
  flags.DEFINE_integer("heads", 12, "H.")
  flags.DEFINE_integer("head_dim", 16, "D, the per-head width.")
  flags.DEFINE_integer(
      "chunk_size", 8, "Our pivots per chunk (<= 0: one chunk)."
  )
  flags.DEFINE_list(
      "memory_chunk_sizes",
      ["1", "2", "4", "8", "16", "32"],
      "Chunk sizes of the memory sweep at the largest N (compiled only).",
  )
  flags.DEFINE_integer("threads", 2, "CPUs (and torch threads) per side.")
  flags.DEFINE_string(
      "omp_wait_policy",
      "PASSIVE",
      "OMP_WAIT_POLICY of both workers ('' leaves it unset). torch's OpenMP"
      " threads spin at barriers by default; on a machine whose cores other"
      " processes also use that made their call up to 60x slower at small"
      " N, so PASSIVE is the default.",
  )
  flags.DEFINE_list(
      "memory_sizes",
      ["128"],
      "More node counts N for our XLA memory analysis only (compiled, not"
      " run).",
  )
  flags.DEFINE_integer("rounds", 5, "Alternating timed rounds.")
  flags.DEFINE_integer("iters", 3, "Timed calls per entry per round.")
  flags.DEFINE_integer("seed", 0, "Seed of the inputs.")
  flags.DEFINE_bool(
      "profile",
      True,
      "Also profile our chunked and materialising calls at every N (XLA:CPU"
      " op durations by kind, experiments.bench.xla_op_profile), after the"
      " timed rounds.",
  )
  flags.DEFINE_string("output", "results/bench_pivotal.json", "JSON output.")
  flags.DEFINE_string("worker", "", "Internal: 'ours' runs our worker.")


if __name__ == "__main__":
  define_flags()
  app.run(main)
