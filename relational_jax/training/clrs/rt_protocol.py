"""The RT paper's CLRS protocol (Diao & Loynd 2023, appendix D) as a config
of the library's CLRS task.

  from relational_jax.training import clrs
  from relational_jax.training.clrs import rt_protocol
  config = rt_protocol.config("rt", algorithms=("insertion_sort",))
  clrs.train_and_evaluate(config, "runs/rt_insertion_sort")

The RT authors' run.py (their 2022 CLRS fork) with its default flags
`RUN_PY_FLAGS` (the paper's Table 2 CLRS values), translated field by field:
run.py's fixed datasets (`protocol.train_size` = 10,000 samples at n = 16,
train seed 1; validation seed 2 at n = 16, test seed 3 at n = 64:
`fixed_data`), batch 4, Adam 2.5e-4 without clipping, 80,000 steps
(320,000 examples), validation every 80 steps (320 examples), noisy hint
teacher forcing 0.5 with hard re-prediction, Haiku's default encoder
initialisation, the model initialised with seed + 1 (run.py's model_seed
+ 1); the test score (n = 64) of the first best validation point
(`protocol.test_points='new_best'`: scored at each new best validation
point). `processor_type` 'et' / 'floyd' puts that pair-state stack in the
RT's place at its layers, heads and head size; 'mpnn' / 'triplet_gmpnn' is
CLRS's own network at `BASELINES`' sizes (the RT paper's tuned MPNN,
Ibarz et al.'s Triplet-GMPNN).
"""

from typing import Mapping, Sequence, Tuple

import processors
from relational_jax.layers import shapes
from relational_jax.training import config as config_lib
from relational_jax.training.clrs import config as clrs_config

TRAIN_LENGTH, TEST_LENGTH = 16, 64  # run.py's build_sampler lengths.
STEPS, EVAL_EVERY, TRAIN_SIZE = 80_000, 80, 10_000
FIRST_SEED = 42  # run.py's --model_seed default.

# run.py's flags (name: value), its defaults, except eval_batch_size
# (theirs 1: it changes no score, only the time a test takes).
RUN_PY_FLAGS = {
    "processor_type": "rt",
    "num_layers": 3,
    "nb_heads": 12,
    "head_size": 16,
    "node_hid_size": 32,
    "edge_hid_size_1": 16,
    "edge_hid_size_2": 8,
    "use_ln": True,
    "use_lstm": False,
    "graph_vec": "cat",
    "ptr_from_edges": True,
    "disable_edge_updates": False,
    "hint_mode": "encoded_decoded_nodiff",
    "hint_teacher_forcing_noise": 0.5,
    "dropout_prob": 0.0,
    "batch_size": 4,
    "learning_rate": 2.5e-4,
    "train_seed": 1,
    "valid_seed": 2,
    "test_seed": 3,
    "eval_batch_size": 32,
}

# Stock dm-clrs processors under the same protocol, at the RT paper's tuned
# sizes (the MPNN of its Table 19) and Ibarz et al.'s (Triplet-GMPNN):
# CLRS's own network (no carried edge state, pointers from nodes).
BASELINES = {
    "mpnn": {"hidden_dim": 512, "learning_rate": 1.6e-3},
    "triplet_gmpnn": {"hidden_dim": 128, "learning_rate": 1e-3},
}


def kinds() -> Tuple[str, ...]:
  """The processor kinds `config` builds: 'rt', the pair-state kinds of
  `processors.PROCESSORS` ('et', 'floyd'), the `BASELINES`."""
  pair_state = tuple(
      kind
      for kind, spec in processors.PROCESSORS.items()
      if issubclass(spec.processor, processors.PairStateProcessor)
  )
  return ("rt",) + pair_state + tuple(BASELINES)


def config(
    processor_type: str = "rt",
    algorithms: Sequence[str] = ("bellman_ford",),
    seeds: Sequence[int] = (FIRST_SEED,),
    flags: Mapping = RUN_PY_FLAGS,
) -> config_lib.ConfigDict:
  """The protocol's CLRS config for `processor_type` (module docstring),
  run.py's `flags` translated (refusing values it cannot translate).

  Raises:
    ValueError: an untranslatable flag value, or a `processor_type` not in
      `kinds()` (naming the valid choices).
  """
  shapes.check_choice(processor_type, kinds(), "processor_type")
  if flags["processor_type"] != "rt" or flags["disable_edge_updates"]:
    raise ValueError(
        "the protocol translates run.py's processor_type 'rt' with edge "
        f"updates; got {flags['processor_type']!r}, "
        f"disable_edge_updates={flags['disable_edge_updates']}."
    )
  if flags["hint_mode"] != "encoded_decoded_nodiff":
    raise ValueError(
        f"hint_mode {flags['hint_mode']!r}: only 'encoded_decoded_nodiff' "
        "(dm-clrs 2.0.3's 'encoded_decoded', which has no diffs) translates."
    )
  if flags["use_lstm"]:
    raise ValueError("use_lstm=True does not translate.")
  c = clrs_config.default_config()
  c.algorithms, c.seeds = tuple(algorithms), tuple(seeds)
  c.processor_type, c.hint_mode = processor_type, "encoded_decoded"
  p, t = c.protocol, c.train
  p.train_lengths, p.test_lengths = (TRAIN_LENGTH,), (TEST_LENGTH,)
  t.batch_size, t.eval_batch_size = (
      flags["batch_size"],
      flags["eval_batch_size"],
  )
  t.steps, t.eval_every, t.progress = STEPS, EVAL_EVERY, False
  p.max_eval_samples, p.train_size = 0, TRAIN_SIZE
  # Keys from model_seed, the model initialised with model_seed + 1.
  p.init_seed_offset, p.test_points = 1, "new_best"
  t.learning_rate = flags["learning_rate"]
  t.clip = 0.0  # their optax.adam, no clipping
  m = c.model
  m.hidden_dim = flags["nb_heads"] * flags["head_size"]  # run.py's hidden_size
  m.dropout_prob = flags["dropout_prob"]
  # Their noise is the probability of feeding back the prediction; ours
  # the probability of feeding the ground truth. Theirs re-encodes hard
  # (argmax / threshold) predictions.
  m.hint_teacher_forcing = 1.0 - flags["hint_teacher_forcing_noise"]
  m.hint_repred_mode = "hard"
  # Their postprocess passes re-encoded SCALAR hints with their gradient
  # (dm-clrs 2.0.3's hard mode stops it).
  m.scalar_hint_gradient = True
  m.use_lstm, m.nb_msg_passing_steps = False, 1
  m.encoder_init = "default"  # their 2022 encoders: Haiku's default init
  m.carry_state, m.ptr_from_edges = True, flags["ptr_from_edges"]
  c.processor.use_ln = flags["use_ln"]
  c.processor.graph_vec = flags["graph_vec"]
  if processor_type in BASELINES:  # CLRS's network, the baseline's sizes.
    m.hidden_dim = BASELINES[processor_type]["hidden_dim"]
    t.learning_rate = BASELINES[processor_type]["learning_rate"]
    m.carry_state = m.ptr_from_edges = False
    return c
  c.processor.nb_heads = flags["nb_heads"]
  if processor_type != "rt":  # A pair-state stack at the RT's sizes.
    pair = c[processors.PROCESSORS[processor_type].section]
    pair.num_layers, pair.head_dim = flags["num_layers"], flags["head_size"]
    return c
  r = c.rt
  r.num_layers, r.head_dim = flags["num_layers"], flags["head_size"]
  r.node_ffn_dim, r.edge_msg_dim, r.edge_ffn_dim = (
      flags["node_hid_size"],
      flags["edge_hid_size_1"],
      flags["edge_hid_size_2"],
  )
  r.init = "diao"  # their Haiku initialisation over concatenated inputs
  return c
