"""Op tests: every op against PyTorch (forward and backward), finite differences, meta shapes, errors."""
