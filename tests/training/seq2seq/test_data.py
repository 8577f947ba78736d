"""relational_jax.training.seq2seq.data: TSV loading; the training stream
(the trainer's, padded) of `Experiment`."""

import os

import jax
import numpy as np
import pytest

from relational_jax.data import scan as scan_lib
from relational_jax.data.vocab import BOS_ID, EOS_ID, PAD_ID, Vocab
from relational_jax.training import seq2seq
from relational_jax.training.seq2seq import config as config_lib
from tests.training.seq2seq.common import tiny


def test_tsv_data_and_a_missing_column(tmp_path):
  good = tmp_path / "good"
  good.mkdir()
  (good / "train.tsv").write_text("a b\tA B\nb\tB\n")
  (good / "test.tsv").write_text("a\tA\n")
  (good / "gen.tsv").write_text("b a b\tB A B\n")
  data = seq2seq.load_data(
      tiny(
          {"data.dataset": "tsv", "data.split": "", "data.data_path": str(good)}
      ).data
  )
  assert data.train == [("a b", "A B"), ("b", "B")]
  assert data.evals == {"iid": [("a", "A")], "gen": [("b a b", "B A B")]}

  bad = tmp_path / "bad"
  bad.mkdir()
  (bad / "train.tsv").write_text("a b\tA B\nb B\n")
  (bad / "test.tsv").write_text("a\tA\n")
  with pytest.raises(
      ValueError, match=r"train.tsv, line 2: found 1 column\(s\), expected 2"
  ):
    seq2seq.train_and_evaluate(
        tiny({
            "data.dataset": "tsv",
            "data.split": "",
            "data.data_path": str(bad),
            "data.scan_official_order": True,  # SCAN's only: the default.
        }),
        str(tmp_path / "run"),
    )


@pytest.mark.parametrize(
    "overrides, message",
    [
        ({"data.cutoff": 30}, r"data.cutoff=30 is read by dataset 'scan' with"),
        (
            {
                "data.dataset": "cogs",
                "data.split": "",
                "data.scan_official_order": True,
                "data.num_train": 5,
            },
            r"data.num_train=5 is read by dataset 'for2lam' only",
        ),
    ],
)
def test_a_data_field_the_dataset_never_reads_is_refused(overrides, message):
  config = tiny({"data.split": "simple", **overrides})
  with pytest.raises(ValueError, match=message):
    config_lib.validate(config)


def test_tsv_gen_categories_are_kept(tmp_path):
  (tmp_path / "train.tsv").write_text(
      "a b\tA B\tin_distribution\nb\tB\tin_distribution\n"
  )
  (tmp_path / "test.tsv").write_text("a\tA\tin_distribution\n")
  (tmp_path / "gen.tsv").write_text("b a b\tB A B\tlonger\nb a\tB A\tswap\n")
  data = seq2seq.load_data(
      tiny({
          "data.dataset": "tsv",
          "data.split": "",
          "data.data_path": str(tmp_path),
      }).data
  )
  assert data.evals["gen"] == [("b a b", "B A B"), ("b a", "B A")]
  assert data.categories == {"gen": ["longer", "swap"]}


def test_malformed_and_empty_tsv_files(tmp_path):
  (tmp_path / "train.tsv").write_text("a\tA\n")
  (tmp_path / "test.tsv").write_text("")
  config = tiny(
      {"data.dataset": "tsv", "data.split": "", "data.data_path": str(tmp_path)}
  )
  with pytest.raises(ValueError, match=r"test\.tsv: empty file"):
    seq2seq.load_data(config.data)
  (tmp_path / "test.tsv").write_text("a\tA\na A\n")
  with pytest.raises(ValueError, match=r"test\.tsv, line 2: .*no tab"):
    seq2seq.load_data(config.data)


def test_scan_official_files_and_the_generated_fallback(
    official_data, tmp_path
):
  # The shipped data holds the official simple split; it is read.
  data = seq2seq.load_data(
      tiny({"data.split": "simple", "data.data_dir": str(official_data)}).data
  )
  official = scan_lib.split("simple", data_dir=official_data / "scan")
  assert data.train == official["train"]
  assert set(data.evals["iid"]) == set(official["test"])
  assert len(data.evals["iid"]) == 4182
  assert any(
      "the official files" in n and "tasks_train_simple.txt" in n
      for n in data.notes
  )
  # No official files: generated, and the notes say so.
  fallback = seq2seq.load_data(
      tiny({"data.split": "simple", "data.data_dir": str(tmp_path)}).data
  )
  assert fallback.train == scan_lib.split("simple")["train"]
  assert any("generated from the grammar" in n for n in fallback.notes)


def test_scan_length_split_is_generated_equal_to_the_official_one(
    official_data,
):
  data = seq2seq.load_data(
      tiny({"data.split": "length", "data.data_dir": str(official_data)}).data
  )
  assert data.train == scan_lib.split("length")["train"]
  assert len(data.evals["gen"]) == 3920
  assert any(
      "generated from the grammar" in n and "equal, as sets" in n
      for n in data.notes
  )


def test_user_data_is_checked():
  with pytest.raises(
      ValueError,
      match=(
          r"unknown evaluation set\(s\) \['test'\]; valid names are \['iid',"
          r" 'gen', 'iid_val', 'gen_val'\]"
      ),
  ):
    seq2seq.Seq2SeqData([("a", "A")], {"test": [("a", "A")]}).check()
  with pytest.raises(ValueError, match="user data: the training set is empty"):
    seq2seq.Seq2SeqData([], {"iid": [("a", "A")]}).check()
  with pytest.raises(
      ValueError, match=r"1 categories for the 2 pairs of 'gen'"
  ):
    seq2seq.Seq2SeqData(
        [("a", "A")],
        {"gen": [("a", "A"), ("b", "B")]},
        categories={"gen": ["x"]},
    ).check()


def _tiny_experiment():
  """A tiny experiment on 10 training pairs, batch 4 (3 steps an epoch)."""
  pairs = [(f"w{i} x", f"W{i} X") for i in range(10)]
  data = seq2seq.Seq2SeqData(pairs, {"iid": pairs[:2]})
  return seq2seq.Experiment(tiny({"train.batch_size": 4}), data=data)


def test_stream_pads_the_short_last_batch_and_resumes_at_a_step():
  exp = _tiny_experiment()
  stream = exp.batch_stream()
  batches = [next(stream) for _ in range(6)]  # Two epochs of 4 + 4 + 2.
  assert all(len(b["src"]) == 4 for b in batches)
  for epoch in (batches[:3], batches[3:]):
    real = [
        (tuple(b["src"][r]), tuple(b["tgt_out"][r]))
        for b in epoch
        for r in range(4)
        if b["weights"][r].any()
    ]
    assert len(real) == len(set(real)) == 10  # Each example once an epoch.
    short = epoch[2]
    assert short["weights"][:2].any(axis=1).all()
    assert not short["weights"][2:].any()  # The padding rows weigh nothing.
  assert stream.get_state() == {"step": 6}
  resumed = exp.batch_stream()
  resumed.set_state({"step": 4})
  for name, value in next(resumed).items():
    np.testing.assert_array_equal(value, batches[4][name])


def test_padding_rows_leave_the_loss_and_accuracy_unchanged():
  exp = _tiny_experiment()
  params = exp.init_state()["params"]
  stream = exp.batch_stream()
  stream.set_state({"step": 2})
  padded = next(stream)  # 2 real rows and 2 zero-weight ones.
  real = {k: v[:2] for k, v in padded.items()}
  loss_and_metrics = jax.jit(  # One program a batch shape, not op by op.
      lambda batch: seq2seq.step.loss_and_metrics(
          exp.model, params, batch, jax.random.PRNGKey(0), deterministic=True
      )
  )
  loss_and_accuracy = lambda batch: np.asarray(loss_and_metrics(batch))
  np.testing.assert_allclose(
      loss_and_accuracy(padded), loss_and_accuracy(real), rtol=1e-6
  )


def test_source_markers_and_target_start():
  """'bos_eos' / 'eos' wrap the source as Csordas et al.'s encoder sees it
  (BOS w1 .. wn EOS); target_start='eos' starts the decoder from EOS (their
  single SOS/EOS token), 'bos' from BOS; outputs are the same."""
  pairs = [("a b", "X"), ("b", "Y X")]
  src_vocab = Vocab.build(s for s, _ in pairs)
  tgt_vocab = Vocab.build(t for _, t in pairs)
  a, b = src_vocab.encode("a")[0], src_vocab.encode("b")[0]
  x, y = tgt_vocab.encode("X")[0], tgt_vocab.encode("Y")[0]
  both = seq2seq.encode_set(
      pairs,
      src_vocab,
      tgt_vocab,
      4,
      3,
      source_markers="bos_eos",
      target_start="eos",
  )
  np.testing.assert_array_equal(
      both.src, [[BOS_ID, a, b, EOS_ID], [BOS_ID, b, EOS_ID, PAD_ID]]
  )
  np.testing.assert_array_equal(
      both.tgt_in, [[EOS_ID, x, EOS_ID], [EOS_ID, y, x]]
  )
  np.testing.assert_array_equal(
      both.tgt_out, [[x, EOS_ID, PAD_ID], [y, x, EOS_ID]]
  )
  assert both.start_id == EOS_ID
  plain = seq2seq.encode_set(
      pairs, src_vocab, tgt_vocab, 3, 3, source_markers="eos"
  )
  np.testing.assert_array_equal(
      plain.src, [[a, b, EOS_ID], [b, EOS_ID, PAD_ID]]
  )
  assert plain.start_id == BOS_ID and (plain.tgt_in[:, 0] == BOS_ID).all()
  np.testing.assert_array_equal(plain.tgt_out, both.tgt_out)
  with pytest.raises(ValueError, match="source_markers.*'bos_eos'"):
    seq2seq.encode_set(pairs, src_vocab, tgt_vocab, 4, 3, source_markers="sos")
  with pytest.raises(ValueError, match="target_start.*'eos'"):
    seq2seq.encode_set(pairs, src_vocab, tgt_vocab, 4, 3, target_start="sos")


def test_source_markers_need_a_sequence_encoder():
  c = config_lib.default_config()
  c.data.dataset, c.data.split = "for2lam", "short"
  c.transformer.positions, c.transformer.tree_encoder = "tree", True
  c.transformer.tree_pos_width = 2 * 32 * 2
  with pytest.raises(
      ValueError, match="tree_encoder=True needs data.source_markers='none'"
  ):
    config_lib.validate(c)
  c.data.source_markers = "none"
  config_lib.validate(c)


@pytest.mark.parametrize(
    "files, message",
    [
        ((), r"tsv: training file .*/d/train.tsv not found \(data.data_path\)"),
        (
            ("train.tsv",),
            r"no evaluation file in .*/d: it needs any of \['test.tsv', "
            r"'gen.tsv', 'dev.tsv', 'gen_dev.tsv'\]",
        ),
    ],
)
def test_missing_files_are_config_errors(tmp_path, files, message):
  """Checked with the config (one line from the command line), before
  anything is written in the work directory."""
  directory = tmp_path / "d"
  directory.mkdir()
  for name in files:
    (directory / name).write_text("a\tA\n")
  config = tiny({
      "data.dataset": "tsv",
      "data.split": "",
      "data.data_path": str(directory),
      "data.scan_official_order": True,  # SCAN's only: the default.
  })
  with pytest.raises(ValueError, match=message):
    seq2seq.validate(config)
  with pytest.raises(ValueError, match=message):
    seq2seq.train_and_evaluate(config, str(tmp_path / "run"))
  assert not os.path.exists(tmp_path / "run" / "config.json")
