"""UI-03: the inspector's evaluation pages in real headless Chromium (tests/inspector.py)
over a real `morphz serve` with bearer tokens (security_servers' token_server), seeded
with the seed-002 loop of tests/evaluation_loop.py: 20 evaluations over two sessions.

Each step is opened and walked with the keyboard; each shows its own snapshot (its hash
as `morphz context encoding replay` gives it), its recall calls and its transaction; the
encoding diff of a session's steps 3 and 4 names exactly the regions whose text differs
in what Compile answered; no secret reaches the DOM or the network for erin, who may
read, recall and encode but not reveal; Chinese renders as glyphs, not as the missing
glyph's box (fonts-noto-cjk, installed by scripts/bootstrap)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support.ui import WebDriverWait

from morphz.client import Client, Credentials

from tests import evaluation_loop as loop
from tests.inspector import (InspectorProcess, browser, network, screenshots_dir, sign_in,
                             wait_for, wait_view)
from tests.inspector import show as showing
from tests.png import ink
from tests.security_servers import ALICE_TOKEN, TOKENS, in_process_too

pytestmark = in_process_too  # a `morphz serve` with tokens of its own, and `morphz ui`
CTX = "ui-evals"
UI_TOKENS = {"alice": "ui-alice-evals-6c2d9e10", "erin": "ui-erin-evals-0b7f4a35"}
# A character no installed font has (plane 16's private use): drawn as the missing glyph.
MISSING = "\U0010fffd"


@pytest.fixture(scope="module")
def steps(token_server, certs):
    alice = Client(token_server.address, timeout=120, credentials=Credentials(
        tls_ca=certs.path("ca.crt"), token=ALICE_TOKEN))
    done = loop.run(alice, CTX)
    alice.grant(CTX, "erin", ["read", "recall", "encode"])
    yield done
    alice.close()


@pytest.fixture(scope="module")
def inspector(steps, token_server, certs, tmp_path_factory):
    d = tmp_path_factory.mktemp("ui-evals")
    users = d / "users.json"
    users.write_text(json.dumps({UI_TOKENS[n]: TOKENS[n] for n in UI_TOKENS}))
    proc = InspectorProcess(["--server", token_server.address, "--tls-ca",
                             certs.path("ca.crt"), "--users", str(users)], d / "ui.log")
    yield proc
    proc.stop()


@pytest.fixture(scope="module")
def shots(tmp_path_factory) -> Path:
    return screenshots_dir(tmp_path_factory, "ui-evals-screenshots")


@pytest.fixture(scope="module")
def erin(inspector):
    driver = browser()
    sign_in(driver, inspector.url, UI_TOKENS["erin"])
    yield driver
    driver.quit()


def show(driver, inspector, route: str, shots: Path | None = None, name: str = "") -> None:
    showing(driver, inspector.url, route, shots, name)


def keys(driver, key: str) -> None:
    """`key` typed where the focus is (nothing clicked first, as an element's send_keys
    would)."""
    ActionChains(driver).send_keys(key).perform()


def press(driver, key: str) -> None:
    """A key pressed on the page (as a user would, focus anywhere but a field), then
    the view it leads to, loaded."""
    before = driver.execute_script("return location.hash")
    keys(driver, key)
    WebDriverWait(driver, 30).until(lambda d: d.execute_script("return location.hash") != before)
    assert wait_view(driver) == "ready", driver.find_element(By.ID, "error").text


def of_session(steps, session: str) -> list:
    return [s for s in steps if s.session == session]


def replayed_hash(token_server, certs, snapshot: str) -> str:
    """The snapshot's hash as the CLI's `encoding replay` reports it (and reproduces)."""
    done = subprocess.run(
        [sys.executable, "-m", "morphz.services.cli.main", "--server", token_server.address,
         "--tls-ca", certs.path("ca.crt"), "--format", "json", "context", "encoding",
         "replay", snapshot, "--context", CTX], capture_output=True, text=True, timeout=60,
        env=dict(os.environ, MORPHZ_TOKEN=ALICE_TOKEN))
    assert done.returncode == 0, done.stdout + done.stderr
    reply = json.loads(done.stdout)
    assert reply["match"] and reply["hash"] == reply["replay_hash"]
    return reply["hash"]


def test_ui_03_a_sessions_evaluations_are_listed_newest_first_and_opened_by_keyboard(
        erin, inspector, steps, shots):
    release = of_session(steps, "release")
    show(erin, inspector, f"evaluations?context={CTX}&session=release", shots, "evaluations")
    rows = erin.find_elements(By.CSS_SELECTOR, "#evaluations tr.eval-row")
    assert [r.get_attribute("data-activation") for r in rows] == \
        [s.activation for s in release[::-1]]
    first = rows[0].text
    assert "normal" in first and "of 1048576 B" in first
    step5 = next(r for r in rows if r.get_attribute("data-activation") == release[2].activation)
    assert "derived test-result" in step5.text and "revised release" in step5.text
    keys(erin, "j")
    keys(erin, "j")
    selected = erin.find_element(By.CSS_SELECTOR, "#evaluations tr[aria-selected=true]")
    assert selected.get_attribute("data-activation") == release[-3].activation
    press(erin, Keys.ENTER)
    assert erin.find_element(By.TAG_NAME, "h2").text == \
        f"Evaluation {release[-3].activation} of session release"


def test_ui_03_each_step_shows_its_snapshot_recalls_and_transaction_stepping_with_keys(
        erin, inspector, steps, token_server, certs, shots):
    """Every step of both sessions, from each session's first step to its last by `n`,
    and back one by `p`: its snapshot and hash (as the CLI's replay gives it), its recall
    calls and its transaction's event."""
    for session in loop.SESSIONS:
        mine = of_session(steps, session)
        show(erin, inspector, f"evaluation?context={CTX}&activation={mine[0].activation}")
        for i, s in enumerate(mine):
            if i:
                press(erin, "n")
            assert erin.find_element(By.TAG_NAME, "h2").text == \
                f"Evaluation {s.activation} of session {session}"
            hash_line = erin.find_element(By.ID, "step-hash")
            assert hash_line.get_attribute("data-match") == "true"
            assert s.snapshot in hash_line.text
            assert replayed_hash(token_server, certs, s.snapshot) in hash_line.text
            recalls = erin.find_elements(By.CSS_SELECTOR, "#step-recalls li[data-ref]")
            assert [r.get_attribute("data-ref") for r in recalls] == s.recalls
            txs = erin.find_elements(By.CSS_SELECTOR, "#step-transactions li[data-ref]")
            assert [t.get_attribute("data-ref") for t in txs] == [s.tx_ref]
            assert f"revision {s.revision} from base {s.revision_seen}" in txs[0].text
        assert erin.find_element(By.ID, "step-next").get_attribute("disabled") is not None
        press(erin, "p")
        assert erin.find_element(By.TAG_NAME, "h2").text.startswith(
            f"Evaluation {mine[-2].activation} ")
    erin.save_screenshot(str(shots / "step.png"))


def test_ui_03_a_step_shows_the_encoding_by_region_the_receipt_and_the_minds_change(
        erin, inspector, steps, shots):
    s5 = steps[4]
    show(erin, inspector, f"evaluation?context={CTX}&activation={s5.activation}", shots,
         "step-5")
    regions = [e.get_attribute("data-name")
               for e in erin.find_elements(By.CSS_SELECTOR, "#step-regions li.region")]
    assert regions == list(s5.regions)
    changes = {(e.get_attribute("data-key"), e.get_attribute("data-change"))
               for e in erin.find_elements(By.CSS_SELECTOR, "#step-mind li")}
    assert changes == {("test-result", "derived"), ("release", "revised"),
                       ("test-result supports release", "related"),
                       (s5.inputs[0], "retired")}
    body = erin.find_element(By.CSS_SELECTOR, "#step-mind .body-diff[data-frame=release]").text
    assert "- (stage waiting-tests)" in body and "+ (stage packaging)" in body
    receipt = erin.find_element(By.CSS_SELECTOR, "#step-transactions li.receipt").text
    assert "derive test-result -> derived" in receipt and "测试结果已吸收" in receipt
    # step 7 (release's 4th) claimed a long log: shown as a preview, marked so
    s7 = steps[6]
    show(erin, inspector, f"evaluation?context={CTX}&activation={s7.activation}")
    marked = erin.find_elements(By.CSS_SELECTOR, "#step-regions .preview-mark[data-key]")
    assert [m.get_attribute("data-key") for m in marked] == s7.inputs


def test_ui_03_the_encoding_diff_of_steps_3_and_4_names_exactly_the_regions_that_changed(
        erin, inspector, steps, shots):
    third, fourth = of_session(steps, "release")[2:4]
    expected = sorted(n for n in set(third.regions) | set(fourth.regions)
                      if third.regions.get(n) != fourth.regions.get(n))
    assert expected and len(expected) < len(fourth.regions)  # some changed, some did not
    show(erin, inspector, f"evaluation?context={CTX}&activation={fourth.activation}")
    press(erin, "d")
    assert f"from={third.snapshot}" in erin.current_url and f"to={fourth.snapshot}" in \
        erin.current_url
    erin.save_screenshot(str(shots / "encoding-diff.png"))
    rows = erin.find_elements(By.CSS_SELECTOR, "#encdiff tbody tr")
    changed = sorted(r.get_attribute("data-name") for r in rows
                     if r.get_attribute("data-status") != "same")
    assert changed == expected
    assert sorted(r.get_attribute("data-name") for r in rows) == sorted(fourth.regions)


def test_ui_03_no_secret_text_in_dom_or_network_without_the_reveal_right(
        erin, inspector, steps):
    secret_step = steps[3]  # support's: its input is a secret tool result
    after = next(s for s in steps[4:] if s.session == "support")
    pages, responses = [], []
    for route in (f"evaluations?context={CTX}&session=support",
                  f"evaluation?context={CTX}&activation={secret_step.activation}",
                  f"evaluation?context={CTX}&activation={after.activation}",
                  f"encdiff?context={CTX}&from={secret_step.snapshot}&to={after.snapshot}"):
        show(erin, inspector, route)
        pages.append(erin.page_source)
        responses += network(erin)
    show(erin, inspector, f"evaluation?context={CTX}&activation={secret_step.activation}")
    shown = erin.find_element(By.CSS_SELECTOR, "#step-inputs li").text
    assert f"[secret {secret_step.inputs[0]}]" in shown and "secret" in shown
    erin.find_element(By.ID, "reveal").click()  # without the right: refused, nothing shown
    wait_for(erin, "#error:not([hidden])")
    assert "FORBIDDEN" in erin.find_element(By.ID, "error").text
    pages.append(erin.page_source)
    erin.find_element(By.ID, "reveal").click()
    assert wait_view(erin) == "ready"
    responses += network(erin)
    api = {r["url"].split("/api/")[1].split("?")[0] for r in responses if "/api/" in r["url"]}
    assert {"evaluations", "evaluation", "encoding_diff"} <= api
    for text in pages + [r["body"] for r in responses]:
        assert loop.SECRET not in text and TOKENS["erin"] not in text
    assert [r["url"] for r in responses if not r["url"].startswith(inspector.url + "/")
            and not r["url"].startswith("data:")] == []


def _glyph(driver, text: str, like) -> frozenset:
    """The ink of `text` drawn large in the font `like` is drawn with, cropped to it."""
    probe = driver.execute_script(
        "const span = document.createElement('span');"
        "span.textContent = arguments[0]; span.className = 'glyph-probe';"
        "const s = getComputedStyle(arguments[1]);"
        "span.style.fontFamily = s.fontFamily; span.style.fontSize = '48px';"
        "span.style.color = '#000'; span.style.background = '#fff';"
        "span.style.display = 'inline-block'; span.style.padding = '4px';"
        "document.body.prepend(span); return span;", text, like)
    try:
        dots = ink(probe.screenshot_as_png)
    finally:
        driver.execute_script("arguments[0].remove()", probe)
    if not dots:
        return dots
    x0, y0 = min(x for x, _ in dots), min(y for _, y in dots)
    return frozenset((x - x0, y - y0) for x, y in dots)


def test_ui_03_chinese_renders_as_glyphs_not_as_the_missing_glyph(erin, inspector, steps,
                                                                   shots):
    """A Chinese frame (customer-ask) and a step's Chinese input, screenshotted; each of
    their characters drawn in the page's own font is ink of its own, unlike the box a
    missing glyph is drawn as (and unlike each other: missing ones would all be that
    box)."""
    show(erin, inspector, f"mind?context={CTX}&focus=customer-ask")
    frame = wait_for(erin, "#detail pre.body")
    WebDriverWait(erin, 30).until(lambda _: loop.CUSTOMER_ASK in frame.text)
    frame.screenshot(str(shots / "cjk-frame.png"))
    s5 = steps[4]
    show(erin, inspector, f"evaluation?context={CTX}&activation={s5.activation}")
    shown = next(e for e in erin.find_elements(By.CSS_SELECTOR, "#step-inputs .input-text")
                 if e.text == loop.CHINESE)
    shown.screenshot(str(shots / "cjk-input.png"))
    missing = _glyph(erin, MISSING, shown)
    assert missing, "the missing glyph draws a box"
    chars = sorted({c for c in loop.CUSTOMER_ASK + loop.CHINESE if ord(c) > 0x2E80})
    assert len(chars) >= 10
    drawn = {c: _glyph(erin, c, shown) for c in chars}
    assert [c for c, g in drawn.items() if not g or g == missing] == []
    assert len(set(drawn.values())) == len(chars)  # each its own glyph


def test_ui_03_a_deep_link_opens_a_step_and_an_unknown_one_says_so(erin, inspector, steps):
    s = steps[10]
    show(erin, inspector, f"evaluation?context={CTX}&activation={s.activation}")
    assert erin.find_element(By.TAG_NAME, "h2").text == \
        f"Evaluation {s.activation} of session {s.session}"
    erin.get("about:blank")
    erin.get(f"{inspector.url}/#/evaluation?context={CTX}&activation=a999")
    assert wait_view(erin) == "error"
    assert "ACTIVATION_NOT_FOUND" in erin.find_element(By.ID, "error").text
