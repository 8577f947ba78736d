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

Every evaluation point is appended to `<out_dir>/curve.jsonl` and the run
checkpointed there (`lightning_loop.fit`), so a killed run resumes exactly
where its last evaluation left it (their batches are in a fixed order, so the
step fixes the next batch).
"""

import argparse
import csv
import os
import sys

import lightning_loop  # pylint: disable=g-bad-import-order  (refs/, on sys.path)


def _args():
  p = argparse.ArgumentParser()
  lightning_loop.add_flags(
      p, scratch_help="Directory holding data/<data_path>/*{train,test}.csv."
  )
  p.add_argument("--data_path", default="compare")
  return p.parse_args()


def _task_ks(path):
  with open(path, newline="") as f:
    return [int(row["task_name"].split(".")[-1]) for row in csv.DictReader(f)]


def main():
  a = _args()
  # Their get_filenames reads ./data/<data_path> of --scratch.
  lightning_loop.enter_checkout(a, "clutrr")
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
  model, optimizer, scheduler = lightning_loop.build(
      EdgeTransformer, args, a.steps
  )

  def evaluate():
    out = {}
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
    return out

  lightning_loop.fit(
      a,
      model,
      optimizer,
      scheduler,
      args.max_grad_norm,
      lambda epoch: loader,  # Their fixed order, the same every epoch.
      len(loader),
      evaluate,
  )


if __name__ == "__main__":
  main()
