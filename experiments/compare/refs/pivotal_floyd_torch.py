r"""The FloydNet authors' side of `experiments.bench.pivotal`.

Runs UNDER THE AUTHORS' ENVIRONMENT (a venv with torch and numpy, e.g.
`python3 -m venv /tmp/torchvenv && /tmp/torchvenv/bin/pip install torch
numpy`), not ours: it loads their `pivotal_attention` from
`<--reference>/src/floydnet/functional.py` (a checkout of
github.com/ocx-lab/FloydNet, never vendored or edited; only that file is
executed, under a private module name) and times it, forward and backward,
on CPU.

Inputs: q_ik, k_ij, k_jk, v_ij, v_jk and the output cotangent dy, each
(B, H, N, N, D) float32 standard normal from `numpy.random.default_rng(
--seed)` drawn in that order, exactly as our side draws them, so both sides
compute the same function of the same numbers. One timed call is
`y = pivotal_attention(q_ik, k_ij, k_jk, v_ij, v_jk)` then
`y.backward(dy)` (the gradients of sum(y * dy) with respect to the five
inputs), the inputs' `.grad` cleared first.

Modes:
  bench   prints `READY {...}` (torch version, threads), then answers on
          stdin: `run N ITERS` (ITERS timed calls at size N; replies `TIMES
          [seconds per call]`), `save N PATH` (one call; writes y and the
          five gradients to the .npz PATH; replies `SAVED PATH`), `quit`.
  memory  one call at `--n` in this fresh process, after a warm-up call at
          N = 4 (thread pools, kernels) and the inputs' creation: the peak
          resident set size (VmHWM, reset just before the call through
          /proc/self/clear_refs) minus the RSS before it; prints `MEMORY
          {...}`. torch's CPU allocator has no peak counter; the RSS growth
          bounds the call's peak allocation from above (it includes the
          five gradients, which the call returns, and y).
"""

import argparse
import importlib.util
import json
import os
import sys
import time

import numpy as np
import torch

ROLES = ("q_ik", "k_ij", "k_jk", "v_ij", "v_jk", "dy")


def load_functional(reference):
  source = os.path.join(reference, "src", "floydnet", "functional.py")
  if not os.path.isfile(source):
    raise SystemExit(
        f"{source} not found: is --reference a checkout of"
        " github.com/ocx-lab/FloydNet?"
    )
  spec = importlib.util.spec_from_file_location("floyd_functional", source)
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module


def make_inputs(batch, heads, n, head_dim, seed):
  rng = np.random.default_rng(seed)
  arrays = [
      rng.standard_normal((batch, heads, n, n, head_dim), dtype=np.float32)
      for _ in ROLES
  ]
  leaves = [torch.from_numpy(a).requires_grad_(True) for a in arrays[:5]]
  return leaves, torch.from_numpy(arrays[5])


def call(functional, leaves, dy):
  for x in leaves:
    x.grad = None
  y = functional.pivotal_attention(*leaves)
  y.backward(dy)
  return y


def _vm_bytes():
  """(VmRSS, VmHWM) of this process in bytes (/proc/self/status)."""
  values = {}
  with open("/proc/self/status") as f:
    for line in f:
      if line.startswith(("VmRSS:", "VmHWM:")):
        key, value = line.split(":")
        values[key] = int(value.split()[0]) * 1024
  return values["VmRSS"], values["VmHWM"]


def _reset_peak():
  """Resets VmHWM to the current RSS (Linux >= 4.0: clear_refs 5)."""
  with open("/proc/self/clear_refs", "w") as f:
    f.write("5")


def main():
  p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  p.add_argument("--reference", required=True)
  p.add_argument("--mode", choices=("bench", "memory"), required=True)
  p.add_argument("--threads", type=int, required=True)
  p.add_argument("--batch", type=int, required=True)
  p.add_argument("--heads", type=int, required=True)
  p.add_argument("--head_dim", type=int, required=True)
  p.add_argument("--seed", type=int, default=0)
  p.add_argument("--n", type=int, help="memory: the size N")
  a = p.parse_args()
  torch.set_num_threads(a.threads)
  functional = load_functional(a.reference)
  shape = lambda n: (a.batch, a.heads, n, n, a.head_dim)

  if a.mode == "memory":
    leaves, dy = make_inputs(a.batch, a.heads, 4, a.head_dim, a.seed)
    call(functional, leaves, dy)
    leaves, dy = make_inputs(a.batch, a.heads, a.n, a.head_dim, a.seed)
    _reset_peak()
    before, _ = _vm_bytes()
    y = call(functional, leaves, dy)
    _, peak = _vm_bytes()
    print(
        "MEMORY "
        + json.dumps({
            "n": a.n,
            "rss_before_bytes": before,
            "peak_rss_bytes": peak,
            "rss_growth_bytes": peak - before,
            "gradient_bytes": sum(x.grad.nbytes for x in leaves),
            "output_bytes": y.nbytes,
            "torch": torch.__version__,
            "threads": torch.get_num_threads(),
        }),
        flush=True,
    )
    return

  inputs = {}
  print(
      "READY "
      + json.dumps({
          "torch": torch.__version__,
          "threads": torch.get_num_threads(),
          "interop_threads": torch.get_num_interop_threads(),
          "cpus": len(os.sched_getaffinity(0)),
          "shape_BxHxNxNxD": list(shape(0)),
      }),
      flush=True,
  )
  for line in sys.stdin:
    cmd = line.split()
    if not cmd or cmd[0] == "quit":
      break
    n = int(cmd[1])
    if n not in inputs:
      inputs[n] = make_inputs(a.batch, a.heads, n, a.head_dim, a.seed)
    leaves, dy = inputs[n]
    if cmd[0] == "run":
      times = []
      for _ in range(int(cmd[2])):
        start = time.perf_counter()
        call(functional, leaves, dy)
        times.append(time.perf_counter() - start)
      print("TIMES " + json.dumps(times), flush=True)
    elif cmd[0] == "save":
      y = call(functional, leaves, dy).detach()
      arrays = {"y": y.numpy()}
      arrays.update({r: x.grad.numpy() for r, x in zip(ROLES, leaves)})
      np.savez(cmd[2], **arrays)
      print(f"SAVED {cmd[2]}", flush=True)
    else:
      raise SystemExit(f"unknown command {line!r}")


if __name__ == "__main__":
  main()
