"""Studies of the NAS package that tests and experiments/ share (each module has a ``main``).

- ``ber_select``: the selection protocol that defines ``--reg ber`` (docs/ber.md, "Selection
  protocol");
- ``repro``: how far one search moves with threads and last-bit noise;
- ``entropy_peak``: where the node batch entropy of a search peaks and when alpha commits.

The scripts experiments/nas_<study>.py run them.
"""
