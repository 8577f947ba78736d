"""Executed XLA:CPU ops of a jitted function and their durations (no flags).

Used by `experiments.bench.profile_clrs_step` and
`experiments.bench.profile_et_stack`: run the function under
`jax.profiler.trace`, read the Perfetto trace, and map each executed HLO
instruction to its `op_name` metadata (the JAX name stack: transforms,
Haiku/Flax module scopes, primitive), so callers can group the time by
module, pass or kind.
"""

import glob
import gzip
import json
import re
import tempfile
import time
from typing import Callable, Dict, List, Tuple

import jax

_INSTRUCTION = re.compile(r"\s*(?:ROOT )?%?([\w.\-]+) = .*op_name=\"([^\"]*)\"")


def op_names(hlo_text: str) -> Dict[str, str]:
  """Maps each HLO instruction name of compiled HLO text to its op_name."""
  names = {}
  for line in hlo_text.split("\n"):
    m = _INSTRUCTION.match(line)
    if m:
      names[m.group(1)] = m.group(2)
  return names


_RESULT = re.compile(r"\s*(?:ROOT )?%?([\w.\-]+) = (\S+) ")


def result_shapes(hlo_text: str) -> Dict[str, str]:
  """Maps each HLO instruction name of compiled HLO text to its result
  shape (e.g. 'f32[8192,192]{1,0}')."""
  shapes = {}
  for line in hlo_text.split("\n"):
    m = _RESULT.match(line)
    if m:
      shapes.setdefault(m.group(1), m.group(2))
  return shapes


def traced_ops(
    run: Callable[[], None],
    hlo_text: str,
    iters: int,
    instructions: bool = False,
) -> Tuple[float, List[tuple]]:
  """Runs `run` (which does `iters` steps and blocks on their results) under
  the profiler; returns (wall seconds per step, [(op_name, ms per step)] for
  every executed op of `hlo_text`, while loops themselves left out); with
  `instructions`, (op_name, ms per step, instruction) where instruction is
  the HLO instruction's name and result shape, e.g. 'dot.12 f32[16,192]'."""
  names = op_names(hlo_text)
  shapes = result_shapes(hlo_text)
  log_dir = tempfile.mkdtemp(prefix="xla_op_profile_")
  started = time.perf_counter()
  with jax.profiler.trace(log_dir, create_perfetto_trace=True):
    run()
  wall_s = (time.perf_counter() - started) / iters
  trace = glob.glob(f"{log_dir}/**/perfetto_trace.json.gz", recursive=True)[0]
  with gzip.open(trace) as f:
    events = json.load(f)
  events = events["traceEvents"] if isinstance(events, dict) else events
  ops = []
  for e in events:
    name = e.get("name", "")
    if e.get("ph") == "X" and name in names and not name.startswith("while"):
      ms = e["dur"] / 1e3 / iters
      ops.append(
          (names[name], ms, f"{name} {shapes[name]}")
          if instructions
          else (names[name], ms)
      )
  return wall_s, ops
