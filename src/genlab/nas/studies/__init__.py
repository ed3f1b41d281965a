"""Studies of the NAS package, each a module that registers itself (genlab.core.studies)
and a generated `genlab nas <study>` command:

- ``ber-select``: the selection protocol that defines ``--reg ber`` (docs/ber.md, "Selection
  protocol");
- ``repro``: how far one search moves with threads and last-bit noise;
- ``entropy-peak``: where the node batch entropy of a search peaks and when alpha commits.
"""

from __future__ import annotations

from genlab.core.studies import Studies

#: the studies of this package, read from its sources to list the commands
STUDIES = Studies(__name__)

__all__ = ["STUDIES"]
