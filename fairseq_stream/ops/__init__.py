"""Tensor operations shared by the strategies: the block-incremental decoder step, the fused output layer."""
