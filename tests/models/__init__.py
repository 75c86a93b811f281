"""Tests for ember.models: the model zoo, the registry and em.summary."""
