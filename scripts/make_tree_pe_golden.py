"""Writes the golden of Shiv & Quirk's tree positional encodings from the
authors' own code, microsoft/icecaps (TensorFlow 1), for
tests/fidelity/test_tree_pe_golden.py.

CI has no TensorFlow, so this script runs the authors' functions once and
stores their inputs, parameters and outputs in
tests/fidelity/goldens/icecaps_tree_pe.npz. It imports their modules from a
checkout (`--icecaps_reference`, the directory holding the `icecaps`
package) and calls, unchanged:
  icecaps/util/trees.py              TreeNode, `left_child_right_sibling`,
                                     `get_positional_encoding`, `get_degrees`;
  icecaps/data_io/json_data_processor.py
                                     `JSONDataProcessor.parse_json_obj`,
                                     `lcrs_transform`, and `write_to_tfrecord`
                                     of abstract_data_processor.py (their
                                     default streamline=True: the token ids
                                     and positions of every node, read back
                                     from the TFRecord file it writes);
  icecaps/estimators/abstract_transformer_estimator.py
                                     `build_embeddings` (the tree parameters,
                                     their initialiser), `treeify_positions`,
                                     `init_inputs` (the encoder's positions
                                     and the d_pos -> d_model dense layer);
  icecaps/estimators/transformer_decoder_estimator.py
                                     `init_targets` (teacher forcing: the
                                     shifted positions, `pos_proj`) and
                                     `get_next_pos_tree` (greedy decoding),
                                     called step by step as `build_rt_decoder`
                                     calls it (its lines 285-297 build each
                                     step's input positions, lines 410-422
                                     the next position; beam width 1).
Their modules are written for TensorFlow 1 (`import tensorflow as tf`,
tf.contrib, tf.estimator): a TensorFlow 2 install serves them through
`tf.compat.v1` in graph mode under the name `tensorflow`, with stand-ins for
the pieces these functions never call (tf.estimator.Estimator as the base
class, tf.contrib.seq2seq, tf.nn.rnn_cell.LSTMStateTuple).

Usage (the reference at 926d5bdbb09aaaf7c04cba450fd666d6f7c01412):
  python3 -m venv /tmp/tfvenv && /tmp/tfvenv/bin/pip install tensorflow-cpu tf_keras numpy
  /tmp/tfvenv/bin/python scripts/make_tree_pe_golden.py \
      --icecaps_reference=/tmp/peers/icecaps
  python3 scripts/make_tree_pe_golden.py --record   # ours vs theirs -> README.json
"""

import argparse
import collections
import datetime
import json
import os
import pathlib
import sys
import tempfile
import types

import numpy as np

GOLDEN_DIR = (
    pathlib.Path(__file__).resolve().parent.parent / "tests/fidelity/goldens"
)
GOLDEN = GOLDEN_DIR / "icecaps_tree_pe.npz"
REFERENCE_COMMIT = "926d5bdbb09aaaf7c04cba450fd666d6f7c01412"

# Small sizes: k = 4 (stack slots), n = 2, d_pos = 2 k n m with m = 3 tree
# parameters, d_model 16 (d_pos != d_model, so the dense layer is on).
K, N, M, D_MODEL = 4, 2, 3, 16
D_POS = K * N * M
# icecaps JSON trees: [root, child, ...], a string is a leaf.
TREES = (
    ["A", "B", ["C", "D"]],
    ["R", ["X", "a", "b", "c"], ["Y", ["Z", "d"]], "e"],
    ["P", "q"],
    ["F", ["G", ["H", ["I", "j", "k"]]], "l"],
)
ORDERS = {"dfs": "depth_first", "bfs": "breadth_first"}


def _install_tf1_shim():
  """`import tensorflow` -> tf.compat.v1 (graph mode) plus stand-ins."""
  os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")  # tf.layers: tf_keras.
  import tensorflow as real_tf  # pylint: disable=g-import-not-at-top

  v1 = real_tf.compat.v1
  v1.disable_v2_behavior()
  shim = types.ModuleType("tensorflow")
  for name in dir(v1):
    if not name.startswith("__"):
      setattr(shim, name, getattr(v1, name))
  shim.estimator = types.SimpleNamespace(
      Estimator=object,
      ModeKeys=types.SimpleNamespace(
          TRAIN="train", EVAL="eval", PREDICT="infer"
      ),
  )
  contrib = types.ModuleType("tensorflow.contrib")
  contrib.seq2seq = types.ModuleType("tensorflow.contrib.seq2seq")
  contrib.layers = types.SimpleNamespace(
      xavier_initializer=v1.glorot_uniform_initializer
  )
  shim.contrib = contrib
  nn = types.ModuleType("tensorflow.nn")
  for name in dir(v1.nn):
    if not name.startswith("__"):
      setattr(nn, name, getattr(v1.nn, name))
  rnn_cell = types.ModuleType("tensorflow.nn.rnn_cell")
  rnn_cell.LSTMStateTuple = collections.namedtuple("LSTMStateTuple", "c h")
  nn.rnn_cell = rnn_cell
  shim.nn = nn
  sys.modules.update({
      "tensorflow": shim,
      "tensorflow.contrib": contrib,
      "tensorflow.contrib.seq2seq": contrib.seq2seq,
      "tensorflow.nn": nn,
      "tensorflow.nn.rnn_cell": rnn_cell,
  })
  return v1


def _hparams(**kw):
  base = dict(
      d_model=D_MODEL,
      d_pos=D_POS,
      tree_depth=K,
      tree_width=N,
      modality="tree",
      learn_wavelengths=False,
      min_wavelength=1.0,
      max_wavelength=1000.0,
      learn_positional_embeddings=False,
      max_length=10,
      tie_token_embeddings=False,
      traversal="dfs",
      beam_width=1,
  )
  base.update(kw)
  return collections.namedtuple("hparams", base)(**base)


def _tokens_and_positions(icecaps_ref, order):
  """Their data pipeline: JSON trees -> lcrs_transform -> write_to_tfrecord
  (streamline=True), read back. Returns (vocab words, [(ids, NxP)])."""
  import tensorflow as tf  # The shim.
  from icecaps.data_io.data_header import DataHeader
  from icecaps.data_io.json_data_processor import JSONDataProcessor

  tmp = tempfile.mkdtemp()
  src = os.path.join(tmp, "trees.json")
  with open(src, "w") as f:
    for t in TREES:
      f.write(json.dumps({"tree": t}) + "\n")
  vocab_file = os.path.join(tmp, "vocab.dic")
  proc = JSONDataProcessor(
      src, DataHeader("tree", "tree", vocab_file, vocab_mode="write")
  )
  out = os.path.join(tmp, "trees.tfrecord")
  proc.write_to_tfrecord(
      out,
      pipeline=[JSONDataProcessor.lcrs_transform],
      traversal=ORDERS[order],
      max_pos_len=K * N,
  )
  words = list(proc.vocabs[vocab_file].words)
  rows = []
  for record in tf.io.tf_record_iterator(out):
    ex = tf.train.Example.FromString(record)
    ids = list(ex.features.feature["tree"].int64_list.value)
    pos = np.asarray(ex.features.feature["tree_pos"].float_list.value)
    rows.append((np.asarray(ids, np.int32), pos.reshape(len(ids), K * N)))
  return words, rows


def _vocabulary(words):
  from icecaps.util.vocabulary import Vocabulary

  fname = os.path.join(tempfile.mkdtemp(), "vocab.dic")
  with open(fname, "w", encoding="utf8") as f:
    f.write("\n".join(words) + "\n")
  return Vocabulary(fname=fname)


def write(icecaps_ref):
  sys.path.insert(0, os.path.abspath(icecaps_ref))
  tf = _install_tf1_shim()
  from icecaps.estimators import abstract_transformer_estimator as ate
  from icecaps.estimators import transformer_decoder_estimator as tde
  from icecaps.util import trees as trees_lib

  rng = np.random.default_rng(0)
  out = {
      "k": K,
      "n": N,
      "m": M,
      "d_model": D_MODEL,
      "d_pos": D_POS,
      "trees": np.asarray([json.dumps(t) for t in TREES]),
  }

  # 1. Tokens and positions of their data pipeline (LCRS, streamlined).
  for order in ORDERS:
    words, rows = _tokens_and_positions(icecaps_ref, order)
    out[f"{order}_words"] = np.asarray(words)
    for i, (ids, pos) in enumerate(rows):
      out[f"{order}_tree{i}_ids"] = ids
      out[f"{order}_tree{i}_pos"] = pos.astype(np.float32)
    vocab = _vocabulary(words)
    out[f"{order}_degrees"] = np.asarray(trees_lib.get_degrees(vocab), np.int32)

  # 2. The encoding of given positions with given parameters, through their
  # encoder input (init_inputs: treeify_positions then tf.layers.dense).
  words = list(out["dfs_words"])
  vocab = _vocabulary(words)
  num_t = max(len(out[f"dfs_tree{i}_ids"]) for i in range(len(TREES)))
  ids_BxT = np.full((len(TREES), num_t + 1), vocab.end_token_id, np.int32)
  pos_BxTxP = np.zeros((len(TREES), num_t, K * N), np.float32)
  for i in range(len(TREES)):
    ids = out[f"dfs_tree{i}_ids"]
    ids_BxT[i, : len(ids)] = ids
    pos_BxTxP[i, : len(ids)] = out[f"dfs_tree{i}_pos"]
  theta_M = rng.uniform(-1.5, 1.5, M).astype(np.float32)
  kernel = rng.normal(0, 0.3, (D_POS, D_MODEL)).astype(np.float32)
  bias = rng.normal(0, 0.3, (D_MODEL,)).astype(np.float32)
  dec_theta_M = rng.uniform(-1.5, 1.5, M).astype(np.float32)
  dec_kernel = rng.normal(0, 0.3, (D_POS, D_MODEL)).astype(np.float32)
  dec_bias = rng.normal(0, 0.3, (D_MODEL,)).astype(np.float32)
  out.update(
      theta=theta_M,
      kernel=kernel,
      bias=bias,
      dec_theta=dec_theta_M,
      dec_kernel=dec_kernel,
      dec_bias=dec_bias,
      ids=ids_BxT,
      positions=pos_BxTxP,
  )

  graph = tf.Graph()
  with graph.as_default():
    enc = ate.AbstractTransformerEstimator.__new__(
        ate.AbstractTransformerEstimator
    )
    enc.hparams = _hparams()
    enc.d_pos, enc.vocab = D_POS, vocab
    enc.features = {"inputs": ids_BxT, "inputs_positions": pos_BxTxP}
    enc.keep_prob = 1.0
    with tf.variable_scope("encoder", reuse=tf.AUTO_REUSE):
      enc.build_embeddings()
      treeified = enc.treeify_positions(tf.constant(pos_BxTxP))
      enc.init_inputs()
    enc_vars = {v.name: v for v in tf.global_variables()}

    dec = tde.TransformerDecoderEstimator.__new__(
        tde.TransformerDecoderEstimator
    )
    dec.hparams = _hparams()
    dec.d_pos, dec.vocab = D_POS, vocab
    dec.degrees = tf.cast(trees_lib.get_degrees(vocab), tf.int32)
    dec.features = {"targets": ids_BxT, "targets_positions": pos_BxTxP}
    dec.keep_prob = 1.0
    dec.batch_size = len(TREES)
    with tf.variable_scope("decoder", reuse=tf.AUTO_REUSE):
      dec.build_embeddings()
      dec.build_io_layers()
      dec.init_targets()
    # Greedy decoding of each tree's own DFS ids then the end token, as
    # build_rt_decoder feeds get_next_pos_tree (beam width 1): the call at
    # step t gives the position of token t; the inputs of steps 0..t are
    # the start token's zero then those positions (its lines 285-297).
    greedy = []
    with tf.variable_scope("decoder", reuse=tf.AUTO_REUSE):
      for i in range(len(TREES)):
        ids = np.append(out[f"dfs_tree{i}_ids"], vocab.end_token_id)
        hyp = tf.constant(ids[None].astype(np.int32))
        positions, aux = None, None
        for t in range(len(ids)):
          next_pos, aux = dec.get_next_pos_tree(
              hyp[:, : t + 1], positions, aux, 1
          )
          positions = (
              next_pos
              if positions is None
              else tf.concat([positions, next_pos], -2)
          )
        concat = tf.concat([tf.zeros([1, 1, N * K]), positions], -2)
        inputs = dec.pos_proj_layer(
            tf.reshape(dec.treeify_positions(concat), [-1, len(ids) + 1, D_POS])
        )
        greedy.append((positions, inputs))
    all_vars = {v.name: v for v in tf.global_variables()}
    with tf.Session() as sess:
      sess.run(tf.global_variables_initializer())
      init_theta = {
          "enc": sess.run(enc_vars["encoder/tree_params:0"]),
      }
      names = sorted(all_vars)
      out["variable_names"] = np.asarray(names)
      assigns = {
          "encoder/tree_params:0": theta_M,
          "encoder/dense/kernel:0": kernel,
          "encoder/dense/bias:0": bias,
          "decoder/tree_params:0": dec_theta_M,
          "decoder/pos_proj/kernel:0": dec_kernel,
          "decoder/pos_proj/bias:0": dec_bias,
      }
      for name, value in assigns.items():
        all_vars[name].load(value, sess)
      res = sess.run({
          "tree_weights": enc.tree_weights,
          "treeified": treeified,
          "encoder_positions": enc.positions,
          "decoder_positions": dec.positions,
          "decoder_inputs": dec.inputs_train,
          "decoder_targets": dec.targets_train,
          "greedy": greedy,
      })
  out.update(
      tree_weights=res["tree_weights"],
      treeified=res["treeified"],
      encoder_positions=res["encoder_positions"],
      decoder_positions=res["decoder_positions"],
      decoder_inputs=res["decoder_inputs"],
      decoder_targets=res["decoder_targets"],
  )
  for i, (raw, encoded) in enumerate(res["greedy"]):
    out[f"greedy{i}_raw"] = raw[0]
    out[f"greedy{i}_inputs"] = encoded[0]

  # 3. Their theta initialiser (tf.get_variable without initializer) at
  # the paper's sizes: d_pos 2048, k 32, n 2 -> m = 32; and a wide one to
  # pin the distribution.
  for m in (32, 4096):
    graph = tf.Graph()
    with graph.as_default():
      enc = ate.AbstractTransformerEstimator.__new__(
          ate.AbstractTransformerEstimator
      )
      enc.hparams = _hparams(d_pos=2 * 32 * m, tree_depth=32)
      enc.d_pos, enc.vocab = 2 * 32 * m, vocab
      tf.set_random_seed(m)
      enc.build_embeddings()
      theta = [v for v in tf.global_variables() if v.name == "tree_params:0"][0]
      with tf.Session() as sess:
        sess.run(theta.initializer)
        out[f"theta_init_m{m}"] = sess.run(theta)
  GOLDEN_DIR.mkdir(parents=True, exist_ok=True)
  np.savez_compressed(GOLDEN, **out)
  print(f"wrote {GOLDEN}")


def record():
  sys.path.insert(0, str(GOLDEN_DIR.parent.parent.parent))
  from tests.fidelity import test_tree_pe_golden as t  # pylint: disable=g-import-not-at-top

  diffs = t.max_abs_diffs()
  readme = GOLDEN_DIR / "README.json"
  meta = json.loads(readme.read_text())
  meta["goldens"]["icecaps_tree_pe"] = {
      "function": (
          "icecaps/util/trees.py left_child_right_sibling + "
          "data_io write_to_tfrecord (streamline) tokens and positions, "
          "estimators/abstract_transformer_estimator.py build_embeddings / "
          "treeify_positions / init_inputs, transformer_decoder_estimator.py "
          "init_targets and get_next_pos_tree (greedy, beam 1), TF 2 "
          "tf.compat.v1; written by scripts/make_tree_pe_golden.py"
      ),
      "max_abs_diff": {k: float(f"{v:.3g}") for k, v in sorted(diffs.items())},
      "reference": "icecaps",
  }
  meta["references"]["icecaps"] = {
      "commit": REFERENCE_COMMIT,
      "generated": (
          datetime.datetime.fromtimestamp(
              GOLDEN.stat().st_mtime, datetime.timezone.utc
          ).isoformat(timespec="seconds")
      ),
      "repository": "https://github.com/microsoft/icecaps",
      "shims": (
          "TensorFlow 2's tf.compat.v1 (graph mode, legacy Keras: "
          "TF_USE_LEGACY_KERAS=1 with tf_keras) registered as the module "
          "tensorflow, with stand-ins tf.estimator.Estimator = object (their "
          "estimators' base class), an empty tf.contrib.seq2seq, "
          "tf.contrib.layers.xavier_initializer = glorot_uniform_initializer "
          "and tf.nn.rnn_cell.LSTMStateTuple (imported, not called); "
          "estimators built with __new__ and their attributes (hparams, "
          "vocab, features) set by hand; their modules loaded unchanged"
      ),
  }
  readme.write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n")
  print(json.dumps(diffs, indent=2))


def main():
  ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  ap.add_argument("--icecaps_reference", help="checkout holding icecaps/")
  ap.add_argument("--record", action="store_true")
  args = ap.parse_args()
  if args.icecaps_reference:
    write(args.icecaps_reference)
  if args.record:
    record()


if __name__ == "__main__":
  main()
