r"""Train an encoder-decoder (Transformer or Edge Transformer) on SCAN / COGS / TSV data.

  python -m experiments.seq2seq_train --dataset=scan --split=length_cutoff \
      --cutoff=26 --positions=relative --universal --steps=50000 \
      --checkpoint_path=runs/scan26_rel_uni
  python -m experiments.seq2seq_train --dataset=cogs --model=edge_transformer \
      --d_model=64 --heads=4 --ff=256 --layers=3 --universal --dropout=0.1

Re-running with the same --checkpoint_path resumes exactly where the run
stopped. The work is done by `experiments.seq2seq_loop.train_and_evaluate`;
this file holds flags only (see seq2seq_loop's docstring for data layout,
evaluation sets and model selection).
"""

from absl import app
from absl import flags
from absl import logging

from experiments import seq2seq_loop
from relational_jax.training import mesh as mesh_lib

_D = seq2seq_loop.Seq2SeqTrainConfig()

flags.DEFINE_string("dataset", _D.dataset, f"One of {list(seq2seq_loop.DATASETS)}.")
flags.DEFINE_string("split", _D.split, "SCAN: simple, length, addprim_jump, addprim_turn_left, length_cutoff; cogs/tsv: default. Empty: the dataset's default.")
flags.DEFINE_integer("cutoff", _D.cutoff, "SCAN length_cutoff: maximal training output length (22..40).")
flags.DEFINE_string("data_dir", _D.data_dir, "Shared data root (SCAN tasks.txt, COGS TSVs); default ../shared/data beside the repo.")
flags.DEFINE_string("data_path", _D.data_path, "dataset=tsv: directory with train.tsv and any of dev/test/gen/gen_dev.tsv.")
flags.DEFINE_boolean("scan_official_order", _D.scan_official_order, "SCAN length_cutoff: draw the IID hold-out from tasks.txt's line order (as Csordas et al.).")
flags.DEFINE_string("model", _D.model, f"One of {list(seq2seq_loop.MODELS)}: Transformer encoder-decoder, or Edge Transformer encoder-decoder (positions=relative; --universal ties its layers; ff a multiple of d_model).")
flags.DEFINE_string("positions", _D.positions, "absolute, relative or tree.")
flags.DEFINE_string("scaling", _D.scaling, "Absolute positions: teu, ped or none (Csordas et al. 2021 sec. 3.3).")
flags.DEFINE_boolean("universal", _D.universal, "Universal Transformer: one layer applied `layers` times.")
flags.DEFINE_integer("layers", _D.layers, "Encoder layers (and decoder layers unless --decoder_layers).")
flags.DEFINE_integer("decoder_layers", _D.decoder_layers, "Decoder layers (0: same as --layers).")
flags.DEFINE_integer("d_model", _D.d_model, "Model width.")
flags.DEFINE_integer("heads", _D.heads, "Attention heads.")
flags.DEFINE_integer("ff", _D.ff, "Feed-forward hidden width.")
flags.DEFINE_float("dropout", _D.dropout, "Dropout rate.")
flags.DEFINE_integer("tree_depth", _D.tree_depth, "positions=tree: maximal tree depth k.")
flags.DEFINE_string("tree_order", _D.tree_order, "positions=tree: dfs or bfs.")
flags.DEFINE_float("lr", _D.lr, "Peak Adam learning rate.")
flags.DEFINE_string("schedule", _D.schedule, f"Learning-rate schedule: one of {list(seq2seq_loop.SCHEDULES)}.")
flags.DEFINE_integer("warmup_steps", _D.warmup_steps, "Linear warmup steps (noam: required).")
flags.DEFINE_integer("batch", _D.batch, "Global batch size (divisible by the number of devices).")
flags.DEFINE_integer("eval_batch", _D.eval_batch, "Evaluation batch size (0: --batch).")
flags.DEFINE_integer("steps", _D.steps, "Training steps.")
flags.DEFINE_integer("eval_every", _D.eval_every, "Evaluate (and checkpoint) every this many steps.")
flags.DEFINE_integer("checkpoint_every", _D.checkpoint_every, "Checkpoint every this many steps (0: --eval_every).")
flags.DEFINE_float("clip", _D.clip, "Gradient clipping by global norm (0: off).")
flags.DEFINE_integer("seed", _D.seed, "Seed of the initialisation, dropout and batch order.")
flags.DEFINE_integer("max_eval_examples", _D.max_eval_examples, "Cap on each evaluation set (a fixed random subset; 0: all).")
flags.DEFINE_string("select_on", _D.select_on, f"Model selection: one of {list(seq2seq_loop.SELECT_ON)}; auto = gen_val if present, else the last step.")
flags.DEFINE_integer("devices", _D.devices, "Devices to use, the first N of jax.devices() (0: all).")
flags.DEFINE_boolean("distributed", False, "Call jax.distributed.initialize() first (multi-host).")
flags.DEFINE_integer("stop_at_step", _D.stop_at_step, "Stop (checkpointed) at this step, as if preempted (0: off).")
flags.DEFINE_string("checkpoint_path", "runs/seq2seq", "Work directory: checkpoints, vocabularies, results; re-run to resume.")
flags.DEFINE_string("results_path", _D.results_path, "Results JSON (default <checkpoint_path>/results.json); the PNG goes beside it.")
flags.DEFINE_boolean("progress", _D.progress, "Show a progress bar.")

FLAGS = flags.FLAGS

_CONFIG_FLAGS = ("dataset", "split", "cutoff", "data_dir", "data_path",
                 "scan_official_order", "model", "positions", "scaling",
                 "universal", "layers", "decoder_layers", "d_model", "heads",
                 "ff", "dropout", "tree_depth", "tree_order", "lr", "schedule",
                 "warmup_steps", "batch", "eval_batch", "steps", "eval_every",
                 "checkpoint_every", "clip", "seed", "max_eval_examples",
                 "select_on", "devices", "stop_at_step", "results_path",
                 "progress")


def config_from_flags() -> seq2seq_loop.Seq2SeqTrainConfig:
  """The run configuration from the parsed flags (validated)."""
  config = seq2seq_loop.get_config(
      **{name: FLAGS[name].value for name in _CONFIG_FLAGS})
  config.validate()
  return config


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f"Unexpected arguments: {argv[1:]}")
  if not FLAGS["verbosity"].present:
    logging.set_verbosity(logging.WARNING)  # orbax logs every save at INFO
  mesh_lib.maybe_initialize_distributed(FLAGS.distributed)
  config = config_from_flags()
  results = seq2seq_loop.train_and_evaluate(config, FLAGS.checkpoint_path)
  for key in ("final", "best"):
    entry = results[key]
    if entry:
      accs = ", ".join(f"{k} {v:.4f}" for k, v in entry["accuracies"].items())
      print(f"{key} (step {entry['step']}): {accs}")
  print(f"results: {config.results_path or FLAGS.checkpoint_path + '/results.json'}")


if __name__ == "__main__":
  app.run(main)
