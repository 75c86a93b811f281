"""Utilities used by more than one layer: TensorBoard event files (`ember.utils.event_file`)."""
