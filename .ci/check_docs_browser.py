#!/usr/bin/env python3
"""Check the built HTML documentation in a real browser, offline.

Every page of the built site is loaded from disk (``file://``) in headless Chromium with the
network cut off (a proxy to nowhere and a host resolver that resolves nothing), then checked:

* no page asks for anything outside the site (every ``http(s)`` request is reported);
* user-guide pages and the pages of how the defaults were chosen (``defaults/``): math typeset
  by MathJax (one ``mjx-container`` per formula of the page, no MathJax error) and no raw TeX
  delimiter (``\\[``, ``\\(``, ``$$``) left in the rendered text outside code;
* gallery pages (``auto_examples/``): at least one figure per example page, every image of
  a gallery page loaded (``complete`` and ``naturalWidth > 0``), thumbnails included, and no
  output block of an example holding a warning (``Warning``) or an absolute file path (a path
  of the machine that built the pages, as warnings print);
* every image of every page loaded.

Chromium is driven through the DevTools protocol over a pipe (``--remote-debugging-pipe``), so
the check needs nothing but the Python standard library and the Debian ``chromium`` package.

Usage::

    python .ci/check_docs_browser.py docs/_build/html [--screenshots docs/_static/screenshots]

Exit status 0 when every check passes, 1 otherwise; the last line of the output is the summary.
"""

import argparse
import base64
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# Pages of prose with formulas, whose math is checked: the user guide and the defaults' evidence.
MATH_PAGES = ("user_guide/", "defaults/")

# Pages whose screenshots are taken with --screenshots: (page, CSS selector scrolled into view).
SCREENSHOTS = {
    "user_guide_pointwise_roc.png": ("user_guide/pointwise_roc.html", "mjx-container[display]"),
    "gallery_plot_soprc_retrieval.png": (
        "auto_examples/plot_soprc_retrieval.html",
        "img.sphx-glr-single-img, img.sphx-glr-multi-img",
    ),
}
LOCAL_SCHEMES = ("file:", "data:", "blob:", "about:", "chrome:", "devtools:")
TEX_DELIMITERS = ("\\[", "\\(", "$$")
# An absolute file path in an example's output: POSIX (two or more components after a "/" that
# does not follow a word, a dot, a colon or another slash, so fractions, "a/b" and URLs do not
# count) or Windows (a drive letter and a backslash).
ABSOLUTE_PATH = re.compile(r"(?<![\w.:/])/(?:[\w.-]+/)+[\w.-]*|\b[A-Za-z]:\\[\w.-]")

# Runs in the page: what the checks need, as one JSON-serialisable object.
PAGE_PROBE = r"""
(() => {
  const skip = new Set(["PRE", "CODE", "SCRIPT", "STYLE", "TEXTAREA", "MJX-CONTAINER"]);
  const texts = [];
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT, {
    acceptNode(node) {
      for (let el = node.parentElement; el; el = el.parentElement) {
        if (skip.has(el.tagName)) return NodeFilter.FILTER_REJECT;
      }
      return NodeFilter.FILTER_ACCEPT;
    },
  });
  while (walker.nextNode()) texts.push(walker.currentNode.nodeValue);
  const images = Array.from(document.images).map((img) => ({
    src: img.getAttribute("src"),
    cls: img.className,
    loaded: img.complete && img.naturalWidth > 0,
    width: img.naturalWidth,
  }));
  const outputs = Array.from(document.querySelectorAll(".sphx-glr-script-out pre")).map(
    (pre) => pre.textContent
  );
  return {
    text: texts.join(" "),
    outputs: outputs,
    mathSources: document.querySelectorAll(".math").length,
    mathRendered: document.querySelectorAll("mjx-container").length,
    mathErrors: document.querySelectorAll("mjx-merror").length,
    images: images,
  };
})()
"""

# Resolves once MathJax has typeset the page (immediately on pages without MathJax).
MATHJAX_READY = """
(window.MathJax && MathJax.startup && MathJax.startup.promise
   ? MathJax.startup.promise.then(() => true) : Promise.resolve(false))
"""


def find_chromium():
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        path = shutil.which(name)
        if path:
            return path
    sys.exit(
        "check_docs_browser: FAIL: no Chromium found; install it with "
        "`apt-get install -y chromium` (Debian) and run again."
    )


class Chromium:
    """Headless Chromium, network off, driven by the DevTools protocol over a pipe."""

    def __init__(self, binary, timeout=60.0):
        self.timeout = timeout
        self._profile = tempfile.mkdtemp(prefix="skrank-chromium-")
        to_browser_read, self._to_browser = os.pipe()
        self._from_browser, from_browser_write = os.pipe()

        def child_fds():  # Chromium reads commands on fd 3 and writes replies on fd 4
            read_end = os.dup(to_browser_read)
            write_end = os.dup(from_browser_write)
            os.dup2(read_end, 3)
            os.dup2(write_end, 4)

        args = [
            binary,
            "--headless",
            "--remote-debugging-pipe",
            f"--user-data-dir={self._profile}",
            "--no-sandbox",  # CI runs as root
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--no-first-run",
            "--no-default-browser-check",
            "--disable-extensions",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--hide-scrollbars",
            # The network is off: every host resolves to nothing, every request goes to a proxy
            # that is not there. file:// pages are not affected.
            "--proxy-server=http://127.0.0.1:9",
            "--proxy-bypass-list=<-loopback>",
            "--host-resolver-rules=MAP * ~NOTFOUND",
            "about:blank",
        ]
        self.process = subprocess.Popen(
            args,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            close_fds=False,
            preexec_fn=child_fds,
        )
        os.close(to_browser_read)
        os.close(from_browser_write)
        self._buffer = b""
        self._next_id = 0
        self.events = []
        self.version = self.call("Browser.getVersion")["product"]

    def _read_message(self, deadline):
        while b"\0" not in self._buffer:
            if time.monotonic() > deadline:
                raise TimeoutError("no reply from Chromium")
            chunk = os.read(self._from_browser, 1 << 20)
            if not chunk:
                raise RuntimeError("Chromium exited")
            self._buffer += chunk
        message, self._buffer = self._buffer.split(b"\0", 1)
        return json.loads(message)

    def call(self, method, session=None, **params):
        self._next_id += 1
        message = {"id": self._next_id, "method": method, "params": params}
        if session:
            message["sessionId"] = session
        os.write(self._to_browser, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + self.timeout
        while True:
            reply = self._read_message(deadline)
            if reply.get("id") == self._next_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply["result"]
            self.events.append(reply)

    def wait_for_event(self, method, session):
        deadline = time.monotonic() + self.timeout
        for i, event in enumerate(self.events):
            if event.get("method") == method and event.get("sessionId") == session:
                del self.events[i]
                return event
        while True:
            event = self._read_message(deadline)
            if event.get("method") == method and event.get("sessionId") == session:
                return event
            self.events.append(event)

    def close(self):
        try:
            self.call("Browser.close")
        except Exception:
            pass
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
        shutil.rmtree(self._profile, ignore_errors=True)


class Tab:
    def __init__(self, browser, width=1280, height=900):
        self.browser = browser
        target = browser.call("Target.createTarget", url="about:blank")["targetId"]
        self.session = browser.call("Target.attachToTarget", targetId=target, flatten=True)[
            "sessionId"
        ]
        for domain in ("Page", "Network", "Runtime"):
            self.call(f"{domain}.enable")
        self.call(
            "Emulation.setDeviceMetricsOverride",
            width=width,
            height=height,
            deviceScaleFactor=1,
            mobile=False,
        )

    def call(self, method, **params):
        return self.browser.call(method, session=self.session, **params)

    def evaluate(self, expression):
        result = self.call(
            "Runtime.evaluate", expression=expression, awaitPromise=True, returnByValue=True
        )
        if "exceptionDetails" in result:
            raise RuntimeError(f"page script failed: {result['exceptionDetails']}")
        return result["result"].get("value")

    def load(self, url):
        """Open ``url``, wait for its load event and MathJax; return the URLs it requested."""
        self.browser.events.clear()
        self.call("Page.navigate", url=url)
        self.browser.wait_for_event("Page.loadEventFired", self.session)
        self.evaluate(MATHJAX_READY)
        return [
            event["params"]["request"]["url"]
            for event in self.browser.events
            if event.get("method") == "Network.requestWillBeSent"
            and event.get("sessionId") == self.session
        ]

    def screenshot(self, selector, path):
        self.evaluate(
            f"(() => {{ const el = document.querySelector({json.dumps(selector)});"
            " if (el) { el.scrollIntoView({block: 'center'}); } return !!el; })()"
        )
        time.sleep(0.3)  # let the scroll settle before capturing
        data = self.call("Page.captureScreenshot", format="png")["data"]
        Path(path).write_bytes(base64.b64decode(data))


def output_problems(outputs):
    """Problems of a gallery page's output blocks: warnings and absolute file paths."""
    problems = []
    for number, output in enumerate(outputs, start=1):
        for line in output.splitlines():
            if "Warning" in line:
                problems.append(f"output block {number} holds a warning: {line.strip()[:160]}")
            elif ABSOLUTE_PATH.search(line):
                problems.append(f"output block {number} holds a file path: {line.strip()[:160]}")
    return problems


def check_page(relative, probe, requests):
    """Problems of one page (empty list: the page passes)."""
    problems = []
    external = [url for url in requests if not url.startswith(LOCAL_SCHEMES)]
    if external:
        problems.append(f"requests outside the site: {sorted(set(external))[:5]}")
    broken = [image["src"] for image in probe["images"] if not image["loaded"]]
    if broken:
        problems.append(f"images not loaded: {broken[:5]}")
    if probe["mathErrors"]:
        problems.append(f"{probe['mathErrors']} MathJax errors")
    if relative.startswith(MATH_PAGES):
        left = [delimiter for delimiter in TEX_DELIMITERS if delimiter in probe["text"]]
        if left:
            problems.append(f"raw TeX delimiters in the rendered text: {left}")
        if probe["mathRendered"] < probe["mathSources"]:
            problems.append(
                f"{probe['mathSources']} formulas but {probe['mathRendered']} rendered by MathJax"
            )
    if relative.startswith("auto_examples/plot_"):
        figures = [image for image in probe["images"] if "sphx-glr" in image["cls"]]
        if not figures:
            problems.append("the example shows no figure")
        problems.extend(output_problems(probe["outputs"]))
    if relative == "auto_examples/index.html":
        placeholders = [image["src"] for image in probe["images"] if "no_image" in image["src"]]
        if placeholders:
            problems.append(f"placeholder thumbnails: {placeholders}")
    return problems


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("site", type=Path, help="the built HTML site, e.g. docs/_build/html")
    parser.add_argument("--screenshots", type=Path, help="folder for PNG screenshots")
    args = parser.parse_args(argv)
    site = args.site.resolve()
    pages = sorted(
        path.relative_to(site).as_posix()
        for path in site.rglob("*.html")
        if not path.relative_to(site).parts[0].startswith(("_", "."))
    )
    if "user_guide/pointwise_roc.html" not in pages:
        sys.exit(f"check_docs_browser: FAIL: {site} does not look like a built skrank site")

    browser = Chromium(find_chromium())
    failures, totals = {}, dict(math=0, guide=0, gallery=0, figures=0, images=0, requests=0)
    try:
        tab = Tab(browser)
        for relative in pages:
            requests = tab.load((site / relative).as_uri())
            probe = tab.evaluate(PAGE_PROBE)
            problems = check_page(relative, probe, requests)
            if problems:
                failures[relative] = problems
            totals["images"] += len(probe["images"])
            totals["requests"] += sum(not url.startswith(LOCAL_SCHEMES) for url in requests)
            if relative.startswith(MATH_PAGES):
                totals["guide"] += 1
                totals["math"] += probe["mathRendered"]
            if relative.startswith("auto_examples/plot_"):
                totals["gallery"] += 1
                totals["figures"] += sum("sphx-glr" in image["cls"] for image in probe["images"])
        if args.screenshots:
            args.screenshots.mkdir(parents=True, exist_ok=True)
            for name, (relative, selector) in SCREENSHOTS.items():
                tab.load((site / relative).as_uri())
                tab.screenshot(selector, args.screenshots / name)
        version = browser.version
    finally:
        browser.close()

    for relative, problems in failures.items():
        for problem in problems:
            print(f"check_docs_browser: {relative}: {problem}")
    if totals["guide"] == 0 or totals["math"] == 0 or totals["gallery"] == 0:
        failures["site"] = ["no user-guide math or no gallery page was checked"]
    summary = (
        f"{len(pages)} pages loaded from disk in headless {version}, network off; "
        f"{totals['requests']} requests outside the site; "
        f"{totals['guide']} user-guide and defaults pages, "
        f"{totals['math']} formulas typeset by MathJax; "
        f"{totals['gallery']} gallery pages, {totals['figures']} figures; "
        f"{totals['images']} images in all"
    )
    status = "FAIL" if failures else "OK"
    print(
        f"check_docs_browser: {status}: {summary}"
        + (f"; {len(failures)} pages fail" * bool(failures))
    )
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
