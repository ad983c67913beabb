"""generate(..., profile=True): a JSON summary of the call written to profile_dir (default
"profiler_traces", where TraceRL's JetEngine wrote a torch.profiler trace): wall time, prompts,
completion tokens and tokens per second, model forwards, and the seconds the device waited for
the host between forwards. One file per call and rank."""

import itertools
import json
import os
import time

from ._checks import check_bool

DEFAULT_DIR = "profiler_traces"
_calls = itertools.count()


def check_profile(profile, profile_dir):
    """The checked (profile, profile_dir) of a generate call."""
    if profile_dir is not None and not isinstance(profile_dir, (str, os.PathLike)):
        raise TypeError(f"profile_dir must be a path or None, got {type(profile_dir).__name__}")
    return check_bool("profile", profile), os.fspath(profile_dir) if profile_dir is not None else DEFAULT_DIR


class CallProfile:
    """Started where the call's decoding starts (the engine's counters then), finished with its
    outputs."""

    def __init__(self, engine, profile, profile_dir, method, rank):
        self._enabled, self._dir = profile, profile_dir
        self._engine, self._method, self._rank = engine, method, rank
        if profile:
            self._forwards, self._idle = engine.counters()
            self._start = time.perf_counter()

    def finish(self, outputs):
        """Writes the summary of a call that returned `outputs`; returns the file's path (None
        when profiling is off)."""
        if not self._enabled:
            return None
        wall = time.perf_counter() - self._start
        forwards, idle = self._engine.counters()
        tokens = sum(len(o["completion_ids"]) for o in outputs)
        summary = {"method": self._method, "rank": self._rank, "prompts": len(outputs), "completion_tokens": tokens,
                   "wall_seconds": wall, "tokens_per_second": tokens / wall if wall > 0 else 0.0,
                   "forwards": forwards - self._forwards, "device_idle_seconds": idle - self._idle}
        os.makedirs(self._dir, exist_ok=True)
        path = os.path.join(self._dir, f"jetengine-{os.getpid()}-rank{self._rank}-{next(_calls)}.json")
        with open(path, "w") as f:
            json.dump(summary, f, indent=1)
        return path
