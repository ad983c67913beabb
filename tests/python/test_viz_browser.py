"""The denoising visualizer (GET /viz of `jetengine serve`) in a real browser: Debian's headless
Chromium loads the page with the prompt and settings in its URL (run=1 starts the run, so nothing
needs a click), the page streams the completion with return_tokens and replays each block's steps;
once the page says it is done, its DOM must hold every token with its denoise step, and a
screenshot must come out. Skipped without chromium (scripts/setup.sh installs it) or the server.

Chromium is driven through the DevTools protocol on a pipe (--remote-debugging-pipe), not with
--dump-dom / --screenshot: those take the page when its load settles, and neither --timeout nor
--virtual-time-budget waits for a fetch body that is still streaming (tried with Chromium 156: the
DOM held the first chunk only), so the test asks the page itself whether it is done."""
import base64
import json
import os
import re
import shutil
import subprocess
import time
import urllib.parse

import pytest

from test_cli_serve import MODEL, start_server

CHROMIUM = shutil.which("chromium")
MAX_TOKENS = 24

pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed")


class Chromium:
    """Headless Chromium and a DevTools session on one page. Messages are JSON, each ended by a
    NUL byte, on the child's fds 3 (to Chromium) and 4 (from it)."""

    def __init__(self, profile, url):
        to_child, self._out = os.pipe()
        self._in, from_child = os.pipe()

        def wire():  # in the child: its fds 3 and 4 (dup first, so neither end is overwritten)
            a, b = os.dup(to_child), os.dup(from_child)
            os.dup2(a, 3)
            os.dup2(b, 4)

        self.proc = subprocess.Popen([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                                      "--remote-debugging-pipe", f"--user-data-dir={profile}",
                                      "--window-size=1200,900", "about:blank"],
                                     preexec_fn=wire, pass_fds=(3, 4), stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL)
        os.close(to_child)
        os.close(from_child)
        self._id, self._buffer, self._session = 0, b"", None
        target = self.call("Target.createTarget", url=url)["targetId"]
        self._session = self.call("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]

    def call(self, method, **params):
        """Sends a command (to the page once attached) and returns its result; events are skipped."""
        self._id += 1
        message = {"id": self._id, "method": method, "params": params}
        if self._session:
            message["sessionId"] = self._session
        os.write(self._out, json.dumps(message).encode() + b"\0")
        while True:
            while b"\0" not in self._buffer:
                chunk = os.read(self._in, 1 << 16)
                assert chunk, "chromium closed the DevTools pipe"
                self._buffer += chunk
            raw, self._buffer = self._buffer.split(b"\0", 1)
            reply = json.loads(raw)
            if reply.get("id") == self._id:
                assert "error" not in reply, reply["error"]
                return reply["result"]

    def evaluate(self, expression):
        return self.call("Runtime.evaluate", expression=expression, returnByValue=True)["result"].get("value")

    def close(self):
        os.close(self._out)  # Chromium exits when its pipe closes
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        os.close(self._in)


@pytest.fixture(scope="module")
def page(tmp_path_factory):
    """The page after a run: (its DOM, a PNG screenshot)."""
    proc, port = start_server("--model", str(MODEL))
    query = urllib.parse.urlencode({"prompt": "What is 4821 + 937?", "chat": 1, "strategy": "low_confidence_dynamic",
                                    "steps": 2,
                                    "threshold": 0.8, "temperature": 0, "max_tokens": MAX_TOKENS,
                                    "ignore_eos": 1, "delay": 40, "run": 1})
    browser = Chromium(tmp_path_factory.mktemp("chromium"), f"http://127.0.0.1:{port}/viz?{query}")
    try:
        deadline = time.time() + 120
        while browser.evaluate("document.body ? document.body.dataset.done || '' : ''") != "1":
            assert time.time() < deadline, "the page did not finish: " + str(browser.evaluate("document.body.innerText"))
            time.sleep(0.2)
        dom = browser.evaluate("document.documentElement.outerHTML")
        png = base64.b64decode(browser.call("Page.captureScreenshot", format="png")["data"])
        yield dom, png
    finally:
        browser.close()
        proc.terminate()
        proc.wait(timeout=60)


def test_the_page_streams_and_shows_every_token_with_its_step(page):
    dom, _ = page
    assert re.search(r'<div id="error">\s*</div>', dom), dom[:4000]
    blocks = [[int(s) for s in re.findall(r'<span class="tok"[^>]*?\bdata-step="(\d+)"', block)]
              for block in dom.split('<div class="block">')[1:]]
    assert sum(map(len, blocks)) == MAX_TOKENS
    assert all(0 < len(block) <= 4 for block in blocks)  # B = 4
    assert f'<b id="token-count">{MAX_TOKENS}</b>' in dom
    assert "finish: length" in dom
    assert re.search(r'<div id="text">5758', dom)  # the demo model's answer, then text past its EOS
    assert "mask" not in re.findall(r'<span class="(\w+)"', dom)  # every cell was unmasked
    # Each block's steps follow the last one of the block before, one or two of them (S = 2).
    last = 0
    for block in blocks:
        assert last < min(block) and max(block) <= last + 2, blocks
        last = max(block)


def test_a_screenshot_of_the_run(page):
    _, png = page
    assert png.startswith(b"\x89PNG") and len(png) > 20_000
