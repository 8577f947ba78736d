"""relational_jax.training.seq2seq.config: the layout, and clear errors."""

import pytest

from relational_jax.models.et_seq2seq import ETSeq2SeqConfig
from relational_jax.models.seq2seq import Seq2SeqConfig
from relational_jax.training import config as config_lib
from relational_jax.training import seq2seq
from tests.training.seq2seq.common import TINY_ET, tiny


def test_default_config_layout_and_models():
  c = seq2seq.default_config()
  assert sorted(c.keys()) == [
      "data",
      "edge_transformer",
      "model",
      "results_path",
      "train",
      "transformer",
  ]
  assert sorted(c.data.keys()) == sorted([
      "dataset",
      "split",
      "cutoff",
      "data_dir",
      "data_path",
      "scan_official_order",
      "source_markers",
      "target_start",
      "max_eval_examples",
      "max_train_examples",
      "num_train",
      "num_test",
      "target_format",
      "holdout_val",
      "entity_lexicon",
  ])
  assert sorted(c.train.keys()) == sorted([
      "learning_rate",
      "schedule",
      "warmup_steps",
      "warmup",
      "optimizer",
      "weight_decay",
      "steps",
      "clip",
      "batch_size",
      "eval_batch_size",
      "eval_every",
      "checkpoint_every",
      "keep_every",
      "seed",
      "dropout_prng",
      "select_on",
      "devices",
      "progress",
      "tensorboard",
      "stop_at_step",
      "csordas_batch_size",
  ])
  for section in ("transformer", "edge_transformer"):
    assert not set(c[section].keys()) & set(seq2seq.config.DATA_DERIVED)
  sizes = dict(
      src_vocab_size=11, tgt_vocab_size=12, max_src_len=13, max_tgt_len=14
  )
  t = seq2seq.config.model_config(c, **sizes)
  assert isinstance(t, Seq2SeqConfig) and t.src_vocab_size == 11
  assert (
      t.positions,
      t.tied,
      t.d_model,
      t.num_heads,
      t.ffn_dim,
      t.num_encoder_layers,
      t.num_decoder_layers,
      t.dropout_rate,
  ) == ("relative", True, 128, 8, 256, 3, 3, 0.1)
  c.model = "edge_transformer"
  e = seq2seq.config.model_config(c, **sizes)
  assert isinstance(e, ETSeq2SeqConfig) and e.max_tgt_len == 14
  assert (
      e.et.tied,
      e.et.edge_width,
      e.et.num_heads,
      e.et.ffn_dim,
      e.et.num_layers,
      e.num_decoder_layers,
      e.et.dropout_rate,
  ) == (True, 128, 8, 256, 3, 3, 0.1)


@pytest.mark.parametrize(
    "overrides, message",
    [
        (
            {"data.dataset": "mnist"},
            (
                r"Unknown dataset 'mnist'; valid choices are \['scan', 'cogs',"
                r" 'tsv', 'for2lam'\]"
            ),
        ),
        (
            {"data.split": "lenght"},
            (
                r"Unknown SCAN split 'lenght'; valid choices are \['simple',"
                r" .*'length_cutoff'\]"
            ),
        ),
        (
            {"data.cutoff": 50},
            r"invalid SCAN length cutoff 50; valid cutoffs are 22..40",
        ),
        (
            {"data.dataset": "cogs", "data.split": "length"},
            r"Unknown cogs split 'length'; valid choices are \['default'\]",
        ),
        (
            {"model": "lstm"},
            (
                r"Unknown model 'lstm'; valid choices are \['transformer',"
                r" 'edge_transformer'\]"
            ),
        ),
        (
            {"transformer.positions": "rotary"},
            (
                r"Unknown positions 'rotary'; valid choices are \['absolute',"
                r" 'relative', 'tree'\]"
            ),
        ),
        ({"transformer.scaling": "up"}, r"Unknown scaling 'up'"),
        (
            dict(TINY_ET, **{"edge_transformer.et.layout": "up"}),
            r"Unknown layout 'up'",
        ),
        (
            {"train.schedule": "linear"},
            (
                r"Unknown train.schedule 'linear'; valid choices are"
                r" \['constant',"
                r" 'cosine', 'noam'\]"
            ),
        ),
        (
            {"train.schedule": "noam", "train.warmup_steps": 0},
            r"schedule='noam' needs warmup_steps >= 1",
        ),
        (
            {"train.select_on": "gen"},
            r"Unknown train.select_on 'gen'; valid choices are",
        ),
        (
            {"train.select_on": "gen_val"},
            r"select_on='gen_val' but this data has no 'gen_val' set",
        ),
        (
            {"transformer.num_heads": 3},
            r"num_heads=3 must divide the d_model 16",
        ),
        (
            {"transformer.dropout_rate": 1.0},
            r"dropout_rate must be in \[0, 1\), got 1.0",
        ),
        (
            {"data.dataset": "tsv", "data.split": ""},
            (
                r"dataset='tsv' needs data_path, a directory with train.tsv and"
                r" any of \['test.tsv', 'gen.tsv', 'dev.tsv', 'gen_dev.tsv'\]"
            ),
        ),
        (
            {"transformer.positions": "tree", "transformer.tree_depth": 4},
            r"target token 'I_JUMP' is not annotated",
        ),
        (
            {
                "transformer.positions": "absolute",
                "transformer.relation_aware": True,
            },
            r"transformer.relation_aware=True: the seq2seq loop passes no",
        ),
        (
            {"transformer.num_edge_labels": 3},
            r"transformer.num_edge_labels=3: the seq2seq loop passes no",
        ),
        (
            {"train.eval_every": 2, "train.keep_every": 3},
            r"train.keep_every=3 is a multiple of neither eval_every=2 nor",
        ),
    ],
)
def test_bad_config_is_a_clear_error(tmp_path, overrides, message):
  """Refused before anything is written: no config.json or vocabularies
  for the next run to conflict with."""
  workdir = tmp_path / "run"
  with pytest.raises(ValueError, match=message):
    seq2seq.train_and_evaluate(tiny(overrides), str(workdir))
  assert not workdir.exists() or not list(workdir.iterdir())


def test_unknown_path_is_a_clear_error():
  with pytest.raises(ValueError, match=r"unknown config path 'train.lr'"):
    tiny({"train.lr": 1e-3})


def test_own_optimizer_refuses_the_built_in_optimisers_fields():
  """An optax optimizer replaces the built-in one: its fields (here the tiny
  config's cosine schedule, warmup and clip) would go unread."""
  import optax  # pylint: disable=g-import-not-at-top

  from relational_jax.training.seq2seq import loop  # pylint: disable=g-import-not-at-top
  from tests.training.seq2seq.common import OWN_OPTIMIZER  # pylint: disable=g-import-not-at-top

  with pytest.raises(
      ValueError,
      match=r"\['train.schedule', 'train.warmup_steps', 'train.clip'\] "
      r"configure the built-in optimiser",
  ):
    loop.validate(tiny(), optimizer=optax.sgd(0.1))
  loop.validate(tiny(OWN_OPTIMIZER), optimizer=optax.sgd(0.1))
  loop.validate(tiny())  # The built-in optimiser reads them.
