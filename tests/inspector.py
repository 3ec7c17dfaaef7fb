"""What the inspector's browser tests (tests/integration/test_ui_inspector.py) and its
benchmark (scripts/benchmarks/ui.py) share: the seeds (the release story, with planted
secrets, and a 10,000-frame Mind built with bulk transactions), `morphz ui` as a real
child process, and headless Chromium driven through Selenium.

Why Selenium and Debian's chromium + chromium-driver (scripts/bootstrap installs both):
the driver comes from the same Debian source package as the browser, so their versions
always match, and the Python binding is pure Python; Playwright's package would bring
its own driver runtime and expects browser builds of its own, which cannot be fetched
here. Network responses are read through the DevTools protocol (performance log and
Network.getResponseBody), which chromedriver exposes."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from morphz.client import Client, Tx
from tests.polling import until

CHROMIUM = os.environ.get("MORPHZ_CHROMIUM", "/usr/bin/chromium")
CHROMEDRIVER = os.environ.get("MORPHZ_CHROMEDRIVER", "/usr/bin/chromedriver")
USER_REQUEST = "Ship v1 once the regression tests pass."
TEST_REPORT = "regression suite: 120 passed, 0 failed"
RELEASE_TX = """(context-tx
  (base-version 1)
  (reason "测试结果已吸收，继续准备发布")
  (derive test-result (from @e4) (tests passed))
  (revise release (goal ship-v1) (stage packaging))
  (relate test-result supports release)
  (retire @e4))"""
EVENT_SECRET = "sk-live-PLANTED-event-4c1f9a"
FRAME_SECRET = "hunter2-PLANTED-frame-77b0"
BUILD_LOG = "build log: " + "step ok; " * 800  # over the 4 KiB preview threshold
BIG_FRAMES = 10_000
BIG_BATCH = 2_000  # frames per bulk transaction


@dataclass(frozen=True)
class Release:
    context: str
    snapshot: str  # compiled after revision 2, with the secret in its inbox
    activation: str
    session: str = "main"


def seed_release(mz: Client, context: str) -> Release:
    """The README's walk-through (revision 1: release planned; revision 2: the test
    report digested, release revised), then a secret event (@e7), a build log long
    enough to be shown as a preview (@e8), a frame holding a secret part (revision 3),
    and an encoding compiled over them."""
    s = "main"
    mz.create_context(context)
    mz.append_event(context, session=s, kind="user-message", text=USER_REQUEST)
    a1 = mz.activate(context, session=s)
    mz.commit(context, Tx(0).create("release", "(goal ship-v1) (stage waiting-tests)"),
              session=s, activation=a1.id)
    mz.append_event(context, session=s, kind="tool-result", actor="npm test", text=TEST_REPORT)
    a2 = mz.activate(context, session=s)
    mz.commit(context, RELEASE_TX, session=s, activation=a2.id)
    mz.append_event(context, session=s, kind="external", text=f"deploy key {EVENT_SECRET}",
                    secret=True)
    mz.append_event(context, session=s, kind="tool-result", actor="ci", text=BUILD_LOG)
    a3 = mz.activate(context, session=s)
    mz.commit(context, f'(context-tx (base-version 2) (create vault (url "https://deploy") '
              f'(token (secret "{FRAME_SECRET}"))))', session=s, activation=a3.id)
    enc = mz.compile(context, session=s, activation=a3.id)
    return Release(context, enc.snapshot, a3.id, s)


def seed_big(mz: Client, context: str, frames: int = BIG_FRAMES,
             batch: int = BIG_BATCH) -> None:
    """`frames` frames in bulk transactions of `batch` creates; frame i relates to i-1
    (`follows`), so every frame has a neighbourhood to draw."""
    mz.create_context(context)
    revision = 0
    for start in range(0, frames, batch):
        tx = Tx(revision)
        for i in range(start, min(frames, start + batch)):
            tx.create(f"f{i:05d}", f"(step {i}) (note \"frame number {i}\")")
            if i:
                tx.relate(f"f{i:05d}", "follows", f"f{i - 1:05d}")
        revision = mz.commit(context, tx).revision


class InspectorProcess:
    """`morphz ui ARGS --listen 127.0.0.1:0` as a child process; `url` from its first line."""

    def __init__(self, args: list[str], log: Path, env: Optional[dict] = None) -> None:
        self._log = open(log, "ab")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "morphz.services.cli.main", "ui", *args,
             "--listen", "127.0.0.1:0"], stdout=subprocess.PIPE, stderr=self._log, text=True,
            env=dict(os.environ, PYTHONUNBUFFERED="1", **(env or {})))
        line = self.proc.stdout.readline()
        assert line.startswith("morphz ui: serving on "), \
            f"morphz ui did not start: {line!r}\n{log.read_text(errors='replace')}"
        self.url = line.split()[4].rstrip("/")

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self._log.close()


def browser():
    """Headless Debian chromium under Selenium, its network visible in the performance log."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for a in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
              "--window-size=1400,1000", "--no-first-run", "--disable-extensions",
              "--disable-background-networking", "--disable-component-update",
              "--disable-default-apps", "--disable-sync"):
        opts.add_argument(a)
    opts.set_capability("goog:loggingPrefs", {"performance": "ALL"})
    return webdriver.Chrome(service=Service(CHROMEDRIVER), options=opts)


def wait_view(driver, timeout: float = 30) -> str:
    """Wait for the current view to finish loading; its state (ready | error). Looked at
    every 20 ms (WebDriverWait's default, 0.5 s, would round every page load the
    benchmark times up to the next half second)."""
    from selenium.webdriver.support.ui import WebDriverWait
    return WebDriverWait(driver, timeout, poll_frequency=0.02).until(lambda d: d.execute_script(
        "const v = document.getElementById('view');"
        "return v && ['ready', 'error'].includes(v.dataset.state) ? v.dataset.state : null"))


def wait_for(driver, css: str, timeout: float = 30):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait
    return WebDriverWait(driver, timeout).until(
        ec.presence_of_element_located((By.CSS_SELECTOR, css)))


def network(driver, bound: float = 30.0) -> list[dict]:
    """Every response the page received since the last call: url, status, body text, and
    `loaded`: whether its body finished loading (one a navigation cancelled failed after
    its headers and has no body). A body can be read only once it has loaded and while
    its document is the page's (a request still going when the log was read and done
    after it was gone by the next call: "No resource with given identifier"), so the log
    is read until every request sent has finished or failed, within `bound` seconds:
    the page is quiet (the inspector does not poll) and its bodies all readable."""
    responses: dict[str, dict] = {}  # request id -> response, in order
    sent: set[str] = set()
    finished: set[str] = set()
    failed: set[str] = set()

    def read_log() -> bool:
        for entry in driver.get_log("performance"):
            msg = json.loads(entry["message"])["message"]
            params = msg.get("params", {})
            if msg["method"] == "Network.requestWillBeSent":
                sent.add(params["requestId"])
            elif msg["method"] == "Network.responseReceived":
                responses[params["requestId"]] = params["response"]
            elif msg["method"] == "Network.loadingFinished":
                finished.add(params["requestId"])
            elif msg["method"] == "Network.loadingFailed":
                failed.add(params["requestId"])
        return all(rid in finished or rid in failed for rid in sent | set(responses))
    until(read_log, bound, "responses still loading")
    seen = []
    for rid, response in responses.items():
        body = ""
        if rid in finished:
            try:
                body = driver.execute_cdp_cmd("Network.getResponseBody",
                                              {"requestId": rid}).get("body", "")
            except Exception:  # noqa: BLE001 (a redirect has none)
                pass
        seen.append({"url": response["url"], "status": response["status"], "body": body,
                     "loaded": rid in finished})
    return seen


def screenshots_dir(tmp_path_factory, name: str) -> Path:
    """Where a module's screenshots go: $MORPHZ_UI_SHOTS when set, else a tmp folder
    (printed)."""
    d = Path(os.environ["MORPHZ_UI_SHOTS"]) if os.environ.get("MORPHZ_UI_SHOTS") \
        else tmp_path_factory.mktemp(name)
    d.mkdir(parents=True, exist_ok=True)
    print(f"screenshots: {d}")
    return d


def sign_in(driver, url: str, ui_token: str) -> None:
    """Sign in at the inspector's /login with an inspector token; the view loaded."""
    driver.get(f"{url}/login")
    field = wait_for(driver, "input[name=token]")
    field.send_keys(ui_token)
    field.submit()
    wait_for(driver, "#banner")
    assert wait_view(driver) == "ready"
    network(driver)  # start each test's record of responses afresh


def show(driver, url: str, route: str, shots: Optional[Path] = None, name: str = "") -> None:
    """Open `route` (`mind?context=...`) in a fresh document and wait for its view;
    with `shots`, save a screenshot of it as NAME.png there."""
    from selenium.webdriver.common.by import By
    driver.get("about:blank")  # a hash change alone would keep the previous view's document
    driver.get(f"{url}/#/{route}")
    assert wait_view(driver) == "ready", driver.find_element(By.ID, "error").text
    if shots is not None:
        driver.save_screenshot(str(shots / f"{name}.png"))
