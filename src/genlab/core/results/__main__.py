"""`make results`: rewrite the pages' generated regions from the results files."""

from genlab.core.results.pages import main

raise SystemExit(main())
