r"""Score a saved seq2seq checkpoint without training: every evaluation set,
strictly (every row ends with its EOS, as in training) and as Csordas et
al.'s code scores it (a row of its batch's longest target need not), the
errors by target length, and the wrong rows as text.

  python -m experiments.seq2seq_evaluate --workdir=runs/scan26_rel_uni
  python -m experiments.seq2seq_evaluate --workdir=runs/scan26_rel_uni --step=45000

(--step: a saved step of the checkpoint set, such as one the run kept with
`--config.train.keep_every`.)

Writes `<workdir>/evaluation.json` (with --step, `evaluation_step<step>.json`;
`seq2seq.loop.evaluate_checkpoint`).
"""

import os

from absl import app
from absl import flags

from relational_jax.training import cli
from relational_jax.training import errors
from relational_jax.training import reporting
from relational_jax.training.seq2seq import loop

flags.DEFINE_string(
    "workdir", None, "A seq2seq_train work directory.", required=True
)
flags.DEFINE_enum(
    "checkpoint", "latest", ["latest", "best"], "Which checkpoint to score."
)
flags.DEFINE_integer(
    "step",
    None,
    "Score this saved step of --checkpoint (default: its newest).",
)
flags.DEFINE_integer(
    "csordas_batch_size",
    2048,
    "Evaluation batch of the authors' scoring (their SCAN profile's"
    " test_batch_size).",
)
flags.DEFINE_integer("max_wrong", 50, "Wrong rows listed per set.")
flags.DEFINE_string(
    "results_path",
    None,
    "Output JSON (default <workdir>/evaluation.json; with --step,"
    " <workdir>/evaluation_step<step>.json).",
)
FLAGS = flags.FLAGS


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f"Unexpected arguments: {argv[1:]}")
  # A missing work dir, an unreadable config or a bad flag: one line
  # (cli.run), before any checkpoint is opened.
  with errors.user_input((ValueError, FileNotFoundError)):
    for name, least in (("csordas_batch_size", 1), ("max_wrong", 0)):
      if FLAGS[name].value < least:
        raise ValueError(
            f"--{name}={FLAGS[name].value}: valid values are >= {least}."
        )
    loop.load_config(FLAGS.workdir)
  results = loop.evaluate_checkpoint(
      FLAGS.workdir,
      FLAGS.checkpoint,
      step=FLAGS.step,
      csordas_batch_size=FLAGS.csordas_batch_size,
      max_wrong=FLAGS.max_wrong,
  )
  default = (
      "evaluation.json"
      if FLAGS.step is None
      else f"evaluation_step{FLAGS.step}.json"
  )
  path = FLAGS.results_path or os.path.join(FLAGS.workdir, default)
  reporting.write_json(path, results)
  for name, entry in results["sets"].items():
    print(
        f"{name} at step {results['step']}: exact match"
        f" {entry['exact_match']:.4f} (the authors' scoring"
        f" {entry['exact_match_csordas']:.4f})"
    )
  print(f"wrote {path}")


if __name__ == "__main__":
  cli.run(main)
