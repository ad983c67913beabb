"""The progress bar of generate calls: tqdm when it is installed and wanted, silent otherwise."""

import time


class Progress:
    """Prompts done out of the total, with completion tokens per second."""

    def __init__(self, total, enabled, description):
        self._bar = None
        self._start = time.perf_counter()
        if enabled:
            try:
                from tqdm.auto import tqdm
            except ImportError:
                return
            self._bar = tqdm(total=total, desc=description, unit="prompt", dynamic_ncols=True)

    def callback(self):
        """What the engine calls as prompts finish (None: nothing to show)."""
        return self._update if self._bar is not None else None

    def _update(self, done, total, completion_tokens):
        elapsed = max(time.perf_counter() - self._start, 1e-9)
        self._bar.set_postfix_str(f"{completion_tokens / elapsed:.1f} tok/s", refresh=False)
        self._bar.update(done - self._bar.n)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if self._bar is not None:
            self._bar.close()
