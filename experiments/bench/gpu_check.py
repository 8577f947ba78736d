r"""The prepared check for a lent GPU: tests, precision, kernels, speed.

  python3 -m experiments.bench.gpu_check --out=results/gpu     # a GPU, 8 min
  python3 -m experiments.bench.gpu_check --out=/tmp/gc --quick  # a CPU, ~2 min
  bash scripts/gpu_check.sh     # on the lent machine: carried wheels, then this
  bash scripts/gpu_check.sh --parts=tests,processors,main_job  # some parts

Parts, in this order, each with a time budget in seconds (its share of
--total_s, default 480, in `BUDGETS_S` proportions: a part given alone gets
more; a part starts no new size, entry or step once its budget is spent, so
a slow compile can overrun it, which the JSON records):

  tests              pytest of tests/layers, tests/models, tests/processors
                     and tests/fidelity (-m "not slow"; --quick: a handful of
                     tests) in a subprocess with
                     JAX_DEFAULT_MATMUL_PRECISION=highest; passed / failed
                     counts and the failed tests' names.
  precision          how far the default matmul precision lands from the
                     authors' goldens (tests/fidelity/goldens, read and run
                     by `experiments.compare.goldens`: relational,
                     triangular and pivotal attention, layers and blocks):
                     max abs and relative error per golden at 'default' and
                     at 'highest'; 'highest' must be within the goldens'
                     test tolerance.
  pivotal_torch      pivotal attention forward + backward, ours (chunked,
                     `experiments.bench.pivotal.OurSide`) against FloydNet's
                     own PyTorch function (`--floyd_checkout`, a checkout of
                     github.com/ocx-lab/FloydNet; loaded by
                     experiments/compare/refs/pivotal_floyd_torch.py) on the
                     same device, same inputs: outputs and gradients (ours at
                     'highest', torch without TF32), time, memory.
  triangular_pallas  the Pallas kernels of the triangular attention
                     (impl='pallas': the forward kernel, chunked backward;
                     impl='pallas_fused': kernels both ways; compiled for the
                     GPU; --quick on a CPU: interpret mode) against the XLA
                     chunked path: output and gradients on fresh random
                     inputs (relative error, 'highest'), then time and
                     memory of each, forward and forward + backward, at
                     growing N while it fits.
  pivotal_pallas     the same for the Pallas kernels of the pivotal
                     attention (`pivotal_attention_core`, impl='pallas' and
                     'pallas_fused'; FloydNet, arXiv 2601.19094) against its
                     chunked path.
  processors         CLRS training at n = 16 (batch 32) and a forward pass at
                     n = 64 of rt, mpnn-512, et and floyd on Bellman-Ford
                     (`experiments.bench.processors.bench_entry`;
                     --processors: some of them, in a chosen order).
  main_job           the README's main job config (`relational_jax.training.
                     clrs` defaults) at batch 4: seconds per training step,
                     sampling included, and the cost of 80,000 steps.

A part ends 'ok', 'mismatch' (an error over its tolerance, failed tests),
'error' (it raised; the other parts still run) or 'skipped' (with the reason:
no GPU, no torch, no FloydNet checkout). Everything goes to ONE JSON,
<--out>/gpu_check.json (device, versions, budgets, every figure, each part's
status and error); a table is printed last; the exit status is 1 if any part
ended 'mismatch' or 'error', else 0.
"""

import dataclasses
import functools
import importlib.metadata
import importlib.util
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from absl import app
from absl import flags
import jax
import numpy as np

from experiments.bench import pivotal as bench_pivotal
from experiments.compare import reference as reference_lib
from relational_jax.layers import pivotal
from relational_jax.layers import triangular
from relational_jax.training import reporting

_REPO = os.path.dirname(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
)
_FLOYD_WRAPPER = os.path.join(
    _REPO, "experiments", "compare", "refs", "pivotal_floyd_torch.py"
)
REPORT_NAME = "gpu_check.json"
FLAGS = flags.FLAGS

# Each part's share of --total_s (seconds, in proportion). The first H200
# run (results/gpu/gpu_check.json, shares of 480 s) found compilation
# dominant: 38 s for an RT training step, 27 s for each train length of the
# main job; these shares are sized from its times.
BUDGETS_S = {
    "tests": 100.0,
    "precision": 35.0,
    "pivotal_torch": 55.0,
    "triangular_pallas": 60.0,
    "pivotal_pallas": 25.0,
    "processors": 250.0,
    "main_job": 140.0,
}


def budgets(parts: Sequence[str], total_s: float) -> Dict[str, float]:
  """The chosen parts' budgets: `total_s` shared in BUDGETS_S proportions."""
  weight = sum(BUDGETS_S[p] for p in parts)
  return {p: total_s * BUDGETS_S[p] / weight for p in parts}


# Relative errors (max |a - b| / max |b|) allowed, both sides in fp32.
TOLERANCES = {
    "triangular_pallas": 1e-4,  # Pallas kernel against the XLA chunked path.
    "pivotal_pallas": 1e-4,  # the same, pivotal attention.
    "pivotal_torch": 1e-4,  # ours against FloydNet's torch function.
}
TEST_DIRS = (
    "tests/layers",
    "tests/models",
    "tests/processors",
    "tests/fidelity",
)
QUICK_TESTS = tuple(
    f"tests/{path}::{test}"
    for path, test in (
        ("layers/test_triangular.py", "test_chunked_equals_unchunked"),
        (
            "layers/test_pivotal.py",
            "test_chunked_equals_unchunked_values_and_grads",
        ),
        (
            "layers/test_relational.py",
            "test_relational_attention_matches_loop_reference",
        ),
        (
            "fidelity/test_peer_goldens.py",
            "test_ours_equals_the_authors_code[et_attention]",
        ),
    )
)


# experiments.bench.processors' entries the processors part can time.
PROCESSOR_ENTRIES = ("rt", "mpnn512", "et", "floyd")


@dataclasses.dataclass(frozen=True)
class Settings:
  """Sizes of every part (`settings()`: the full check or --quick)."""

  quick: bool = False
  floyd_checkout: Optional[str] = None
  seed: int = 0
  test_targets: Tuple[str, ...] = TEST_DIRS
  golden_cases: Tuple[str, ...] = (  # cheapest first
      "et_attention",
      "pivotal_fn",
      "rt_layer",
      "rt_layer_no_edge_update",
      "rt_stack",
      "et_layer",
      "pivotal_block_pre",
  )
  pivotal_BxHxD: Tuple[int, int, int] = (1, 12, 16)
  pivotal_sizes: Tuple[int, ...] = (64, 128, 256, 512)
  pivotal_chunk: int = 8
  triangular_BxHxK: Tuple[int, int, int] = (2, 12, 16)
  triangular_sizes: Tuple[int, ...] = (64, 128, 256, 512, 1024)
  triangular_chunk: int = 8
  pallas_block: int = 16
  iters: int = 5
  processor_entries: Tuple[str, ...] = PROCESSOR_ENTRIES
  processor_sizes: Tuple[Tuple[str, int], ...] = (
      ("batch_size", 32),
      ("train_length", 16),
      ("eval_length", 64),
      ("train_iters", 10),
      ("eval_iters", 3),
  )
  main_job_overrides: Tuple[Tuple[str, Any], ...] = (("train.batch_size", 4),)
  main_job_steps: int = 50


def with_processors(s: Settings, names: Sequence[str]) -> Settings:
  """`s` timing the processors `names` in that order (none: as `s` has)."""
  unknown = [n for n in names if n not in PROCESSOR_ENTRIES]
  if unknown:
    raise app.UsageError(
        f"--processors: unknown {unknown}; valid: {list(PROCESSOR_ENTRIES)}"
    )
  if not names:
    return s
  return dataclasses.replace(s, processor_entries=tuple(names))


def settings(quick: bool, floyd_checkout=None, seed=0) -> Settings:
  full = Settings(floyd_checkout=floyd_checkout, seed=seed)
  if not quick:
    return full
  return dataclasses.replace(
      full,
      quick=True,
      test_targets=QUICK_TESTS,
      golden_cases=("pivotal_fn",),
      pivotal_BxHxD=(1, 2, 4),
      pivotal_sizes=(5, 8),
      pivotal_chunk=2,
      triangular_BxHxK=(1, 2, 4),
      triangular_sizes=(8,),
      triangular_chunk=2,
      pallas_block=4,
      iters=2,
      processor_entries=("mpnn512",),
      processor_sizes=(
          ("batch_size", 2),
          ("train_length", 4),
          ("eval_length", 5),
          ("train_iters", 1),
          ("eval_iters", 1),
      ),
      main_job_overrides=(
          ("train.batch_size", 2),
          ("protocol.train_lengths", (4,)),
          ("train.eval_batch_size", 2),
          ("protocol.max_eval_samples", 2),
          ("rt.num_layers", 1),
      ),
      main_job_steps=2,
  )


class Skip(Exception):
  """A part that cannot run here; the message is the reason recorded."""


class Budget:
  """A part's time budget: `left()` seconds."""

  def __init__(self, seconds: float):
    self.seconds, self._start = seconds, time.monotonic()

  def left(self) -> float:
    return self.seconds - (time.monotonic() - self._start)


# -- Figures and tolerances. ---------------------------------------------------


def errors(got, want) -> Dict[str, float]:
  """max |got - want| ('max_abs') and that over max |want| ('rel'), fp64."""
  got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
  if got.shape != want.shape:
    raise ValueError(f"shapes differ: {got.shape} against {want.shape}")
  max_abs = float(np.max(np.abs(got - want)))
  scale = float(np.max(np.abs(want)))
  return {"max_abs": max_abs, "rel": max_abs / scale if scale > 0 else max_abs}


def compare(got: Dict, want: Dict) -> Dict[str, Dict[str, float]]:
  """`errors` of every output of `want` (the same names in `got`)."""
  missing = sorted(set(want) - set(got))
  if missing:
    raise ValueError(f"outputs missing: {missing}")
  return {name: errors(got[name], want[name]) for name in sorted(want)}


def worst(per_output: Dict[str, Dict[str, float]], key="rel") -> Dict:
  """The output with the largest `key` error: {'output', 'max_abs', 'rel'}."""
  name = max(per_output, key=lambda n: per_output[n][key])
  return {"output": name, **per_output[name]}


def over_tolerance(
    per_output: Dict[str, Dict[str, float]],
    tolerance: float,
    what: str,
    key: str = "rel",
) -> List[str]:
  """One message per output whose `key` error is not within `tolerance`
  (NaN is not)."""
  return [
      f"{what} {name}: {key} error {e[key]:.3g} > {tolerance:.3g}"
      for name, e in per_output.items()
      if not e[key] <= tolerance
  ]


def exit_status(parts: Dict[str, Dict]) -> int:
  """1 if any part ended 'mismatch' or 'error', else 0."""
  bad = [p for p in parts.values() if p["status"] in ("mismatch", "error")]
  return 1 if bad else 0


def format_table(parts: Dict[str, Dict]) -> str:
  lines = [f"{'part':18s} {'status':9s} {'s / budget':>11s}  summary"]
  for name, p in parts.items():
    seconds = f"{p['wall_s']:.0f} / {p['budget_s']:.0f}"
    summary = p.get("summary") or p.get("reason") or p.get("error") or ""
    if p.get("mismatches"):
      first = p["mismatches"][0]
      summary = f"{len(p['mismatches'])} over: {first}; {summary}".strip("; ")
    lines.append(f"{name:18s} {p['status']:9s} {seconds:>11s}  {summary}")
  return "\n".join(lines)


def _print(message: str) -> None:
  print(message, flush=True)


def run_parts(
    parts: Sequence[Tuple[str, Callable, float]],
    s: Settings,
    log=_print,
    after_part: Optional[Callable[[Dict[str, Dict]], None]] = None,
) -> Dict[str, Dict]:
  """Runs each (name, function, budget_s); function(s, Budget) returns its
  figures (with 'mismatches', a list of messages, when any) or raises
  `Skip`. A part that raises anything else is recorded as 'error'.
  `after_part(report so far)` runs after each part (main writes the JSON
  then, so a run stopped from outside keeps the parts it finished)."""
  report = {}
  for name, part, budget_s in parts:
    log(f"[gpu_check] {name} (budget {budget_s:.0f} s)")
    start = time.monotonic()
    try:
      figures = part(s, Budget(budget_s))
      entry = {"status": "mismatch" if figures.get("mismatches") else "ok"}
      entry.update(figures)
    except Skip as e:
      entry = {"status": "skipped", "reason": str(e)}
    except Exception as e:  # pylint: disable=broad-except
      entry = {
          "status": "error",
          "error": f"{type(e).__name__}: {e}"[:500],
          "traceback": traceback.format_exc()[-4000:],
      }
    wall_s = time.monotonic() - start
    entry.update(
        wall_s=wall_s, budget_s=budget_s, over_budget=wall_s > budget_s
    )
    report[name] = entry
    log(f"[gpu_check] {name}: {entry['status']} in {wall_s:.1f} s")
    if after_part is not None:
      after_part(report)
  return report


def finish(report: Dict, out_dir: str, log=_print) -> int:
  """Writes <out_dir>/gpu_check.json, prints the table; the exit status."""
  report["exit_status"] = exit_status(report["parts"])
  path = os.path.join(out_dir, REPORT_NAME)
  reporting.write_json(path, report)
  log(format_table(report["parts"]))
  log(f"exit status {report['exit_status']} -> {path}")
  return report["exit_status"]


# -- Device helpers. -----------------------------------------------------------


def _on_gpu() -> bool:
  return jax.default_backend() == "gpu"


def _memory_stats() -> Dict:
  device = jax.devices()[0]
  stats = device.memory_stats() if hasattr(device, "memory_stats") else None
  return stats or {}  # None on CPU


def device_info() -> Dict:
  device = jax.devices()[0]
  return {
      "backend": jax.default_backend(),
      "device": str(device),
      "device_kind": device.device_kind,
      "device_count": jax.device_count(),
      "bytes_limit": _memory_stats().get("bytes_limit"),
      "host_cpus": os.cpu_count(),
      "machine": platform.machine(),
      "python": platform.python_version(),
  }


VERSIONED = (
    "jax",
    "jaxlib",
    "jax-cuda13-plugin",
    "jax-cuda12-plugin",
    "flax",
    "optax",
    "chex",
    "orbax-checkpoint",
    "numpy",
    "dm-clrs",
    "dm-haiku",
    "ml-collections",
    "torch",
    "triton",
    "pytest",
)


def versions() -> Dict[str, Optional[str]]:
  found = {}
  for name in VERSIONED:
    try:
      found[name] = importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
      found[name] = None
  return found


def _timed(fn: Callable, iters: int, sync: Callable) -> Dict[str, float]:
  """Median and minimum seconds of `iters` calls after one untimed call."""
  sync(fn())
  times = []
  for _ in range(iters):
    start = time.perf_counter()
    sync(fn())
    times.append(time.perf_counter() - start)
  return {"median_s": statistics.median(times), "min_s": min(times)}


def _compiled_bytes(fn, args) -> Dict[str, int]:
  """XLA's buffer assignment of the jitted `fn` at `args` (compiled, not run).
  (experiments.bench.triangular's own reader sits behind absl flags that
  clash with experiments.bench.processors', so it is not imported here.)"""
  stats = fn.lower(*args).compile().memory_analysis()
  if stats is None:
    return {}
  return {
      "argument_bytes": int(stats.argument_size_in_bytes),
      "output_bytes": int(stats.output_size_in_bytes),
      "temp_bytes": int(stats.temp_size_in_bytes),
  }


def _stop_before(n, budget, last, needed_bytes, free_bytes) -> Optional[str]:
  """Why not to run size `n`, or None. `last`: (wall, run) seconds of the
  size before (half or less): its compiles are taken to cost the same again
  and its runs 8 times as much (cubic cost); past the budget, or needing
  more than 80% of the device's free bytes, the size is not run."""
  if last is not None:
    wall_s, run_s = last
    predicted_s = wall_s - run_s + 8 * run_s
    if predicted_s > budget.left():
      return (
          f"N={n} not run: predicted {predicted_s:.0f} s, {budget.left():.0f}"
          " s of the budget left"
      )
  if free_bytes and needed_bytes > 0.8 * free_bytes:
    return (
        f"N={n} not run: needs ~{needed_bytes / 2**30:.1f} GiB, the device"
        f" has {free_bytes / 2**30:.1f} GiB free"
    )
  return None


def _grow(
    all_sizes,
    one_size: Callable,
    budget,
    *,
    bytes_of: Callable,
    bytes_key: str,
    needed_multiple: int,
    free_bytes: Callable,
    after_each: Optional[Callable] = None,
):
  """`one_size(n) -> (cell, run seconds)` at each N of `all_sizes` in turn
  while `_stop_before` allows (the size needs `needed_multiple` arrays of
  `bytes_of(n)` bytes, recorded in the cell under `bytes_key`); a failure
  after the first size ends the sweep. `after_each()` runs after every size.
  Returns (sizes: {str(N): cell}, the cells' mismatches, why it stopped)."""
  sizes, mismatches, last, stopped = {}, [], None, None
  for n in all_sizes:
    array_bytes = bytes_of(n)
    stopped = _stop_before(
        n, budget, last, needed_multiple * array_bytes, free_bytes()
    )
    if stopped:
      break
    start = time.perf_counter()
    try:
      cell, runs = one_size(n)
    except Exception as e:  # pylint: disable=broad-except
      if not sizes:
        raise
      stopped = f"N={n}: {type(e).__name__}: {str(e)[:300]}"
      break
    finally:
      if after_each is not None:
        after_each()
    cell[bytes_key] = array_bytes
    mismatches += cell.pop("mismatches")
    sizes[str(n)] = cell
    last = (time.perf_counter() - start, runs)
  return sizes, mismatches, stopped


def _jax_free_bytes() -> Optional[int]:
  stats = _memory_stats()
  if "bytes_limit" not in stats:
    return None
  return stats["bytes_limit"] - stats.get("bytes_in_use", 0)


# -- The parts. ----------------------------------------------------------------


def part_tests(s: Settings, budget: Budget) -> Dict:
  """pytest in a subprocess at JAX_DEFAULT_MATMUL_PRECISION=highest."""
  if importlib.util.find_spec("pytest") is None:
    raise Skip("pytest is not installed")
  on_gpu = _on_gpu()
  workers = 0
  if on_gpu and importlib.util.find_spec("xdist"):
    workers = max(1, min(8, (os.cpu_count() or 2) // 2))  # 84 s on an H200
  cmd = [sys.executable, "-m", "pytest", "-q", "-rfE", "-p", "no:cacheprovider"]
  cmd += ["-m", "not slow"] + (["-n", str(workers)] if workers else [])
  cmd += list(s.test_targets)
  env = dict(
      os.environ,
      JAX_DEFAULT_MATMUL_PRECISION="highest",
      XLA_PYTHON_CLIENT_PREALLOCATE="false",
      # tests/conftest.py picks the CPU unless JAX_PLATFORMS is set; empty
      # lets JAX take the GPU.
      JAX_PLATFORMS="" if on_gpu else "cpu",
  )
  timeout = max(budget.left(), 10.0)
  try:
    done = subprocess.run(
        cmd,
        cwd=_REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
  except subprocess.TimeoutExpired as e:
    tail = e.stdout or b""  # What pytest printed before it was stopped.
    tail = tail.decode(errors="replace") if isinstance(tail, bytes) else tail
    tail = tail[-500:]
    raise RuntimeError(
        f"pytest did not finish in {timeout:.0f} s; last output: {tail}"
    ) from None
  output = done.stdout + done.stderr
  counts = pytest_counts(output)
  failed = [
      line.split(" ", 1)[1]
      for line in output.splitlines()
      if line.startswith(("FAILED ", "ERROR "))
  ]
  figures = {
      "command": " ".join(cmd),
      "returncode": done.returncode,
      "workers": workers,
      "counts": counts,
      "failed_tests": failed[:100],
      "summary": (
          ", ".join(f"{v} {k}" for k, v in counts.items())
          or f"no summary line (rc {done.returncode})"
      ),
  }
  bad = counts.get("failed", 0) + counts.get("errors", 0)
  if bad or done.returncode != 0 or not counts.get("passed"):
    figures["mismatches"] = [
        f"pytest: {figures['summary']}, returncode {done.returncode}"
    ]
    figures["output_tail"] = output[-6000:]
  return figures


def pytest_counts(output: str) -> Dict[str, int]:
  """{'passed': 221, 'failed': 2, ...} from pytest's closing line."""
  words = "passed|failed|errors?|skipped|deselected|xfailed|xpassed|warnings?"
  for line in reversed(output.splitlines()):
    found = re.findall(rf"(\d+) ({words})\b", line)
    if found and re.search(r" in [\d.]+s", line):
      counts = {}
      for number, word in found:
        word = {"error": "errors", "warning": "warnings"}.get(word, word)
        counts[word] = int(number)
      return counts
  return {}


def part_precision(s: Settings, budget: Budget) -> Dict:
  """Our layers on the authors' goldens at 'default' and 'highest'."""
  from experiments.compare import goldens  # pylint: disable=g-import-not-at-top

  cases, mismatches = {}, []
  for case in s.golden_cases:
    if budget.left() <= 0:
      cases[case] = {"not_run": "budget spent"}
      continue
    meta, inputs, params, theirs = goldens.load(case)
    per = {}
    for precision in ("default", "highest"):
      with jax.default_matmul_precision(precision):
        ours = goldens.RUNNERS[case](meta, inputs, params)
      per[precision] = compare(ours, theirs)
    cases[case] = {p: {"worst": worst(e), "outputs": e} for p, e in per.items()}
    mismatches += over_tolerance(
        per["highest"], goldens.TOLERANCE, f"{case} at 'highest'", "max_abs"
    )
  ran = {c: v for c, v in cases.items() if "default" in v}
  top = max(ran, key=lambda c: ran[c]["default"]["worst"]["rel"])
  return {
      "what": (
          "max abs and relative error (max |ours - theirs| / max |theirs|) of"
          " every output of each golden and the worst (relative), matmuls at"
          " each precision"
      ),
      "golden_tolerance_max_abs": goldens.TOLERANCE,
      "cases": cases,
      "mismatches": mismatches,
      "summary": (
          f"default: worst rel {ran[top]['default']['worst']['rel']:.1e}"
          f" ({top}); highest: worst rel"
          f" {max(v['highest']['worst']['rel'] for v in ran.values()):.1e}"
      ),
  }


def _load_file(name: str, path: str):
  spec = importlib.util.spec_from_file_location(name, path)
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module


def _checkout_commit(checkout: str) -> Optional[str]:
  """The commit of a checkout: its COMMIT file (a copied source tree, made
  by scripts/build_gpu_wheels.sh) or git's."""
  marker = os.path.join(checkout, "COMMIT")
  if os.path.isfile(marker):
    with open(marker) as f:
      return f.read().strip()
  return reference_lib.commit(checkout)


def part_pivotal_torch(s: Settings, budget: Budget) -> Dict:
  """Ours (chunked) against FloydNet's pivotal_attention, same device."""
  checkout = s.floyd_checkout
  where = f"github.com/{bench_pivotal.REPOSITORY}"
  if not checkout:
    raise Skip(f"no --floyd_checkout (a checkout of {where})")
  if not os.path.isfile(os.path.join(checkout, bench_pivotal.MARKER)):
    raise Skip(f"{checkout} has no {bench_pivotal.MARKER} (not {where})")
  if importlib.util.find_spec("torch") is None:
    raise Skip("torch is not installed")
  import torch  # pylint: disable=g-import-not-at-top

  on_gpu = _on_gpu()
  if on_gpu and not torch.cuda.is_available():
    raise Skip("torch sees no CUDA device (ours runs on the GPU)")
  device = "cuda" if on_gpu else "cpu"
  torch.backends.cuda.matmul.allow_tf32 = False  # fp32, as ours at 'highest'
  wrapper = _load_file("pivotal_floyd_torch", _FLOYD_WRAPPER)
  functional = wrapper.load_functional(checkout)
  b, h, d = s.pivotal_BxHxD
  ours = bench_pivotal.OurSide(b, h, d, s.pivotal_chunk, s.seed)

  def torch_sync(_):
    if on_gpu:
      torch.cuda.synchronize()

  def one_size(n):
    arrays = bench_pivotal.make_inputs(b, h, n, d, s.seed)
    leaves = [
        torch.from_numpy(a).to(device).requires_grad_(True) for a in arrays[:5]
    ]
    call = functools.partial(
        wrapper.call, functional, leaves, torch.from_numpy(arrays[5]).to(device)
    )
    cell = {}
    if on_gpu:
      torch.cuda.empty_cache()
      torch.cuda.reset_peak_memory_stats()
      base = torch.cuda.memory_allocated()
    theirs = {"y": call().detach().cpu().numpy()}
    theirs.update(
        {r: x.grad.cpu().numpy() for r, x in zip(bench_pivotal.ROLES, leaves)}
    )
    if on_gpu:
      cell["theirs_peak_bytes"] = int(torch.cuda.max_memory_allocated() - base)
    cell["theirs"] = _timed(call, s.iters, torch_sync)
    for precision in ("highest", "default"):
      with jax.default_matmul_precision(precision):
        per = compare(ours.outputs("ours", n), theirs)
        cell[f"ours_{precision}"] = _summary(
            ours.run("ours", n, s.iters + 1)[1:]
        )
      cell[f"ours_{precision}_vs_theirs"] = worst(per)
      cell[f"theirs_over_ours_{precision}"] = (
          cell["theirs"]["median_s"] / cell[f"ours_{precision}"]["median_s"]
      )
      if precision == "highest":
        cell["mismatches"] = over_tolerance(
            per, TOLERANCES["pivotal_torch"], f"N={n} ours vs theirs"
        )
    cell["ours_xla_memory"] = bench_pivotal.xla_memory(
        "ours", s.pivotal_chunk, b, h, n, d
    )
    cell["ours_device_peak_bytes_so_far"] = _memory_stats().get(
        "peak_bytes_in_use"
    )
    runs = (s.iters + 3) * sum(
        cell[e]["median_s"] for e in ("theirs", "ours_highest", "ours_default")
    )
    return cell, runs

  sizes, mismatches, stopped = _grow(
      s.pivotal_sizes,
      one_size,
      budget,
      bytes_of=lambda n: 4 * b * h * n**3,  # their B x H x N^3 scores, fp32
      bytes_key="scores_bytes",
      needed_multiple=6,
      free_bytes=lambda: torch.cuda.mem_get_info()[0] if on_gpu else None,
      after_each=torch.cuda.empty_cache if on_gpu else None,
  )
  largest = sizes[max(sizes, key=int)] if sizes else None
  return {
      "what": (
          "pivotal attention forward + backward (y and the gradients of"
          " sum(y * dy)), B x H x N x N x D inputs of"
          " experiments.bench.pivotal.make_inputs; ours chunked, theirs"
          " materialising; times after one untimed call"
      ),
      "device": device,
      "shape_BxHxD": [b, h, d],
      "chunk_size": s.pivotal_chunk,
      "torch": torch.__version__,
      "torch_allow_tf32": torch.backends.cuda.matmul.allow_tf32,
      "reference": {
          "repository": where,
          "path": os.path.abspath(checkout),
          "commit": _checkout_commit(checkout),
      },
      "sizes": sizes,
      "stopped": stopped,
      "mismatches": mismatches,
      "summary": (
          f"N={max(sizes, key=int)}: theirs / ours x"
          f"{largest['theirs_over_ours_default']:.2f} (default),"
          f" rel err {largest['ours_highest_vs_theirs']['rel']:.1e}"
          if sizes
          else "no size ran"
      ),
  }


def _summary(times: List[float]) -> Dict[str, float]:
  return {"median_s": statistics.median(times), "min_s": min(times)}


def _triangular_calls(impl: str, s: Settings, interpret: bool):
  """(jit forward, jit forward + backward) of one core implementation."""
  if impl in ("pallas", "pallas_fused"):
    attend = functools.partial(
        triangular.triangular_attention_pallas,
        block_size=s.pallas_block,
        interpret=interpret,
        chunk_size=s.triangular_chunk,
        backward="chunked" if impl == "pallas" else "pallas",
    )
  else:
    attend = functools.partial(
        triangular.triangular_attention_core, chunk_size=s.triangular_chunk
    )

  def forward(q, k, v1, v2, do):
    del do
    return attend(q, k, v1, v2)

  def forward_backward(q, k, v1, v2, do):
    o, vjp = jax.vjp(attend, q, k, v1, v2)
    return o, vjp(do)

  return {"forward": forward, "forward_backward": forward_backward}


def _pivotal_calls(impl: str, s: Settings, interpret: bool):
  """(jit forward, jit forward + backward) of one pivotal implementation."""
  options = dict(chunk_size=s.pivotal_chunk)
  if impl != "chunked":
    options.update(impl=impl, block_size=s.pallas_block)
    options.update(interpret=interpret)
  attend = functools.partial(pivotal.pivotal_attention_core, **options)

  def forward(q, k_il, k_lj, v_il, v_lj, dy):
    del dy
    return attend(q, k_il, k_lj, v_il, v_lj)

  def forward_backward(q, k_il, k_lj, v_il, v_lj, dy):
    y, vjp = jax.vjp(attend, q, k_il, k_lj, v_il, v_lj)
    return y, vjp(dy)

  return {"forward": forward, "forward_backward": forward_backward}


def _outputs(fb, args, names) -> Dict:
  o, grads = fb(*args)
  out = {names[0]: np.asarray(o)}
  out.update({n: np.asarray(g) for n, g in zip(names[1:], grads)})
  return out


def _pallas_interpret(s: Settings) -> bool:
  """Interpret mode off a GPU (--quick only; Skip otherwise)."""
  on_gpu = _on_gpu()
  if not on_gpu and not s.quick:
    raise Skip(
        "no GPU: the Pallas kernel compiles for real only on a GPU (--quick"
        " runs it in interpret mode)"
    )
  return not on_gpu


def part_triangular_pallas(s: Settings, budget: Budget) -> Dict:
  """Pallas kernel against the XLA chunked path: values, gradients, speed."""
  interpret = _pallas_interpret(s)
  calls = {
      impl: {
          kind: jax.jit(f)
          for kind, f in _triangular_calls(impl, s, interpret).items()
      }
      for impl in ("pallas", "pallas_fused", "xla_chunked")
  }
  b, h, k = s.triangular_BxHxK
  # q_BxNxLxHxK, k_BxLxNxHxK, v1_BxNxLxHxK, v2_BxLxNxHxK, do_BxNxNxHxK.
  sizes, mismatches, stopped = _pallas_sizes(
      s,
      budget,
      calls,
      lambda n: [(b, n, n, h, k)] * 5,
      ("o", "dq", "dk", "dv1", "dv2"),
      "triangular_pallas",
      s.triangular_sizes,
      lambda n: 4 * b * n * n * h * k,
  )
  return _pallas_report(
      sizes,
      mismatches,
      stopped,
      interpret,
      what=(
          "triangular_attention_pallas with backward='chunked' ('pallas':"
          " Pallas forward, chunked backward) and backward='pallas'"
          " ('pallas_fused': Pallas kernels both ways) against"
          " triangular_attention_core (XLA, chunked), chunk_size pivots per"
          " chunk of the chunked backward; errors at 'highest' and"
          " 'default'; times (after one untimed call) and XLA buffer"
          " assignment at 'default'"
      ),
      shape_BxHxK=[b, h, k],
      chunk_size=s.triangular_chunk,
      block_size=s.pallas_block,
  )


def part_pivotal_pallas(s: Settings, budget: Budget) -> Dict:
  """The pivotal attention's Pallas kernel against its chunked path."""
  interpret = _pallas_interpret(s)
  calls = {
      impl: {
          kind: jax.jit(f)
          for kind, f in _pivotal_calls(impl, s, interpret).items()
      }
      for impl in ("pallas", "pallas_fused", "chunked")
  }
  calls["xla_chunked"] = calls.pop("chunked")
  b, h, k = s.pivotal_BxHxD
  # q_BxHxIxJxK, k_BxHxIxLxK, k_BxHxLxJxK, v_BxHxIxLxK, v_BxHxLxJxK, dy.
  sizes, mismatches, stopped = _pallas_sizes(
      s,
      budget,
      calls,
      lambda n: [(b, h, n, n, k)] * 6,
      ("y", "dq", "dk_il", "dk_lj", "dv_il", "dv_lj"),
      "pivotal_pallas",
      s.pivotal_sizes,
      lambda n: 4 * b * n * n * h * k,
  )
  return _pallas_report(
      sizes,
      mismatches,
      stopped,
      interpret,
      what=(
          "pivotal_attention_core impl='pallas' (Pallas forward, chunked"
          " backward) and impl='pallas_fused' (Pallas forward and backward)"
          " against impl='chunked' (XLA), chunk_size pivots per chunk of"
          " the chunked backward; errors at 'highest' and 'default'; times"
          " (after one untimed call) and XLA buffer assignment at 'default'"
      ),
      shape_BxHxK=[b, h, k],
      chunk_size=s.pivotal_chunk,
      block_size=s.pallas_block,
  )


def _pallas_sizes(
    s, budget, calls, arg_shapes, names, tolerance_key, all_sizes, pair_bytes_of
):
  """Values, gradients, times and memory of `calls` (Pallas variants such
  as 'pallas' and 'xla_chunked', each {'forward', 'forward_backward'}) at
  growing N, while the budget and the memory allow: (sizes, mismatches,
  stopped). Each variant is compared with 'xla_chunked'."""
  rng = np.random.default_rng(s.seed + 1)
  variants = [name for name in calls if name != "xla_chunked"]

  def one_size(n):
    args = [
        jax.device_put(rng.standard_normal(shape, dtype=np.float32))
        for shape in arg_shapes(n)
    ]
    cell = {"mismatches": []}
    for precision in ("highest", "default"):
      with jax.default_matmul_precision(precision):
        want = _outputs(calls["xla_chunked"]["forward_backward"], args, names)
        for v in variants:
          start = time.perf_counter()
          got = _outputs(calls[v]["forward_backward"], args, names)
          cell[f"{v}_first_call_s_{precision}"] = time.perf_counter() - start
          cell[f"{v}_vs_xla_{precision}"] = per = compare(got, want)
          if precision == "highest":
            cell["mismatches"] += over_tolerance(
                per, TOLERANCES[tolerance_key], f"N={n} {v} vs xla"
            )
    for impl, kinds in calls.items():
      for kind, fn in kinds.items():
        with jax.default_matmul_precision("default"):
          cell[f"{impl}_{kind}"] = {
              **_timed(
                  functools.partial(fn, *args), s.iters, jax.block_until_ready
              ),
              **_compiled_bytes(fn, args),
              "device_peak_bytes_so_far": (
                  _memory_stats().get("peak_bytes_in_use")
              ),
          }
    for v in variants:
      for kind in ("forward", "forward_backward"):
        cell[f"xla_over_{v}_{kind}"] = (
            cell[f"xla_chunked_{kind}"]["median_s"]
            / cell[f"{v}_{kind}"]["median_s"]
        )
    runs = (s.iters + 3) * sum(
        cell[f"{i}_{k}"]["median_s"] for i in calls for k in calls[i]
    )
    return cell, runs

  return _grow(
      all_sizes,
      one_size,
      budget,
      bytes_of=pair_bytes_of,  # one B x N x N x H x K fp32 array
      bytes_key="pair_array_bytes",
      needed_multiple=14,
      free_bytes=_jax_free_bytes,
  )


def _pallas_report(sizes, mismatches, stopped, interpret, *, what, **shape):
  """A Pallas part's figures (`_pallas_sizes`'s, a summary)."""
  n = max(sizes, key=int)
  rel = max(
      e["rel"]
      for c in sizes.values()
      for key, errors_of in c.items()
      if key.endswith("_vs_xla_highest")
      for e in errors_of.values()
  )
  fused = sizes[n].get("pallas_fused_forward_backward")
  return {
      "what": what,
      "interpret": interpret,
      **shape,
      "sizes": sizes,
      "stopped": stopped,
      "mismatches": mismatches,
      "summary": (
          f"worst rel err {rel:.1e}; N={n}: fwd+bwd pallas"
          f" {sizes[n]['pallas_forward_backward']['median_s'] * 1e3:.1f} ms,"
          " xla"
          f" {sizes[n]['xla_chunked_forward_backward']['median_s'] * 1e3:.1f} ms"
          + (f", fused {fused['median_s'] * 1e3:.1f} ms" if fused else "")
          + (" (interpret)" if interpret else "")
      ),
  }


def part_processors(s: Settings, budget: Budget) -> Dict:
  """experiments.bench.processors' entries, through its own flags."""
  from experiments.bench import processors as bench_processors  # pylint: disable=g-import-not-at-top

  values = dict(s.processor_sizes, algorithm="bellman_ford")
  for name, value in values.items():  # bench_entry reads these flags
    setattr(FLAGS, name, value)
  entries, not_run, last_s = {}, [], 0.0
  for name in s.processor_entries:
    if entries and last_s > budget.left():
      not_run.append(name)
      continue
    start = time.perf_counter()
    entries[name] = bench_processors.bench_entry(
        name, bench_processors.ENTRIES[name]
    )
    last_s = time.perf_counter() - start
    entries[name]["wall_s"] = last_s
  figures = {"settings": values, "entries": entries, "not_run": not_run}
  if "mpnn512" in entries:
    base = entries["mpnn512"]
    figures["ratios_vs_mpnn512"] = {
        name: {
            "train": r["train_examples_per_s"] / base["train_examples_per_s"],
            "eval": r["eval_examples_per_s"] / base["eval_examples_per_s"],
        }
        for name, r in entries.items()
    }
  figures["summary"] = (
      "train ex/s: "
      + ", ".join(
          f"{n} {r['train_examples_per_s']:.0f}" for n, r in entries.items()
      )
      + (f"; not run: {','.join(not_run)}" if not_run else "")
  )
  return figures


def part_main_job(s: Settings, budget: Budget) -> Dict:
  """The README's main job config: seconds per training step."""
  from relational_jax.training.clrs import config as clrs_config  # pylint: disable=g-import-not-at-top
  from relational_jax.training.clrs import loop  # pylint: disable=g-import-not-at-top

  overrides = dict(s.main_job_overrides)
  config = clrs_config.get_config(overrides)
  clrs_config.validate(config)
  algorithm, seed = config.algorithms[0], config.seeds[0]
  key = jax.random.PRNGKey(seed)
  with tempfile.TemporaryDirectory() as workdir:
    start = time.perf_counter()
    model, stream, _, _ = loop.model_for_run(config, algorithm, seed, workdir)
    build_s = time.perf_counter() - start
    cycle = len(stream.lengths)  # batches cycle over the train lengths

    def train(steps, batches=None):
      """Seconds per step of `steps` steps, sampling each batch between the
      dispatches as the trainer does, or on ready `batches`."""
      start = time.perf_counter()
      for step in range(steps):
        feedback = batches[step] if batches else next(stream)
        loss = model.feedback(jax.random.fold_in(key, step), feedback)
      float(loss)
      return (time.perf_counter() - start) / steps

    warmup_s = train(cycle) * cycle  # compiles once per length
    probe_s = train(cycle)
    fit = int(0.4 * budget.left() / probe_s) // cycle * cycle
    steps = max(cycle, min(s.main_job_steps, fit))
    interleaved_s = train(steps)
    # Apart: the host's sampling, then the device steps on ready batches.
    start = time.perf_counter()
    batches = [next(stream) for _ in range(steps)]
    sample_s = (time.perf_counter() - start) / steps
    step_s = train(steps, batches)
  batch = config.train.batch_size
  return {
      "config_overrides": {
          k: list(v) if isinstance(v, tuple) else v
          for k, v in overrides.items()
      },
      "algorithm": algorithm,
      "processor_type": config.processor_type,
      "train_lengths": list(config.protocol.train_lengths),
      "batch_size": batch,
      "build_s": build_s,
      "warmup_steps": cycle,
      "warmup_s": warmup_s,
      "timed_steps": steps,
      "step_s": interleaved_s,
      "device_step_s": step_s,
      "sample_s": sample_s,
      "cost_80000_steps_h": interleaved_s * 80_000 / 3600,
      "examples_per_s": batch / interleaved_s,
      "summary": (
          f"{interleaved_s * 1e3:.1f} ms/step at batch {batch} (device"
          f" {step_s * 1e3:.1f}, sampling {sample_s * 1e3:.1f}); 80,000 steps"
          f" ~{interleaved_s * 80_000 / 3600:.2f} h"
      ),
  }


PARTS = {
    "tests": part_tests,
    "precision": part_precision,
    "pivotal_torch": part_pivotal_torch,
    "triangular_pallas": part_triangular_pallas,
    "pivotal_pallas": part_pivotal_pallas,
    "processors": part_processors,
    "main_job": part_main_job,
}


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f"Unexpected arguments: {argv[1:]}")
  unknown = sorted(set(FLAGS.parts) - set(PARTS))
  if unknown:
    raise app.UsageError(f"--parts: unknown {unknown}; valid: {list(PARTS)}")
  # The pytest subprocess and torch share the GPU with this process.
  os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
  start = time.monotonic()
  s = with_processors(
      settings(FLAGS.quick, FLAGS.floyd_checkout, FLAGS.seed), FLAGS.processors
  )
  report = {
      "what": "experiments.bench.gpu_check (see its docstring)",
      "command": " ".join(sys.argv),
      "quick": s.quick,
      "device": device_info(),
      "versions": versions(),
      "tolerances_rel": TOLERANCES,
      "settings": dataclasses.asdict(s),
  }
  chosen = [n for n in PARTS if n in FLAGS.parts]
  budget_s = budgets(chosen, FLAGS.total_s)
  report["budgets_s"] = budget_s
  parts = [(n, PARTS[n], budget_s[n]) for n in chosen]
  path = os.path.join(FLAGS.out, REPORT_NAME)
  report["parts"] = run_parts(
      parts,
      s,
      after_part=lambda done: reporting.write_json(
          path, dict(report, parts=done, unfinished=True)
      ),
  )
  report["wall_s"] = time.monotonic() - start
  return finish(report, FLAGS.out)


def define_flags():
  """The command-line flags (defined only when run as a script, so that
  importing this module beside other absl entry points does not clash)."""
  flags.DEFINE_string("out", None, "Output folder (gpu_check.json).")
  flags.mark_flag_as_required("out")
  flags.DEFINE_bool(
      "quick",
      False,
      "Tiny sizes, a few steps and a handful of tests (a CPU smoke run;"
      " the Pallas kernel then runs in interpret mode).",
  )
  flags.DEFINE_string(
      "floyd_checkout",
      None,
      "Checkout of github.com/ocx-lab/FloydNet (with"
      " src/floydnet/functional.py); without it pivotal_torch is skipped.",
  )
  flags.DEFINE_list("parts", list(PARTS), "Parts to run, of those above.")
  flags.DEFINE_list(
      "processors",
      [],
      "The processors part's entries, in order, of"
      f" {list(PROCESSOR_ENTRIES)} (default: all; --quick: mpnn512).",
  )
  flags.DEFINE_float(
      "total_s",
      480.0,
      "Seconds the chosen parts share, in BUDGETS_S proportions (a part"
      " starts nothing new past its share; compiles can overrun it).",
  )
  flags.DEFINE_integer("seed", 0, "Seed of the random inputs.")


if __name__ == "__main__":
  define_flags()
  app.run(main)
