"""CLRS training as a library call, on a tiny config: JSON, PNG, checkpoints,
resume, NaN stop, evaluate-only, a user-defined processor."""

import os
import re

import clrs
import haiku as hk
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import processors

from relational_jax.training.checkpoints import RunCheckpoints
from relational_jax.training.clrs import config as clrs_config
from relational_jax.training.clrs import data as clrs_data
from relational_jax.training.clrs import loop as clrs_loop
from relational_jax.training import trainer
from relational_jax.training import config as config_lib
from relational_jax.training.errors import NonFiniteLossError, UserError
from tests.experiments.test_migrate_workdir import load_migrate

TINY = {
    "algorithms": ("bellman_ford",),
    "protocol.train_lengths": (5,),
    "protocol.test_lengths": (5, 6),
    "train.batch_size": 4,
    "train.eval_batch_size": 4,
    "train.steps": 2,
    "train.eval_every": 1,
    "protocol.max_eval_samples": 4,
    "train.progress": False,
    "model.hidden_dim": 16,
    "processor.nb_heads": 2,
    "rt.head_dim": 4,
    "rt.num_layers": 1,
    "rt.node_ffn_dim": 4,
    "rt.edge_msg_dim": 4,
    "rt.edge_ffn_dim": 4,
}


def tiny(**overrides):
  merged = dict(TINY)
  merged.update({k.replace("__", "."): v for k, v in overrides.items()})
  return clrs_config.get_config(merged)


@pytest.mark.slow
def test_runs_end_to_end(tmp_path):
  workdir = str(tmp_path / "run")
  results = clrs_loop.train_and_evaluate(tiny(), workdir)
  run = results["algorithms"]["bellman_ford"]["runs"][0]
  assert run["steps"] == 2 and set(run["test"]) == {"5", "6"}
  assert [h["step"] for h in run["history"]] == [1, 2]
  assert os.path.exists(os.path.join(workdir, "results.json"))
  assert os.path.getsize(os.path.join(workdir, "results_validation.png")) > 1000
  ckpts = os.path.join(workdir, "bellman_ford_seed42", "checkpoints")
  assert os.listdir(os.path.join(ckpts, "latest")) and os.listdir(
      os.path.join(ckpts, "best")
  )
  assert results["config"]["rt"]["head_dim"] == 4
  assert run["select_on"] == "val" and run["selected"].startswith("val")
  # Another selection on a finished run: tested again, not the old result.
  logs = []
  again = clrs_loop.train_and_evaluate(
      tiny(train__select_on="last"), workdir, log=logs.append
  )
  run = again["algorithms"]["bellman_ford"]["runs"][0]
  assert (run["select_on"], run["selected"], run["steps"]) == ("last",) * 2 + (
      2,
  )
  assert not any("already complete" in m for m in logs)
  logs.clear()
  clrs_loop.train_and_evaluate(
      tiny(train__select_on="last"), workdir, log=logs.append
  )
  assert any("already complete, reusing" in m for m in logs)


@pytest.mark.parametrize(
    "overrides, message",
    [
        (
            dict(algorithms=("bubble_sortt",)),
            r"Unknown CLRS algorithm 'bubble_sortt'; valid algorithms are \[",
        ),
        (
            dict(algorithms=("bfs,dfs",)),  # One string: the flag's pitfall.
            r"'bfs,dfs' \(several algorithms: --config.algorithms=",
        ),
        (
            dict(processor_type="gnn"),
            r"Unknown processor_type 'gnn'; valid kinds are \[",
        ),
        (
            dict(processor__graph_vec="mean"),
            r"Unknown graph_vec 'mean'; valid choices are \['cat', 'core'\]",
        ),
        (dict(hint_mode="all"), r"Unknown hint_mode 'all'"),
        (dict(seeds=(42, 42)), r"seeds repeats \[42\]: each is one run"),
        (dict(algorithms=()), r"algorithms must name at least one"),
        (
            dict(hint_mode="none", model__hint_teacher_forcing=0.5),
            r"model.hint_teacher_forcing=0.5 acts on hints fed back.*"
            r"hint_mode='none'",
        ),
        (
            dict(model__scalar_hint_gradient=False),
            r"scalar_hint_gradient=False acts only with hint_repred_mode="
            r"'hard'.*got 'soft'",
        ),
        (
            dict(protocol__test_lengths=(2,)),
            r"test_lengths must all be >= 4 nodes, got 2",
        ),
        (
            dict(model__ptr_from_edges=True, model__carry_state=False),
            r"ptr_from_edges=True needs carry_state=True",
        ),
        (
            dict(model__hidden_dim=-3),
            r"model.hidden_dim must be an int >= 1, got -3",
        ),
        (
            dict(model__nb_msg_passing_steps=0),
            r"model.nb_msg_passing_steps must be an int >= 1, got 0",
        ),
        (dict(model__dropout_prob=1.0), r"dropout_prob must be in \[0, 1\)"),
        (
            dict(model__hint_teacher_forcing=1.5),
            r"hint_teacher_forcing must be in \[0, 1\], got 1.5",
        ),
        (
            dict(processor_type="mpnn"),
            (
                r"config.rt fields \[.*'head_dim'.*\] apply to the RT processor"
                r" kinds only"
            ),
        ),
    ],
)
def test_bad_config_is_a_clear_error(tmp_path, overrides, message):
  with pytest.raises(ValueError, match=message):
    clrs_loop.train_and_evaluate(tiny(**overrides), str(tmp_path))
  # Refused before anything is saved: the directory takes a good config.
  assert not os.path.exists(os.path.join(tmp_path, "config.json"))


@pytest.mark.parametrize(
    "overrides, message",
    [
        (
            {"processor_type": "mpnn"},
            r"model.carry_state=True, but processor_type='mpnn' \(a dm-clrs "
            r"kind\) carries no edge or graph hidden.*--nocarry_state "
            r"--noptr_from_edges",
        ),
        (
            {
                "processor_type": "mpnn",
                "model.carry_state": False,
                "model.ptr_from_edges": False,
                "model.decode_previous_hiddens": False,
            },
            r"decode_previous_hiddens=False .* with carry_state=False",
        ),
    ],
)
def test_a_model_option_the_processor_cannot_use_is_refused(overrides, message):
  with pytest.raises(ValueError, match=message):
    clrs_config.validate(clrs_config.get_config(overrides))
  clrs_config.validate(  # dm-clrs's own network: fine.
      clrs_config.get_config({
          "processor_type": "mpnn",
          "model.carry_state": False,
          "model.ptr_from_edges": False,
      })
  )


@pytest.mark.parametrize(
    "kind, field, value",
    [("mpnn", "graph_vec", "core"), ("et", "nb_triplet_fts", 4)],
)
def test_a_processor_field_the_kind_never_reads_is_refused(kind, field, value):
  config = clrs_config.get_config(
      {"processor_type": kind, f"processor.{field}": value}
  )
  with pytest.raises(
      ValueError,
      match=rf"processor.{field}={value!r} is not an option of "
      rf"processor_type={kind!r}",
  ):
    clrs_config.validate(config)


@pytest.mark.parametrize(
    "kind, field, value",
    [
        ("mpnn", "nb_heads", 4),
        ("gmpnn", "nb_triplet_fts", 16),
        ("memnet_full", "use_ln", False),
    ],
)
def test_a_factory_argument_a_dm_clrs_kind_never_reads_is_refused(
    kind, field, value
):
  """dm-clrs's factory takes nb_heads, nb_triplet_fts and use_ln for every
  kind; a kind that never reads one refuses a value other than the
  default, naming the kinds that read it."""
  stock = {"model.carry_state": False, "model.ptr_from_edges": False}
  config = clrs_config.get_config(
      dict(stock, processor_type=kind, **{f"processor.{field}": value})
  )
  readers = processors.factory.CLRS_ARGUMENT_READERS[field]
  with pytest.raises(
      ValueError,
      match=rf"processor.{field}={value!r} is not read by dm-clrs's "
      rf"processor_type={kind!r}; \[{re.escape(repr(readers[0]))}",
  ):
    clrs_config.validate(config)
  assert f"processor.{field}" in clrs_loop.unread_paths(config.to_dict())
  reader = clrs_config.get_config(
      dict(stock, processor_type=readers[0], **{f"processor.{field}": value})
  )
  clrs_config.validate(reader)
  assert f"processor.{field}" not in clrs_loop.unread_paths(reader.to_dict())


def test_unknown_config_path_is_a_clear_error():
  with pytest.raises(ValueError, match=r"unknown config path 'rt.head_size'"):
    clrs_config.get_config({"rt.head_size": 4})


def test_heads_that_do_not_divide_the_width_are_an_error():
  from relational_jax.layers.relational import RelationalAttention  # pylint: disable=g-import-not-at-top

  with pytest.raises(
      ValueError, match=r"num_heads=5 must divide the node width D 16"
  ):
    RelationalAttention(num_heads=5).init(
        jax.random.PRNGKey(0), jnp.ones((1, 3, 16))
    )


@pytest.mark.slow
def test_kill_and_resume_equals_uninterrupted(tmp_path):
  cfg = dict(
      protocol__test_lengths=(5,),
      train__steps=4,
      train__eval_every=2,
  )
  whole = clrs_loop.train_and_evaluate(tiny(**cfg), str(tmp_path / "whole"))
  # "Killed" after step 2 (the last checkpoint), then started again.
  clrs_loop.train_and_evaluate(
      tiny(**dict(cfg, train__steps=2)), str(tmp_path / "split")
  )
  resumed = clrs_loop.train_and_evaluate(tiny(**cfg), str(tmp_path / "split"))
  a = whole["algorithms"]["bellman_ford"]["runs"][0]
  b = resumed["algorithms"]["bellman_ford"]["runs"][0]
  assert len(a["losses"]) == len(b["losses"]) == 4
  np.testing.assert_allclose(b["losses"], a["losses"], rtol=1e-6)
  np.testing.assert_allclose(
      b["final_params_fingerprint"],
      a["final_params_fingerprint"],
      rtol=1e-6,
      atol=1e-7,
  )
  assert b["test"] == a["test"]


@pytest.mark.slow
def test_nan_loss_stops_and_keeps_the_last_good_checkpoint(
    tmp_path, monkeypatch
):
  import processors  # pylint: disable=g-import-not-at-top

  real_step = processors.CarryModel.train_step
  calls = []

  def poisoned(self, state, rng_key, feedback, algorithm_index=None):
    calls.append(1)
    state, metrics = real_step(self, state, rng_key, feedback, algorithm_index)
    if len(calls) >= 3:
      metrics = dict(metrics, loss=float("nan"))
    return state, metrics

  monkeypatch.setattr(processors.CarryModel, "train_step", poisoned)
  workdir = str(tmp_path / "nan")
  cfg = tiny(
      protocol__test_lengths=(5,),
      train__steps=4,
      train__eval_every=2,
  )
  with pytest.raises(
      NonFiniteLossError,
      match=r"non-finite loss nan at step 3.*last good checkpoint \(step 2\)",
  ):
    clrs_loop.train_and_evaluate(cfg, workdir)
  monkeypatch.setattr(processors.CarryModel, "train_step", real_step)
  run_dir = os.path.join(workdir, "bellman_ford_seed42")
  model, _, _, _ = clrs_loop.model_for_run(cfg, "bellman_ford", 42, run_dir)
  task = clrs_loop.ClrsTask(model, None, 42, None)
  state, meta = trainer.restore(
      task.abstract_state(), os.path.join(run_dir, "checkpoints")
  )
  assert meta["step"] == 2
  assert all(
      np.all(np.isfinite(x)) for x in jax.tree_util.tree_leaves(state["params"])
  )
  # The evaluate-only path tests that checkpoint at any sizes.
  evaluation = clrs_loop.evaluate_checkpoints(workdir, [5, 8], which="latest")
  assert set(evaluation["algorithms"]["bellman_ford"]["mean_test"]) == {
      "5",
      "8",
  }
  assert os.path.exists(os.path.join(workdir, "evaluation_ood.png"))
  [run] = evaluation["algorithms"]["bellman_ford"]["runs"]
  assert (run["checkpoint"], run["step"]) == (
      "latest",
      2,
  ) and "skipped" not in run
  # No 'latest' restorable: the entry says it tested 'best' instead.
  latest = os.path.join(run_dir, "checkpoints", "latest")
  for step in os.listdir(latest):
    os.remove(os.path.join(latest, step, "meta", "metadata"))
  lines = []
  evaluation = clrs_loop.evaluate_checkpoints(
      workdir, [5], which="latest", log=lines.append
  )
  [run] = evaluation["algorithms"]["bellman_ford"]["runs"]
  assert run["checkpoint"] == "best" and run["skipped"]
  assert all(os.path.isdir(f["moved_to"]) for f in run["skipped"])
  assert any("tested best step" in l for l in lines)


def test_evaluate_only_needs_an_existing_directory(tmp_path):
  with pytest.raises(
      FileNotFoundError,
      match=r"Checkpoint directory .*missing.* does not exist",
  ):
    clrs_loop.evaluate_checkpoints(str(tmp_path / "missing"), [64])
  # A run whose config is saved but that has no checkpoint yet: one line.
  config_lib.save_config(tiny(), str(tmp_path))
  with pytest.raises(
      UserError, match=r"No best checkpoint in .*bellman_ford_seed42.*latest"
  ):
    clrs_loop.evaluate_checkpoints(str(tmp_path), [5])


@pytest.mark.slow
def test_edge_transformer_runs_end_to_end(tmp_path):
  cfg = {k: v for k, v in TINY.items() if not k.startswith("rt.")}
  cfg.update({
      "processor_type": "et",
      "protocol.test_lengths": (6,),
      "et.head_dim": 4,
      "et.num_layers": 1,
      "et.chunk_size": 4,
  })
  results = clrs_loop.train_and_evaluate(
      clrs_config.get_config(cfg), str(tmp_path)
  )
  run = results["algorithms"]["bellman_ford"]["runs"][0]
  assert run["steps"] == 2 and 0.0 <= run["test"]["6"] <= 1.0


class _UserProcessor(clrs.processors.Processor):
  """A user's own CLRS processor (not one of ours): an MLP on [node, mean of
  neighbours], following the CLRS Processor contract."""

  def __init__(self, out_size, name="user_mlp"):
    super().__init__(name=name)
    self.out_size = out_size

  def __call__(self, node_fts, edge_fts, graph_fts, adj_mat, hidden, **kwargs):
    del edge_fts, graph_fts, kwargs
    z = jnp.concatenate([node_fts, hidden], axis=-1)
    msgs = jnp.einsum("bij,bjd->bid", adj_mat, z) / jnp.maximum(
        jnp.sum(adj_mat, -1, keepdims=True), 1.0
    )
    out = hk.nets.MLP([self.out_size, self.out_size])(
        jnp.concatenate([z, msgs], axis=-1)
    )
    return out, None


@pytest.mark.slow
def test_a_user_processor_factory_trains_through_the_library(tmp_path):
  cfg = {k: v for k, v in TINY.items() if not k.startswith("rt.")}
  cfg.update({
      "processor_type": "user_mlp",
      "train.steps": 3,
      "protocol.test_lengths": (5,),
      "model.carry_state": False,
      "model.ptr_from_edges": False,
  })
  config = clrs_config.get_config(cfg)
  with pytest.raises(ValueError, match=r"Unknown processor_type 'user_mlp'"):
    clrs_loop.train_and_evaluate(config, str(tmp_path / "no_factory"))
  results = clrs_loop.train_and_evaluate(
      config, str(tmp_path / "user"), processor_factory=_UserProcessor
  )
  run = results["algorithms"]["bellman_ford"]["runs"][0]
  assert run["steps"] == 3 and np.all(np.isfinite(run["losses"]))
  assert 0.0 <= run["test"]["5"] <= 1.0
  assert results["config"]["processor_type"] == "user_mlp"
  # The user's processor is the one that ran: its parameters are in the model.
  model, _, _, _ = clrs_loop.model_for_run(
      config,
      "bellman_ford",
      42,
      str(tmp_path / "user" / "x"),
      processor_factory=_UserProcessor,
  )
  assert any("user_mlp" in name for name in model.params)


def _as_saved_by_earlier_versions(workdir, config):
  """Rewrites `workdir` (one stopped run) as earlier versions wrote it:
  config.json under the old paths (protocol.train_steps, model.learning_rate,
  ...; no train section; heads and layer norm in the model sections, the rt
  section's read and `processor`'s at their defaults) and checkpoints whose
  optimiser state has dm-clrs's own layout (`stock_clrs_optimizer` of
  scripts/migrate_workdir.py)."""
  migrate = load_migrate()
  from relational_jax.training import reporting  # pylint: disable=g-import-not-at-top

  record = config_lib.to_dict(config)
  default = config_lib.to_dict(clrs_config.default_config())
  train = record.pop("train")
  for old, new in migrate.CLRS_RENAMED_PATHS.items():
    section, name = old.split(".")
    new_section, new_name = new.split(".")
    if new_section == "train":
      record[section][name] = train[new_name]
    else:  # processor.nb_heads / use_ln, held by the model sections.
      held = record[new_section] if section == "rt" else default[new_section]
      record[section][name] = held[new_name]
  for name in ("nb_heads", "use_ln"):
    record["processor"][name] = default["processor"][name]
  assert (
      record["rt"]["num_heads"] == 2 and record["processor"]["nb_heads"] == 12
  )
  reporting.write_json(os.path.join(workdir, "config.json"), record)

  stock = migrate.stock_clrs_optimizer(config.train)
  run_dir = os.path.join(workdir, "bellman_ford_seed42")
  model, stream, _, _ = clrs_loop.model_for_run(
      config, "bellman_ford", 42, run_dir
  )
  abstract = clrs_loop.ClrsTask(model, stream, 42, None).abstract_state()
  ckpt_dir = os.path.join(run_dir, "checkpoints")
  saved = {}
  with RunCheckpoints(ckpt_dir) as ckpts:
    for which in ("latest", "best"):
      for step in ckpts.all_steps(which):
        saved[which, step] = ckpts.restore(abstract, which, step)
  os.rename(ckpt_dir, ckpt_dir + "_today")
  is_adam = lambda x: isinstance(x, optax.ScaleByAdamState)

  def stock_layout(state):
    (adam,) = [
        x
        for x in jax.tree_util.tree_leaves(state["opt_state"], is_leaf=is_adam)
        if is_adam(x)
    ]
    fresh = stock.init(state["params"])
    return {
        "params": state["params"],
        "opt_state": jax.tree_util.tree_map(
            lambda x: adam if is_adam(x) else x, fresh, is_leaf=is_adam
        ),
    }

  with RunCheckpoints(ckpt_dir) as ckpts:
    for (which, step), (state, meta) in sorted(saved.items(), reverse=True):
      ckpts.save(step, stock_layout(state), meta, best=which == "best")


@pytest.mark.slow
def test_a_run_of_another_version_is_refused_then_migrated_resumes_exactly(
    tmp_path,
):
  """A work directory written before CLRS had its `train` section and took
  its optimiser from `optim.make_optimizer` (old config paths, heads in
  rt.num_heads, dm-clrs's optimiser state layout) is refused in one line
  naming scripts/migrate_workdir.py; converted by it, it resumes and trains
  on bit-identically."""
  cfg = dict(protocol__test_lengths=(5,), train__steps=4, train__eval_every=2)
  whole = clrs_loop.train_and_evaluate(tiny(**cfg), str(tmp_path / "whole"))
  split = str(tmp_path / "split")
  clrs_loop.train_and_evaluate(tiny(**dict(cfg, train__stop_at_step=2)), split)
  _as_saved_by_earlier_versions(split, tiny(**cfg))
  with pytest.raises(
      UserError, match=r"not in this version's format.*migrate_workdir.py"
  ):
    clrs_loop.train_and_evaluate(tiny(**cfg), split)
  load_migrate().migrate(split, log=lambda _: None)
  logs = []
  resumed = clrs_loop.train_and_evaluate(tiny(**cfg), split, log=logs.append)
  assert any("resumed at step 2" in m for m in logs), logs
  assert not any("could not be restored" in m for m in logs), logs
  a = whole["algorithms"]["bellman_ford"]["runs"][0]
  b = resumed["algorithms"]["bellman_ford"]["runs"][0]
  assert b["losses"] == a["losses"]
  assert b["final_params_fingerprint"] == a["final_params_fingerprint"]
  assert b["test"] == a["test"] and b["history"] == a["history"]


def test_carry_model_takes_one_optimiser():
  import processors  # pylint: disable=g-import-not-at-top

  # Refused before anything is built: CLRS's own optimiser settings beside
  # an optax one would be ignored.
  with pytest.raises(ValueError, match=r"\['learning_rate'\] configure CLRS"):
    processors.CarryModel(
        None, None, None, optimizer=optax.adam(1e-3), learning_rate=1e-3
    )


def test_string_matcher_haystack_does_not_leak_into_other_algorithms():
  """dm-clrs 2.0.3's create_samplers overwrites the train lengths of every
  algorithm after a string matcher; ours computes them per algorithm."""
  lengths = [4, 7, 11, 13, 16]
  assert clrs_data.sample_lengths("naive_string_matcher", lengths) == [20]
  assert clrs_data.sample_lengths("bellman_ford", lengths) == lengths


@pytest.mark.slow
def test_corrupt_latest_checkpoint_resumes_from_the_previous_one(tmp_path):
  """The newest checkpoint's array files are truncated after the run ended
  (before result.json, as if killed): the rerun reports it, resumes from the
  step before, replays the same batches and ends where the run ended."""
  from relational_jax.training import checkpoints as ckpt_lib  # pylint: disable=g-import-not-at-top

  cfg = tiny(protocol__test_lengths=(5,), train__steps=3)
  workdir = str(tmp_path / "run")
  whole = clrs_loop.train_and_evaluate(cfg, workdir)
  a = whole["algorithms"]["bellman_ford"]["runs"][0]
  assert a["checkpoint_fallbacks"] == []
  run_dir = os.path.join(workdir, "bellman_ford_seed42")
  os.remove(os.path.join(run_dir, "result.json"))
  newest = os.path.join(run_dir, "checkpoints", "latest", "3")
  # Its array files cut to half, as by a write that stopped short.
  arrays = [
      os.path.join(d, f)
      for d, _, fs in os.walk(newest)
      for f in fs
      if os.path.basename(d) == "d"
  ]
  assert arrays
  for path in arrays:
    with open(path, "r+b") as f:
      f.truncate(os.path.getsize(path) // 2)
  lines = []
  resumed = clrs_loop.train_and_evaluate(cfg, workdir, log=lines.append)
  b = resumed["algorithms"]["bellman_ford"]["runs"][0]
  assert any(newest in l and "could not be restored" in l for l in lines)
  assert any(
      l.startswith("[bellman_ford seed 42] resumed at step 2 ") for l in lines
  )
  [fallback] = b["checkpoint_fallbacks"]
  assert fallback["path"] == newest and fallback["step"] == 3
  assert fallback["restored_instead"] == {"which": "latest", "step": 2}
  assert os.path.isdir(fallback["moved_to"])
  # Step 3 was trained again from step 2's state and data-stream position.
  assert b["losses"] == a["losses"] and len(b["losses"]) == 3
  assert b["final_params_fingerprint"] == a["final_params_fingerprint"]
  assert [h["step"] for h in b["history"]] == [1, 2, 3]
  assert b["test"] == a["test"]
  with RunCheckpoints(os.path.join(run_dir, "checkpoints")) as ckpts:
    assert ckpts.all_steps() == [2, 3]
  # Every checkpoint unreadable: an error naming them, not a fresh start.
  for step in (2, 3):
    meta_file = os.path.join(
        run_dir, "checkpoints", "latest", str(step), "meta", "metadata"
    )
    os.remove(meta_file)
  for best in os.listdir(os.path.join(run_dir, "checkpoints", "best")):
    os.remove(
        os.path.join(run_dir, "checkpoints", "best", best, "meta", "metadata")
    )
  os.remove(os.path.join(run_dir, "result.json"))
  with pytest.raises(
      ckpt_lib.CorruptCheckpointError,
      match=r"latest/3: FileNotFoundError.*latest/2: .*"
      r"Refusing to start from scratch",
  ):
    clrs_loop.train_and_evaluate(cfg, workdir)


def test_a_changed_config_on_resume_names_the_fields(tmp_path):
  from relational_jax.training import config as config_lib  # pylint: disable=g-import-not-at-top
  from relational_jax.training import reporting  # pylint: disable=g-import-not-at-top

  workdir = str(tmp_path / "run")
  saved = config_lib.to_dict(tiny())
  config_path = os.path.join(workdir, "config.json")
  reporting.write_json(config_path, saved)  # as train_and_evaluate writes it
  changed = tiny(train__learning_rate=0.01, rt__num_layers=2)
  with pytest.raises(
      ValueError,
      match=(
          r"config \(.*config.json\) differs from this run's config in 2 "
          r"field\(s\) that cannot change on resume: rt.num_layers: saved 1, "
          r"now 2; train.learning_rate: saved 0.00025, now 0.01. Use a new "
          r"work directory"
      ),
  ):
    clrs_loop.train_and_evaluate(changed, workdir)
  assert reporting.read_json(config_path) == saved  # not overwritten
  # Fields that may change on resume, and fields added since the run saved
  # its config (their defaults), are no conflict.
  allowed = config_lib.to_dict(
      tiny(
          train__steps=9,
          protocol__test_lengths=(7,),
          train__progress=True,
          train__eval_batch_size=2,
          algorithms=("bfs",),
          seeds=(1, 2),
      )
  )
  assert clrs_loop.resume_conflicts(saved, allowed) == {}
  older = {k: v for k, v in saved.items() if k != "hint_mode"}
  older["model"] = {k: v for k, v in saved["model"].items() if k != "use_lstm"}
  with pytest.raises(UserError, match="missing: hint_mode, model.use_lstm"):
    clrs_loop.resume_conflicts(older, saved)
  assert clrs_loop.resume_conflicts(saved, config_lib.to_dict(changed)) == {
      "train.learning_rate": (0.00025, 0.01),
      "rt.num_layers": (1, 2),
  }
  # Fields the processor kind does not read (the RT kinds: node_readout).
  unread = dict(
      saved, processor=dict(saved["processor"], node_readout="rowcol")
  )
  assert clrs_loop.resume_conflicts(saved, unread) == {}
  # Heads and layer norm: processor.nb_heads / use_ln, for every kind.
  for name, value in (("nb_heads", 4), ("use_ln", False)):
    changed = dict(saved, processor=dict(saved["processor"], **{name: value}))
    assert clrs_loop.resume_conflicts(saved, changed) == {
        f"processor.{name}": (saved["processor"][name], value)
    }
    clrs_kind = dict(saved, processor_type="gat")
    assert clrs_loop.resume_conflicts(
        clrs_kind, dict(changed, processor_type="gat")
    ) == {f"processor.{name}": (saved["processor"][name], value)}


def test_rt_triangular_builds_its_triangular_attention():
  """triangular_heads=0 (the config default) means "as many as num_heads"
  for 'rt_triangular', never "no triangular attention"."""
  import haiku as hk  # pylint: disable=g-import-not-at-top,redefined-outer-name,reimported

  config = tiny(processor_type="rt_triangular")

  def make_config():
    return clrs_config.processor_factory(config)(8).config

  triangular = hk.transform(make_config).apply({}, None)
  assert triangular.triangular_heads == config.processor.nb_heads == 2
  config.rt.triangular_heads = 1
  assert hk.transform(make_config).apply({}, None).triangular_heads == 1
