"""Multi-run studies, each a module that registers itself (genlab.core.studies) and a
generated `genlab gaze <study>` command: the synthetic bench (bench), the premise audit
(audit), the paper protocol on real data (paper); their tables (tables), sizing (sizing) and
seed-and-subject bootstrap statistics (stats); runs (runs) trains one study run as a
genlab.core.sweep target."""

from __future__ import annotations

from genlab.core.studies import Studies

#: the studies of this package, read from its sources to list the commands
STUDIES = Studies(__name__)

__all__ = ["STUDIES"]
