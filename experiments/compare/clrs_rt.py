r"""CLRS, Relational Transformer: ours beside the RT authors' CLRS fork.

The authors' side is github.com/CameronDiao/relational-transformer (a 2022
fork of CLRS, Haiku), driven by `refs/clrs_rt_fork.py` in its own Python:

  /root/.pyenv/versions/3.10.13/bin/python3.10 -m venv /tmp/rtvenv
  /tmp/rtvenv/bin/pip install jax==0.4.13 jaxlib==0.4.13 dm-haiku==0.0.10 \
      numpy==1.22.4 scipy==1.10.1 ml_dtypes==0.2.0 optax==0.1.5 chex==0.1.7 \
      tensorflow-cpu==2.9.1 tensorflow-datasets==4.5.2 absl-py attrs requests

(their environment.yml pins jax/jaxlib 0.3.14, dm-haiku 0.0.6, optax 0.1.2,
chex 0.1.3, numpy 1.22.4, tensorflow 2.9.1; jaxlib 0.3.14 is no longer on
PyPI, so this is the oldest jax/jaxlib there with the Haiku, optax and chex
of its time. Python 3.10, not their 3.9: their `filter_null_grads` tests
`isinstance(x, chex.Array)`, a `typing.Union` in chex 0.1.7, which only
Python >= 3.10 accepts. Nothing of theirs is edited or stubbed.)

Same data on both sides: their run.py's datasets, built by their own
`clrs.build_sampler` (train: seed 1, `train_size` samples at n = 16; val:
seed 2 at n = 16; test: seed 3 at n = 64; run.py's set sizes: 32 x the
algorithm's multiplier, 2048 for binary_search) and written once by the
wrapper's `data` command to `<scratch>/data/*.npz`. Our side reads those
arrays and draws its training batches as their `Sampler.next` does
(`RandomState.choice(train_size, (batch,), replace=True)` from the state
their train sampler had after building its dataset), so both sides train on
the same batches in the same order. The evaluation sets are the first
`max_eval_samples` samples of theirs (0: all), on both sides.

The fork's `samplers.py` and dm-clrs 2.0.3's, called as run.py calls them
(no `p`, no `length_needle`), give the same arrays and the same batch
stream for bellman_ford and binary_search (every input, hint, output and
length of the 10,000 training, and the full validation and test sets, and
the generator state after construction: checked, and tested in
tests/experiments/test_compare_clrs.py where their checkout is present).
2.0.3 draws the edge probability per sample, `self._rng.choice(p)`, but
NumPy draws nothing to choose from the one-element default `p`. What
differs is our usual pipeline (`relational_jax.training.clrs.data`:
lengths 4..16, p in 0.1..0.9, random `pos`, `pred_h` as an input,
on-the-fly sampling), which this comparison does not use: both sides
follow run.py. Reading their dump instead of calling 2.0.3 keeps that true
for any algorithm whose sampler changed between the two.

Hyperparameters (`AUTHORS`, their run.py defaults = the RT paper's Table 2
CLRS values): RT, 3 layers, 12 heads of 16, d_nh 32, d_eh1 16, d_eh2 8,
LayerNorm, graph_vec cat, pointers decoded from edges, hint mode
encoded_decoded_nodiff with teacher-forcing noise 0.5, batch 4, Adam lr
2.5e-4 without clipping, no dropout. Seed s: their `--model_seed=42+s`
(run.py's default for s = 0) and our init seed 43+s (their `init` uses
model_seed + 1); the data seeds stay run.py's. Every `eval_every` steps both
sides score the current parameters on the validation (n = 16) and test
(n = 64) sets: metrics `<algorithm>/val`, `<algorithm>/test`.

Our other processors on the same footing (`our_config(...,
processor_type='et' | 'floyd')`, `fixed_data.FixedData.build`): the pair-state
processors (the Edge Transformer's triangular attention, FloydNet's pivotal
attention) replace the RT at its layers, heads and head size, everything
else as translated for the RT; their data is run.py's datasets built by
dm-clrs 2.0.3 (equal to the fork's, above), so no checkout of theirs is
needed: they are configs of the library's CLRS task
(`rt_protocol.config`), the named reproductions `pair_models_clrs_<kind>`.
"""

import dataclasses
import os
import subprocess
import sys
from typing import Dict, List, Mapping, Sequence, Tuple

from experiments.compare import curves
from experiments.compare import protocol
from relational_jax.training.clrs import fixed_data
from relational_jax.training.clrs import rt_protocol

REPOSITORY = "CameronDiao/relational-transformer"
MARKER = os.path.join("clrs", "examples", "run.py")
WRAPPER = os.path.join(
    os.path.dirname(os.path.abspath(__file__)), "refs", "clrs_rt_fork.py"
)
TRAIN_LENGTH, TEST_LENGTH = rt_protocol.TRAIN_LENGTH, rt_protocol.TEST_LENGTH
MODEL_SEED = rt_protocol.FIRST_SEED  # seed 0 of the comparison
# Their run.py flags: the protocol's (`rt_protocol.RUN_PY_FLAGS`).
AUTHORS = rt_protocol.RUN_PY_FLAGS


@dataclasses.dataclass(frozen=True)
class Budget:
  algorithms: Tuple[str, ...]
  steps: int
  eval_every: int
  seeds: int
  train_size: int  # their --train_size
  max_eval_samples: int  # first samples of each evaluation set; 0: all
  # When the test set (n = 64) is scored: 'every_evaluation' (with the
  # validation set: the OOD curve), or 'new_best' (at each new best
  # validation point and the last step only: the best checkpoint's score,
  # which the protocol reports, unchanged, without the rest of the curve).
  test_points: str = "every_evaluation"


TEST_POINTS = ("every_evaluation", "new_best")


BOTH = ("bellman_ford", "binary_search")
# paper: their 320,000 examples (80,000 steps of 4), run.py's evaluation
# cadence (every 320 examples = 80 steps) and full evaluation sets.
# cpu: 640 steps (2,560 examples) at run.py's cadence (8 points), each
# evaluation on the first 128 samples of each set (bellman_ford's sets have
# 32: all of them; binary_search's 2048, whose n = 64 scoring would
# otherwise dominate). Measured on the loaded 2-core machine (load ~6.5,
# 200 steps, one seed, sides side by side): theirs 1.49 s/step and 21 s per
# evaluation (bellman_ford), 0.39 s/step and 144 s per 256 + 256 samples
# (binary_search); ours 0.60 s/step and 18 s, 0.29 s/step and 105 s; so a
# seed takes about 36 min on their side, 21 min on ours (compiles
# included): 3 seeds about 1.8 h (their side is the long pole).
# smoke: both sides end to end in a few minutes, 2 steps, 4 samples.
BUDGETS = {
    "paper": Budget(BOTH, 80_000, 80, 3, 10_000, 0),
    "cpu": Budget(BOTH, 640, 80, 3, 10_000, 128),
    "smoke": Budget(("bellman_ford",), 2, 1, 1, 16, 4),
}


def eval_batch_size(budget: Budget, hp: Mapping = AUTHORS) -> int:
  """Samples per predict call on both sides: AUTHORS' unless the budget
  scores fewer samples (their `collect_and_eval` scores whole batches)."""
  if (
      budget.max_eval_samples
      and budget.max_eval_samples < hp["eval_batch_size"]
  ):
    return budget.max_eval_samples
  return hp["eval_batch_size"]


def reference_flags(
    budget: Budget, seed: int, hp: Mapping = AUTHORS
) -> List[str]:
  """Their run.py flags for seed `seed` of `budget`."""
  hp = dict(
      hp,
      eval_batch_size=eval_batch_size(budget, hp),
      train_size=budget.train_size,
      model_seed=MODEL_SEED + seed,
  )
  # Their booleans are strings, 'True' / 'False', which str() writes.
  return [f"--{name}={value}" for name, value in hp.items()]


def our_config(
    budget: Budget,
    seed: int,
    algorithm: str,
    hp: Mapping = AUTHORS,
    processor_type: str = "rt",
):
  """Our side of seed `seed` on `algorithm`: the library's protocol config
  (`rt_protocol.config`, their flags `hp` translated; 'et' / 'floyd' /
  'mpnn' / 'triplet_gmpnn' in the RT's place) at `budget`'s steps,
  cadence, train size, evaluation samples and test points."""
  c = rt_protocol.config(
      processor_type, (algorithm,), (MODEL_SEED + seed,), flags=hp
  )
  c.train.steps, c.train.eval_every = budget.steps, budget.eval_every
  c.train.eval_batch_size = eval_batch_size(budget, hp)
  c.protocol.train_size = budget.train_size
  c.protocol.max_eval_samples = budget.max_eval_samples
  c.protocol.test_points = budget.test_points
  return c


# --- Data: their datasets, read into dm-clrs 2.0.3 structures. -------------


def data_path(data_dir: str, budget: Budget, algorithm: str) -> str:
  return os.path.join(data_dir, f"{algorithm}_train{budget.train_size}.npz")


def prepare_data(
    budget: Budget, scratch: str, reference: str, reference_python: str
) -> str:
  """Has their wrapper write each algorithm's datasets once (see the
  module docstring); returns the directory."""
  data_dir = os.path.join(scratch, "data")
  os.makedirs(data_dir, exist_ok=True)
  for algorithm in budget.algorithms:
    path = data_path(data_dir, budget, algorithm)
    if os.path.isfile(path):
      continue
    cmd = [
        reference_python,
        WRAPPER,
        "data",
        f"--reference={reference}",
        f"--algorithm={algorithm}",
        f"--out={path}",
        "--authors_flags=" + " ".join(reference_flags(budget, 0)),
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if proc.returncode:
      raise RuntimeError(
          "their data command failed (exit "
          f"{proc.returncode}): {' '.join(cmd)}\n"
          f"{proc.stdout[-1500:]}{proc.stderr[-3000:]}"
      )
  return data_dir


def metric_names_of(algorithms: Sequence[str]) -> Tuple[str, ...]:
  return tuple(f"{a}/{s}" for a in algorithms for s in ("val", "test"))


# --- Our side. ---------------------------------------------------------------


def fit_ours(
    budget: Budget,
    seed: int,
    algorithm: str,
    data: fixed_data.FixedData,
    run_dir: str,
    log=print,
    stop_at: int = 0,
    processor_type: str = "rt",
):
  """Trains (or resumes) our model (`our_config(..., processor_type)`) on
  `data` with the library's CLRS task (`relational_jax.training.clrs.loop.
  fit_one`) in `run_dir`; its `trainer.RunRecord` (history entries
  {"step", "loss", "val", "test"}; "loss": the mean training loss since the
  previous point). Checkpointed at every evaluation (params, Adam state,
  the batch generator's state, the history)."""
  from relational_jax.training.clrs import config as clrs_config  # pylint: disable=g-import-not-at-top
  from relational_jax.training.clrs import loop  # pylint: disable=g-import-not-at-top

  config = our_config(budget, seed, algorithm, processor_type=processor_type)
  config.train.stop_at_step = stop_at if 0 < stop_at < budget.steps else 0
  clrs_config.validate(config)
  _, done, _, _, _ = loop.fit_one(
      config, algorithm, config.seeds[0], run_dir, log, data=data
  )
  return done


def train_ours_one(
    budget: Budget,
    seed: int,
    algorithm: str,
    data: fixed_data.FixedData,
    run_dir: str,
    log=print,
    stop_at: int = 0,
) -> List[Dict]:
  """Our RT side of one algorithm and seed (`fit_ours`); its evaluation
  points [{"step", "loss", "val", "test"}]."""
  done = fit_ours(
      budget,
      seed,
      algorithm,
      data,
      run_dir,
      lambda m: log(f"[clrs_rt ours {algorithm} seed {seed}] {m}"),
      stop_at,
  )
  return [
      {k: h[k] for k in ("step", "loss", "val", "test") if k in h}
      for h in done.history
  ]


def merge(per_algorithm: Mapping[str, Sequence[Mapping]]) -> List[Dict]:
  """Evaluation points {"step", "metrics": {"<algo>/val", "<algo>/test"}}
  of one seed, from each algorithm's [{"step", "val", "test"}]."""
  steps: Dict[int, Dict[str, float]] = {}
  for algorithm, points in per_algorithm.items():
    for point in points:
      metrics = steps.setdefault(int(point["step"]), {})
      metrics[f"{algorithm}/val"] = float(point["val"])
      metrics[f"{algorithm}/test"] = float(point["test"])
  return [{"step": s, "metrics": steps[s]} for s in sorted(steps)]


def run_ours(
    budget: Budget, seed: int, data_dir: str, workdir: str, log=print
) -> List[Dict]:
  """Trains (or resumes) our side on every algorithm of `budget`; writes
  `<workdir>/results.json` ({"history": merged points}) when finished."""
  from relational_jax.training import reporting  # pylint: disable=g-import-not-at-top

  per_algorithm = {}
  for algorithm in budget.algorithms:
    done = os.path.join(workdir, algorithm, "history.json")
    if os.path.isfile(done):
      history = reporting.read_json(done)
      if history and history[-1]["step"] == budget.steps:
        per_algorithm[algorithm] = history
        continue
    data = fixed_data.FixedData.load(data_path(data_dir, budget, algorithm))
    per_algorithm[algorithm] = train_ours_one(
        budget, seed, algorithm, data, os.path.join(workdir, algorithm), log
    )
    reporting.write_json(done, per_algorithm[algorithm])
  history = merge(per_algorithm)
  reporting.write_json(
      os.path.join(workdir, "results.json"),
      {"history": history, "budget": dataclasses.asdict(budget)},
  )
  return history


# --- Their side. -------------------------------------------------------------


def reference_env(threads: int = 1) -> Dict[str, str]:
  """Their process's environment: XLA on `threads` CPU threads."""
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", JAX_PLATFORMS="cpu")
  if threads == 1:
    env["XLA_FLAGS"] = (
        "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"
    )
  return env


def run_theirs(
    budget: Budget,
    seed: int,
    reference: str,
    scratch: str,
    python: str,
    out_dir: str,
    threads: int = 1,
) -> List[Dict]:
  """Runs (or resumes, or reuses) their side, one algorithm after the other
  under `out_dir/<algorithm>`; returns the merged evaluation points."""
  per_algorithm = {}
  for algorithm in budget.algorithms:
    run_dir = os.path.join(out_dir, algorithm)
    curve = os.path.join(run_dir, "curve.jsonl")
    points = read_curve(curve)
    if not (points and points[-1]["step"] == budget.steps):
      os.makedirs(run_dir, exist_ok=True)
      cmd = [
          python,
          WRAPPER,
          "train",
          f"--reference={reference}",
          f"--algorithm={algorithm}",
          f"--out_dir={run_dir}",
          f"--steps={budget.steps}",
          f"--eval_every={budget.eval_every}",
          f"--max_eval_samples={budget.max_eval_samples}",
          "--authors_flags=" + " ".join(reference_flags(budget, seed)),
      ]
      protocol.run_reference(
          cmd,
          os.path.join(run_dir, "log.txt"),
          env=reference_env(threads),
          cwd=scratch,
      )
      points = read_curve(curve)
    per_algorithm[algorithm] = points
  return merge(per_algorithm)


def read_curve(path: str) -> List[Dict]:
  """The wrapper's evaluation points ({"step", "val", "test", ...}; [] if
  absent)."""
  return protocol.read_jsonl(path)


def finished_ours(budget: Budget, workdir: str):
  """A finished run's merged evaluation points, or None."""
  history = curves.finished_history(workdir, budget.steps)
  if history is None or set(history[-1]["metrics"]) != set(
      metric_names_of(budget.algorithms)
  ):
    return None
  return history


def finished_theirs(budget: Budget, out_dir: str):
  """A finished reference run's merged evaluation points, or None."""
  per_algorithm = {}
  for algorithm in budget.algorithms:
    points = read_curve(os.path.join(out_dir, algorithm, "curve.jsonl"))
    if not points or points[-1]["step"] != budget.steps:
      return None
    per_algorithm[algorithm] = points
  return merge(per_algorithm)


def metric_names() -> Sequence[str]:
  return metric_names_of(BOTH)


# Found by this comparison and resolved in our network (what, our setting).
RESOLVED = [
    (
        (
            "decoder inputs with carried state: their nets.py feeds edge and"
            " graph decoders [features, previous hidden, new hidden], so"
            " pointers from edges are w . [edge_fts, previous edge hidden, new"
            " edge hidden] + b (576 weights and a bias); ours read [edge_fts,"
            " new edge hidden] without bias"
            " (results/compare_clrs_rt_params.json: totals theirs 1,103,404 /"
            " ours 1,103,018 on bellman_ford, 1,103,981 / 1,103,788 on"
            " binary_search, processors equal)"
        ),
        (
            "model.decode_previous_hiddens=True (default) and a bias on "
            "EdgePointerDecoder: our totals are now theirs"
        ),
    ),
    (
        (
            "re-encoded SCALAR hint predictions under noisy teacher forcing:"
            " their postprocess passes them with their gradient, dm-clrs"
            " 2.0.3's hard postprocess stops it (found by the whole-network"
            " golden tests/fidelity rt_net_bellman_ford: noisy-forcing"
            " gradients differed by up to 0.026, e.g. the `d` decoder's"
            " weights)"
        ),
        (
            "model.scalar_hint_gradient=True (default; set in our_config): the "
            "gradient flows as theirs"
        ),
    ),
    (
        (
            "initial parameter distributions of the RT processor (not its"
            " function): theirs are Haiku's TruncatedNormal(1/sqrt(fan_in))"
            " (std 0.88/sqrt(fan_in)) of their concatenated inputs; ours split"
            " those linears by input (edge_in / edge_hidden_in / edge_graph_in,"
            " fan-in 192 each vs their 576; the edge update's w4 blocks, 192 vs"
            " 768) and used Flax's lecun_normal (std 1/sqrt(fan_in)); the"
            " attention's value_edge_kernel was 3x smaller than theirs (fan-in"
            " H*E). At the comparison's sizes (binary_search) our stds were"
            " 1.7x theirs on the edge input linears, 2.3x on w4, 1.14x on the"
            " other dense kernels, 0.33x on value_edge_kernel; encoders and"
            " decoders matched. Diagnostic (one seed, 200 steps): our side"
            " started from their initial parameters (mapped) trains to loss"
            " 4.98 / 1.05 at steps 100 / 200, theirs 5.01 / 1.09, ours from our"
            " old init 5.77 / 2.35"
        ),
        (
            "RTConfig.init='diao' (default; set in our_config): every RT kernel"
            " is Haiku's TruncatedNormal(1/sqrt(fan_in)) over the input as"
            " their code concatenates it (W_4 blocks 2E + 2D, the edge input"
            " linears edge_fts + E + graph_fts, W^V_e E); 'flax' keeps LeCun"
            " normal per kernel (tests/layers/test_rt_init.py)"
        ),
    ),
]
# Whole-network equality (tests/fidelity/test_peer_goldens.py, rt_net_*,
# goldens from their BaselineModel at tiny sizes with run.py's settings):
# training loss, every gradient (teacher forcing on, and noise 0.5 under a
# fixed force mask) and evaluation predictions equal theirs to 1e-5
# (gradients relative to their magnitude) on bellman_ford and binary_search.
DIFFERENCES = [
    (
        "teacher-forcing coin and evaluation keys come from each side's own key"
        " chain (theirs: run.py's split chain from PRNGKey(model_seed); ours:"
        " fold_in(PRNGKey(42 + seed), step)); parameter initialisation from"
        " each side's own RNG"
    ),
    (
        "their nets.py applies dropout to the node, edge and graph hiddens, "
        "ours (dm-clrs 2.0.3) to the node hidden only: no effect at run.py's "
        "dropout_prob 0, but their Net draws three dropout keys per step, so "
        "the teacher-forcing masks come from differently positioned keys"
    ),
    (
        "run.py evaluates every 320 examples (80 steps) plus after the first "
        "step, and the test set once at the end with the best-validation "
        "parameters; here both sides score val and test with the current "
        "parameters every eval_every steps"
    ),
    (
        "evaluation batch 32 on both sides (run.py: 1; predictions do not "
        "depend on the other samples of a batch)"
    ),
    (
        "their environment: jax/jaxlib 0.4.13, dm-haiku 0.0.10, optax 0.1.5,"
        " chex 0.1.7 under Python 3.10 (their environment.yml: jax 0.3.14,"
        " haiku 0.0.6, optax 0.1.2, chex 0.1.3 under Python 3.9; jaxlib 0.3.14"
        " is no longer on PyPI)"
    ),
]


def describe(budget: Budget) -> Dict:
  return {
      "repository": REPOSITORY,
      "hyperparameters": dict(AUTHORS),
      "reference_flags_seed0": reference_flags(budget, 0),
      "budget": dataclasses.asdict(budget),
      "data": (
          "their run.py datasets from their own samplers (train "
          "seed 1, train_size samples at n=16; val seed 2 at n=16; "
          "test seed 3 at n=64), dumped once by "
          "refs/clrs_rt_fork.py data; our side reads the arrays and "
          "draws the same training batches (their Sampler.next "
          "index stream); evaluation on the first max_eval_samples "
          "of each set (0: all) on both sides"
      ),
      "data_vs_dm_clrs_2_0_3": (
          "with run.py's arguments the fork's samplers and dm-clrs "
          "2.0.3's give identical datasets and batch streams for "
          "bellman_ford and binary_search (checked on the 10,000 "
          "training samples and the full val/test sets); our usual "
          "pipeline (lengths 4..16, p in 0.1..0.9, random pos, pred_h "
          "as input) is not used here: both sides follow run.py"
      ),
      "differences": DIFFERENCES,
      "resolved": [{"theirs": what, "ours": how} for what, how in RESOLVED],
  }


class ClrsRt(protocol.Comparison):
  """The comparison `clrs_rt` (module docstring); prepare_data runs their
  wrapper from `inputs.reference` in `inputs.reference_python`."""

  name = "clrs_rt"
  repository = REPOSITORY
  marker = MARKER
  budgets = BUDGETS
  run_ours = staticmethod(run_ours)
  run_theirs = staticmethod(run_theirs)
  finished_ours = staticmethod(finished_ours)
  finished_theirs = staticmethod(finished_theirs)
  metric_names = staticmethod(metric_names)
  describe = staticmethod(describe)

  def reference_flags(self, budget: Budget, seed: int) -> List[str]:
    return reference_flags(budget, seed)

  def prepare_data(
      self, budget: Budget, scratch: str, inputs: protocol.DataInputs
  ) -> str:
    return prepare_data(
        budget, scratch, inputs.reference, inputs.reference_python
    )


if __name__ == "__main__":
  sys.exit("run `python -m experiments.compare clrs_rt`")
