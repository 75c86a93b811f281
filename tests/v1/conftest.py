"""Fixtures for ember.v1 tests: a fresh default graph per test and a session on it."""

import pytest

import ember.v1 as tf


@pytest.fixture
def graph():
    """A new graph, made the default one for the test."""
    g = tf.Graph()
    with g.as_default():
        yield g


@pytest.fixture
def sess(graph):
    """A session on the test's graph, also the default session (for eval/run)."""
    with tf.Session(graph=graph) as s:
        yield s
