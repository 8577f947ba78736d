"""Learning curves of our implementations beside the authors' own code.

    python -m experiments.compare NAME --reference=DIR [--budget=cpu]

Each comparison (a `protocol.Comparison`, named in `registry.COMPARISONS`,
the one place the entry point finds it) trains our side and the authors'
side with matched settings on the same data, for several seeds each,
evaluates both at the same steps, and writes `results/compare/NAME.json`
(both curves: mean, sd, range and values per evaluation point; the matching
rule of `curves.compare_sides` per point) and `results/compare/NAME.png`
(at budgets other than cpu `NAME__<budget>.*`; with seeds missing, a
`__partial` suffix).

The authors' code is never vendored: `--reference` is a checkout (get it with
the `fetch` of public repositories); without it the command says what to fetch
and exits non-zero.
"""
