"""The two studies on synthetic problems rather than digits: the 1-D toy (toy) and the
sparse regression with a diagonal net (sparse)."""
