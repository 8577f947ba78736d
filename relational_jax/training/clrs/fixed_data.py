"""CLRS data as the RT paper's protocol draws it: fixed datasets (run.py, 2022).

The RT authors' CLRS fork (appendix D) trains from a fixed train set built
once, not from fresh samples: its run.py calls `clrs.build_sampler(name,
seed, num_samples, length)` with no `p`, no `length_needle` and none of the
modern processing (random `pos`, `pred_h` as an input, permutations):

  train  seed 1, `train_size` samples at the train length (16);
  val    seed 2, `run_py_eval_size(algorithm)` samples at the train length;
  test   seed 3, as many at the test length (64).

A training batch is `batch_size` samples drawn with replacement by the
train sampler's RandomState, continuing from its state after building the
set (`Sampler.next` of that version): `FixedStream`, whose position is that
state. dm-clrs 2.0.3's samplers called this way give the fork's arrays and
stream for the algorithms checked (tests/experiments/test_compare_clrs.py).
The library's CLRS task uses this with `protocol.train_size > 0`; the
`clrs_rt` comparison also reads the same arrays from the fork's own dump
(`FixedData.load`).
"""

import dataclasses
import json
from typing import Dict, Optional, Tuple

import clrs
import numpy as np

from relational_jax.training.clrs import data as clrs_data

# run.py's --valid_size and --test_size (x the algorithm's multiplier).
RUN_PY_EVAL_SIZE = 32


def run_py_eval_size(algorithm: str) -> int:
  """run.py's validation (= test) set size of `algorithm` (its
  `_eval_sizes` in the fork's environment)."""
  clrs_data.check_algorithm(algorithm)
  if algorithm == "find_maximum_subarray_kadane":
    return 1024
  if algorithm in (
      "quickselect",
      "minimum",
      "binary_search",
      "naive_string_matcher",
      "kmp_matcher",
      "segments_intersect",
  ):
    return 2048
  settings = clrs.CLRS_30_ALGS_SETTINGS[algorithm]
  return RUN_PY_EVAL_SIZE * settings["num_samples_multiplier"]


@dataclasses.dataclass
class FixedData:
  """One algorithm's three fixed datasets: arrays '<split>/<stage>/<name>'
  and '<split>/lengths' (split: train, val, test), the spec, the train
  sampler's RandomState after building the train set, and the split
  lengths (graph sizes) {'val': n, 'test': n}."""

  spec: Dict[str, Tuple[str, str, str]]
  arrays: Dict[str, np.ndarray]
  train_rng_state: Optional[tuple]
  train_size: int
  lengths: Dict[str, int] = dataclasses.field(
      default_factory=lambda: {"val": 16, "test": 64}
  )

  @classmethod
  def load(cls, path: str) -> "FixedData":
    """The fork's own dump (`refs/clrs_rt_fork.py data`): the arrays, a
    'meta_json' entry (spec, rng kind, train_size) and the train sampler's
    RandomState ('train_rng_keys', 'train_rng_rest'); n = 16 and 64."""
    with np.load(path) as f:
      arrays = {k: f[k] for k in f.files}
    meta = json.loads(arrays.pop("meta_json").tobytes().decode())
    pos, has_gauss, cached = arrays.pop("train_rng_rest").tolist()
    state = (
        meta["rng_kind"],
        arrays.pop("train_rng_keys").astype(np.uint32),
        int(pos),
        int(has_gauss),
        float(cached),
    )
    spec = {k: tuple(v) for k, v in meta["spec"].items()}
    return cls(spec, arrays, state, int(meta["train_size"]))

  @classmethod
  def build(
      cls,
      algorithm: str,
      train_size: int,
      train_length: int = 16,
      test_length: int = 64,
  ) -> "FixedData":
    """run.py's datasets of `algorithm`, built by the installed dm-clrs's
    samplers as the fork's run.py calls them (module docstring)."""
    clrs_data.check_algorithm(algorithm)
    if train_size < 1:
      raise ValueError(f"train_size must be >= 1, got {train_size}.")
    clrs_data.check_lengths([train_length, test_length], "lengths")
    size = run_py_eval_size(algorithm)
    arrays, spec, state = {}, None, None
    for split, num, length in (
        ("train", train_size, train_length),
        ("val", size, train_length),
        ("test", size, test_length),
    ):
      part, spec, rng = _split_arrays(algorithm, split, num, length)
      arrays.update(part)
      state = rng.get_state() if split == "train" else state
    return cls(
        spec,
        arrays,
        state,
        train_size,
        {"val": int(train_length), "test": int(test_length)},
    )

  def feedback(self, split: str, idx=None) -> clrs.Feedback:
    """The `split` set (or its samples `idx`) as a dm-clrs `Feedback`."""

    def points(stage):
      out = []
      for name, (st, loc, typ) in self.spec.items():
        if st != stage:
          continue
        data = self.arrays[f"{split}/{stage}/{name}"]
        if idx is not None:
          data = np.take(data, idx, axis=1 if stage == "hint" else 0)
        out.append(
            clrs.DataPoint(name=name, location=loc, type_=typ, data=data)
        )
      return out

    lengths = self.arrays[f"{split}/lengths"]
    if idx is not None:
      lengths = np.take(lengths, idx, axis=0)
    return clrs.Feedback(
        features=clrs.Features(
            inputs=points("input"), hints=points("hint"), lengths=lengths
        ),
        outputs=points("output"),
    )

  def num_samples(self, split: str) -> int:
    return int(self.arrays[f"{split}/lengths"].shape[0])

  def eval_set(
      self, algorithm: str, split: str, batch_size: int, max_samples: int
  ) -> clrs_data.EvalSet:
    """The first `max_samples` (0: all) samples of `split` ('val' or
    'test') as an `EvalSet`."""
    n = self.num_samples(split)
    n = min(n, max_samples) if max_samples > 0 else n
    return clrs_data.EvalSet(
        algorithm,
        self.lengths[split],
        split,
        self.feedback(split, np.arange(n)),
        self.spec,
        batch_size,
    )


def _split_arrays(algorithm: str, split: str, num: int, length: int):
  """One split built as run.py builds it: its arrays ('<split>/...'), the
  spec, and the sampler's RandomState after building it."""
  sampler, spec = clrs.build_sampler(
      name=algorithm,
      seed=clrs_data.SPLIT_SEEDS[split],
      num_samples=num,
      length=length,
  )
  arrays = {}
  # pylint: disable=protected-access
  rng = sampler._rng
  for stage, dps in (
      ("input", sampler._inputs),
      ("hint", sampler._hints),
      ("output", sampler._outputs),
  ):
    for dp in dps:
      arrays[f"{split}/{stage}/{dp.name}"] = np.asarray(dp.data)
  arrays[f"{split}/lengths"] = np.asarray(sampler._lengths)
  # pylint: enable=protected-access
  return arrays, {k: tuple(v) for k, v in spec.items()}, rng


def make_eval_set(
    algorithm: str,
    split: str,
    length: int,
    batch_size: int,
    max_samples: int = 0,
) -> clrs_data.EvalSet:
  """run.py's `split` set ('val' or 'test') of `algorithm` at `length`
  alone (the test set at any size), its first `max_samples` (0: all)."""
  clrs_data.check_algorithm(algorithm)
  clrs_data.check_lengths([length], f"{split} lengths")
  arrays, spec, _ = _split_arrays(
      algorithm, split, run_py_eval_size(algorithm), length
  )
  data = FixedData(spec, arrays, None, 0, {split: int(length)})
  return data.eval_set(algorithm, split, batch_size, max_samples)


class FixedStream:
  """run.py's batch stream over a `FixedData` train set: `batch_size`
  samples drawn with replacement by the train sampler's RandomState, whose
  state is the position (`get_state` / `set_state`)."""

  def __init__(self, data: FixedData, batch_size: int):
    self.data, self.batch_size = data, batch_size
    self.spec = data.spec
    self.rng = np.random.RandomState()
    self.rng.set_state(data.train_rng_state)

  def __iter__(self):
    return self

  def __next__(self) -> clrs.Feedback:
    idx = self.rng.choice(
        self.data.train_size, (self.batch_size,), replace=True
    )
    return self.data.feedback("train", idx)

  def get_state(self) -> list:
    kind, keys, pos, has_gauss, cached = self.rng.get_state()
    return [kind, keys.tolist(), int(pos), int(has_gauss), float(cached)]

  def set_state(self, state: list) -> None:
    self.rng.set_state(
        tuple(state[:1]) + (np.asarray(state[1], np.uint32),) + tuple(state[2:])
    )
