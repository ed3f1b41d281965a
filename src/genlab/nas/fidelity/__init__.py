"""Proxy fidelity: does a cheap stand-in rank NAS-Bench-201 cells the way CIFAR-10 does?

- ``draw``: the fixed, seeded draw of NB201 cells every candidate is measured on;
- ``zero_cost``: the training-free rankings the field uses (parameter count, synflow, NWOT,
  snip, ZiCo), one registry; ``score``: `genlab nas score`, those rankings over cells;
- ``train``: `genlab nas fidelity`, every drawn cell retrained on a proxy (one run per cell and
  seed through genlab.core.sweep), written to cells.csv;
- ``report``: Kendall's tau-b of each ranking against the NB201 table's columns, with
  bootstrap intervals and paired differences over the same cells (docs/nas_proxy.md).
"""
