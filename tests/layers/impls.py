"""The implementations of the pivot-axis attentions (triangular and
pivotal), for property tests run over each: module options by name, the
Pallas kernels in interpret mode with blocks of 4 pivots (so N = 5 has a
ragged last block)."""

import pytest

IMPLS = {
    "chunked": {},
    "pallas": dict(impl="pallas", pallas_block_size=4, interpret=True),
    "pallas_fused": dict(
        impl="pallas_fused", pallas_block_size=4, interpret=True
    ),
}

# The names to parametrize over: 'pallas' (the forward kernel of
# 'pallas_fused' with the chunked backward, each tested fast) runs in the
# slow tier.
IMPL_PARAMS = [
    pytest.param(name, marks=pytest.mark.slow) if name == "pallas" else name
    for name in sorted(IMPLS)
]
