r"""The reference side of `python -m experiments.compare clrs_rt`.

Runs UNDER THE AUTHORS' ENVIRONMENT (the Python of a venv with their 2022
dependencies; see `experiments/compare/clrs_rt.py` for the install command),
not ours: it imports the RT authors' CLRS fork
(github.com/CameronDiao/relational-transformer, package `clrs`) from
`--reference`, a checkout that is never vendored or edited, and its
training script `clrs/examples/run.py` for its flags and its evaluation
function. Two subcommands:

`data`: the datasets their run.py builds, written to one .npz for our side:
  `clrs.build_sampler(algorithm, seed=train_seed, num_samples=train_size,
  length=16)` (train), `seed=valid_seed, length=16` (val) and
  `seed=test_seed, length=64` (test), with run.py's evaluation-set sizes
  (`valid_size` / `test_size` x num_samples_multiplier; 2048 for
  binary_search and the other run.py exceptions), every input, hint and
  output array, the lengths, the spec, and the state of the train sampler's
  NumPy generator right after it built its dataset: every training batch of
  theirs is `rng.choice(train_size, (batch_size,), replace=True)` from that
  state, so our side draws the very same batches.

`train`: run.py's training loop, step for step: their `BaselineModel` with
  their processor factory and model parameters (run.py's `main`, from their
  own flags: `--authors_flags` is parsed by run.py's absl flag definitions),
  initialised with `init(<one test feedback>, model_seed + 1)`, trained on
  `train_sampler.next(batch_size)` with the key chain
  `rng_key, new = split(rng_key)` from `PRNGKey(model_seed)`. Every
  `--eval_every` steps (and at the last), as run.py does at each evaluation,
  two keys are split off (their train-set and validation evaluations) and
  the model is scored with run.py's `collect_and_eval` on the first
  `--max_eval_samples` (0: all) samples of the validation set (n = 16) and
  of the test set (n = 64). Differences from run.py, none of which changes a
  trained parameter: evaluation points at `--eval_every` steps (run.py:
  every 320 examples, plus once after the first step), the test set scored
  at every point (run.py: once, at the end, with the best-validation
  parameters), no train-set evaluation (its key is still split off), and
  `--eval_batch_size` samples per predict call (run.py: 1; each sample's
  prediction does not depend on the others in its batch: no noise or
  dropout at prediction, the hint length is the dataset's padded length).

At every evaluation the point is appended to `<out_dir>/curve.jsonl` and the
run is checkpointed (`checkpoint.pkl`: params, optimiser state, step, the
key chain and the train sampler's NumPy generator state), so a killed run
resumes exactly after its last evaluation.
"""

import argparse
import json
import os
import pickle
import sys
import time

import curve_file  # pylint: disable=g-bad-import-order  (refs/, on sys.path)


def _args():
  p = argparse.ArgumentParser()
  p.add_argument("command", choices=("data", "train"))
  p.add_argument(
      "--reference",
      required=True,
      help="Checkout of github.com/CameronDiao/relational-transformer.",
  )
  p.add_argument("--algorithm", required=True)
  p.add_argument(
      "--authors_flags",
      default="",
      help="Flags for their run.py, space separated.",
  )
  p.add_argument("--out", help="data: the .npz to write.")
  p.add_argument("--out_dir", help="train: curve.jsonl and checkpoint.pkl.")
  p.add_argument("--steps", type=int, default=0)
  p.add_argument("--eval_every", type=int, default=0)
  p.add_argument("--max_eval_samples", type=int, default=0)
  p.add_argument(
      "--stop_at",
      type=int,
      default=0,
      help="Stop after the checkpoint of this step (a resume test).",
  )
  return p.parse_args()


def _import_theirs(reference, authors_flags):
  """Their `clrs` package and run.py module, with run.py's flags parsed
  from `authors_flags` and converted as its `main` does."""
  if not os.path.isfile(os.path.join(reference, "clrs", "examples", "run.py")):
    sys.exit(
        f"--reference={reference} has no clrs/examples/run.py: pass a "
        "checkout of github.com/CameronDiao/relational-transformer."
    )
  sys.path.insert(0, reference)
  import clrs  # pylint: disable=g-import-not-at-top

  if not os.path.abspath(clrs.__file__).startswith(os.path.abspath(reference)):
    sys.exit(
        f"imported clrs from {clrs.__file__}, not from {reference}: this "
        "Python has another clrs installed."
    )
  from clrs.examples import run  # pylint: disable=g-import-not-at-top

  flags = run.FLAGS
  flags(["run.py", f"--algorithm={_ARGS.algorithm}"] + authors_flags.split())
  for name in (
      "chunked_training",
      "eval_on_train_set",
      "eval_on_test_set",
      "verbose_logging",
      "log_param_count",
      "ptr_from_edges",
      "disable_edge_updates",
      "use_ln",
      "use_lstm",
      "freeze_processor",
  ):
    setattr(flags, name, {"True": True, "False": False}[getattr(flags, name)])
  if flags.chunked_training:
    sys.exit("chunked training is not part of this comparison.")
  if "gat" in flags.processor_type or flags.processor_type in (
      "rt",
      "rtv2",
      "pt",
  ):
    flags.hidden_size = flags.nb_heads * flags.head_size
  return clrs, run, flags


def _eval_sizes(run, flags, algorithm):
  """run.py's validation and test set sizes."""
  mult = run.specs.CLRS_30_ALGS_SETTINGS[algorithm]["num_samples_multiplier"]
  val, test = flags.valid_size * mult, flags.test_size * mult
  if algorithm == "find_maximum_subarray_kadane":
    val = test = 1024
  elif algorithm in (
      "quickselect",
      "minimum",
      "binary_search",
      "naive_string_matcher",
      "kmp_matcher",
      "segments_intersect",
  ):
    val = test = 2048
  return val, test


def _samplers(clrs, run, flags, algorithm):
  val_size, test_size = _eval_sizes(run, flags, algorithm)
  train, spec = clrs.build_sampler(
      name=algorithm,
      seed=flags.train_seed,
      num_samples=flags.train_size,
      length=16,
  )
  val, _ = clrs.build_sampler(
      name=algorithm, seed=flags.valid_seed, num_samples=val_size, length=16
  )
  test, _ = clrs.build_sampler(
      name=algorithm, seed=flags.test_seed, num_samples=test_size, length=64
  )
  return train, val, test, spec, val_size, test_size


def dump_data(a):
  import numpy as np  # pylint: disable=g-import-not-at-top

  clrs, run, flags = _import_theirs(a.reference, a.authors_flags)
  train, val, test, spec, _, _ = _samplers(clrs, run, flags, a.algorithm)
  kind, keys, pos, has_gauss, cached = train._rng.get_state()  # pylint: disable=protected-access
  arrays = {
      "train_rng_keys": keys,
      "train_rng_rest": np.array([pos, has_gauss, cached], np.float64),
  }
  for split, sampler in (("train", train), ("val", val), ("test", test)):
    for stage, dps in (
        ("input", sampler._inputs),
        ("hint", sampler._hints),  # pylint: disable=protected-access
        ("output", sampler._outputs),
    ):  # pylint: disable=protected-access
      for dp in dps:
        arrays[f"{split}/{stage}/{dp.name}"] = np.asarray(dp.data)
    arrays[f"{split}/lengths"] = np.asarray(sampler._lengths)  # pylint: disable=protected-access
  meta = {
      "algorithm": a.algorithm,
      "spec": {k: list(v) for k, v in spec.items()},
      "rng_kind": kind,
      "train_size": flags.train_size,
      "batch_size": flags.batch_size,
  }
  arrays["meta_json"] = np.frombuffer(json.dumps(meta).encode(), np.uint8)
  tmp = a.out + ".tmp.npz"
  np.savez(tmp, **arrays)
  os.replace(tmp, a.out)
  print(f"wrote {a.out}: {len(arrays)} arrays", flush=True)


def train(a):
  import jax  # pylint: disable=g-import-not-at-top
  import numpy as np  # pylint: disable=g-import-not-at-top

  clrs, run, flags = _import_theirs(a.reference, a.authors_flags)
  if flags.hint_mode != "encoded_decoded_nodiff":
    sys.exit(
        "this comparison trains hint_mode encoded_decoded_nodiff, got "
        f"{flags.hint_mode!r}."
    )
  train_sampler, val_sampler, test_sampler, spec, val_size, test_size = (
      _samplers(clrs, run, flags, a.algorithm)
  )
  if a.max_eval_samples:
    val_size = min(val_size, a.max_eval_samples)
    test_size = min(test_size, a.max_eval_samples)
  for name, size in (("validation", val_size), ("test", test_size)):
    if size % flags.eval_batch_size:  # collect_and_eval scores whole batches
      sys.exit(
          f"the {name} count {size} is not a multiple of "
          f"--eval_batch_size={flags.eval_batch_size}."
      )
  processor_factory = clrs.get_processor_factory(
      flags.processor_type,
      use_ln=flags.use_ln,
      nb_layers=flags.num_layers,
      nb_heads=flags.nb_heads,
      node_hid_size=flags.node_hid_size,
      edge_hid_size_1=flags.edge_hid_size_1,
      edge_hid_size_2=flags.edge_hid_size_2,
      graph_vec=flags.graph_vec,
      disable_edge_updates=flags.disable_edge_updates,
  )
  os.makedirs(a.out_dir, exist_ok=True)
  model = clrs.models.BaselineModel(
      spec=spec,
      dummy_trajectory=val_sampler.next(),
      processor_factory=processor_factory,
      hidden_dim=flags.hidden_size,
      encode_hints=True,
      decode_hints=True,
      decode_diffs=False,
      ptr_from_edges=flags.ptr_from_edges,
      use_lstm=flags.use_lstm,
      learning_rate=flags.learning_rate,
      checkpoint_path=os.path.join(a.out_dir, "their_checkpoints"),
      freeze_processor=flags.freeze_processor,
      dropout_prob=flags.dropout_prob,
      hint_teacher_forcing_noise=flags.hint_teacher_forcing_noise,
  )
  feedback = test_sampler.next(flags.eval_batch_size, eval=True)
  model.init(feedback.features, flags.model_seed + 1)
  test_sampler.reset_proc_samples()
  rng_key = jax.random.PRNGKey(flags.model_seed)

  ckpt_path = os.path.join(a.out_dir, "checkpoint.pkl")
  curve_path = os.path.join(a.out_dir, "curve.jsonl")
  step = 0
  if os.path.isfile(ckpt_path):
    with open(ckpt_path, "rb") as f:
      ckpt = pickle.load(f)
    model.params, model.opt_state = ckpt["params"], ckpt["opt_state"]
    rng_key, step = jax.numpy.asarray(ckpt["rng_key"]), ckpt["step"]
    train_sampler._rng.set_state(ckpt["sampler_rng"])  # pylint: disable=protected-access
    curve_file.restart(curve_path, step)
    print(f"resumed at step {step}", flush=True)
  else:
    curve_file.restart(curve_path, None)

  def score(sampler, count, key):
    return float(
        run.collect_and_eval(
            sampler, model.predict, count, key, spec=spec, extras={}
        )["score"]
    )

  started = time.time()
  while step < a.steps:
    feedback = train_sampler.next(flags.batch_size)
    rng_key, new_rng_key = jax.random.split(rng_key)
    loss = float(model.feedback(rng_key, feedback))
    rng_key = new_rng_key
    step += 1
    if step % a.eval_every and step != a.steps:
      continue
    train_seconds = time.time() - started
    # run.py splits off a key for its train-set evaluation, then one for
    # validation, keeping the second half of each split.
    _, rng_key = jax.random.split(rng_key)
    val_key, rng_key = jax.random.split(rng_key)
    point = {
        "step": step,
        "loss": loss,
        "train_seconds": train_seconds,
        "val": score(val_sampler, val_size, val_key),
        "test": score(test_sampler, test_size, jax.random.PRNGKey(3)),
        "val_samples": val_size,
        "test_samples": test_size,
        "eval_seconds": time.time() - started - train_seconds,
    }
    curve_file.append(curve_path, point)
    state = {
        "params": jax.device_get(model.params),
        "opt_state": jax.device_get(model.opt_state),
        "rng_key": np.asarray(rng_key),
        "step": step,
        "sampler_rng": train_sampler._rng.get_state(),
    }  # pylint: disable=protected-access
    with open(ckpt_path + ".tmp", "wb") as f:
      pickle.dump(state, f)
    os.replace(ckpt_path + ".tmp", ckpt_path)
    print(
        f"step {step}: loss {loss:.4f} val {point['val']:.4f} "
        f"test {point['test']:.4f} ({train_seconds:.1f} s train, "
        f"{point['eval_seconds']:.1f} s eval)",
        flush=True,
    )
    started = time.time()
    if step == a.stop_at:
      return


_ARGS = None

if __name__ == "__main__":
  _ARGS = _args()
  if _ARGS.command == "data":
    dump_data(_ARGS)
  else:
    if _ARGS.steps < 1 or _ARGS.eval_every < 1:
      sys.exit("train needs --steps >= 1 and --eval_every >= 1.")
    train(_ARGS)
