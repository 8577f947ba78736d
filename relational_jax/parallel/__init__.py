"""Data parallelism over every device of every process.

`mesh`: the 1-D 'data' mesh, shardings, and each process's rows of a global
batch; `distributed`: JAX's multi-process runtime (its flags, process 0 writes
the files, barrier). Imports only JAX and NumPy, so that every layer above
(`processors/`, `relational_jax.training`) may use it.
"""
