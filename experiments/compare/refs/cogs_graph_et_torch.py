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
(`lightning_loop.fit`: model, optimiser, scheduler, step and torch's RNG
state), so a killed run resumes exactly.
"""

import argparse
import sys

import lightning_loop  # pylint: disable=g-bad-import-order  (refs/, on sys.path)

# Their evaluation sets in `load.read_cogs_datasets`' `test_sets_names`,
# the ones scored here.
EVAL_SETS = ("dev", "test", "gen")


def _args():
  p = argparse.ArgumentParser()
  lightning_loop.add_flags(
      p,
      scratch_help="Directory holding data/{train,test,dev,gen}_seqtag.jsonl.",
  )
  return p.parse_args()


def main():
  a = _args()
  lightning_loop.enter_checkout(a, "cogs")  # Their load.DATA_DIR is ./data/.
  import torch

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
  model, optimizer, scheduler = lightning_loop.build(Parser, args, a.steps)

  def evaluate():
    out = {}
    for name, loader, size in evals:
      correct = 0
      for batch in loader:
        _, scores = model._calculate_loss(batch)
        acc = model.compute_acc(batch, scores)  # Their batch mean.
        correct += round(float(acc) * batch["tokens"].shape[0])
      out[name] = {"all": correct / size, "count": size}
    return out

  lightning_loop.fit(
      a,
      model,
      optimizer,
      scheduler,
      args.max_grad_norm,
      epoch_loader,
      steps_per_epoch,
      evaluate,
  )


if __name__ == "__main__":
  main()
