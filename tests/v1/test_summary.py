"""tf.summary ops, FileWriter and the event-file format (bytes checked against what TensorFlow writes)."""

import numpy as np
import pytest

import ember.v1 as tf
from ember.utils import event_file


def test_crc32c_and_record_framing(tmp_path):
    assert event_file.crc32c(b"123456789") == 0xE3069283  # the standard CRC-32C check value
    path = tmp_path / "records"
    path.write_bytes(event_file.record(b"abc") + event_file.record(b""))
    assert event_file.read_records(path) == [b"abc", b""]
    data = bytearray(path.read_bytes())
    data[13] ^= 1
    path.write_bytes(bytes(data))
    with pytest.raises(ValueError, match="corrupt record data"):
        event_file.read_records(path)


def test_summary_ops_serialize_as_tensorflow_does(graph, sess):
    x = tf.placeholder(tf.float32, [None])
    with tf.name_scope("train"):
        loss = tf.summary.scalar("loss", tf.reduce_mean(x))
    hist = tf.summary.histogram("values", x)
    assert loss.name == "train/loss:0" and tf.get_collection(tf.GraphKeys.SUMMARIES) == [loss, hist]
    assert sess.run(loss, {x: [1.0, 2.0]}) == b"\n\x11\n\ntrain/loss\x15\x00\x00\xc0?"  # TF's bytes
    values = np.array([-3.0, 0.0, 0.5, 0.5, 2.0, 1e-13], np.float32)
    ((tag, h),) = event_file.parse_summary(sess.run(hist, {x: values}))
    assert tag == "values" and (h["min"], h["max"], h["num"]) == (-3.0, 2.0, 6.0)
    # TF's default buckets with runs of empty ones collapsed, as TensorFlow encodes this histogram.
    assert len(h["bucket_limit"]) == 9 and h["bucket"][:8] == [0, 1, 0, 2, 0, 2, 0, 1]
    np.testing.assert_allclose(h["bucket_limit"][:4], [-3.1665833053880363, -2.8787120958073054, 0.0, 1e-12])
    merged = tf.summary.merge_all()
    assert [t for t, _ in event_file.parse_summary(sess.run(merged, {x: values}))] == ["train/loss", "values"]


def test_file_writer_round_trip(graph, sess, tmp_path):
    x = tf.placeholder(tf.float32, [])
    s = tf.summary.scalar("x", x)
    with tf.summary.FileWriter(str(tmp_path / "run"), tf.get_default_graph()) as writer:
        for step in range(3):
            writer.add_summary(sess.run(s, {x: step * 1.5}), step)
        writer.add_summary(tf.Summary(value=[tf.Summary.Value(tag="python", simple_value=0.25)]), 7)
    (path,) = (tmp_path / "run").glob("events.out.tfevents.*")
    events = event_file.read_events(path)
    assert events[0]["file_version"] == "brain.Event:2"
    assert all("graph_def" in e for e in events[1:] if "summary" not in e)  # the graph, with tensorboard installed
    assert [(e["step"], e["summary"]) for e in events[1:] if "summary" in e] == [
        (0, [("x", 0.0)]), (1, [("x", 1.5)]), (2, [("x", 3.0)]), (7, [("python", 0.25)])]
    with pytest.raises(TypeError, match="serialized Summary"):
        writer.add_summary(3.0)
