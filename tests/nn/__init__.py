"""Tests for ember.nn: modules, layers, losses, init and utils against PyTorch."""
