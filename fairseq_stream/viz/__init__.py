"""Pictures: DDGviz for Jacobi decoding (matplotlib is imported lazily)."""
