r"""The authors' side of the SCAN comparisons (Csordas et al. 2021).

Runs UNDER THE AUTHORS' ENVIRONMENT (a venv with torch; their other needs:
`pip install requests psutil matplotlib setproctitle tensorboard`), not
ours: it imports their own code (github.com/RobertCsordas/
transformer_generalization) from `--reference`, a checkout that is never
vendored or edited, and builds their run exactly as their `main.py` does:
`framework.helpers.TrainingHelper(register_args=main.register_args)` parses
their command line (`--authors_flags`, e.g. `-profile trafo_scan -task
scan_resplit_transformer -transformer.variant relative_universal
-scan.length_cutoff 26`, their sweep `scan_trafo_length_cutoff.yaml`), then
their task class (`tasks.ScanResplitTransformer`) builds their datasets,
loaders, model, model interface and Adam optimiser. Training steps are their
`Task.train_step()` (learning-rate schedule, forward, masked cross-entropy,
backward, gradient clipping, optimiser step); evaluation is their
`Task.validate_on_name()` (greedy decoding, exact match).

Four things are replaced by this wrapper, none of them inside the step:
* `torch.utils.data.Sampler.__init__` accepts (and ignores) the
  `data_source` argument their `InfiniteSampler` passes, which torch 2.2+
  no longer takes (the released code targets torch 1.9);
* SCAN is not downloaded: `--scan_file` (the official `tasks.txt`) is
  linked into their cache directory `<scratch>/cache/scan_resplit/`, where
  their `download(..., ignore_if_exists=True)` finds it;
* the TensorBoard *server* their helper starts for `-log tb` is not started
  (`TrainingHelper.start_tensorboard` is a no-op); events are still written;
* `--mode=bench` feeds `train_step` pre-collated batches (their
  `VarLengthCollate` of the examples in `--batches`), so that the timing
  excludes data loading; `--mode=train` uses their own loader.

Modes:
  train  trains `--steps` steps and writes, every `--eval_every` steps and
         at the last, one line `{"step", "loss", "train_seconds",
         "accuracy": {"iid": ..., "gen": ...}, "sizes"}` to
         `<out_dir>/curve.jsonl` (and prints it after `CURVE `) (their 'iid'
         and 'val' sets; 'val' is the generalisation set of the length
         split; sizes are the full sets' even when `--max_eval_examples`
         scores only their first examples). At the same moment it
         checkpoints `<out_dir>/checkpoint.pt`: model, Adam state, their
         step counter (`helper.state.iter`, which drives their learning-rate
         schedule) and torch's RNG state (dropout). A killed run resumes
         exactly: their loader is rebuilt and advanced by the steps done
         (their `InfiniteSampler` draws from its own seeded RandomState, so
         the same batches come next), then the RNG state is restored.
         `--stop_at=S` stops after the checkpoint of step S (a resume
         test).
  bench  builds the model, then answers commands on stdin: `run N` (N timed
         steps; replies `TIMES [seconds per step]`), `quit`. Prints
         `READY {...}` (shapes, threads, parameters) first.
"""

import argparse
import json
import os
import sys
import time

import curve_file  # pylint: disable=g-bad-import-order  (refs/, on sys.path)


def _args():
  p = argparse.ArgumentParser()
  p.add_argument(
      "--reference",
      required=True,
      help="Checkout of github.com/RobertCsordas/transformer_generalization.",
  )
  p.add_argument(
      "--scratch",
      required=True,
      help="Working directory of their run (cache/, save/).",
  )
  p.add_argument(
      "--scan_file", required=True, help="The official SCAN tasks.txt."
  )
  p.add_argument("--mode", choices=("train", "bench"), required=True)
  p.add_argument("--seed", type=int, default=0)
  p.add_argument("--steps", type=int, default=0)
  p.add_argument("--eval_every", type=int, default=500)
  p.add_argument("--threads", type=int, default=1)
  p.add_argument(
      "--max_eval_examples",
      type=int,
      default=0,
      help=(
          "train: > 0 scores only the first N examples of each "
          "evaluation set (smoke runs)."
      ),
  )
  p.add_argument(
      "--out_dir",
      default="",
      help="train: curve.jsonl and checkpoint.pt go here.",
  )
  p.add_argument(
      "--stop_at",
      type=int,
      default=0,
      help="train: stop after the checkpoint of this step.",
  )
  p.add_argument(
      "--batches",
      default="",
      help=(
          "bench: JSON file, a list of batches, each a list of "
          "[source, target] strings of the training set."
      ),
  )
  p.add_argument(
      "--authors_flags",
      required=True,
      help="Their main.py command line, space separated.",
  )
  return p.parse_args()


def _link_scan(scratch, scan_file):
  cache = os.path.join(scratch, "cache", "scan_resplit")
  os.makedirs(cache, exist_ok=True)
  target = os.path.join(cache, "tasks.txt")
  if not os.path.exists(target):
    os.symlink(os.path.abspath(scan_file), target)


def build_task(a):
  """Their task, built as their main.py builds it."""
  import torch

  torch.set_num_threads(a.threads)
  if not os.path.isfile(os.path.join(a.reference, "main.py")):
    sys.exit(
        f"--reference={a.reference} has no main.py: pass a checkout of "
        "github.com/RobertCsordas/transformer_generalization."
    )
  if not os.path.isfile(a.scan_file):
    sys.exit(
        f"--scan_file={a.scan_file} not found (the official SCAN tasks.txt)."
    )
  sys.path.insert(0, a.reference)
  os.makedirs(a.scratch, exist_ok=True)
  os.chdir(a.scratch)
  _link_scan(a.scratch, a.scan_file)
  # Their InfiniteSampler calls Sampler.__init__(data_source), an argument
  # that torch >= 2.2 no longer takes (and never used).
  sampler_init = torch.utils.data.Sampler.__init__
  torch.utils.data.Sampler.__init__ = (
      lambda self, data_source=None: sampler_init(self)
  )
  import framework  # pylint: disable=import-outside-toplevel
  import main as their_main  # pylint: disable=import-outside-toplevel
  import tasks  # pylint: disable=import-outside-toplevel

  framework.helpers.TrainingHelper.start_tensorboard = lambda self: None
  sys.argv = (
      ["main.py"]
      + a.authors_flags.split()
      + [
          "-seed",
          str(a.seed),
          "-reset",
          "1",
          "-gpu",
          "none",
          "-name",
          f"{a.mode}_seed{a.seed}",
      ]
  )
  helper = framework.helpers.TrainingHelper(
      wandb_project_name="modules",
      register_args=their_main.register_args,
      extra_dirs=["export", "model_weights"],
  )
  constructors = {
      "scan_resplit_transformer": tasks.ScanResplitTransformer,
      "trafo_scan": tasks.ScanTransformer,
  }
  task = constructors[helper.args.task](helper)
  return helper, task


def _collated(task, batches_path):
  """Their VarLengthCollate of our batches (lists of [source, target])."""
  import framework  # pylint: disable=import-outside-toplevel
  import numpy as np  # pylint: disable=import-outside-toplevel

  train_set = task.train_set
  in_voc, out_voc = train_set.in_vocabulary, train_set.out_vocabulary
  collate = framework.loader.collate.VarLengthCollate(batch_dim=task.batch_dim)
  with open(batches_path) as f:
    batches = json.load(f)
  out = []
  for batch in batches:
    items = []
    for src, tgt in batch:
      i, o = in_voc(src), out_voc(tgt)
      items.append({
          "in": np.asarray(i, np.int16),
          "out": np.asarray(o, np.int16),
          "in_len": len(i),
          "out_len": len(o),
      })
    out.append(collate(items))
  return out


def bench(a):
  import torch  # pylint: disable=import-outside-toplevel

  _, task = build_task(a)
  batches = _collated(task, a.batches)
  cursor = [0]

  def next_batch():
    b = batches[cursor[0] % len(batches)]
    cursor[0] += 1
    return b

  task.get_train_batch = next_batch
  task.model.train()
  first = batches[0]
  print(
      "READY "
      + json.dumps({
          "threads": torch.get_num_threads(),
          "parameters": sum(p.numel() for p in task.model.parameters()),
          # Their interface appends EOS to both sides (add_eos).
          "src_shape_TxB_without_eos": list(first["in"].shape),
          "tgt_shape_TxB_without_eos": list(first["out"].shape),
          "src_lengths_max": [int(b["in"].shape[0]) for b in batches],
          "tgt_lengths_max": [int(b["out"].shape[0]) for b in batches],
          "torch": torch.__version__,
      }),
      flush=True,
  )
  for line in sys.stdin:
    cmd = line.split()
    if not cmd or cmd[0] == "quit":
      break
    times = []
    for _ in range(int(cmd[1])):
      start = time.perf_counter()
      res, _ = task.train_step()
      float(res.loss)  # The step is synchronous on CPU; read the loss.
      times.append(time.perf_counter() - start)
    print("TIMES " + json.dumps(times), flush=True)


def train(a):
  import torch  # pylint: disable=import-outside-toplevel

  if not a.out_dir:
    sys.exit("--mode=train needs --out_dir (curve.jsonl, checkpoint.pt).")
  out_dir = os.path.abspath(a.out_dir)  # build_task changes directory.
  helper, task = build_task(a)
  sizes = {
      "train": len(task.train_set),
      "iid": len(task.valid_sets.iid),
      "gen": len(task.valid_sets.val),
  }
  if a.max_eval_examples > 0:
    for name in ("iid", "val"):
      vset = task.valid_sets[name]
      vset.my_indices = vset.my_indices[: a.max_eval_examples]
      task.replace_valid_set(name, vset)
  os.makedirs(out_dir, exist_ok=True)
  ckpt_path = os.path.join(out_dir, "checkpoint.pt")
  curve_path = os.path.join(out_dir, "curve.jsonl")
  task.data_iter = iter(task.train_loader)
  step = 0
  if os.path.isfile(ckpt_path):
    ckpt = torch.load(ckpt_path, weights_only=False)
    task.model.load_state_dict(ckpt["model"])
    task.optimizer.load_state_dict(ckpt["optimizer"])
    step = helper.state.iter = ckpt["step"]
    for _ in range(step):  # The batches already trained on.
      next(task.data_iter)
    torch.set_rng_state(ckpt["torch_rng"])
    curve_file.restart(curve_path, step)
    print(f"resumed at step {step}", flush=True)
  else:
    curve_file.restart(curve_path, None)
  task.model.train()
  start = time.time()
  while step < a.steps:
    res, _ = task.train_step()
    step += 1
    print(f"LOSS {step} {float(res.loss):.6f}", flush=True)
    if step % a.eval_every == 0 or step == a.steps:
      seconds = time.time() - start
      accuracy = {}
      for ours, theirs in (("iid", "iid"), ("gen", "val")):
        test, _ = task.validate_on_name(theirs)
        accuracy[ours] = float(test.accuracy)
      task.model.train()
      point = {
          "step": step,
          "loss": float(res.loss),
          "train_seconds": seconds,
          "accuracy": accuracy,
          "sizes": sizes,
      }
      # The point first: a run killed before the checkpoint below redoes
      # these steps (restart drops the point) instead of losing the point.
      curve_file.append(curve_path, point)
      torch.save(
          {
              "model": task.model.state_dict(),
              "optimizer": task.optimizer.state_dict(),
              "step": step,
              "torch_rng": torch.get_rng_state(),
          },
          ckpt_path + ".tmp",
      )
      os.replace(ckpt_path + ".tmp", ckpt_path)
      print("CURVE " + json.dumps(point), flush=True)
      if step == a.stop_at:
        return
      start = time.time()


def main():
  a = _args()
  if a.mode == "bench":
    bench(a)
  else:
    train(a)


if __name__ == "__main__":
  main()
