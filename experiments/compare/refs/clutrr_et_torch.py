r"""The reference side of `python -m experiments.compare clutrr_et`.

Runs UNDER THE AUTHORS' ENVIRONMENT (a venv with torch, pytorch_lightning and
transformers), not ours: it imports the Edge Transformer authors' own
`clutrr/model.py` and `clutrr/train.py` (github.com/bergen/EdgeTransformer)
from `--reference`, a checkout that is never vendored or edited, and trains
their `EdgeTransformer` with their data code:

* `train.py`'s `load_files()` reads `<scratch>/data/<data_path>/*train.csv`
  and `*test.csv` (we run from `--scratch`, where the harness wrote them),
  splits the training rows 80/20 with `torch.utils.data.random_split` after
  their `set_random_seed(seed)`, and batches them unshuffled (their
  `shuffle: False`) with their `collate`.
* Optimiser and schedule from their `configure_optimizers()` (Adam, HF
  `get_linear_schedule_with_warmup` over `num_training_steps`), stepped per
  batch as their Lightning trainer does (`interval: 'step'`), with
  `torch.nn.utils.clip_grad_norm_` at `max_grad_norm` (Lightning's
  `gradient_clip_val`, algorithm 'norm').

Two things replace Lightning's `Trainer` (whose old API, `gpus=1`,
`progress_bar_refresh_rate`, the released code's, current Lightning no longer
accepts): a plain loop doing what `trainer.fit` does per batch
(`_calculate_loss`, backward, clip, optimiser step, scheduler step), and the
DataLoaders rebuilt from their datasets with `num_workers=0` (theirs: 8
worker processes; the batches are identical). Training stops after `--steps`
batches (the schedule's `num_training_steps` is set to it, so warmup and
decay follow the shortened budget as on our side). Every `--eval_every`
steps the model is scored on every test file, per k (`task_name`), in
eval mode without gradients.

Every evaluation point is appended to `<out_dir>/curve.jsonl`, and the run
is checkpointed there (`checkpoint.pt`: model, optimiser, scheduler, step
and torch's RNG state) at the same moment, so a killed run resumes exactly
where its last evaluation left it (their batches are in a fixed order, so the
step fixes the next batch).
"""

import argparse
import csv
import os
import sys
import time

import curve_file  # pylint: disable=g-bad-import-order  (refs/, on sys.path)


def _args():
  p = argparse.ArgumentParser()
  p.add_argument(
      "--reference",
      required=True,
      help="Checkout of github.com/bergen/EdgeTransformer.",
  )
  p.add_argument(
      "--scratch",
      required=True,
      help="Directory holding data/<data_path>/*{train,test}.csv.",
  )
  p.add_argument("--data_path", default="compare")
  p.add_argument("--seed", type=int, required=True)
  p.add_argument("--steps", type=int, required=True)
  p.add_argument("--eval_every", type=int, required=True)
  p.add_argument("--threads", type=int, default=1)
  p.add_argument(
      "--stop_at",
      type=int,
      default=0,
      help="Stop after the checkpoint of this step (a resume test).",
  )
  p.add_argument(
      "--out_dir", required=True, help="curve.jsonl and checkpoint.pt go here."
  )
  p.add_argument(
      "--authors_flags",
      default="",
      help="Extra flags for their train.py parser, space separated.",
  )
  return p.parse_args()


def _task_ks(path):
  with open(path, newline="") as f:
    return [int(row["task_name"].split(".")[-1]) for row in csv.DictReader(f)]


def main():
  a = _args()
  import torch

  torch.set_num_threads(a.threads)
  clutrr_dir = os.path.join(a.reference, "clutrr")
  if not os.path.isfile(os.path.join(clutrr_dir, "train.py")):
    sys.exit(
        f"--reference={a.reference} has no clutrr/train.py: pass a "
        "checkout of github.com/bergen/EdgeTransformer."
    )
  sys.path.insert(0, clutrr_dir)
  os.chdir(a.scratch)  # Their get_filenames reads ./data/<data_path>.
  sys.argv = [
      "train.py",
      "--data_path",
      a.data_path,
      "--seed",
      str(a.seed),
  ] + a.authors_flags.split()
  import train as their  # Parses sys.argv into their cl_args.
  from model import EdgeTransformer
  from torch.utils.data import DataLoader

  args = their.cl_args
  their.set_random_seed(args.seed)
  train_loader, _, test_loaders, test_files = their.load_files()
  loader = DataLoader(
      train_loader.dataset,
      batch_size=args.batch_size,
      shuffle=False,
      drop_last=False,
      num_workers=0,
      collate_fn=their.collate,
  )
  tests = [
      (
          os.path.basename(f),
          DataLoader(
              l.dataset,
              batch_size=args.batch_size,
              shuffle=False,
              num_workers=0,
              collate_fn=their.collate,
          ),
          _task_ks(f),
      )
      for l, f in zip(test_loaders, test_files)
  ]
  args.optimizer_args = {"lr": args.lr}
  args.scheduler_args = {
      "num_warmup_steps": args.num_warmup_steps,
      "num_training_steps": a.steps,
  }
  model = EdgeTransformer(args)
  opt = model.configure_optimizers()
  optimizer, scheduler = opt["optimizer"], opt["lr_scheduler"]["scheduler"]

  def evaluate():
    model.eval()
    out = {}
    with torch.no_grad():
      for name, test_loader, ks in tests:
        correct = []
        for batch in test_loader:
          _, logits = model._calculate_loss(batch)
          correct += (logits.argmax(-1) == batch["query_labels"]).tolist()
        per_k, counts = {}, {}
        for k in sorted(set(ks)):
          hits = [c for c, kk in zip(correct, ks) if kk == k]
          per_k[str(k)] = sum(hits) / len(hits)
          counts[str(k)] = len(hits)
        out[os.path.splitext(name)[0].split("_")[-1]] = {
            "all": sum(correct) / len(correct),
            "per_k": per_k,
            "count_per_k": counts,
        }
    model.train()
    return out

  os.makedirs(a.out_dir, exist_ok=True)
  ckpt_path = os.path.join(a.out_dir, "checkpoint.pt")
  curve_path = os.path.join(a.out_dir, "curve.jsonl")
  step = 0
  if os.path.isfile(ckpt_path):
    ckpt = torch.load(ckpt_path, weights_only=False)
    model.load_state_dict(ckpt["model"])
    optimizer.load_state_dict(ckpt["optimizer"])
    scheduler.load_state_dict(ckpt["scheduler"])
    torch.set_rng_state(ckpt["torch_rng"])
    step = ckpt["step"]
    curve_file.restart(curve_path, step)
    print(f"resumed at step {step}", flush=True)
  else:
    curve_file.restart(curve_path, None)

  def save(point):
    curve_file.append(curve_path, point)
    torch.save(
        {
            "model": model.state_dict(),
            "optimizer": optimizer.state_dict(),
            "scheduler": scheduler.state_dict(),
            "step": step,
            "torch_rng": torch.get_rng_state(),
        },
        ckpt_path + ".tmp",
    )
    os.replace(ckpt_path + ".tmp", ckpt_path)

  started = time.time()
  model.train()
  skip = step % len(loader)  # Batches of the current epoch already done.
  while step < a.steps:
    for batch in loader:
      if skip:
        skip -= 1
        continue
      loss, _ = model._calculate_loss(batch)
      optimizer.zero_grad()
      loss.backward()
      torch.nn.utils.clip_grad_norm_(model.parameters(), args.max_grad_norm)
      optimizer.step()
      scheduler.step()
      step += 1
      if step % a.eval_every == 0 or step == a.steps:
        point = {
            "step": step,
            "loss": float(loss.detach()),
            "train_seconds": time.time() - started,
            "tests": evaluate(),
        }
        save(point)
        print(f"step {step}: loss {point['loss']:.4f}", flush=True)
        started = time.time()
        if step == a.stop_at:
          return
      if step >= a.steps:
        break


if __name__ == "__main__":
  main()
