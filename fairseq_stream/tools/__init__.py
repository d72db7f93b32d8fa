"""Tools around the engine: the Python session, the benchmark harness, the demo, sharding, DDGviz, checkpoints, text."""
