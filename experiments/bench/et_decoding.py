r"""Benchmark: ET encoder-decoder greedy decoding, incremental cache vs full recompute.

Both decode the same random-initialised `EdgeTransformerSeq2Seq` greedily to
each of the `--target_lens` lengths (no early stop: EOS is never emitted by
the argmax over a vocabulary whose EOS logit is masked, so both run every
step):
  incremental  `et_seq2seq.greedy_decode`: per step, only node p's new row and
               column, from cached per-layer projections (O(N^2 D + N D^2)
               per layer and step);
  full         per step, the whole causal teacher-forced pass over the
               S + T joint graph on the tokens so far (O(N^3 D + N^2 D^2)).
Both are jitted loops (`lax.fori_loop`) over a fixed shape; the decoded
tokens are checked to be identical. Reports the median wall time of
`--repeats` runs after a warm-up run, and the XLA compiled memory.

  python3 -m experiments.bench.et_decoding --output=results/bench_et_decoding.json
"""

import json
import os
import platform
import statistics
import time

from absl import app
from absl import flags
import jax
import jax.numpy as jnp
import numpy as np

from relational_jax.models import et_seq2seq as ets
from relational_jax.models.edge_transformer import ETConfig

_BATCH = flags.DEFINE_integer("batch", 16, "Batch size B.")
_SRC_LEN = flags.DEFINE_integer("source_len", 9, "Source length S (SCAN: 9).")
_TGT_LENS = flags.DEFINE_list(
    "target_lens",
    ["16", "32", "48"],
    "Decoding lengths T (SCAN outputs: up to 49).",
)
_WIDTH = flags.DEFINE_integer("width", 64, "Edge width (num_heads * head_dim).")
_HEADS = flags.DEFINE_integer("num_heads", 4, "Heads.")
_LAYERS = flags.DEFINE_integer("num_layers", 3, "Encoder and decoder layers.")
_REPEATS = flags.DEFINE_integer("repeats", 3, "Timed runs per configuration.")
_OUTPUT = flags.DEFINE_string(
    "output",
    "results/bench_et_decoding.json",
    "Where to write the JSON results.",
)

VOCAB, BOS, EOS = 16, 1, 2


def _full_greedy(model, params, src_BxS, max_len):
  """Greedy decoding that re-runs the full causal pass at every step."""
  num_b = src_BxS.shape[0]

  def body(t, tgt_in_BxT):
    logits_BxTxV = model.apply({"params": params}, src_BxS, None, tgt_in_BxT)
    logits_BxV = jax.lax.dynamic_index_in_dim(
        logits_BxTxV, t, axis=1, keepdims=False
    )
    next_B = jnp.argmax(logits_BxV.at[:, EOS].set(-jnp.inf), axis=-1)
    return jax.lax.dynamic_update_slice_in_dim(
        tgt_in_BxT,
        next_B[:, None].astype(jnp.int32),
        jnp.minimum(t + 1, max_len - 1),
        axis=1,
    )

  tgt_in_BxT = jnp.zeros((num_b, max_len), jnp.int32).at[:, 0].set(BOS)
  tgt_in_BxT = jax.lax.fori_loop(0, max_len - 1, body, tgt_in_BxT)
  # The last step's token is the argmax at position max_len - 1.
  logits_BxTxV = model.apply({"params": params}, src_BxS, None, tgt_in_BxT)
  last_B = jnp.argmax(logits_BxTxV[:, -1].at[:, EOS].set(-jnp.inf), axis=-1)
  return jnp.concatenate(
      [tgt_in_BxT[:, 1:], last_B[:, None].astype(jnp.int32)], axis=1
  )


def _incremental_greedy(model, params, src_BxS, max_len):
  """`et_seq2seq` incremental decoding, EOS masked as in `_full_greedy`."""
  state = ets.init_decode_state(model, params, src_BxS, max_len)
  num_b = src_BxS.shape[0]

  def body(t, carry):
    state, last_B, out_BxT = carry
    logits_BxV, state = ets.decode_step(model, params, state, last_B)
    next_B = jnp.argmax(logits_BxV.at[:, EOS].set(-jnp.inf), axis=-1).astype(
        jnp.int32
    )
    return state, next_B, out_BxT.at[:, t].set(next_B)

  carry = (
      state,
      jnp.full((num_b,), BOS, jnp.int32),
      jnp.zeros((num_b, max_len), jnp.int32),
  )
  return jax.lax.fori_loop(0, max_len, body, carry)[2]


def _time(fn, *args):
  out = jax.block_until_ready(fn(*args))
  times = []
  for _ in range(_REPEATS.value):
    start = time.perf_counter()
    jax.block_until_ready(fn(*args))
    times.append(time.perf_counter() - start)
  return out, statistics.median(times)


def main(argv):
  del argv
  rows = []
  for max_len in [int(t) for t in _TGT_LENS.value]:
    if _WIDTH.value % _HEADS.value:
      raise ValueError(
          f"--num_heads={_HEADS.value} must divide --width={_WIDTH.value}."
      )
    config = ets.ETSeq2SeqConfig(
        src_vocab_size=VOCAB,
        tgt_vocab_size=VOCAB,
        et=ETConfig(
            num_layers=_LAYERS.value,
            num_heads=_HEADS.value,
            head_dim=_WIDTH.value // _HEADS.value,
        ),
        num_decoder_layers=_LAYERS.value,
        max_src_len=_SRC_LEN.value,
        max_tgt_len=max_len,
    )
    model = ets.EdgeTransformerSeq2Seq(config)
    src_BxS = jax.random.randint(
        jax.random.PRNGKey(1), (_BATCH.value, _SRC_LEN.value), 3, VOCAB
    )
    params = model.init(
        jax.random.PRNGKey(0),
        src_BxS[:1],
        None,
        jnp.ones((1, max_len), jnp.int32),
    )["params"]
    row = {"target_len": max_len, "nodes": _SRC_LEN.value + max_len}
    outs = {}
    for name, fn in (
        ("incremental", _incremental_greedy),
        ("full", _full_greedy),
    ):
      jitted = jax.jit(fn, static_argnums=(0, 3))
      compiled = jitted.lower(model, params, src_BxS, max_len).compile()
      mem = compiled.memory_analysis()
      outs[name], seconds = _time(lambda p, s: compiled(p, s), params, src_BxS)
      row[f"{name}_seconds"] = round(seconds, 4)
      row[f"{name}_temp_gb"] = (
          round(mem.temp_size_in_bytes / 1e9, 4) if mem is not None else None
      )
      print(f"T={max_len} {name}: {seconds:.3f} s", flush=True)
    row["same_tokens"] = bool(np.array_equal(outs["incremental"], outs["full"]))
    row["speedup"] = round(row["full_seconds"] / row["incremental_seconds"], 2)
    rows.append(row)
    print(row, flush=True)
  result = {
      "benchmark": (
          "ET encoder-decoder greedy decoding: incremental vs full recompute"
      ),
      "batch": _BATCH.value,
      "source_len": _SRC_LEN.value,
      "width": _WIDTH.value,
      "num_heads": _HEADS.value,
      "layers": f"{_LAYERS.value}+{_LAYERS.value} (tied)",
      "repeats": _REPEATS.value,
      "backend": jax.default_backend(),
      "machine": f"{platform.machine()} {os.cpu_count()} CPUs",
      "rows": rows,
  }
  os.makedirs(os.path.dirname(os.path.abspath(_OUTPUT.value)), exist_ok=True)
  with open(_OUTPUT.value, "w") as f:
    json.dump(result, f, indent=1)
  print(f"wrote {_OUTPUT.value}")


if __name__ == "__main__":
  app.run(main)
