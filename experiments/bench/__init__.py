"""Benchmarks, FLOP counts and profiles (absl mains unless noted).

Run each as `python3 -m experiments.bench.<module>`; results JSON files keep
their historical names under `results/` (`bench_<module>.json` for the
benchmarks).

  dropout_prng       cost of dropout masks per generator (threefry against
                     `relational_jax.training.prng`'s counter hash);
  et_decoding        ET encoder-decoder greedy decoding, incremental cache
                     against full recompute;
  et_parts           what one Edge Transformer training pass spends its time
                     on (wall clock; the pivot sum's share);
  gpu_check          the prepared check for a lent GPU: tests, precision
                     against the goldens, the Pallas kernel and FloydNet's
                     torch function, CLRS speed; one JSON, exit 1 on a
                     mismatch (`scripts/gpu_check.sh`);
  peers              CLRS training and forward speed against the peers (the
                     RT authors' RT, Mueller et al.'s Edge Transformer,
                     dm-clrs MPNN and Triplet-GMPNN; our FloydNet), side by
                     side in one process, and XLA's memory analysis of each
                     step (--memory);
  pivotal            FloydNet's pivotal attention, forward + backward: ours
                     (chunked) against the authors' PyTorch function, time
                     and memory;
  processors         CLRS processor speed: training examples/s at n = 16, a
                     forward pass at n = 64 (`ENTRIES`, shared by the others);
  scan_step          one SCAN training step, ours against the authors'
                     PyTorch code;
  triangular         one Edge Transformer layer, chunked triangular attention
                     against the reference;
  flops_processors   FLOPs of one CLRS training step per processor, from
                     XLA's cost analysis;
  profile_clrs_step  where one CLRS training step's time goes (XLA:CPU op
                     profile);
  profile_et_stack   where one Edge Transformer training step's time goes
                     (XLA:CPU op profile);
  xla_op_profile     (a library, no flags) executed XLA:CPU ops of a jitted
                     function and their durations, for the two profiles;
  worker             (a library, no flags) the stdin/stdout worker process
                     that runs each side of `pivotal` and `scan_step`.
"""
