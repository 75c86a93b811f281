"""`tf.train.MonitoredTrainingSession` and `StopAtStepHook`: the session loop of TF1's distributed programs.

The chief initialises the variables; the other workers wait until the processes holding them say
they are initialised. `should_stop()` turns true once a StopAtStepHook sees the global step reach its
last step (the step is fetched with every run).
"""

from __future__ import annotations

import time

from ember.v1.session import Session

_INIT_WAIT = 300.0  # seconds a non-chief worker waits for the chief to initialise the variables


class StopAtStepHook:
    """Stop after `num_steps` more steps, or once the global step reaches `last_step`."""

    def __init__(self, num_steps: int | None = None, last_step: int | None = None) -> None:
        if (num_steps is None) == (last_step is None):
            raise ValueError("StopAtStepHook: give exactly one of num_steps and last_step")
        self._num_steps = num_steps
        self._last_step = last_step

    def begin(self, step: int) -> None:
        if self._last_step is None:
            self._last_step = step + self._num_steps

    def after_run(self, step: int) -> bool:
        """Whether to stop now."""
        return step >= self._last_step


class MonitoredTrainingSession:
    """A Session that initialises (chief) or waits for (others) the variables, with stop hooks."""

    def __init__(self, master: str = "", is_chief: bool = True, checkpoint_dir=None, scaffold=None, hooks=None,
                 chief_only_hooks=None, save_checkpoint_secs=None, save_summaries_steps=None, config=None,
                 **kwargs) -> None:
        from ember.v1.graph_api import get_default_graph
        from ember.v1.train import get_or_create_global_step
        from ember.v1.variables import global_variables_initializer, report_uninitialized_variables

        self.graph = get_default_graph()
        self._hooks = list(hooks or []) + (list(chief_only_hooks or []) if is_chief else [])
        self._global_step = get_or_create_global_step(self.graph)
        with self.graph.as_default():
            init = global_variables_initializer()
            pending = report_uninitialized_variables()
        self._sess = Session(master, graph=self.graph)
        if is_chief:
            self._sess.run(init)
        else:
            deadline = time.monotonic() + _INIT_WAIT
            while len(self._sess.run(pending)):
                if time.monotonic() > deadline:
                    raise RuntimeError(f"MonitoredTrainingSession: the chief did not initialise the variables within "
                                       f"{_INIT_WAIT:g} s")
                time.sleep(0.05)
        step = int(self._sess.run(self._global_step))
        for h in self._hooks:
            if hasattr(h, "begin"):
                h.begin(step)
        self._stop = False

    def run(self, fetches, feed_dict=None, options=None, run_metadata=None):
        """Session.run, then the hooks see the new global step."""
        values, step = self._sess.run([fetches, self._global_step], feed_dict=feed_dict)
        for h in self._hooks:
            if hasattr(h, "after_run") and h.after_run(int(step)):
                self._stop = True
        return values

    def should_stop(self) -> bool:
        """Whether a hook asked to stop."""
        return self._stop

    def close(self) -> None:
        self._sess.close()

    def __enter__(self) -> MonitoredTrainingSession:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
