"""The CLRS RT comparison (`experiments.compare clrs_rt`): matched-setting
translation, the missing-reference message, the fork-data reader, the
curve files, and (only where the authors' checkout and their Python exist,
never in CI) a smoke run of both sides end to end."""

import dataclasses
import json
import os

import numpy as np
import pytest

from experiments.compare import __main__ as entry
from experiments.compare import clrs_rt
from experiments.compare import reference
from experiments.compare import registry
from relational_jax.training.clrs import fixed_data
from relational_jax.training.clrs import rt_protocol

RT_CHECKOUT = os.environ.get("CLRS_RT_REFERENCE", "/tmp/peers/rt")
RT_PYTHON = os.environ.get("CLRS_RT_PYTHON", "/tmp/rtvenv/bin/python")


def test_clrs_rt_settings_translate_field_by_field():
  hp = clrs_rt.AUTHORS
  budget = clrs_rt.BUDGETS["cpu"]
  c = clrs_rt.our_config(budget, seed=2, algorithm="binary_search")
  m, p, r = c.model, c.protocol, c.rt
  assert c.processor_type == hp["processor_type"] == "rt"
  # Keys from model_seed 42 + 2, the model initialised with it + 1.
  assert c.algorithms == ("binary_search",) and c.seeds == (44,)
  assert p.init_seed_offset == 1 and p.train_size == budget.train_size
  assert p.test_points == budget.test_points
  assert c.hint_mode == "encoded_decoded"  # 2.0.3 has no diffs: = nodiff
  assert (r.num_layers, c.processor.nb_heads, r.head_dim) == (
      hp["num_layers"],
      hp["nb_heads"],
      hp["head_size"],
  )
  assert (r.node_ffn_dim, r.edge_msg_dim, r.edge_ffn_dim) == (
      hp["node_hid_size"],
      hp["edge_hid_size_1"],
      hp["edge_hid_size_2"],
  )
  assert m.hidden_dim == hp["nb_heads"] * hp["head_size"] == 192
  assert c.processor.use_ln is hp["use_ln"] is True
  assert c.processor.graph_vec == hp["graph_vec"] == "cat"
  assert c.train.learning_rate == hp["learning_rate"] == 2.5e-4
  assert c.train.clip == 0.0 and m.dropout_prob == hp["dropout_prob"]
  assert m.hint_teacher_forcing == 1 - hp["hint_teacher_forcing_noise"] == 0.5
  assert m.hint_repred_mode == "hard" and m.encoder_init == "default"
  assert m.carry_state and m.ptr_from_edges is hp["ptr_from_edges"] is True
  assert not m.use_lstm and m.nb_msg_passing_steps == 1
  assert c.train.batch_size == hp["batch_size"] == 4
  assert (p.train_lengths, p.test_lengths) == ((16,), (64,))
  assert (c.train.steps, c.train.eval_every) == (
      budget.steps,
      budget.eval_every,
  )
  from relational_jax.training.clrs import config as clrs_config  # pylint: disable=g-import-not-at-top

  clrs_config.validate(c)


def test_clrs_rt_reference_flags_carry_every_value_and_the_seed():
  budget = clrs_rt.BUDGETS["cpu"]
  flags = clrs_rt.reference_flags(budget, seed=1)
  for name, value in clrs_rt.AUTHORS.items():
    if name != "eval_batch_size":
      assert f"--{name}={value}" in flags
  assert "--ptr_from_edges=True" in flags and "--use_lstm=False" in flags
  assert "--model_seed=43" in flags
  assert f"--train_size={budget.train_size}" in flags
  assert "--eval_batch_size=32" in flags
  # A budget scoring fewer samples than a batch scores them in one batch.
  assert "--eval_batch_size=4" in clrs_rt.reference_flags(
      clrs_rt.BUDGETS["smoke"], 0
  )


@pytest.mark.parametrize(
    "name,value,match",
    [
        ("hint_mode", "encoded_decoded", "nodiff"),
        ("disable_edge_updates", True, "edge updates"),
        ("processor_type", "mpnn", "'rt'"),
        ("use_lstm", True, "use_lstm"),
    ],
)
def test_clrs_rt_untranslatable_values_are_refused(name, value, match):
  hp = dict(clrs_rt.AUTHORS, **{name: value})
  with pytest.raises(ValueError, match=match):
    clrs_rt.our_config(clrs_rt.BUDGETS["smoke"], 0, "bellman_ford", hp)


def test_clrs_rt_missing_reference_names_what_to_fetch(tmp_path):
  assert isinstance(registry.get("clrs_rt"), clrs_rt.ClrsRt)
  with pytest.raises(
      reference.MissingReferenceError,
      match="fetch github:CameronDiao/relational-transformer",
  ):
    entry.run(
        "clrs_rt",
        None,
        "smoke",
        str(tmp_path / "w"),
        str(tmp_path / "o"),
        "python",
        "x.csv",
    )
  with pytest.raises(
      reference.MissingReferenceError, match="has no clrs/examples/run.py"
  ):
    entry.run(
        "clrs_rt",
        str(tmp_path),
        "smoke",
        str(tmp_path / "w"),
        str(tmp_path / "o"),
        "python",
        "x.csv",
    )
  assert not os.path.exists(tmp_path / "o")


def _fake_fork_npz(path):
  """Two samples of a tiny spec in the wrapper's `data` layout."""
  spec = {
      "x": ["input", "node", "scalar"],
      "h": ["hint", "node", "mask"],
      "y": ["output", "node", "pointer"],
  }
  rng = np.random.RandomState(5)
  kind, keys, pos, has_gauss, cached = rng.get_state()
  arrays = {
      "train_rng_keys": keys,
      "train_rng_rest": np.array([pos, has_gauss, cached], np.float64),
      "meta_json": np.frombuffer(
          json.dumps({
              "spec": spec,
              "rng_kind": kind,
              "train_size": 3,
              "batch_size": 2,
              "algorithm": "t",
          }).encode(),
          np.uint8,
      ),
  }
  for split in ("train", "val", "test"):
    arrays[f"{split}/input/x"] = np.arange(12.0).reshape(3, 4)
    arrays[f"{split}/hint/h"] = np.arange(24.0).reshape(2, 3, 4)  # time first
    arrays[f"{split}/output/y"] = np.arange(12).reshape(3, 4) % 4
    arrays[f"{split}/lengths"] = np.array([2.0, 1.0, 2.0])
  np.savez(path, **arrays)


def test_fork_data_batches_follow_their_sampler_index_stream(tmp_path):
  path = str(tmp_path / "t.npz")
  _fake_fork_npz(path)
  data = fixed_data.FixedData.load(path)
  assert data.train_size == 3 and data.spec["h"] == ("hint", "node", "mask")
  rng = np.random.RandomState()
  rng.set_state(data.train_rng_state)
  idx = rng.choice(3, (2,), replace=True)
  assert list(idx) == list(
      np.random.RandomState(5).choice(3, (2,), replace=True)
  )
  fb = data.feedback("train", idx)
  (x,), (h,), (y,) = fb.features.inputs, fb.features.hints, fb.outputs
  np.testing.assert_array_equal(x.data, np.arange(12.0).reshape(3, 4)[idx])
  np.testing.assert_array_equal(
      h.data, np.arange(24.0).reshape(2, 3, 4)[:, idx]
  )
  assert (y.name, y.location, y.type_) == ("y", "node", "pointer")
  assert list(fb.features.lengths) == list(np.array([2.0, 1.0, 2.0])[idx])
  eval_set = data.eval_set("t", "test", batch_size=2, max_samples=2)
  assert eval_set.num_samples == 2 and eval_set.length == 64


def test_clrs_rt_curves_merge_and_finish_per_algorithm(tmp_path):
  budget = dataclasses.replace(
      clrs_rt.BUDGETS["smoke"], algorithms=clrs_rt.BOTH
  )
  out = tmp_path / "theirs_seed0"
  for algorithm, acc in (("bellman_ford", 0.5), ("binary_search", 0.25)):
    (out / algorithm).mkdir(parents=True)
    (out / algorithm / "curve.jsonl").write_text(
        "".join(
            json.dumps({"step": s, "val": acc * s, "test": acc}) + "\n"
            for s in (1, 2)
        )
    )
  points = clrs_rt.finished_theirs(budget, str(out))
  assert points[1] == {
      "step": 2,
      "metrics": {
          "bellman_ford/val": 1.0,
          "bellman_ford/test": 0.5,
          "binary_search/val": 0.5,
          "binary_search/test": 0.25,
      },
  }
  # One algorithm short of the last step: not finished.
  (out / "binary_search" / "curve.jsonl").write_text(
      json.dumps({"step": 1, "val": 0.1, "test": 0.1}) + "\n"
  )
  assert clrs_rt.finished_theirs(budget, str(out)) is None
  assert clrs_rt.finished_ours(budget, str(tmp_path / "absent")) is None


@pytest.mark.skipif(
    not (
        os.path.isfile(os.path.join(RT_CHECKOUT, clrs_rt.MARKER))
        and os.path.isfile(RT_PYTHON)
    ),
    reason=(
        f"needs the authors' checkout ({RT_CHECKOUT}, "
        f"github.com/{clrs_rt.REPOSITORY}) and their Python ({RT_PYTHON}; "
        "install command in experiments/compare/clrs_rt.py); CI has "
        "neither"
    ),
)
def test_clrs_rt_smoke_runs_both_sides_on_the_same_data(tmp_path):
  result = entry.run(
      "clrs_rt",
      RT_CHECKOUT,
      "smoke",
      str(tmp_path / "w"),
      str(tmp_path / "o"),
      RT_PYTHON,
      "x.csv",
      log=lambda m: None,
  )
  budget = clrs_rt.BUDGETS["smoke"]
  for side in ("ours", "theirs"):
    points = result["runs"][side][0]
    assert [p["step"] for p in points] == [1, 2]
    for p in points:
      assert 0.0 <= p["metrics"]["bellman_ford/val"] <= 1.0
      assert 0.0 <= p["metrics"]["bellman_ford/test"] <= 1.0
  assert os.path.isfile(tmp_path / "o" / "clrs_rt__smoke.json")
  # With run.py's arguments the fork's samplers and dm-clrs 2.0.3's give
  # the same arrays and the same batch stream.
  data_dir = str(tmp_path / "w" / "scratch" / "data")
  clrs_rt.prepare_data(
      dataclasses.replace(budget, algorithms=clrs_rt.BOTH),
      str(tmp_path / "w" / "scratch"),
      RT_CHECKOUT,
      RT_PYTHON,
  )
  import clrs  # pylint: disable=g-import-not-at-top

  for algorithm, n_eval in (("bellman_ford", 32), ("binary_search", 2048)):
    data = fixed_data.FixedData.load(
        clrs_rt.data_path(data_dir, budget, algorithm)
    )
    for split, seed, num, length in (
        ("train", 1, budget.train_size, 16),
        ("val", 2, n_eval, 16),
        ("test", 3, n_eval, 64),
    ):
      ours, spec = clrs.build_sampler(
          algorithm, num_samples=num, length=length, seed=seed
      )
      assert {k: tuple(v) for k, v in spec.items()} == data.spec
      for stage, dps in (
          ("input", ours._inputs),
          ("hint", ours._hints),  # pylint: disable=protected-access
          ("output", ours._outputs),
      ):  # pylint: disable=protected-access
        for dp in dps:
          np.testing.assert_array_equal(
              data.arrays[f"{split}/{stage}/{dp.name}"], dp.data
          )
      np.testing.assert_array_equal(
          data.arrays[f"{split}/lengths"], ours._lengths
      )  # pylint: disable=protected-access
      if split == "train":
        theirs_rng = np.random.RandomState()
        theirs_rng.set_state(data.train_rng_state)
        assert list(theirs_rng.choice(num, (8,))) == list(
            ours._rng.choice(num, (8,))
        )  # pylint: disable=protected-access
    # FixedData.build (pair_models_clrs' data) is the same dump.
    built = fixed_data.FixedData.build(algorithm, budget.train_size)
    assert built.spec == data.spec and set(built.arrays) == set(data.arrays)
    for name, array in data.arrays.items():
      np.testing.assert_array_equal(built.arrays[name], array)
    (kind, keys, *rest), (kind0, keys0, *rest0) = (
        built.train_rng_state,
        data.train_rng_state,
    )
    np.testing.assert_array_equal(keys, keys0)
    assert (kind, list(rest)) == (kind0, list(rest0))


@pytest.mark.slow
def test_our_side_runs_on_the_library_trainer_and_resumes_exactly(tmp_path):
  """train_ours_one (our side of clrs_rt) trains with trainer.fit: a run
  stopped after its first evaluation and resumed gives the points of an
  uninterrupted one."""
  path = str(tmp_path / "t.npz")
  _fake_fork_npz(path)
  data = fixed_data.FixedData.load(path)
  budget = clrs_rt.Budget(("bellman_ford",), 4, 2, 1, 3, 2)
  quiet = lambda m: None
  straight = clrs_rt.train_ours_one(
      budget, 0, "bellman_ford", data, str(tmp_path / "a"), log=quiet
  )
  part = clrs_rt.train_ours_one(
      budget, 0, "bellman_ford", data, str(tmp_path / "b"), log=quiet, stop_at=2
  )
  assert [p["step"] for p in part] == [2]
  resumed = clrs_rt.train_ours_one(
      budget, 0, "bellman_ford", data, str(tmp_path / "b"), log=quiet
  )
  assert [p["step"] for p in straight] == [2, 4]
  assert resumed == straight
  assert all(set(p) == {"step", "loss", "val", "test"} for p in straight)


@pytest.mark.parametrize("kind", ["et", "floyd"])
def test_pair_state_processors_take_the_rt_s_place_all_else_equal(kind):
  """our_config(processor_type='et' | 'floyd'): that stack at the RT's
  layers, heads and head size; every other field as translated for 'rt'."""
  from relational_jax.training import config as config_lib  # pylint: disable=g-import-not-at-top
  from relational_jax.training.clrs import config as clrs_config  # pylint: disable=g-import-not-at-top

  hp, budget = clrs_rt.AUTHORS, clrs_rt.BUDGETS["cpu"]
  rt = clrs_rt.our_config(budget, 1, "bellman_ford")
  c = clrs_rt.our_config(budget, 1, "bellman_ford", processor_type=kind)
  clrs_config.validate(c)  # The RT section keeps its defaults.
  pair = c[kind]
  assert (pair.num_layers, c.processor.nb_heads, pair.head_dim) == (
      hp["num_layers"],
      hp["nb_heads"],
      hp["head_size"],
  )
  changed = config_lib.diff(config_lib.to_dict(rt), config_lib.to_dict(c))
  assert {p.split(".")[0] for p in changed} <= {"processor_type", "rt", kind}
  assert changed["processor_type"] == ("rt", kind)
  with pytest.raises(
      ValueError,
      match=r"Unknown processor_type 'gin'; valid choices are \['rt', 'et',",
  ):
    clrs_rt.our_config(budget, 0, "bellman_ford", processor_type="gin")


@pytest.mark.parametrize("kind", sorted(rt_protocol.BASELINES))
def test_baselines_take_the_rt_s_place_in_clrs_s_network(kind):
  """our_config(processor_type='mpnn' | 'triplet_gmpnn'): CLRS's network
  (no carried state, pointers from nodes) at the baseline's hidden size and
  learning rate; data, batch, steps, clipping and hint settings as for 'rt'."""
  from relational_jax.training import config as config_lib  # pylint: disable=g-import-not-at-top
  from relational_jax.training.clrs import config as clrs_config  # pylint: disable=g-import-not-at-top

  budget = clrs_rt.BUDGETS["cpu"]
  rt = clrs_rt.our_config(budget, 1, "bellman_ford")
  c = clrs_rt.our_config(budget, 1, "bellman_ford", processor_type=kind)
  clrs_config.validate(c)
  changed = config_lib.diff(config_lib.to_dict(rt), config_lib.to_dict(c))
  assert set(changed) == {
      "processor_type",
      "model.hidden_dim",
      "train.learning_rate",
      "model.carry_state",
      "model.ptr_from_edges",
  }
  assert (c.model.hidden_dim, c.train.learning_rate) == (
      rt_protocol.BASELINES[kind]["hidden_dim"],
      rt_protocol.BASELINES[kind]["learning_rate"],
  )


def test_fork_data_from_dm_clrs_is_run_py_s_datasets():
  """run.py's set sizes and seeds, built by dm-clrs (the arrays of the
  wrapper's dump where their checkout is present, see the smoke test)."""
  assert fixed_data.run_py_eval_size("bellman_ford") == 32
  assert fixed_data.run_py_eval_size("binary_search") == 2048
  assert fixed_data.run_py_eval_size("dfs") == 32
  data = fixed_data.FixedData.build("bellman_ford", 8)
  assert data.train_size == 8 and data.spec["pi"] == (
      "output",
      "node",
      "pointer",
  )
  assert (data.num_samples("val"), data.num_samples("test")) == (32, 32)
  assert data.arrays["train/input/pos"].shape == (8, 16)
  assert data.arrays["test/input/pos"].shape == (32, 64)
  stream = fixed_data.FixedStream(data, 4)
  first = next(stream).features.lengths
  again = fixed_data.FixedStream(
      fixed_data.FixedData.build("bellman_ford", 8), 4
  )
  np.testing.assert_array_equal(next(again).features.lengths, first)
