"""Layer 6, entry points: the Python session, the benchmark harness, the demo, sharding, DDGviz, the
frontier, checkpoint averaging and the text pipeline's command line."""
