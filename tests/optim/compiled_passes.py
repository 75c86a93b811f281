"""A spy on the compiled optimizer passes (ember/optim/fused.py), for tests that check which path ran."""

from ember.optim import fused


def record_compiled_passes(monkeypatch) -> list:
    """A list that receives the profiler name of every compiled pass that runs from now on in the test."""
    ran = []
    run = fused._Kernel.run

    def spied(kernel, update, *args):
        done = run(kernel, update, *args)
        if done:
            ran.append(update.event)
        return done

    monkeypatch.setattr(fused._Kernel, "run", spied)
    return ran
