"""`ember.profiler`: record every kernel (eager ops and graph steps) and summarise or export it.

    with em.profiler.profile() as prof:
        step(x, y)
    print(prof.table())
    prof.export_chrome_trace("trace.json")   # open in https://ui.perfetto.dev or chrome://tracing
"""

from ember.runtime.profiler import Event, Profile, profile, record_function

__all__ = ["Event", "Profile", "profile", "record_function"]
