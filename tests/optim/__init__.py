"""Optimizer and learning-rate scheduler tests: trajectories and lr sequences against PyTorch, state dicts."""
