"""Upper limits of the sizes and counts genlab.optim accepts, checked before a run starts.

A width whose tensors would not fit in memory, or a step count that would run for
centuries, is refused up front with the limit in the message (ConfigError).
"""

from __future__ import annotations

from genlab.core.errors import require_at_most

MAX_WIDTH = 65_536  # hidden width / channels / embedding size
MAX_DEPTH = 1_024  # hidden layers / blocks per stage
MAX_PARAMETERS = 100_000_000  # 400 MB of float32 weights, before optimiser state and measures
MAX_EPOCHS = 10_000
MAX_ITERATIONS = 100_000  # power iterations, probes, ascent steps, draws, toy steps
#: bytes the per-sample products of one chunk of samples may take in the measures (a chunk
#: of vmapped per-sample gradients or Hessian-vector products holds a few (chunk, d) sets)
PER_SAMPLE_BYTES = 1 << 30


__all__ = ["MAX_DEPTH", "MAX_EPOCHS", "MAX_ITERATIONS", "MAX_PARAMETERS", "MAX_WIDTH",
           "PER_SAMPLE_BYTES", "require_at_most"]
