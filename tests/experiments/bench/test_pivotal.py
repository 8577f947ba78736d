"""bench.pivotal: our side's entries compute the same function, are timed,
and XLA's memory analysis is read (tiny sizes; the authors' side needs
torch and their checkout and is not run here)."""

import numpy as np

from experiments.bench import pivotal as bench_pivotal


def test_our_entries_agree_and_are_timed():
  side = bench_pivotal.OurSide(
      batch=1, heads=2, head_dim=4, chunk_size=2, seed=0
  )
  want = side.outputs("materialising", 5)
  assert set(want) == {"y", "q_ik", "k_ij", "k_jk", "v_ij", "v_jk"}
  for entry in ("ours", "ours_unchunked"):
    got = side.outputs(entry, 5)
    for name in want:
      np.testing.assert_allclose(got[name], want[name], rtol=1e-5, atol=1e-5)
  times = side.run("ours", 5, 2)
  assert len(times) == 2 and all(t > 0 for t in times)


def test_inputs_are_the_documented_draws():
  q, *_, dy = bench_pivotal.make_inputs(1, 2, 3, 4, seed=7)
  rng = np.random.default_rng(7)
  np.testing.assert_array_equal(
      q, rng.standard_normal((1, 2, 3, 3, 4), dtype=np.float32)
  )
  assert dy.shape == (1, 2, 3, 3, 4) and dy.dtype == np.float32


def test_xla_memory_reads_the_buffer_assignment():
  m = bench_pivotal.xla_memory("ours", 2, 1, 2, 6, 4)
  assert set(m) == {
      "argument_bytes",
      "output_bytes",
      "alias_bytes",
      "temp_bytes",
  }
  # Six B x H x N x N x D fp32 inputs; y and five gradients out.
  assert m["argument_bytes"] == 6 * 4 * 2 * 36 * 4
  assert m["output_bytes"] >= 6 * 4 * 2 * 36 * 4
  assert m["temp_bytes"] > 0
