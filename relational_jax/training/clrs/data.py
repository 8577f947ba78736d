"""CLRS data for training and evaluation: sampled on the fly, never downloaded.

Protocol (RT paper appendix D, CLRS-compatible): train on n <= 16 (seed 1),
validate at n = 16 (seed 2), test out of distribution at n = 64 (seed 3), with
`clrs.build_sampler` and the sampler processing of CLRS `examples/run.py`:
random `pos`, fixed `pred_h` hints turned into inputs for the algorithms that
need it, and permutation pointers.

Unlike dm-clrs 2.0.3's `create_samplers`, the string matchers' longer
haystack (5/4 of the longest train length) is computed per algorithm, so it
never leaks into the train lengths of the algorithms after them.
"""

import dataclasses
from typing import Dict, Iterator, List, Optional, Sequence, Tuple

import clrs
import numpy as np

from relational_jax.layers import shapes

# The algorithms whose fixed `pred_h` hint CLRS turns into an input (run.py).
PRED_AS_INPUT_ALGOS = (
    "binary_search",
    "minimum",
    "find_maximum_subarray",
    "find_maximum_subarray_kadane",
    "matrix_chain_order",
    "lcs_length",
    "optimal_bst",
    "activity_selector",
    "task_scheduling",
    "naive_string_matcher",
    "kmp_matcher",
    "jarvis_march",
)
STRING_MATCHERS = ("naive_string_matcher", "kmp_matcher")
SPARSE_GRAPH_ALGOS = (
    "articulation_points",
    "bridges",
    "mst_kruskal",
    "bipartite_matching",
)
SPLIT_SEEDS = {"train": 1, "val": 2, "test": 3}
CORE_ALGORITHMS = (
    "activity_selector",
    "bellman_ford",
    "binary_search",
    "find_maximum_subarray_kadane",
    "graham_scan",
    "insertion_sort",
    "matrix_chain_order",
    "naive_string_matcher",
)


def check_algorithm(algorithm: str) -> None:
  if algorithm not in clrs.CLRS_30_ALGS_SETTINGS:
    several = (
        ' (several algorithms: --config.algorithms=\'("a","b")\' or '
        "--algorithms=a,b)"
        if "," in str(algorithm)
        else ""
    )
    raise ValueError(
        f"Unknown CLRS algorithm {algorithm!r}{several}; valid algorithms "
        f"are {sorted(clrs.CLRS_30_ALGS_SETTINGS)}."
    )


def check_lengths(lengths: Sequence[int], what: str) -> None:
  """Raises ValueError unless `lengths` names sizes, each of >= 4 nodes."""
  if not len(lengths):
    raise ValueError(f"{what} must name at least one size, got none.")
  for n in lengths:
    if int(n) < 4:
      raise ValueError(
          f"{what} must all be >= 4 nodes, got {n} in {list(lengths)}."
      )


def sample_lengths(algorithm: str, lengths: Sequence[int]) -> List[int]:
  """The sampler sizes for `algorithm`: string matchers use one haystack of
  5/4 of the longest length (CLRS run.py), everything else `lengths` as is."""
  if algorithm in STRING_MATCHERS:
    return [(max(lengths) * 5) // 4]
  return [int(n) for n in lengths]


def sampler_kwargs(algorithm: str, split: str) -> Dict:
  """Extra sampler arguments as CLRS run.py, for training and validation
  samplers alike: edge probabilities (halved for the algorithms with long
  trajectories) and a needle of random length up to 8 (read by the string
  matchers). Test samplers use the CLRS defaults."""
  if split == "test":
    return {}
  p = tuple(0.1 + 0.1 * i for i in range(9))
  if algorithm in SPARSE_GRAPH_ALGOS:
    p = tuple(np.array(p) / 2)
  kwargs = dict(p=p, length_needle=-8)
  return kwargs


def eval_num_samples(algorithm: str, split: str, max_samples: int = 0) -> int:
  """CLRS sizes for sampled evaluation sets: 2 x 32 x the algorithm's
  `num_samples_multiplier` (as CLRS run.py for sampled val/test sets),
  optionally capped by `max_samples` (> 0) for small runs."""
  mult = clrs.CLRS_30_ALGS_SETTINGS[algorithm]["num_samples_multiplier"]
  n = clrs.CLRS30[split]["num_samples"] * 2 * mult
  return min(n, max_samples) if max_samples > 0 else n


def _process(algorithm, spec, stream, randomize_pos, pos_rng):
  if randomize_pos:
    stream = clrs.process_random_pos(stream, pos_rng)
  if algorithm in PRED_AS_INPUT_ALGOS:
    spec, stream = clrs.process_pred_as_input(spec, stream)
  spec, stream = clrs.process_permutations(spec, stream, True)
  return spec, stream


class TrainStream:
  """An endless, seeded stream of training batches cycling over the lengths.

  Its position (the samplers' and random-position RNG states, the samplers'
  tracked hint lengths and the cycle index) is `get_state()` / `set_state()`,
  so a resumed run continues the very same stream.
  """

  def __init__(
      self, algorithm: str, lengths: Sequence[int], batch_size: int, seed: int
  ):
    check_algorithm(algorithm)
    check_lengths(lengths, "train_lengths")
    self.algorithm = algorithm
    self.batch_size = batch_size
    self.lengths = sample_lengths(algorithm, lengths)
    self._samplers = []
    self._streams = []
    self._pos_rngs = []
    self.spec = None
    for i, n in enumerate(self.lengths):
      sampler, spec = clrs.build_sampler(
          algorithm,
          num_samples=-1,
          length=n,
          seed=SPLIT_SEEDS["train"] * 1_000_003 + seed * 1009 + i,
          **sampler_kwargs(algorithm, "train"),
      )
      pos_rng = np.random.RandomState(seed * 7919 + i)
      raw = _endless(sampler, batch_size)
      spec, stream = _process(algorithm, spec, raw, True, pos_rng)
      self._samplers.append(sampler)
      self._streams.append(stream)
      self._pos_rngs.append(pos_rng)
      self.spec = spec
    self._index = 0

  def __iter__(self):
    return self

  def __next__(self) -> clrs.Feedback:
    stream = self._streams[self._index % len(self._streams)]
    self._index += 1
    return next(stream)

  def get_state(self) -> Dict:
    return {
        "index": self._index,
        "sampler_rngs": [_rng_state(s._rng) for s in self._samplers],  # pylint: disable=protected-access
        "pos_rngs": [_rng_state(r) for r in self._pos_rngs],
        "max_steps": [int(s.max_steps) for s in self._samplers],
    }

  def set_state(self, state: Dict) -> None:
    self._index = int(state["index"])
    for s, r, m in zip(
        self._samplers, state["sampler_rngs"], state["max_steps"]
    ):
      s._rng.set_state(_from_rng_state(r))  # pylint: disable=protected-access
      s.max_steps = int(m)
    for rng, r in zip(self._pos_rngs, state["pos_rngs"]):
      rng.set_state(_from_rng_state(r))


class MultiStream:
  """The generalist's stream: the next batch of every algorithm, in order,
  each from the `TrainStream` a single-task run of that algorithm draws
  from; its position is theirs."""

  def __init__(self, streams: Sequence[TrainStream]):
    self.streams = list(streams)

  def __iter__(self):
    return self

  def __next__(self) -> List[clrs.Feedback]:
    return [next(s) for s in self.streams]

  def get_state(self) -> Dict:
    return {"algorithms": [s.get_state() for s in self.streams]}

  def set_state(self, state: Dict) -> None:
    states = state["algorithms"]
    if len(states) != len(self.streams):
      raise ValueError(
          f"a stream position of {len(states)} algorithms cannot continue "
          f"a stream of {len(self.streams)}."
      )
    for stream, s in zip(self.streams, states):
      stream.set_state(s)


def _endless(sampler, batch_size) -> Iterator[clrs.Feedback]:
  while True:
    yield sampler.next(batch_size)


def _rng_state(rng: np.random.RandomState):
  kind, keys, pos, has_gauss, cached = rng.get_state()
  return [kind, keys.tolist(), int(pos), int(has_gauss), float(cached)]


def _from_rng_state(state):
  kind, keys, pos, has_gauss, cached = state
  return (kind, np.asarray(keys, dtype=np.uint32), pos, has_gauss, cached)


@dataclasses.dataclass
class EvalSet:
  """A fixed evaluation set, served in order in batches of `batch_size`
  (the last batch is padded by repeating samples; see `unpad`)."""

  algorithm: str
  length: int
  split: str
  feedback: clrs.Feedback
  spec: Dict
  batch_size: int

  @property
  def num_samples(self) -> int:
    return int(self.feedback.outputs[0].data.shape[0])

  def batches(self) -> Iterator[Tuple[clrs.Feedback, int]]:
    """Yields (feedback batch, number of real samples in it)."""
    n = self.num_samples
    for start in range(0, n, self.batch_size):
      idx = np.arange(start, start + self.batch_size) % n
      real = min(self.batch_size, n - start)
      yield _take(self.feedback, idx), real


def _take(feedback: clrs.Feedback, idx: np.ndarray) -> clrs.Feedback:
  f = feedback.features
  sub = lambda dps, axis: [
      dp.__class__(
          name=dp.name,
          location=dp.location,
          type_=dp.type_,
          data=np.take(np.asarray(dp.data), idx, axis=axis),
      )
      for dp in dps
  ]
  features = f._replace(
      inputs=sub(f.inputs, 0),
      hints=sub(f.hints, 1),
      lengths=np.take(f.lengths, idx, axis=0),
  )
  return feedback._replace(features=features, outputs=sub(feedback.outputs, 0))


def make_eval_set(
    algorithm: str,
    split: str,
    length: int,
    batch_size: int,
    max_samples: int = 0,
    seed: Optional[int] = None,
) -> EvalSet:
  """The CLRS-protocol evaluation set of `split` ('val' or 'test') at `length`
  (string matchers: haystack 5/4 of `length` for 'val', as the train sizes)."""
  check_algorithm(algorithm)
  shapes.check_choice(split, ("val", "test"), "eval split")
  check_lengths([length], f"{split} lengths")
  n_nodes = sample_lengths(algorithm, [length])[0] if split == "val" else length
  num = eval_num_samples(algorithm, split, max_samples)
  sampler, spec = clrs.build_sampler(
      algorithm,
      num_samples=num,
      length=n_nodes,
      seed=SPLIT_SEEDS[split] if seed is None else seed,
      **sampler_kwargs(algorithm, split),
  )
  full = sampler.next()  # the whole fixed dataset, in order
  spec, stream = _process(
      algorithm,
      spec,
      iter([full]),
      split == "val",
      np.random.RandomState(SPLIT_SEEDS[split]),
  )
  return EvalSet(algorithm, length, split, next(stream), spec, batch_size)
