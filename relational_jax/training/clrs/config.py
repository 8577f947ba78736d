"""The CLRS run configuration: one `ConfigDict`, each field written once.

  config.algorithms, seeds, processor_type, hint_mode   what to train
  config.multi_algorithm   'separate': one model per algorithm and seed;
                    'generalist': one model per seed over all the
                    algorithms, as CLRS's run.py trains it (a shared
                    processor, each algorithm's encoders and decoders; each
                    step one update on a batch of each algorithm in turn;
                    the best checkpoint on the sum of their validation
                    scores); 'generalist_summed': the same model, each step
                    one update on the summed losses of a batch of each
  config.train      the `train` section every task has
                    (`trainer.TRAIN_FIELDS`: steps, batch sizes, evaluation
                    and checkpoint cadence, the optimiser of
                    `optim.make_optimizer`, ...); `select_on` 'val' tests the
                    best-validation state, 'last' the final one
  config.protocol   the data protocol: train and test graph sizes, the
                    evaluation sample cap; `train_size` 0 samples every
                    batch afresh (CLRS's run.py today), > 0 trains on a
                    fixed set of that many samples (the RT paper's
                    protocol, `fixed_data`: run.py of its 2022 fork, one
                    train and one test length); `test_points` when the test
                    sets are scored ('end': the selected state, once;
                    'every_evaluation' or 'new_best': during training, the
                    test score that of the selected evaluation point); and
                    `init_seed_offset` (the model is initialised with
                    seed + offset: run.py's is 1)
  config.model      keyword arguments of `processors.CarryModel` (CLRS
                    `BaselineModel` names: hidden_dim, dropout_prob, ...)
  config.processor  arguments of `processors.get_processor_factory` that are
                    not a model section: nb_heads (the attention heads of
                    every kind: the RT kinds, 'et', 'floyd', CLRS's GAT
                    kinds), use_ln (layer norm: the RT kinds and CLRS kinds;
                    'et' and 'floyd' have none to switch), nb_triplet_fts,
                    and the processor options of our kinds (graph_vec,
                    node_readout)
  config.rt         `RTConfig` fields (our RT kinds), handed on unchanged
  config.et         `ETConfig` fields (the 'et' kind), handed on unchanged
  config.floyd      `FloydConfig` fields (the 'floyd' kind), handed on
                    unchanged

The model sections hold every field of their config dataclass but two
kinds: those no kind of the section takes as an option (withheld or fixed
by all of them, e.g. the RT's use_edges), and num_heads and use_ln, which
come from `config.processor.nb_heads` and `config.processor.use_ln` as the
factory's own arguments (`processors.factory.ARGUMENT_FIELDS`): each is
written once, for every kind. A field the kind does not read must keep its
default (`validate`).
The model sections and processor options are read from the processor table
(`processors.PROCESSORS`: each kind's `section`, config dataclass, `choices`
and `run_defaults`), so a kind added there has its section here.

Defaults: the main job of the README (the RT paper's tuned RT on
bellman_ford, a small CPU budget).
"""

from typing import Callable, Dict, List, Optional

import processors
from relational_jax.layers import shapes
from relational_jax.parallel import mesh as mesh_lib
from relational_jax.training import config as config_lib
from relational_jax.training import optim
from relational_jax.training import trainer
from relational_jax.training.clrs import data as clrs_data

ConfigDict = config_lib.ConfigDict
# RTConfig fields that the processor kind fixes ('rt_no_edge_update', ...).
RT_KIND_FIELDS = processors.factory.RT_KIND_FIELDS
RT_TRIANGULAR_FIELDS = processors.factory.RT_TRIANGULAR_FIELDS
GRAPH_VEC_CHOICES = ("cat", "core")
HINT_MODES = ("encoded_decoded", "decoded_only", "none")
MULTI_ALGORITHM = ("separate", "generalist", "generalist_summed")
TEST_POINTS = ("end", "every_evaluation", "new_best")
HINT_REPRED_MODES = ("soft", "hard", "hard_on_eval")
ENCODER_INITS = ("default", "xavier_on_scalars")


def model_sections() -> dict:
  """{model section: the name of its family of our kinds in messages}, one
  per config dataclass of `processors.PROCESSORS` ('rt': 'RT', ...)."""
  return {
      name: spec.family
      for name, (spec, _) in processors.factory.sections().items()
  }


def _section_of(spec, kinds) -> ConfigDict:
  """The model section of `kinds` (all of `spec.config`): every field some
  kind takes as an option, at `spec.run_defaults` over the dataclass's (not
  num_heads and use_ln: `config.processor.nb_heads` / `.use_ln`)."""
  table = processors.PROCESSORS
  never = set.intersection(
      *(set(table[k].withheld) | set(table[k].fixed) for k in kinds)
  )
  never |= set(processors.factory.ARGUMENT_FIELDS)
  out = config_lib.section(spec.config, exclude=never)
  for name, value in spec.run_defaults.items():
    out[name] = value
  return out


def default_config() -> ConfigDict:
  c = ConfigDict()
  c.algorithms = ("bellman_ford",)
  c.seeds = (42,)
  c.processor_type = "rt"
  c.hint_mode = "encoded_decoded"
  c.multi_algorithm = "separate"
  c.train = ConfigDict(
      dict(
          steps=300,
          batch_size=8,
          eval_batch_size=32,
          eval_every=50,
          checkpoint_every=0,  # 0: at every evaluation
          keep_every=0,  # > 0: also keep the latest steps that are multiples.
          stop_at_step=0,
          learning_rate=2.5e-4,
          schedule="constant",
          warmup_steps=0,
          warmup="count_plus_one",
          clip=1.0,
          optimizer="adam",
          weight_decay=0.0,
          select_on="val",
          devices=0,
          progress=True,
          tensorboard=False,  # Also TensorBoard events (metrics.jsonl always).
      )
  )
  c.protocol = ConfigDict(
      dict(
          train_lengths=(4, 7, 11, 13, 16),
          test_lengths=(16, 32, 64),  # the OOD curve: n = 16 is in distribution
          max_eval_samples=0,  # 0: CLRS sizes (64 x num_samples_multiplier)
          train_size=0,  # > 0: a fixed train set (fixed_data), run.py 2022
          test_points="end",
          init_seed_offset=0,
      )
  )
  c.model = ConfigDict(
      dict(
          hidden_dim=192,  # = num_heads * head_dim: no projection around RT
          dropout_prob=0.0,
          hint_teacher_forcing=0.0,
          hint_repred_mode="soft",
          use_lstm=False,
          nb_msg_passing_steps=1,
          encoder_init="xavier_on_scalars",
          carry_state=True,
          ptr_from_edges=True,
          decode_previous_hiddens=True,  # As the RT authors' nets.py.
          # Hard-postprocessed SCALAR hints fed back keep their gradient, as the
          # RT authors' fork (dm-clrs 2.0.3 stops it: False).
          scalar_hint_gradient=True,
      )
  )
  # Our kinds' processor options at their defaults (graph_vec='cat',
  # node_readout='diagonal').
  choices = {}
  for spec in processors.PROCESSORS.values():
    for name, valid in spec.choices.items():
      choices.setdefault(name, valid[0])
  c.processor = ConfigDict(
      dict(use_ln=True, nb_triplet_fts=8, nb_heads=12, **choices)
  )
  # One section per config dataclass of our kinds: rt (RTConfig's defaults,
  # the RT paper's Table 2: 3 layers, 12 heads (processor.nb_heads) x 16,
  # d_nh 32, d_eh1 16, d_eh2 8), et and floyd (at ET's width: 12 heads x 16
  # = 192, 3 layers).
  for name, (spec, kinds) in processors.factory.sections().items():
    c[name] = _section_of(spec, kinds)
  c.results_path = ""  # '' = <workdir>/results.json; the PNGs go beside it.
  return c


def load(raw: dict) -> ConfigDict:
  """A config from its JSON record (`config.json`, a results JSON's
  'config'), refusing one of another version (`errors.OtherFormatError`,
  naming the fields that differ from today's and the converter)."""
  config_lib.check_same_fields(raw, config_lib.to_dict(default_config()))
  return config_lib.from_dict(raw)


def _sections_in_use(kind: str):
  spec = processors.PROCESSORS.get(kind)
  return (spec.section,) if spec is not None else ()


# Model fields that act only on hints fed back to the processor.
HINT_FEEDBACK_FIELDS = (
    "hint_teacher_forcing",
    "hint_repred_mode",
    "scalar_hint_gradient",
)


def _check_fixed_protocol(config: ConfigDict) -> None:
  """train_size, test_points and init_seed_offset (`default_config`)."""
  p = config.protocol
  shapes.check_choice(p.test_points, TEST_POINTS, "protocol.test_points")
  for name in ("train_size", "init_seed_offset"):
    if not (isinstance(p[name], int) and p[name] >= 0):
      raise ValueError(f"protocol.{name} must be an int >= 0, got {p[name]!r}.")
  if p.train_size and (len(p.train_lengths), len(p.test_lengths)) != (1, 1):
    raise ValueError(
        f"protocol.train_size={p.train_size} (a fixed train set, run.py "
        "2022) trains at one length and tests at one: got train_lengths="
        f"{tuple(p.train_lengths)}, test_lengths={tuple(p.test_lengths)}."
    )
  if p.test_points != "end":
    if len(p.test_lengths) != 1:
      raise ValueError(
          f"protocol.test_points={p.test_points!r} scores one test length "
          f"during training; got test_lengths={tuple(p.test_lengths)} "
          "(or test_points='end')."
      )
    if config.multi_algorithm != "separate" or config.train.select_on != "val":
      raise ValueError(
          f"protocol.test_points={p.test_points!r} takes the test score at "
          "the best validation point of a single-task run: it needs "
          "multi_algorithm='separate' and train.select_on='val', got "
          f"{config.multi_algorithm!r} and {config.train.select_on!r} (or "
          "test_points='end')."
      )


def validate(config: ConfigDict, custom_factory: bool = False) -> None:
  """Raises ValueError naming a bad value and the valid choices."""
  for algorithm in config.algorithms:
    clrs_data.check_algorithm(algorithm)
  if not config.algorithms:
    raise ValueError("algorithms must name at least one algorithm.")
  if not config.seeds:
    raise ValueError("seeds must name at least one seed.")
  for name in ("algorithms", "seeds"):
    values = list(config[name])
    repeated = sorted({v for v in values if values.count(v) > 1})
    if repeated:  # A repeat would reuse the first run and count it twice.
      raise ValueError(f"{name} repeats {repeated}: each is one run.")
  shapes.check_choice(config.hint_mode, HINT_MODES, "hint_mode")
  shapes.check_choice(
      config.multi_algorithm, MULTI_ALGORITHM, "multi_algorithm"
  )
  m, p, t = config.model, config.protocol, config.train
  shapes.check_choice(m.hint_repred_mode, HINT_REPRED_MODES, "hint_repred_mode")
  shapes.check_choice(m.encoder_init, ENCODER_INITS, "encoder_init")
  for name in ("hidden_dim", "nb_msg_passing_steps"):
    if not (isinstance(m[name], int) and m[name] >= 1):
      raise ValueError(f"model.{name} must be an int >= 1, got {m[name]!r}.")
  if not 0.0 <= m.dropout_prob < 1.0:
    raise ValueError(
        f"model.dropout_prob must be in [0, 1), got {m.dropout_prob}."
    )
  if not 0.0 <= m.hint_teacher_forcing <= 1.0:
    raise ValueError(
        "model.hint_teacher_forcing must be in [0, 1], got "
        f"{m.hint_teacher_forcing}."
    )
  defaults = default_config()  # Also for the model sections below.
  fed_back = config.hint_mode == "encoded_decoded"
  for name in HINT_FEEDBACK_FIELDS:
    if not fed_back and m[name] != defaults.model[name]:
      raise ValueError(
          f"model.{name}={m[name]!r} acts on hints fed back to the processor,"
          f" which hint_mode={config.hint_mode!r} does not do (only "
          f"'encoded_decoded'); leave it at {defaults.model[name]!r}."
      )
  if not m.scalar_hint_gradient and m.hint_repred_mode != "hard":
    raise ValueError(
        "model.scalar_hint_gradient=False acts only with hint_repred_mode="
        f"'hard' (hard-postprocessed hints), got {m.hint_repred_mode!r}."
    )
  clrs_data.check_lengths(p.train_lengths, "train_lengths")
  clrs_data.check_lengths(p.test_lengths, "test_lengths")
  if p.max_eval_samples < 0:
    raise ValueError(
        "protocol.max_eval_samples must be >= 0 (0: CLRS sizes), got "
        f"{p.max_eval_samples}."
    )
  _check_fixed_protocol(config)
  trainer.validate_train_section(t)
  if t.eval_batch_size < 1:
    raise ValueError(
        f"train.eval_batch_size must be >= 1, got {t.eval_batch_size}."
    )
  optim.validate(t)
  mesh = mesh_lib.mesh_of_first(t.devices)
  for name in ("batch_size", "eval_batch_size"):
    mesh_lib.check_divisible(
        t[name], mesh_lib.num_data_shards(mesh), f"train.{name}"
    )
  if m.ptr_from_edges and not m.carry_state:
    raise ValueError(
        "ptr_from_edges=True needs carry_state=True (stock CLRS "
        "BaselineModel cannot decode pointers from edges)."
    )
  if not (m.carry_state or m.decode_previous_hiddens):
    raise ValueError(
        "model.decode_previous_hiddens=False changes what decoders read of "
        "carried hiddens; with carry_state=False there are none. Leave it "
        "at its default True."
    )
  if custom_factory:
    return
  kind = config.processor_type
  if kind not in processors.all_kinds():
    raise ValueError(
        f"Unknown processor_type {kind!r}; valid kinds are "
        f"{list(processors.all_kinds())}."
    )
  shapes.check_choice(
      config.processor.graph_vec, GRAPH_VEC_CHOICES, "graph_vec"
  )
  # Nothing is silently ignored: a model section the kind does not read
  # must keep its defaults, and so must nb_heads / use_ln where its config
  # has no num_heads / use_ln.
  for name, family in model_sections().items():
    if name in _sections_in_use(kind):
      continue
    changed = config_lib.diff(defaults[name].to_dict(), config[name].to_dict())
    if changed:
      raise ValueError(
          f"config.{name} fields {sorted(changed)} apply to the "
          f"{family} processor kinds only, not to "
          f"processor_type={kind!r}."
      )
  _check_unread_arguments(config, defaults)
  if kind in processors.CLRS_KINDS and m.carry_state:
    raise ValueError(
        f"model.carry_state=True, but processor_type={kind!r} (a dm-clrs "
        "kind) carries no edge or graph hidden between steps and returns no "
        "edges to decode pointers from: set model.carry_state=False and "
        "model.ptr_from_edges=False (--nocarry_state --noptr_from_edges), "
        "dm-clrs's own network."
    )
  processor_factory(config)  # Bad sizes or choices fail here, early.


def unread_processor_fields(kind: str) -> Dict[str, List[str]]:
  """{`config.processor` field the kind `kind` never reads: the kinds that
  read it}. Ours: nb_heads / use_ln where its config has no num_heads /
  use_ln (`ProcessorSpec.arguments`), the other kinds' processor options
  (node_readout for the RT kinds) and nb_triplet_fts. dm-clrs's kinds: our
  processor options (graph_vec, node_readout) and the factory arguments
  that dm-clrs's factory passes them but they never read
  (`processors.factory.CLRS_ARGUMENT_READERS`: nb_heads but for the GATs,
  nb_triplet_fts but for the triplet kinds, use_ln for the MemNets)."""
  table = processors.PROCESSORS.items()
  clrs_readers = processors.factory.CLRS_ARGUMENT_READERS
  choices = {name for s in processors.PROCESSORS.values() for name in s.choices}
  spec = processors.PROCESSORS.get(kind)
  if spec is None:
    out = {
        name: [k for k, s in table if name in s.choices]
        for name in sorted(choices)
    }
    for argument, readers in clrs_readers.items():
      if kind in processors.factory.CLRS_KINDS and kind not in readers:
        ours = [k for k, s in table if argument in s.arguments()]
        out[argument] = list(readers) + ours
    return out
  out = {}
  for argument in processors.factory.ARGUMENT_FIELDS.values():
    if argument not in spec.arguments():
      out[argument] = [k for k, s in table if argument in s.arguments()]
  for name in sorted(choices - set(spec.choices)):
    out[name] = [k for k, s in table if name in s.choices]
  out["nb_triplet_fts"] = list(clrs_readers["nb_triplet_fts"])
  return out


def _check_unread_arguments(config: ConfigDict, defaults: ConfigDict) -> None:
  """Raises ValueError where a `config.processor` field that the kind
  `config.processor_type` does not read (`unread_processor_fields`) differs
  from its default, naming the kinds that read it."""
  kind = config.processor_type
  fields = {a: f for f, a in processors.factory.ARGUMENT_FIELDS.items()}
  for name, readers in sorted(unread_processor_fields(kind).items()):
    value, default = config.processor[name], defaults.processor[name]
    if value == default:
      continue
    spec = processors.PROCESSORS.get(kind)
    if name in fields and spec is not None:
      raise ValueError(
          f"config.processor.{name}={value!r} is not read by "
          f"processor_type={kind!r} (its {spec.config.__name__} has no "
          f"{fields[name]}); of our kinds, {readers} read it. Leave it at "
          f"its default {default!r}."
      )
    if spec is None and name in processors.factory.CLRS_ARGUMENT_READERS:
      raise ValueError(
          f"config.processor.{name}={value!r} is not read by dm-clrs's "
          f"processor_type={kind!r}; {readers} read it. Leave it at its "
          f"default {default!r}."
      )
    raise ValueError(
        f"config.processor.{name}={value!r} is not an option of "
        f"processor_type={kind!r}; {readers} read it. Leave it at its "
        f"default {default!r}."
    )


def processor_factory(config: ConfigDict) -> Callable:
  """The processor factory of `config.processor_type`. Every kind takes its
  heads and layer norm from `config.processor.nb_heads` and
  `config.processor.use_ln` (the factory's own arguments: our kinds set
  their config's num_heads / use_ln from them where it has one); our kinds
  read their model section (`config.rt`, `config.et`, `config.floyd`: the
  kind's `section` in `processors.PROCESSORS`) as options, and their
  processor options (`choices`) from `config.processor`."""
  kind, p = config.processor_type, config.processor
  spec = processors.PROCESSORS.get(kind)
  if spec is not None:
    options = config_lib.to_dict(config[spec.section])
    defaults = default_config()[spec.section]
    # Fields the section holds for other kinds (the triangular edge
    # attention's for 'rt_triangular'): at their defaults, or refused.
    for name in spec.withheld:
      if name not in options:
        continue
      if options[name] != defaults[name]:
        takers = [
            k
            for k in processors.factory.sections()[spec.section][1]
            if name not in processors.PROCESSORS[k].withheld
        ]
        which = (
            f"processor_type {takers[0]!r}"
            if len(takers) == 1
            else f"processor_types {takers}"
        )
        raise ValueError(
            f"config.{spec.section}.{name} applies to {which} only, not to "
            f"{kind!r}."
        )
      del options[name]
    for name in spec.heads_default:
      if not options[name]:
        del options[name]  # 0: the factory's default, nb_heads
    return processors.get_processor_factory(
        kind,
        use_ln=p.use_ln,
        nb_triplet_fts=p.nb_triplet_fts,
        nb_heads=p.nb_heads,
        **{name: p[name] for name in spec.choices},
        **options,
    )
  return processors.get_processor_factory(
      kind,
      use_ln=p.use_ln,
      nb_triplet_fts=p.nb_triplet_fts,
      nb_heads=p.nb_heads,
  )


def get_config(overrides: Optional[dict] = None) -> ConfigDict:
  """The default config with dotted-path `overrides`."""
  return config_lib.override(default_config(), overrides or {})
