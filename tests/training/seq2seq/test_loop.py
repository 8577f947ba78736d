"""relational_jax.training.seq2seq.loop on tiny configs: end to end on SCAN
length_cutoff=26, exact kill-and-resume, the ET encoder-decoder, COGS, NaN
stop, 4 devices vs 1, and a user model on user data with a user optimiser."""

import json
import os
import shutil
import subprocess
import sys

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from relational_jax.training import metrics_log
from relational_jax.training import seq2seq
from tests.training.seq2seq.common import OWN_OPTIMIZER, TINY, TINY_ET, tiny

REPO = os.path.dirname(
    os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
)
QUIET = dict(log=lambda _: None)


def _params(config, workdir, which="latest", **kwargs):
  state, meta = seq2seq.restore_checkpoint(config, workdir, which, **kwargs)
  return jax.tree_util.tree_map(np.asarray, state["params"]), meta


@pytest.mark.slow
def test_end_to_end_and_exact_resume(tmp_path):
  fresh_dir = str(tmp_path / "fresh")
  fresh = seq2seq.train_and_evaluate(tiny(), fresh_dir, **QUIET)
  assert fresh["complete"] and fresh["steps"] == 4
  assert [h["step"] for h in fresh["history"]] == [3, 4]
  assert set(fresh["final"]["accuracies"]) == {"iid", "gen"}
  assert fresh["data"]["train_size"] == 16458
  assert fresh["data"]["full_eval_sizes"] == {"iid": 1828, "gen": 2624}
  assert fresh["data"]["eval_sizes"] == {"iid": 4, "gen": 4}
  assert fresh["model_selection"] == "last" and fresh["selection"]["step"] == 4
  assert len(fresh["losses"]) == 4 and all(np.isfinite(fresh["losses"]))
  with open(os.path.join(fresh_dir, "results.json")) as f:
    saved = json.load(f)
  assert saved["history"] == fresh["history"]
  assert saved["config"] == seq2seq.config.config_lib.to_dict(tiny())
  assert saved["config"]["transformer"]["d_model"] == 16
  assert os.path.getsize(os.path.join(fresh_dir, "results_accuracy.png")) > 1000
  for name in ("latest", "best"):
    assert os.listdir(os.path.join(fresh_dir, "checkpoints", name))
  for name in ("src", "tgt"):
    assert os.path.exists(os.path.join(fresh_dir, f"vocab_{name}.json"))

  # Killed at step k=2 (checkpointed, between evaluations) ...
  resumed_dir = str(tmp_path / "resumed")
  part = seq2seq.train_and_evaluate(
      tiny({"train.stop_at_step": 2}), resumed_dir, **QUIET
  )
  assert part == {"stopped_at": 2}  # As every task's planned stop.
  assert not os.path.exists(os.path.join(resumed_dir, "results.json"))
  part_losses = [
      r["loss"] for r in metrics_log.read(resumed_dir) if r["kind"] == "train"
  ]
  np.testing.assert_allclose(part_losses, fresh["losses"][:2], rtol=1e-6)

  # ... and resumed to 2k=4 (the entry point's resume: test_seq2seq_train).
  lines = []
  resumed = seq2seq.train_and_evaluate(tiny(), resumed_dir, log=lines.append)
  assert any("resumed at step 2" in line for line in lines)
  assert resumed["complete"] and resumed["steps"] == 4
  np.testing.assert_allclose(resumed["losses"], fresh["losses"], rtol=1e-6)
  assert resumed["history"] == fresh["history"]
  fresh_params, fresh_meta = _params(tiny(), fresh_dir)
  resumed_params, resumed_meta = _params(tiny(), resumed_dir)
  assert fresh_meta["stream"] == resumed_meta["stream"]
  jax.tree_util.tree_map(
      lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7),
      fresh_params,
      resumed_params,
  )

  # Resuming with a different model or data configuration is refused, and
  # the message names the differing paths.
  with pytest.raises(
      ValueError,
      match=(
          r"config.json\) differs from this run's config in 1 field\(s\) that"
          r" cannot change on resume: train.seed: saved 3, now 4\."
      ),
  ):
    seq2seq.train_and_evaluate(tiny({"train.seed": 4}), resumed_dir)
  with pytest.raises(
      ValueError,
      match=(
          r"resume: transformer.ffn_dim: saved 32, now 64;"
          r" transformer.num_heads:"
          r" saved 2, now 4\."
      ),
  ):
    seq2seq.train_and_evaluate(
        tiny({"transformer.num_heads": 4, "transformer.ffn_dim": 64}),
        resumed_dir,
    )


@pytest.mark.slow
def test_counter_hash_dropout_is_a_config_choice(tmp_path):
  # The first step's loss sees the dropout masks: other masks, other loss.
  runs = {}
  for prng in ("threefry", "counter_hash"):
    workdir = str(tmp_path / prng)
    seq2seq.train_and_evaluate(
        tiny({"train.stop_at_step": 1, "train.dropout_prng": prng}),
        workdir,
        **QUIET,
    )
    runs[prng] = metrics_log.read(workdir)[0]["loss"]
  assert all(np.isfinite(list(runs.values()))), runs
  assert runs["threefry"] != runs["counter_hash"], runs
  with pytest.raises(ValueError, match="Unknown train.dropout_prng 'fast'"):
    seq2seq.train_and_evaluate(
        tiny({"train.dropout_prng": "fast"}), str(tmp_path / "bad")
    )


@pytest.mark.slow
def test_edge_transformer_end_to_end_and_exact_resume(tmp_path):
  """The ET encoder-decoder trains, decodes greedily and resumes exactly."""
  fresh = seq2seq.train_and_evaluate(
      tiny(TINY_ET), str(tmp_path / "fresh"), **QUIET
  )
  assert fresh["complete"] and [h["step"] for h in fresh["history"]] == [3, 4]
  assert set(fresh["final"]["accuracies"]) == {"iid", "gen"}
  assert all(np.isfinite(fresh["losses"]))
  params, _ = _params(tiny(TINY_ET), str(tmp_path / "fresh"))
  assert set(params["decoder"]) == {"layer"}  # Tied layers.
  resumed_dir = str(tmp_path / "resumed")
  seq2seq.train_and_evaluate(
      tiny(dict(TINY_ET, **{"train.stop_at_step": 2})), resumed_dir, **QUIET
  )
  resumed = seq2seq.train_and_evaluate(tiny(TINY_ET), resumed_dir, **QUIET)
  np.testing.assert_allclose(resumed["losses"], fresh["losses"], rtol=1e-6)
  assert resumed["history"] == fresh["history"]


@pytest.mark.slow
def test_cogs_trains_and_evaluates(tmp_path):
  """COGS from ../shared/data/cogs: train, IID test, gen and IID dev sets
  (gen.tsv: 21,000 rows with a third column, the category)."""
  result = seq2seq.train_and_evaluate(
      tiny({
          "data.dataset": "cogs",
          "data.split": "",
          "data.scan_official_order": True,  # SCAN's only: the default.
          "train.steps": 2,
          "train.eval_every": 2,
      }),
      str(tmp_path),
      **QUIET,
  )
  assert result["complete"] and result["steps"] == 2
  assert result["data"]["train_size"] == 24155
  assert result["data"]["full_eval_sizes"] == {
      "iid": 3000,
      "gen": 21000,
      "iid_val": 3000,
  }
  assert result["data"]["eval_sizes"] == {"iid": 4, "gen": 4, "iid_val": 4}
  assert result["data"]["notes"] == []
  assert set(result["final"]["accuracies"]) == {"iid", "gen", "iid_val"}
  assert result["model_selection"] == "last"
  assert all(np.isfinite(result["losses"]))
  # 'gen' per category: the categories of the 4 rows evaluated.
  gen = seq2seq.data.tsv_lib.load_tsv(
      os.path.join(seq2seq.config.DEFAULT_DATA_DIR, "cogs", "gen.tsv"),
      with_type=True,
  )
  chosen = [gen[i].type for i in seq2seq.data.subset_indices(len(gen), 4)]
  sizes = result["data"]["category_sizes"]
  assert set(sizes) == {"gen"}
  assert sizes["gen"] == {c: chosen.count(c) for c in set(chosen)}
  _check_by_category(result, sizes["gen"])


def _check_by_category(result, sizes):
  """gen_by_category in every history entry, final and selection: the
  categories of the evaluated rows, accuracies in [0, 1] whose
  count-weighted mean is the total."""
  records = result["history"] + [
      dict(result["final"]["accuracies"], **result["final"]),
      dict(result["selection"]["accuracies"], **result["selection"]),
  ]
  for record in records:
    by_category = record["gen_by_category"]
    assert set(by_category) == set(sizes)
    assert all(0.0 <= a <= 1.0 for a in by_category.values())
    mean = sum(by_category[c] * n for c, n in sizes.items()) / sum(
        sizes.values()
    )
    assert mean == pytest.approx(record["gen"])
    assert "iid_by_category" not in record


class TableModel(nn.Module):
  """Not trained: greedy decoding translates source id i to target id
  table[i] token by token (a fixed table); __call__ is a small embedding
  + dense layer so that the loop has parameters to train."""

  tgt_vocab_size: int
  table: tuple

  @nn.compact
  def __call__(self, src_BxS, src_mask_BxS, tgt_in_BxT, *, deterministic=True):
    return nn.Dense(self.tgt_vocab_size)(
        nn.Embed(self.tgt_vocab_size, 4)(tgt_in_BxT)
    )

  @nn.nowrap
  def greedy_decode(
      self, params, src_BxS, max_len, bos, eos, *, src_mask_BxS=None
  ):
    src = np.asarray(src_BxS)
    out = np.zeros((src.shape[0], max_len), np.int32)
    for b, row in enumerate(src):
      ids = [self.table[t] for t in row if t] + [eos]
      out[b, : len(ids)] = ids[:max_len]
    return out


def test_per_category_accuracies_of_a_subset(tmp_path):
  """Categories of user data, subset by max_eval_examples; mixed
  accuracies (a table model that mistranslates 'e'; 'z' -> 'Zx' is unseen
  in training, so its target is UNK and never matched)."""
  train = [(w, w.upper() + "x") for w in "abcde"] * 2
  gen = [
      ("a b", "Ax Bx"),
      ("c d", "Cx Dx"),
      ("a e", "Ax Ex"),
      ("e e", "Ex Ex"),
      ("z", "Zx"),
      ("b c a", "Bx Cx Ax"),
      ("d", "Dx"),
      ("e", "Ex"),
  ]
  categories = [
      "pairs",
      "pairs",
      "pairs",
      "with_e",
      "unseen",
      "triple",
      "single",
      "with_e",
  ]
  data = seq2seq.Seq2SeqData(
      train,
      {"iid": train[:5], "gen": gen},
      description="table",
      categories={"gen": categories},
  )
  # Vocabularies: <pad> <bos> <eos> <unk> a..e / Ax..Ex -> ids 4..8; 'e'
  # (8) is translated to 'Dx' (7), an unknown source token (UNK, 3) to UNK.
  table = (0, 0, 0, 3, 4, 5, 6, 7, 7)
  config = tiny({
      "train.steps": 1,
      "train.eval_every": 1,
      "train.batch_size": 4,
      "train.eval_batch_size": 4,
      "data.max_eval_examples": 6,
      "data.source_markers": "none",
      **OWN_OPTIMIZER,
  })  # The table reads bare words.
  result = seq2seq.train_and_evaluate(
      config,
      str(tmp_path),
      data=data,
      optimizer=optax.sgd(0.0),
      model=lambda tgt_vocab_size, **_: TableModel(tgt_vocab_size, table),
      **QUIET,
  )
  idx = seq2seq.data.subset_indices(len(gen), 6)
  chosen = [categories[i] for i in idx]
  assert "unseen" in chosen  # Rows 0-4 and 6: the UNK row is evaluated.
  sizes = result["data"]["category_sizes"]["gen"]
  assert sizes == {c: chosen.count(c) for c in set(chosen)}
  assert sum(sizes.values()) == result["data"]["eval_sizes"]["gen"] == 6
  right = {"a b", "c d", "b c a", "d"}
  expected = {
      c: np.mean([gen[i][0] in right for i in idx if categories[i] == c])
      for c in set(chosen)
  }
  by_category = result["final"]["gen_by_category"]
  assert by_category == pytest.approx(expected)
  assert by_category["unseen"] == 0.0  # UNK emitted for UNK: not a match.
  assert 0 < result["final"]["accuracies"]["gen"] < 1
  assert len(set(by_category.values())) > 1
  _check_by_category(result, sizes)


class NoEosTableModel(TableModel):
  """TableModel's translation, then the first target word instead of EOS:
  every row is strictly wrong, and right in Csordas et al.'s scoring
  exactly when it holds its batch's longest target and is translated
  right."""

  @nn.nowrap
  def greedy_decode(
      self, params, src_BxS, max_len, bos, eos, *, src_mask_BxS=None
  ):
    src = np.asarray(src_BxS)
    out = np.full((src.shape[0], max_len), 4, np.int32)
    for b, row in enumerate(src):
      ids = [self.table[t] for t in row if t][:max_len]
      out[b, : len(ids)] = ids
    return out


def test_csordas_scoring_during_training_by_its_batch_size(
    tmp_path, monkeypatch
):
  """train.csordas_batch_size > 0 adds `<set>_csordas` to every
  evaluation, scored in batches of that size (not the decoding's
  eval_batch_size); it may change on resume, and the evaluator gives the
  same number from the saved checkpoint."""
  train = [(w, w.upper() + "x") for w in "abcde"] * 2
  # Targets of 2, 1, 3, 1, 1 words; 'e' is mistranslated (as above).
  gen = [("a b", "Ax Bx"), ("c", "Cx"), ("a b c", "Ax Bx Cx"), ("d", "Dx")]
  gen += [("e", "Ex")]
  data = seq2seq.Seq2SeqData(train, {"gen": gen}, description="table")
  table = (0, 0, 0, 3, 4, 5, 6, 7, 7)
  model = lambda tgt_vocab_size, **_: NoEosTableModel(tgt_vocab_size, table)
  base = {
      "train.batch_size": 4,
      "train.eval_batch_size": 4,
      "data.max_eval_examples": 0,
      "data.source_markers": "none",
      **OWN_OPTIMIZER,
  }
  run = lambda steps, csordas: seq2seq.train_and_evaluate(
      tiny({
          **base,
          "train.steps": steps,
          "train.eval_every": 1,
          "train.csordas_batch_size": csordas,
      }),
      str(tmp_path),
      data=data,
      optimizer=optax.sgd(0.0),
      model=model,
      **QUIET,
  )
  # Batches of 2: (a b | c) -> 'a b'; (a b c | d) -> 'a b c'; (e) -> none.
  first = run(1, 2)
  assert first["final"]["accuracies"] == {"gen": 0.0, "gen_csordas": 0.4}
  # Resumed with batches of 5: only 'a b c' is its batch's longest.
  second = run(2, 5)
  assert [h["gen_csordas"] for h in second["history"]] == [0.4, 0.2]
  assert [h["gen"] for h in second["history"]] == [0.0, 0.0]
  scored = seq2seq.loop.evaluate_checkpoint(
      str(tmp_path),
      csordas_batch_size=5,
      model=model,
      data=data,
      optimizer=optax.sgd(0.0),
  )
  assert scored["sets"]["gen"]["exact_match_csordas"] == 0.2
  drawn = []
  monkeypatch.setattr(
      seq2seq.loop.reporting,
      "plot_curves",
      lambda series, path, **_: drawn.append([s[0] for s in series]),
  )
  seq2seq.loop.plot_accuracies(second, "unused.png")
  assert drawn == [["generalisation", "generalisation, their scoring"]]
  off = run(2, 0)  # Finished: reused, its record as it was written.
  assert off["final"]["accuracies"]["gen_csordas"] == 0.2
  with pytest.raises(ValueError, match=r"csordas_batch_size must be >= 0.*-1"):
    seq2seq.validate(tiny({"train.csordas_batch_size": -1}))


@pytest.mark.slow
def test_nan_loss_stops_and_keeps_the_last_good_checkpoint(tmp_path):
  workdir = str(tmp_path / "nan")
  config = tiny({"train.eval_every": 2})

  def poison_step_3(step, batch):
    if step == 3:
      batch = dict(batch, weights=np.full_like(batch["weights"], np.nan))
    return batch

  with pytest.raises(
      seq2seq.NonFiniteLossError,
      match=r"non-finite loss nan at step 3; training stopped.*"
      r"last good checkpoint \(step 2\)",
  ):
    seq2seq.train_and_evaluate(
        config, workdir, batch_hook=poison_step_3, **QUIET
    )
  params, meta = _params(config, workdir)
  assert meta["step"] == 2 and len(meta["losses"]) == 2
  assert all(np.all(np.isfinite(p)) for p in jax.tree_util.tree_leaves(params))


# Three train steps on a fresh state, then IID exact match; run here (one CPU
# device) and in a subprocess with 4 CPU devices.
_THREE_STEPS = """
import jax
import numpy as np
from relational_jax.parallel import mesh as mesh_lib
from relational_jax.training import config as config_lib

def three_steps(s2s, config):
  exp = s2s.Experiment(config)
  state, stream, losses = exp.init_state(), exp.batch_stream(), []
  for step in range(3):
    batch = mesh_lib.shard_process_batch(
        next(stream), exp.mesh, config.train.batch_size)
    shards = len(batch["src"].sharding.device_set)
    state, metrics = exp.train_step(state, batch, step)
    losses.append(float(metrics["loss"]))
  params = [np.asarray(x).tolist()
            for x in jax.tree_util.tree_leaves(state["params"])]
  try:
    s2s.Experiment(config_lib.override(config, {"train.batch_size": 6}))
    error = None
  except ValueError as e:
    error = str(e)
  return {"n": exp.num_devices, "losses": losses, "params": params,
          "shards": shards, "iid": exp.exact_match(state["params"], "iid"),
          "error": error}
"""
_SUBPROCESS = (
    """
import json, sys
from relational_jax.training import metrics_log
from relational_jax.training import seq2seq
"""
    + _THREE_STEPS
    + """
config = seq2seq.get_config(json.loads(sys.argv[1]))
print("RESULT " + json.dumps(three_steps(seq2seq, config)))
"""
)
exec(_THREE_STEPS)  # Defines three_steps here.


@pytest.mark.slow
def test_four_devices_match_one_device():
  env = dict(os.environ)
  env["XLA_FLAGS"] = (
      env.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=4"
  ).strip()
  env["JAX_PLATFORMS"] = "cpu"
  proc = subprocess.run(
      [sys.executable, "-c", _SUBPROCESS, json.dumps(TINY)],
      cwd=REPO,
      env=env,
      capture_output=True,
      text=True,
      timeout=300,
  )
  assert proc.returncode == 0, proc.stderr[-3000:]
  line = [l for l in proc.stdout.splitlines() if l.startswith("RESULT ")][-1]
  four = json.loads(line[len("RESULT ") :])
  one = three_steps(seq2seq, tiny())  # noqa: F821  # This process: one CPU device.
  assert (four["n"], four["shards"], one["n"], one["shards"]) == (4, 4, 1, 1)
  np.testing.assert_allclose(four["losses"], one["losses"], rtol=1e-5)
  # Float reduction order differs across devices; Adam's m/sqrt(v) magnifies
  # that for near-zero gradients, so params agree to ~1e-5 absolute (lr 1e-3).
  for a, b in zip(four["params"], one["params"]):
    np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-4)
  assert four["iid"] == one["iid"]
  assert (
      "global batch size 6 is not divisible by the number of devices 4"
      in four["error"]
  )
  assert one["error"] is None


# ---------------------------------------------------------------------------
# A model, data and optimiser of the caller's, through the public call.


class PositionwiseTranslator(nn.Module):
  """Not one of ours: output token t is read from source token t alone (an
  embedding and an MLP, no attention), so it can learn a token-by-token
  translation of any length; a source PAD maps to EOS."""

  src_vocab_size: int
  tgt_vocab_size: int
  width: int = 32

  @nn.compact
  def __call__(self, src_BxS, src_mask_BxS, tgt_in_BxT, *, deterministic=True):
    num_s, num_t = src_BxS.shape[1], tgt_in_BxT.shape[1]
    src_BxT = jnp.pad(src_BxS, ((0, 0), (0, max(0, num_t - num_s))))[:, :num_t]
    h_BxTxF = nn.Embed(self.src_vocab_size, self.width)(src_BxT)
    h_BxTxF = nn.Dropout(0.1, deterministic=deterministic)(
        nn.relu(nn.Dense(self.width)(h_BxTxF))
    )
    return nn.Dense(self.tgt_vocab_size)(h_BxTxF)

  @nn.nowrap
  def greedy_decode(
      self, params, src_BxS, max_len, bos, eos, *, src_mask_BxS=None
  ):
    tgt_in_BxL = jnp.full((src_BxS.shape[0], max_len), bos)
    pred_BxL = jnp.argmax(
        self.apply({"params": params}, src_BxS, src_mask_BxS, tgt_in_BxL),
        axis=-1,
    )
    is_eos = pred_BxL == eos
    after_eos = jnp.cumsum(is_eos, axis=1) - is_eos > 0
    return jnp.where(after_eos, 0, pred_BxL)


def _translation_pairs(rng, num, lengths):
  out = []
  for _ in range(num):
    words = rng.choice(list("abcde"), rng.integers(*lengths))
    out.append((" ".join(words), " ".join(w.upper() + "x" for w in words)))
  return out


@pytest.mark.slow
def test_user_model_data_and_optimizer(tmp_path):
  rng = np.random.default_rng(0)
  data = seq2seq.Seq2SeqData(
      train=_translation_pairs(rng, 200, (1, 5)),
      evals={
          "iid": _translation_pairs(rng, 40, (1, 5)),
          "gen": _translation_pairs(rng, 40, (6, 9)),
      },  # Longer: unseen.
      description="a->Ax translation",
  )
  sizes = []

  def factory(**kwargs):
    sizes.append(kwargs)
    return PositionwiseTranslator(
        kwargs["src_vocab_size"], kwargs["tgt_vocab_size"]
    )

  config = tiny({
      "train.steps": 60,
      "train.eval_every": 30,
      "train.batch_size": 16,
      "train.eval_batch_size": 16,
      "data.max_eval_examples": 0,
      "data.source_markers": "none",
      **OWN_OPTIMIZER,
  })  # Position-wise: bare words.
  run = dict(model=factory, data=data, optimizer=optax.adam(3e-2))
  result = seq2seq.train_and_evaluate(
      config, str(tmp_path / "full"), **run, **QUIET
  )
  assert sizes[0] == {
      "src_vocab_size": 9,
      "tgt_vocab_size": 9,
      "max_src_len": 8,
      "max_tgt_len": 9,
      "pad_id": 0,
  }
  assert result["complete"] and result["model"] == "PositionwiseTranslator"
  assert result["data"]["eval_sizes"] == {"iid": 40, "gen": 40}
  assert [h["step"] for h in result["history"]] == [30, 60]
  assert np.mean(result["losses"][-5:]) < 0.1 * result["losses"][0]
  assert result["final"]["accuracies"] == {"iid": 1.0, "gen": 1.0}
  assert os.listdir(tmp_path / "full" / "checkpoints" / "best")

  # Stopped halfway and resumed: the same run.
  seq2seq.train_and_evaluate(
      config_with_stop(config, 30), str(tmp_path / "resumed"), **run, **QUIET
  )
  resumed = seq2seq.train_and_evaluate(
      config, str(tmp_path / "resumed"), **run, **QUIET
  )
  np.testing.assert_allclose(resumed["losses"], result["losses"], rtol=1e-6)
  params, meta = _params(config, str(tmp_path / "resumed"), **run)
  assert meta["step"] == 60 and set(params) == {"Embed_0", "Dense_0", "Dense_1"}


def config_with_stop(config, step):
  return seq2seq.config.config_lib.override(
      config, {"train.stop_at_step": step}
  )


@pytest.mark.filterwarnings(
    "ignore::pytest.PytestUnraisableExceptionWarning"
)  # orbax's failed read
@pytest.mark.slow
def test_corrupt_newest_checkpoint_is_reported_and_resume_stays_exact(tmp_path):
  """A truncated newest checkpoint: the run names it, resumes from the older
  step, and ends exactly where an uninterrupted run ends."""
  from tests.training.test_checkpoints import _truncate_array  # pylint: disable=g-import-not-at-top

  fresh = seq2seq.train_and_evaluate(tiny(), str(tmp_path / "fresh"), **QUIET)
  workdir = str(tmp_path / "corrupt")
  seq2seq.train_and_evaluate(
      tiny({"train.stop_at_step": 2, "train.checkpoint_every": 1}),
      workdir,
      **QUIET,
  )
  newest = os.path.join(workdir, "checkpoints", "latest", "2")
  _truncate_array(newest)
  lines = []
  resumed = seq2seq.train_and_evaluate(
      tiny({"train.checkpoint_every": 1}), workdir, log=lines.append
  )
  assert any(
      newest in line and "could not be restored" in line for line in lines
  ), lines
  assert any("resumed at step 1" in line for line in lines), lines
  assert [f["step"] for f in resumed["checkpoint_fallbacks"]] == [2]
  np.testing.assert_allclose(resumed["losses"], fresh["losses"], rtol=1e-6)


def test_an_unreadable_config_json_is_named_and_kept(tmp_path):
  """A work dir whose config.json is garbage (no checkpoint yet) is refused
  with the file named, before anything is written."""
  path = tmp_path / "config.json"
  path.write_text("{not json")
  with pytest.raises(ValueError, match=f"{path}"):
    seq2seq.train_and_evaluate(tiny(), str(tmp_path), **QUIET)
  assert path.read_text() == "{not json"
  assert not (tmp_path / "checkpoints").exists()


def test_max_train_examples_trains_on_a_fixed_subset():
  """data.max_train_examples: the training pairs (and so the vocabularies)
  are a fixed random subset; 0 keeps them all; a negative count is named."""
  train = [(w, w.upper()) for w in "abcdefgh"]
  data = seq2seq.Seq2SeqData(train, {"iid": train[:2]})
  config = tiny({"data.max_train_examples": 3, "data.source_markers": "none"})
  experiment = seq2seq.Experiment(config, data=data)
  idx = seq2seq.data.subset_indices(len(train), 3)
  assert experiment.data.train == [train[i] for i in idx]
  assert len(experiment.train_set.src) == 3
  assert len(experiment.src_vocab) == 4 + 3  # PAD BOS EOS UNK + 3 words.
  config = tiny({"data.max_train_examples": 0, "data.source_markers": "none"})
  assert seq2seq.Experiment(config, data=data).data.train == train
  with pytest.raises(ValueError, match=r"data.max_train_examples.*-1"):
    seq2seq.validate(tiny({"data.max_train_examples": -1}))


def test_evaluate_checkpoint_scores_the_saved_run(tmp_path):
  workdir = str(tmp_path / "run")
  config = tiny(
      {"train.steps": 6, "train.eval_every": 2, "train.keep_every": 2}
  )
  results = seq2seq.train_and_evaluate(config, workdir, **QUIET)
  scored = seq2seq.loop.evaluate_checkpoint(
      workdir, csordas_batch_size=2, max_wrong=1
  )
  assert scored["step"] == 6 and scored["checkpoint"] == "latest"
  # A step train.keep_every kept scores as its evaluation did in training.
  first = seq2seq.loop.evaluate_checkpoint(workdir, step=2)
  assert first["step"] == 2 and results["history"][0]["step"] == 2
  for name, entry in first["sets"].items():
    assert entry["exact_match"] == results["history"][0][name]
  with pytest.raises(
      seq2seq.loop.errors.UserError, match=r"step 3 .* \[2, 4, 6\]"
  ):
    seq2seq.loop.evaluate_checkpoint(workdir, step=3)
  for name, entry in scored["sets"].items():
    # Strict scoring is training's; the authors' only ever forgives.
    assert entry["exact_match"] == results["final"]["accuracies"][name]
    assert entry["exact_match_csordas"] >= entry["exact_match"]
    by_length = entry["by_target_length"].values()
    assert sum(v["rows"] for v in by_length) == entry["size"] == 4
    wrong = sum(v["wrong"] for v in by_length)
    assert wrong == round((1 - entry["exact_match"]) * 4)
    assert len(entry["wrong"]) == min(wrong, 1)
    if entry["wrong"]:
      assert set(entry["wrong"][0]) == {"row", "source", "target", "prediction"}
  with pytest.raises(FileNotFoundError, match="not a seq2seq work directory"):
    seq2seq.loop.evaluate_checkpoint(str(tmp_path / "none"))
  shutil.rmtree(os.path.join(workdir, "checkpoints", "best"))
  with pytest.raises(seq2seq.loop.errors.UserError, match="No best checkpoint"):
    seq2seq.loop.evaluate_checkpoint(workdir, "best")
