"""experiments.seq2seq_train / seq2seq_loop on tiny configs: end to end on SCAN
length_cutoff=26, exact kill-and-resume, NaN stop, 4 devices vs 1, clear errors."""

import json
import os
import subprocess
import sys

import jax
import numpy as np
import pytest

from experiments import seq2seq_loop

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# Every run below shares these model/optimiser settings, so the train step and
# the greedy decoder compile once for the whole file.
TINY = dict(dataset="scan", split="length_cutoff", cutoff=26,
            scan_official_order=False, d_model=16, heads=2, ff=32, layers=1,
            dropout=0.1, batch=8, eval_batch=4, steps=4, eval_every=3,
            max_eval_examples=4, schedule="cosine", warmup_steps=1, lr=1e-3,
            clip=1.0, seed=3, progress=False)


def tiny(**overrides):
  return seq2seq_loop.get_config(**dict(TINY, **overrides))


def _params(config, workdir, which="latest"):
  state, meta = seq2seq_loop.restore_checkpoint(config, workdir, which)
  return jax.tree_util.tree_map(np.asarray, state["params"]), meta


def test_end_to_end_and_exact_resume(tmp_path, capsys):
  fresh_dir = str(tmp_path / "fresh")
  fresh = seq2seq_loop.train_and_evaluate(tiny(), fresh_dir, log=lambda _: None)
  assert fresh["complete"] and fresh["steps"] == 4
  assert [h["step"] for h in fresh["history"]] == [3, 4]
  assert set(fresh["final"]["accuracies"]) == {"iid", "gen"}
  assert fresh["data"]["train_size"] == 16458
  assert fresh["data"]["full_eval_sizes"] == {"iid": 1828, "gen": 2624}
  assert fresh["data"]["eval_sizes"] == {"iid": 4, "gen": 4}
  assert fresh["model_selection"] == "last" and fresh["best"]["step"] == 4
  assert len(fresh["losses"]) == 4 and all(np.isfinite(fresh["losses"]))
  with open(os.path.join(fresh_dir, "results.json")) as f:
    assert json.load(f)["history"] == fresh["history"]
  assert os.path.getsize(os.path.join(fresh_dir, "results_accuracy.png")) > 1000
  for name in ("latest", "best"):
    assert os.listdir(os.path.join(fresh_dir, "checkpoints", name))
  for name in ("src", "tgt"):
    assert os.path.exists(os.path.join(fresh_dir, f"vocab_{name}.json"))

  # Killed at step k=2 (checkpointed, between evaluations) ...
  resumed_dir = str(tmp_path / "resumed")
  part = seq2seq_loop.train_and_evaluate(tiny(stop_at_step=2), resumed_dir,
                                         log=lambda _: None)
  assert not part["complete"] and part["steps"] == 2 and part["history"] == []
  np.testing.assert_allclose(part["losses"], fresh["losses"][:2], rtol=1e-6)

  # ... and resumed to 2k=4 from the command line's main().
  from absl import flags  # pylint: disable=g-import-not-at-top
  from experiments import seq2seq_train  # pylint: disable=g-import-not-at-top
  argv = ["seq2seq_train", f"--checkpoint_path={resumed_dir}"] + [
      f"--{k}={v}" if not isinstance(v, bool) else f"--{'' if v else 'no'}{k}"
      for k, v in TINY.items()]
  flags.FLAGS(argv)
  try:
    assert seq2seq_train.config_from_flags() == tiny()
    seq2seq_train.main(argv[:1])
  finally:
    flags.FLAGS.unparse_flags()
  assert "resumed at step 2" in capsys.readouterr().out
  with open(os.path.join(resumed_dir, "results.json")) as f:
    resumed = json.load(f)
  assert resumed["complete"] and resumed["steps"] == 4
  np.testing.assert_allclose(resumed["losses"], fresh["losses"], rtol=1e-6)
  assert resumed["history"] == fresh["history"]
  fresh_params, fresh_meta = _params(tiny(), fresh_dir)
  resumed_params, resumed_meta = _params(tiny(), resumed_dir)
  assert fresh_meta["stream"] == resumed_meta["stream"]
  jax.tree_util.tree_map(
      lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7),
      fresh_params, resumed_params)

  # Resuming with a different model or data configuration is refused.
  with pytest.raises(ValueError, match=r"cannot resume: the configuration changed \(seed: saved 3, now 4\)"):
    seq2seq_loop.train_and_evaluate(tiny(seed=4, steps=6), resumed_dir)


def test_edge_transformer_end_to_end_and_exact_resume(tmp_path):
  """The ET encoder-decoder trains, decodes greedily and resumes exactly."""
  et = dict(model="edge_transformer", d_model=8, ff=16, universal=True)
  fresh = seq2seq_loop.train_and_evaluate(tiny(**et), str(tmp_path / "fresh"),
                                          log=lambda _: None)
  assert fresh["complete"] and [h["step"] for h in fresh["history"]] == [3, 4]
  assert set(fresh["final"]["accuracies"]) == {"iid", "gen"}
  assert all(np.isfinite(fresh["losses"]))
  params, _ = _params(tiny(**et), str(tmp_path / "fresh"))
  assert set(params["decoder"]) == {"layer"}          # Tied layers.
  resumed_dir = str(tmp_path / "resumed")
  seq2seq_loop.train_and_evaluate(tiny(stop_at_step=2, **et), resumed_dir,
                                  log=lambda _: None)
  resumed = seq2seq_loop.train_and_evaluate(tiny(**et), resumed_dir,
                                            log=lambda _: None)
  np.testing.assert_allclose(resumed["losses"], fresh["losses"], rtol=1e-6)
  assert resumed["history"] == fresh["history"]


def test_cogs_trains_and_evaluates(tmp_path):
  """COGS from ../shared/data/cogs: train, IID test and IID dev sets."""
  result = seq2seq_loop.train_and_evaluate(
      tiny(dataset="cogs", split="", steps=2, eval_every=2), str(tmp_path),
      log=lambda _: None)
  assert result["complete"] and result["steps"] == 2
  assert result["data"]["train_size"] == 24155
  assert result["data"]["full_eval_sizes"] == {"iid": 3000, "iid_val": 3000}
  assert set(result["final"]["accuracies"]) == {"iid", "iid_val"}
  assert result["model_selection"] == "last"
  assert all(np.isfinite(result["losses"]))


def test_nan_loss_stops_and_keeps_the_last_good_checkpoint(tmp_path):
  workdir = str(tmp_path / "nan")
  config = tiny(eval_every=2, nan_at_step=3)
  with pytest.raises(seq2seq_loop.NonFiniteLossError,
                     match=r"non-finite loss nan .* at step 3; training stopped.*"
                     r"last good checkpoint \(step 2\)"):
    seq2seq_loop.train_and_evaluate(config, workdir, log=lambda _: None)
  params, meta = _params(config, workdir)
  assert meta["step"] == 2 and len(meta["losses"]) == 2
  assert all(np.all(np.isfinite(p)) for p in jax.tree_util.tree_leaves(params))


# Three train steps on a fresh state, then IID exact match; run here (one CPU
# device) and in a subprocess with 4 CPU devices. The subprocess imports
# seq2seq_loop by path, skipping the experiments package's CLRS/TensorFlow
# import.
_THREE_STEPS = """
import jax
import numpy as np

def three_steps(loop, config):
  exp = loop.Experiment(config)
  state, stream, losses = exp.init_state(), exp.batch_stream(), []
  for _ in range(3):
    batch = exp.sharded_batch(stream.next_indices())
    shards = len(batch["src"].sharding.device_set)
    state, metrics = exp.train_step(state, batch)
    losses.append(float(metrics["loss"]))
  params = [np.asarray(x).tolist()
            for x in jax.tree_util.tree_leaves(state["params"])]
  try:
    loop.Experiment(loop.get_config(**dict(vars(config), batch=6)))
    error = None
  except ValueError as e:
    error = str(e)
  return {"n": exp.num_devices, "losses": losses, "params": params,
          "shards": shards, "iid": exp.exact_match(state["params"], "iid"),
          "error": error}
"""
_SUBPROCESS = """
import json, sys
sys.path.insert(0, "experiments")
import seq2seq_loop
""" + _THREE_STEPS + """
config = seq2seq_loop.get_config(**json.loads(sys.argv[1]))
print("RESULT " + json.dumps(three_steps(seq2seq_loop, config)))
"""
exec(_THREE_STEPS)  # Defines three_steps here.


def test_four_devices_match_one_device():
  env = dict(os.environ)
  env["XLA_FLAGS"] = (env.get("XLA_FLAGS", "")
                      + " --xla_force_host_platform_device_count=4").strip()
  env["JAX_PLATFORMS"] = "cpu"
  proc = subprocess.run([sys.executable, "-c", _SUBPROCESS, json.dumps(TINY)],
                        cwd=REPO, env=env, capture_output=True, text=True,
                        timeout=300)
  assert proc.returncode == 0, proc.stderr[-3000:]
  line = [l for l in proc.stdout.splitlines() if l.startswith("RESULT ")][-1]
  four = json.loads(line[len("RESULT "):])
  one = three_steps(seq2seq_loop, tiny())  # noqa: F821  # This process: one CPU device.
  assert (four["n"], four["shards"], one["n"], one["shards"]) == (4, 4, 1, 1)
  np.testing.assert_allclose(four["losses"], one["losses"], rtol=1e-5)
  # Float reduction order differs across devices; Adam's m/sqrt(v) magnifies
  # that for near-zero gradients, so params agree to ~1e-5 absolute (lr 1e-3).
  for a, b in zip(four["params"], one["params"]):
    np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-4)
  assert four["iid"] == one["iid"]
  assert ("global batch size 6 is not divisible by the number of devices 4"
          in four["error"])
  assert one["error"] is None


@pytest.mark.parametrize("overrides, message", [
    (dict(dataset="mnist"), r"unknown dataset 'mnist'; valid choices are \['scan', 'cogs', 'tsv'\]"),
    (dict(split="lenght"), r"unknown SCAN split 'lenght'; valid choices are \['simple', .*'length_cutoff'\]"),
    (dict(cutoff=50), r"invalid SCAN length cutoff 50; valid cutoffs are 22..40"),
    (dict(dataset="cogs", split="length"), r"unknown cogs split 'length'; valid choices are \['default'\]"),
    (dict(model="lstm"), r"unknown model 'lstm'; valid choices are \['transformer', 'edge_transformer'\]"),
    (dict(model="edge_transformer", positions="absolute"), r"model='edge_transformer' takes the Edge Transformer's relative positions \(eq. 10\): positions must be 'relative', got 'absolute'"),
    (dict(model="edge_transformer", ff=24), r"ff \(24\) must be a multiple of d_model \(16\)"),
    (dict(positions="rotary"), r"unknown positions 'rotary'; valid choices are \['absolute', 'relative', 'tree'\]"),
    (dict(scaling="up"), r"unknown scaling 'up'"),
    (dict(schedule="linear"), r"unknown schedule 'linear'; valid choices are \['constant', 'cosine', 'noam'\]"),
    (dict(schedule="noam", warmup_steps=0), r"schedule='noam' needs warmup_steps >= 1"),
    (dict(select_on="gen"), r"unknown select_on 'gen'; valid choices are"),
    (dict(select_on="gen_val"), r"select_on='gen_val' but this data has no 'gen_val' set"),
    (dict(heads=3), r"heads \(3\) must divide d_model \(16\)"),
    (dict(dataset="tsv", split=""), r"dataset='tsv' needs data_path"),
    (dict(positions="tree"), r"target token 'I_JUMP' is not annotated"),
])
def test_bad_config_is_a_clear_error(tmp_path, overrides, message):
  with pytest.raises(ValueError, match=message):
    seq2seq_loop.train_and_evaluate(tiny(**overrides), str(tmp_path / "run"))


def test_tsv_data_and_a_missing_column(tmp_path):
  good = tmp_path / "good"
  good.mkdir()
  (good / "train.tsv").write_text("a b\tA B\nb\tB\n")
  (good / "test.tsv").write_text("a\tA\n")
  (good / "gen.tsv").write_text("b a b\tB A B\n")
  data = seq2seq_loop.load_data(tiny(dataset="tsv", split="", data_path=str(good)))
  assert data.train == [("a b", "A B"), ("b", "B")]
  assert data.evals == {"iid": [("a", "A")], "gen": [("b a b", "B A B")]}

  bad = tmp_path / "bad"
  bad.mkdir()
  (bad / "train.tsv").write_text("a b\tA B\nb B\n")
  with pytest.raises(ValueError, match=r"train.tsv, line 2: found 1 column\(s\), expected 2"):
    seq2seq_loop.train_and_evaluate(tiny(dataset="tsv", split="", data_path=str(bad)),
                                    str(tmp_path / "run"))


def test_batch_stream_is_resumable():
  a = seq2seq_loop.BatchStream(10, 4, seed=1)
  first = [a.next_indices() for _ in range(3)]  # 2 per epoch: crosses epochs.
  assert a.get_state()["epoch"] == 1
  b = seq2seq_loop.BatchStream(10, 4, seed=1)
  b.next_indices()
  c = seq2seq_loop.BatchStream(10, 4, seed=1)
  c.set_state(b.get_state())
  np.testing.assert_array_equal(c.next_indices(), first[1])
  np.testing.assert_array_equal(c.next_indices(), first[2])
  with pytest.raises(ValueError, match="batch size 11 is larger than the training set"):
    seq2seq_loop.BatchStream(10, 11, seed=1)
