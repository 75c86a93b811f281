"""tf.train.Saver: checkpoints of a session's variables in Ember's safetensors format, TF's state file and errors."""

import os

import numpy as np
import pytest

import ember as em
import ember.v1 as tf


def _model():
    w = tf.Variable(np.arange(6, dtype=np.float32).reshape(2, 3), name="w")
    b = tf.Variable(1.0, name="b")
    step = tf.Variable(0, name="step", trainable=False)
    return w, b, step


def test_save_restore_round_trip_and_max_to_keep(graph, sess, tmp_path):
    w, b, step = _model()
    inc = tf.group(tf.assign_add(step, 1), tf.assign_add(w, tf.ones([2, 3])))
    saver = tf.train.Saver(max_to_keep=2)
    sess.run(tf.global_variables_initializer())
    prefixes = []
    for _ in range(3):
        sess.run(inc)
        prefixes.append(saver.save(sess, str(tmp_path / "model.ckpt"), global_step=step))
    assert [os.path.basename(p) for p in prefixes] == ["model.ckpt-1", "model.ckpt-2", "model.ckpt-3"]
    assert saver.last_checkpoints == prefixes[1:]
    assert not tf.train.checkpoint_exists(prefixes[0]) and tf.train.checkpoint_exists(prefixes[2])
    assert tf.train.latest_checkpoint(str(tmp_path)) == prefixes[2]
    state = tf.train.get_checkpoint_state(str(tmp_path))
    assert state.model_checkpoint_path == prefixes[2] and state.all_model_checkpoint_paths == prefixes[1:]
    assert (tmp_path / "checkpoint").read_text().splitlines()[0] == 'model_checkpoint_path: "model.ckpt-3"'
    assert tf.train.list_variables(str(tmp_path)) == [("b", []), ("step", []), ("w", [2, 3])]
    # The file is an ordinary Ember checkpoint keyed by the variables' names.
    stored = em.load(prefixes[2] + ".safetensors")
    np.testing.assert_array_equal(np.asarray(stored["w"]), np.arange(6).reshape(2, 3) + 3)
    fresh = tf.Session()
    saver.restore(fresh, prefixes[1])
    got_w, got_b, got_step = fresh.run([w, b, step])
    np.testing.assert_array_equal(got_w, np.arange(6).reshape(2, 3) + 2)
    assert (got_b, got_step) == (1.0, 2)
    assert sess.run(step) == 3  # restoring into one session leaves the others alone


def test_saver_errors(graph, sess, tmp_path):
    w, b, step = _model()
    saver = tf.train.Saver()
    with pytest.raises(tf.errors.FailedPreconditionError, match="uninitialized value w"):
        saver.save(sess, str(tmp_path / "m"))
    sess.run(tf.global_variables_initializer())
    with pytest.raises(ValueError, match="Parent directory of .* doesn't exist"):
        saver.save(sess, str(tmp_path / "missing" / "m"))
    path = saver.save(sess, str(tmp_path / "m"))
    with pytest.raises(tf.errors.NotFoundError, match="Key weights not found in checkpoint"):
        tf.train.Saver({"weights": w}).restore(sess, path)
    with pytest.raises(ValueError, match="not a valid checkpoint"):
        saver.restore(sess, str(tmp_path / "nothing"))
    with tf.Graph().as_default():
        other = tf.Variable(np.zeros((3, 2), np.float32), name="w")
        with pytest.raises(tf.errors.InvalidArgumentError, match="Assign requires shapes of both tensors to match"):
            tf.train.Saver([other]).restore(tf.Session(), path)
    assert tf.train.latest_checkpoint(str(tmp_path / "empty")) is None
