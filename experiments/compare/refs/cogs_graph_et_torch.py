r"""The reference side of `python -m experiments.compare cogs_graph_et`.

Runs UNDER THE AUTHORS' ENVIRONMENT (a venv with torch, pytorch_lightning and
transformers), not ours: it imports the Edge Transformer authors' own
`cogs/train.py`, `cogs/load.py` and `cogs/model.py`
(github.com/bergen/EdgeTransformer) from `--reference`, a checkout that is
never vendored or edited, and trains their `Parser` with their data code:

* `load.set_up_cogs('parent_attention_encoding', 1)` (what their `train()`
  calls) reads `./data/{train,test,dev,gen}_seqtag.jsonl`; we run from
  `--scratch`, where the harness wrote them. Their vocabularies, padding
  (`make_collator`, `CogsDataset`) and label ids are theirs.
* Optimiser and schedule from their `Parser.configure_optimizers()` (AdamW
  with their lr, betas and eps; HF `get_linear_schedule_with_warmup`),
  stepped per batch (their `interval: 'step'`), with
  `torch.nn.utils.clip_grad_norm_` at `max_grad_norm` (Lightning's
  `gradient_clip_val`).
* Loss `Parser._calculate_loss`; accuracy `Parser.compute_acc` (a sentence is
  right when its parent and every label of every token are), scored on
  every evaluation file in batches of their `--batch_size` (their gen
  loader's 5 predicts the same: padding is masked), in eval mode without
  gradients.

What replaces Lightning's `Trainer` (the released code's `gpus=1`,
`progress_bar_refresh_rate` and `precision=16` need a GPU and an old
Lightning): a plain loop doing what `trainer.fit` does per batch (loss,
backward, clip, optimiser step, scheduler step) in float32 on the CPU, and
DataLoaders with `num_workers=0` (theirs: 8 worker processes; the batches
are the same). Their training loader shuffles (`shuffle: True`,
`drop_last: True`); here epoch e's order is drawn from a generator seeded
with (seed, e) instead of torch's global one, the same distribution of
orders, so that a run resumes exactly. Training stops after `--steps`
batches; the schedule's `num_training_steps` is set to it, as on our side.

Every `--eval_every` steps an evaluation point is appended to
`<out_dir>/curve.jsonl` and the run is checkpointed there
(`checkpoint.pt`: model, optimiser, scheduler, step and torch's RNG state).
"""

import argparse
import os
import sys
import time

import curve_file  # pylint: disable=g-bad-import-order  (refs/, on sys.path)

# Their evaluation sets in `load.read_cogs_datasets`' `test_sets_names`,
# the ones scored here.
EVAL_SETS = ("dev", "test", "gen")


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
      help="Directory holding data/{train,test,dev,gen}_seqtag.jsonl.",
  )
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


def main():
  a = _args()
  import torch

  torch.set_num_threads(a.threads)
  cogs_dir = os.path.join(a.reference, "cogs")
  if not os.path.isfile(os.path.join(cogs_dir, "train.py")):
    sys.exit(
        f"--reference={a.reference} has no cogs/train.py: pass a "
        "checkout of github.com/bergen/EdgeTransformer."
    )
  sys.path.insert(0, cogs_dir)
  os.chdir(a.scratch)  # Their load.DATA_DIR is ./data/.
  sys.argv = ["train.py", "--seed", str(a.seed)] + a.authors_flags.split()
  import train as their  # Parses sys.argv into their cl_args.
  import load
  from model import Parser
  from torch.utils.data import DataLoader

  args = their.cl_args
  their.set_random_seed(args.seed)
  train_data, test_sets, names, vocabs, _ = load.set_up_cogs(
      "parent_attention_encoding", 1
  )
  for arg, vocab in (  # As their train().
      ("token_vocab_size", "tokens_vocab"),
      ("parent_vocab_size", "parent_vocab"),
      ("role_vocab_size", "role_vocab"),
      ("category_vocab_size", "category_vocab"),
      ("noun_type_vocab_size", "noun_type_vocab"),
      ("verb_name_vocab_size", "verb_name_vocab"),
  ):
    setattr(args, arg, len(vocabs[vocab]))
  training_set = their.CogsDataset(train_data)
  collate = their.make_collator(
      vocabs, max(len(s) for s in training_set.tokens)
  )
  evals = []
  for name in EVAL_SETS:
    dataset = their.CogsDataset(test_sets[names.index(name)])
    evals.append((
        name,
        DataLoader(
            dataset,
            batch_size=args.batch_size,
            shuffle=False,
            num_workers=0,
            collate_fn=collate,
        ),
        len(dataset),
    ))
  steps_per_epoch = len(training_set) // args.batch_size  # drop_last

  def epoch_loader(epoch):
    return DataLoader(
        training_set,
        batch_size=args.batch_size,
        shuffle=True,
        drop_last=True,
        num_workers=0,
        collate_fn=collate,
        generator=torch.Generator().manual_seed(a.seed * 1_000_003 + epoch),
    )

  args.optimizer_args = {
      "lr": args.lr,
      "betas": (args.beta1, args.beta2),
      "eps": args.eps,
  }
  args.scheduler_args = {
      "num_warmup_steps": args.num_warmup_steps,
      "num_training_steps": a.steps,
  }
  model = Parser(args)
  opt = model.configure_optimizers()
  optimizer, scheduler = opt["optimizer"], opt["lr_scheduler"]["scheduler"]

  def evaluate():
    model.eval()
    out = {}
    with torch.no_grad():
      for name, loader, size in evals:
        correct = 0
        for batch in loader:
          _, scores = model._calculate_loss(batch)
          acc = model.compute_acc(batch, scores)  # Their batch mean.
          correct += round(float(acc) * batch["tokens"].shape[0])
        out[name] = {"all": correct / size, "count": size}
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
  while step < a.steps:
    skip = step % steps_per_epoch  # Batches of this epoch already done.
    for batch in epoch_loader(step // steps_per_epoch):
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
