"""Work directories of another version: refused by the library in one line
naming scripts/migrate_workdir.py, converted by it, then resumed."""

import os

import jax.numpy as jnp
import numpy as np
import pytest

from relational_jax.data import paths as data_paths
from relational_jax.training import checkpoints as ckpt_lib
from relational_jax.training import cogs_graph
from relational_jax.training import config as config_lib
from relational_jax.training import errors
from relational_jax.training import optim
from relational_jax.training import reporting
from relational_jax.training import seq2seq
from relational_jax.training import trainer
from relational_jax.training.clrs import config as clrs_config
from relational_jax.training.clrs import loop as clrs_loop
from tests.experiments.test_migrate_workdir import load_migrate
from tests.training.clrs.test_loop import tiny as clrs_tiny
from tests.training.seq2seq.common import tiny as seq2seq_tiny


@pytest.fixture(scope="module")
def migrate():
  return load_migrate()


def test_old_default_data_dirs_become_the_shipped_ones(migrate):
  old_root = os.path.join("/somewhere", "main", "..", "shared", "data")
  for old, shipped in (
      (old_root, data_paths.OFFICIAL_DIR),
      (os.path.join(old_root, "cogs"), data_paths.COGS_DIR),
      (
          os.path.join(old_root, "clutrr", "gen_train23_test2to10"),
          data_paths.CLUTRR_K23_DIR,
      ),
  ):
    saved = config_lib.to_dict(seq2seq_tiny())
    saved["data"]["data_dir"] = os.path.normpath(old)
    task, new = migrate.upgrade_config(saved)
    assert task == "seq2seq" and new["data"]["data_dir"] == shipped
  # Any other directory is the user's own data: kept.
  saved["data"]["data_dir"] = "/data/mine"
  assert migrate.upgrade_config(saved)[1]["data"]["data_dir"] == "/data/mine"


def test_a_field_added_since_takes_the_value_runs_without_it_used(
    migrate, tmp_path
):
  saved = config_lib.to_dict(cogs_graph.default_config())
  del saved["edge_transformer"]["init"]  # Saved before the field existed.
  del saved["train"]["eval_tests"]
  with pytest.raises(errors.OtherFormatError, match="missing: "):
    config_lib.resume_conflicts(
        saved, config_lib.to_dict(cogs_graph.default_config())
    )
  workdir = tmp_path / "run"
  workdir.mkdir()
  reporting.write_json(str(workdir / "config.json"), saved)
  with pytest.raises(
      errors.OtherFormatError,
      match=rf"config.json is not in this version's format.*"
      rf"edge_transformer.init.*migrate_workdir.py {workdir}",
  ):
    config_lib.check_and_save(
        cogs_graph.default_config(), str(workdir), cogs_graph.RESUMABLE_CHANGES
    )
  migrate.migrate(str(workdir), log=lambda _: None)
  new = reporting.read_json(str(workdir / "config.json"))
  assert new["edge_transformer"]["init"] == "flax"
  assert new["train"]["eval_tests"] is False
  assert (workdir / "config.before_migration.json").exists()
  flax = cogs_graph.default_config()
  flax.edge_transformer.init = "flax"
  config_lib.check_and_save(
      flax, str(workdir), cogs_graph.RESUMABLE_CHANGES, save=False
  )


def test_clrs_records_of_another_version(migrate):
  old = config_lib.to_dict(clrs_tiny())
  train = old.pop("train")
  old["protocol"].update(train_steps=9, batch_size=2)
  old["model"].update(learning_rate=0.1, grad_clip_max_norm=0.0)
  with pytest.raises(errors.OtherFormatError, match="migrate_workdir.py"):
    clrs_config.load(old)
  task, new = migrate.upgrade_config(old)
  assert task == "clrs"
  assert (new["train"]["steps"], new["train"]["batch_size"]) == (9, 2)
  assert (new["train"]["learning_rate"], new["train"]["clip"]) == (0.1, 0.0)
  assert "train_steps" not in new["protocol"]
  assert old["protocol"]["train_steps"] == 9  # The saved record is kept.
  clrs_config.validate(clrs_config.load(new))
  # Flat CLRS run.py names: no layout of today's.
  with pytest.raises(errors.OtherFormatError, match="unknown: hidden_size"):
    clrs_config.load({"hidden_size": 16})


def test_heads_held_by_the_model_sections_become_processor_fields(migrate):
  """Records held heads and layer norm in the model sections (rt.num_heads,
  rt.use_ln, et.num_heads, floyd.num_heads) beside processor.nb_heads /
  use_ln, which the RT read from its section."""
  now = config_lib.to_dict(clrs_tiny())  # processor.nb_heads 2
  saved = config_lib.to_dict(clrs_tiny())
  saved["processor"].update(nb_heads=12, use_ln=False)
  saved["rt"].update(num_heads=2, use_ln=True)
  saved["et"]["num_heads"], saved["floyd"]["num_heads"] = 5, 7
  with pytest.raises(errors.OtherFormatError, match="unknown: rt.num_heads"):
    clrs_loop.resume_conflicts(saved, now)
  upgraded = migrate.upgrade_clrs(saved)
  assert upgraded == now
  assert clrs_loop.resume_conflicts(
      upgraded, clrs_tiny(processor__nb_heads=3)
  ) == {"processor.nb_heads": (2, 3)}
  # Another kind: its own section's heads; use_ln, never read by ET, takes
  # the default.
  et = migrate.upgrade_clrs(dict(saved, processor_type="et"))
  assert et["processor"] == dict(
      saved["processor"], nb_heads=5, use_ln=now["processor"]["use_ln"]
  )
  # A CLRS kind read processor.nb_heads / use_ln: they stay.
  gat = migrate.upgrade_clrs(dict(saved, processor_type="gat"))
  assert gat["processor"] == saved["processor"]


def test_stock_optimiser_states_move_into_todays(migrate):
  train = clrs_config.default_config().train
  stock = migrate.stock_clrs_optimizer(train)  # clip 1.0: clip, Adam, scale
  params = {"w": np.ones(3, np.float32)}
  today = optim.make_optimizer(train)
  g = {"w": np.asarray([0.5, -1.0, 2.0], np.float32)}
  s_old, s_new = stock.init(params), today.init(params)
  for _ in range(3):  # The same updates, step for step.
    u_old, s_old = stock.update(g, s_old, params)
    u_new, s_new = today.update(g, s_new, params)
    np.testing.assert_array_equal(u_old["w"], u_new["w"])
  upgraded = migrate.upgrade_stock_opt_state(s_old, today.init(params))
  u_old, _ = stock.update(g, s_old, params)
  u_up, _ = today.update(g, upgraded, params)
  np.testing.assert_array_equal(u_old["w"], u_up["w"])
  train.schedule = "linear"
  assert migrate.stock_clrs_optimizer(train) is None


# The position of seq2seq's former batch stream: epoch 1, two batches in.
_OLD_STREAM = {
    "seed": 3,
    "epoch": 1,
    "index": 8,
    "num_examples": 10,
    "batch_size": 4,
}
_TODAY = {"train_seconds": 1.0, "sittings": [], "history": []}


def test_checkpoint_records_in_todays_layout(migrate):
  old = dict(_TODAY, step=4, stream=dict(_OLD_STREAM), losses=[1.0] * 4)
  old["best"] = None
  assert migrate.upgrade_record(old, 4) == dict(old, stream={"step": 4})
  assert old["stream"] == _OLD_STREAM  # A copy.
  # The graph tasks' former loop: no step, stream or losses.
  graph = {"history": [{"step": 2, "val_accuracy": 0.5}]}
  assert migrate.upgrade_record(graph, 2) == {
      "history": graph["history"],
      "step": 2,
      "stream": {"step": 2},
      "losses": [],
      "best": {"step": 2, "score": 0.5, "selection": ""},
      "sittings": [],
      "train_seconds": 0.0,
  }
  # Today's records are kept.
  today = dict(_TODAY, step=4, stream={"step": 4}, losses=[], best=None)
  assert migrate.upgrade_record(today, 4) == today


@pytest.mark.slow
def test_a_seq2seq_work_dir_of_the_former_stream(migrate, tmp_path):
  """A work directory as the former seq2seq code left it at step 2 (its
  stream position {seed, epoch, index, ...}, no integrity record; built
  here by hand) is refused naming the script; converted, it resumes at
  step 2 and trains the new stream's batches 3 and 4."""
  import orbax.checkpoint as ocp  # pylint: disable=g-import-not-at-top

  config = seq2seq_tiny()
  workdir = str(tmp_path / "old")
  exp = seq2seq.Experiment(config)
  t = config.train
  state = exp.init_state()
  state["step"] = jnp.asarray(2, jnp.int32)  # As trained 2 steps.
  old_record = {
      "step": 2,
      "stream": {
          "seed": t.seed,
          "epoch": 0,
          "index": 2 * t.batch_size,
          "num_examples": len(exp.train_set),
          "batch_size": t.batch_size,
      },
      "losses": [3.5, 3.25],
      "history": [],
      "best": None,
      "train_seconds": 1.0,
      "sittings": [],
      "since_eval": {"loss": [3.5, 3.25]},
  }
  os.makedirs(workdir)
  reporting.write_json(
      os.path.join(workdir, "config.json"), config_lib.to_dict(config)
  )
  exp.src_vocab.save(os.path.join(workdir, "vocab_src.json"))
  exp.tgt_vocab.save(os.path.join(workdir, "vocab_tgt.json"))
  mgr = ocp.CheckpointManager(
      os.path.join(trainer.checkpoint_dir(workdir), "latest")
  )
  mgr.save(
      2,
      args=ocp.args.Composite(
          state=ocp.args.StandardSave(state),
          meta=ocp.args.JsonSave(old_record),
      ),
  )
  mgr.wait_until_finished()
  with pytest.raises(errors.OtherFormatError, match="migrate_workdir.py"):
    seq2seq.train_and_evaluate(config, workdir, log=lambda _: None)
  migrate.migrate(workdir, log=lambda _: None)

  seen, lines = {}, []

  def record_batch(step, batch):
    seen[step] = batch
    return batch

  resumed = seq2seq.train_and_evaluate(
      config, workdir, log=lines.append, batch_hook=record_batch
  )
  assert any("resumed at step 2" in line for line in lines)
  assert resumed["complete"] and resumed["steps"] == 4
  assert resumed["losses"][:2] == [3.5, 3.25] and len(resumed["losses"]) == 4
  assert sorted(seen) == [3, 4]
  for step, batch in seen.items():  # The new stream's batches 3 and 4.
    indices = trainer.epoch_indices(
        step - 1, len(exp.train_set), t.batch_size, t.seed
    )
    np.testing.assert_array_equal(batch["src"], exp.train_set.src[indices])
  _, meta = seq2seq.restore_checkpoint(config, workdir)
  assert meta["stream"] == {"step": 4}


def test_tree_records_before_the_authors_choices_keep_their_model(migrate):
  saved = config_lib.to_dict(seq2seq_tiny())
  for name in ("tree_pe_init", "tree_pos_bias", "tree_tokens", "tree_end"):
    del saved["transformer"][name]
  saved["transformer"]["tree_pe_norm"] = "paper"  # Then: scaled by d_pos.
  task, new = migrate.upgrade_config(saved)
  assert task == "seq2seq"
  t = new["transformer"]
  assert (t["tree_tokens"], t["tree_end"], t["tree_pe_init"]) == (
      "arity",
      "eos",
      "spread",
  )
  assert t["tree_pos_bias"] is False and t["tree_pe_norm"] == "pe_width"
