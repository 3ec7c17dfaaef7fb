"""UI-01 and UI-02: `morphz ui`, the web inspector, driven in real headless Chromium
(Debian's chromium and chromium-driver through Selenium; see tests/inspector.py for why)
against a real `morphz serve` that takes bearer tokens over TLS (security_servers'
token_server), seeded with the release story (plus a planted secret event and a frame
with a secret part) and a 10,000-frame context built with bulk transactions.

The inspector runs with --users: each browser signs in with an inspector token mapped to
a Morphz token. erin has read, recall and encode on the seeded contexts but not reveal;
alice created them (every right, reveal included); carol has no grant at all.
Screenshots of every view are saved under the run's tmp folder (printed), or in
$MORPHZ_UI_SHOTS when set."""
from __future__ import annotations

import json
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

from morphz.client import Client, Credentials

from tests.inspector import (BIG_FRAMES, EVENT_SECRET, FRAME_SECRET, TEST_REPORT,
                             InspectorProcess, browser, network, screenshots_dir, seed_big,
                             seed_release, wait_for, wait_view)
from tests.inspector import show as showing, sign_in as signing_in
from tests.security_servers import ALICE_TOKEN, TOKENS, in_process_too

pytestmark = in_process_too  # a `morphz serve` with tokens of its own, and `morphz ui`
UI_TOKENS = {"alice": "ui-alice-3f9c0b7e", "erin": "ui-erin-81d2a6c4", "carol": "ui-carol-5e07d913"}
# The seeds' physical region order (seeds 001; CORE-26 asserts the server keeps it),
# without the optional cognitive-capabilities region a plain compile leaves out.
SEED_REGIONS = ["protocol", "evaluation-profile", "inbox", "observation-state", "mind",
                "session-directory", "kernel", "evaluation-environment", "evaluate"]
RELEASE, BIG = "ui-release", "ui-big"


@pytest.fixture(scope="module")
def seeded(token_server, certs):
    alice = Client(token_server.address, timeout=120, credentials=Credentials(
        tls_ca=certs.path("ca.crt"), token=ALICE_TOKEN))
    release = seed_release(alice, RELEASE)
    seed_big(alice, BIG)
    for context in (RELEASE, BIG):
        alice.grant(context, "erin", ["read", "recall", "encode"])
    yield release
    alice.close()


@pytest.fixture(scope="module")
def inspector(seeded, token_server, certs, tmp_path_factory):
    d = tmp_path_factory.mktemp("ui")
    users = d / "users.json"
    users.write_text(json.dumps({UI_TOKENS[n]: (ALICE_TOKEN if n == "alice" else TOKENS[n])
                                 for n in UI_TOKENS}))
    proc = InspectorProcess(["--server", token_server.address, "--tls-ca",
                             certs.path("ca.crt"), "--users", str(users)], d / "ui.log",
                            env={"MORPHZ_TOKEN": TOKENS["root"]})  # never used: --users
    yield proc
    proc.stop()


@pytest.fixture(scope="module")
def shots(tmp_path_factory) -> Path:
    return screenshots_dir(tmp_path_factory, "ui-screenshots")


@pytest.fixture(scope="module")
def chrome():
    driver = browser()
    yield driver
    driver.quit()


def sign_in(driver, inspector, who: str) -> None:
    signing_in(driver, inspector.url, UI_TOKENS[who])


def show(driver, inspector, route: str, shots: Path | None = None, name: str = "") -> None:
    showing(driver, inspector.url, route, shots, name)


def texts(driver, css: str) -> list[str]:
    return [e.text for e in driver.find_elements(By.CSS_SELECTOR, css)]


@pytest.fixture
def erin(chrome, inspector):
    sign_in(chrome, inspector, "erin")
    return chrome


# -- UI-02: each view shows the context's state at a chosen revision -------------------------
def test_ui_02_contexts_view_shows_revision_frames_events_lag_and_audit(erin, inspector, shots):
    show(erin, inspector, "contexts", shots, "contexts")
    row = erin.find_element(By.CSS_SELECTOR, f"tr[data-context={RELEASE}]")
    cells = [c.text for c in row.find_elements(By.TAG_NAME, "td")]
    assert cells[:3] == [RELEASE, "3", "3"]  # revision 3, tick 3
    assert cells[3].startswith("3 active")
    lag = row.find_element(By.CSS_SELECTOR, "td.lag")
    WebDriverWait(erin, 30).until(lambda _: lag.text != "…")
    assert lag.text.isdigit()  # the recall index's lag, in commits
    row.find_element(By.CSS_SELECTOR, "td.audit button").click()
    audit = row.find_element(By.CSS_SELECTOR, "td.audit")
    WebDriverWait(erin, 60).until(lambda _: audit.text not in ("audit", "auditing…"))
    assert audit.text.startswith("FORBIDDEN: principal erin may not admin")  # alice's: below
    big = erin.find_element(By.CSS_SELECTOR, f"tr[data-context={BIG}]")
    assert f"{BIG_FRAMES} active" in big.text


def test_ui_02_mind_graph_draws_frames_relations_sources_and_frame_detail(erin, inspector,
                                                                          shots):
    show(erin, inspector, f"mind?context={RELEASE}", shots, "mind")
    nodes = {n.get_attribute("data-id"): n.get_attribute("data-state")
             for n in erin.find_elements(By.CSS_SELECTOR, "#graph g.node")}
    assert nodes == {"release": "active", "test-result": "active", "vault": "active",
                     "@e4": "retired"}
    edges = {(e.get_attribute("data-from"), e.get_attribute("data-name"),
              e.get_attribute("data-to"))
             for e in erin.find_elements(By.CSS_SELECTOR, "#graph g.edge")}
    assert edges == {("test-result", "supports", "release"), ("test-result", "source", "@e4")}
    erin.find_element(By.CSS_SELECTOR, "#graph g.node[data-id=test-result]").click()
    wait_for(erin, "#detail ul.sources li[data-ref='@e4']")
    detail = erin.find_element(By.ID, "detail").text
    assert "(tests passed)" in detail and TEST_REPORT in detail
    assert "测试结果已吸收，继续准备发布" in detail  # the transaction that last changed it
    erin.find_element(By.CSS_SELECTOR, "#graph g.node[data-id=release]").click()
    wait_for(erin, "#detail ul.revisions li[data-revision='1']")
    assert texts(erin, "#detail pre.body") == ["(goal ship-v1) (stage packaging)"]
    revisions = texts(erin, "#detail ul.revisions li")
    assert "(stage packaging)" in revisions[0] and "(stage waiting-tests)" in revisions[1]
    erin.save_screenshot(str(shots / "mind-detail.png"))


def test_ui_02_mind_graph_at_revision_1_shows_the_first_plan(erin, inspector, shots):
    show(erin, inspector, f"mind?context={RELEASE}&revision=1", shots, "mind-revision-1")
    assert [n.get_attribute("data-id")
            for n in erin.find_elements(By.CSS_SELECTOR, "#graph g.node")] == ["release"]
    assert erin.find_elements(By.CSS_SELECTOR, "#graph g.edge") == []
    erin.find_element(By.CSS_SELECTOR, "#graph g.node[data-id=release]").click()
    wait_for(erin, "#detail pre.body")
    assert texts(erin, "#detail pre.body") == ["(goal ship-v1) (stage waiting-tests)"]


def test_ui_02_timeline_shows_events_transactions_and_recall_search(erin, inspector, shots):
    show(erin, inspector, f"timeline?context={RELEASE}", shots, "timeline")
    rows = {r.get_attribute("data-ref"): r.text
            for r in erin.find_elements(By.CSS_SELECTOR, "#timeline tbody tr")}
    assert "user-message" in rows["@e1"] and "Ship v1" in rows["@e1"]
    assert "tool-result" in rows["@e4"] and "npm test" in rows["@e4"] and "retired" in rows["@e4"]
    tx = rows["@e6"]
    assert "context-tx" in tx and "revision 2" in tx and "测试结果已吸收，继续准备发布" in tx
    assert "#1 revise release -> revised (frame revision 2)" in tx
    assert "#2 relate test-result supports release -> related" in tx
    erin.find_element(By.ID, "search-q").send_keys("regression suite")
    erin.find_element(By.CSS_SELECTOR, "#search-mode option[value=lexical]").click()
    erin.find_element(By.CSS_SELECTOR, "#search button").click()
    wait_for(erin, "#search-results tr[data-id='@e4']")
    erin.save_screenshot(str(shots / "timeline-search.png"))
    show(erin, inspector, f"timeline?context={RELEASE}&revision=1")
    refs = [r.get_attribute("data-ref")
            for r in erin.find_elements(By.CSS_SELECTOR, "#timeline tbody tr")]
    assert refs == ["@e1", "@e2", "@e3", "@e4", "@e5"]  # revision 2's commit is @e6


def test_ui_02_diff_between_revisions_1_and_2_shows_the_revised_release(erin, inspector,
                                                                       shots):
    show(erin, inspector, f"diff?context={RELEASE}&from=1&to=2", shots, "diff")
    revised = erin.find_element(By.CSS_SELECTOR, "#diff-revised li[data-id=release]")
    assert "frame revision 1 -> 2" in revised.text
    assert texts(erin, "#diff-revised .diff-removed") == ["- (stage waiting-tests)"]
    assert texts(erin, "#diff-revised .diff-added") == ["+ (stage packaging)"]
    assert [e.get_attribute("data-id")
            for e in erin.find_elements(By.CSS_SELECTOR, "#diff-created li")] == ["test-result"]
    assert texts(erin, "#diff-related li") == ["test-result supports release"]
    assert texts(erin, "#diff-unrelated li") == []


def test_ui_02_encoding_regions_appear_in_the_seeds_order(erin, inspector, seeded, shots):
    show(erin, inspector, f"encoding?context={RELEASE}&snapshot={seeded.snapshot}", shots,
         "encoding")
    wait_for(erin, "#regions")
    assert [r.get_attribute("data-name")
            for r in erin.find_elements(By.CSS_SELECTOR, "#regions .region")] == SEED_REGIONS
    assert "replay matches" in erin.find_element(By.ID, "encoding").text
    inbox = erin.find_element(By.CSS_SELECTOR, "#regions .region[data-name=inbox]").text
    assert "1 preview(s)" in inbox  # the 6 KB build log, @e8
    assert texts(erin, "#previews li")[0].startswith("@e8: preview, 4096 of ")
    assert erin.find_element(By.CSS_SELECTOR, "#pressure .bar")
    # compile again for the latest activation (offered): the same regions in the same order
    activation = erin.find_element(By.ID, "activation")
    WebDriverWait(erin, 30).until(lambda _: activation.get_attribute("value"))
    assert activation.get_attribute("value") == seeded.activation
    erin.find_element(By.CSS_SELECTOR, "#compile button").click()
    wait_for(erin, "#regions .region[data-name=evaluate]")
    assert [r.get_attribute("data-name")
            for r in erin.find_elements(By.CSS_SELECTOR, "#regions .region")] == SEED_REGIONS


def test_ui_02_a_10000_frame_mind_stays_usable_by_pages_and_neighbourhoods(erin, inspector,
                                                                          shots):
    show(erin, inspector, f"mind?context={BIG}", shots, "mind-10000")
    head = erin.find_element(By.ID, "frame-list").text
    assert f"{BIG_FRAMES} of {BIG_FRAMES} frames, page 1 of 100" in head
    drawn = erin.find_elements(By.CSS_SELECTOR, "#graph g.node")
    assert 1 < len(drawn) <= 120  # a neighbourhood, never the whole Mind
    erin.find_element(By.ID, "find").send_keys("f05000\n")
    wait_for(erin, "#frame-list a[data-id=f05000]").click()
    wait_for(erin, "#graph g.node.focus[data-id=f05000]")
    assert wait_view(erin) == "ready"
    edges = {(e.get_attribute("data-from"), e.get_attribute("data-to"))
             for e in erin.find_elements(By.CSS_SELECTOR, "#graph g.edge")}
    assert {("f05000", "f04999"), ("f05001", "f05000")} <= edges
    wait_for(erin, "#detail pre.body")
    assert texts(erin, "#detail pre.body") == ['(step 5000) (note "frame number 5000")']


# -- UI-01: only what the principal may read; secrets as their marker; nothing outside -----
def test_ui_01_no_secret_text_in_dom_or_network_and_every_asset_from_the_process(
        erin, inspector, seeded, shots):
    pages, responses = [], []
    for route in ("contexts", f"mind?context={RELEASE}", f"timeline?context={RELEASE}",
                  f"diff?context={RELEASE}&from=2&to=3",
                  f"encoding?context={RELEASE}&snapshot={seeded.snapshot}"):
        show(erin, inspector, route)
        pages.append(erin.page_source)
        responses += network(erin)  # read while this document still holds the bodies
    show(erin, inspector, f"mind?context={RELEASE}&focus=vault", shots, "mind-secret")
    wait_for(erin, "#detail pre.body")
    assert "[secret" in erin.find_element(By.CSS_SELECTOR, "#detail pre.body").text
    pages.append(erin.page_source)
    responses += network(erin)
    show(erin, inspector, f"timeline?context={RELEASE}")
    secret_row = erin.find_element(By.CSS_SELECTOR, "#timeline tr[data-ref='@e7']").text
    assert "[secret @e7]" in secret_row and "(secret)" in secret_row
    erin.find_element(By.ID, "search-q").send_keys("deploy key")
    erin.find_element(By.CSS_SELECTOR, "#search button").click()
    wait_for(erin, "#search-results table, #search-results p")
    pages.append(erin.page_source)
    # asking to reveal without the right: refused, and still no secret text
    erin.find_element(By.ID, "reveal").click()
    wait_for(erin, "#error:not([hidden])")
    assert "PERMISSION_DENIED" in erin.find_element(By.ID, "error").text or \
        "FORBIDDEN" in erin.find_element(By.ID, "error").text
    pages.append(erin.page_source)
    erin.find_element(By.ID, "reveal").click()
    assert wait_view(erin) == "ready"
    responses += network(erin)
    # Every JSON reply that loaded was read, so the scan below means it (one the page
    # cancelled under load, say a refetch superseded by the next click, has no body).
    api = [r for r in responses if "/api/" in r["url"] and r["loaded"]]
    assert {"/api/mind", "/api/frame", "/api/timeline", "/api/diff", "/api/encoding",
            "/api/search"} <= {"/api/" + r["url"].split("/api/")[1].split("?")[0] for r in api}
    assert all(r["body"] for r in api), [(r["url"], r["status"]) for r in api if not r["body"]]
    for text in pages + [r["body"] for r in responses]:
        for secret in (EVENT_SECRET, FRAME_SECRET, TOKENS["erin"], ALICE_TOKEN):
            assert secret not in text
    outside = [r["url"] for r in responses
               if not r["url"].startswith(inspector.url + "/") and not r["url"].startswith("data:")]
    assert outside == []
    static = [r["url"] for r in responses if "/static/" in r["url"]]
    assert any(u.endswith("/static/app.js") for u in static)


def test_ui_01_reveal_shows_secrets_to_a_principal_with_the_right(chrome, inspector):
    sign_in(chrome, inspector, "alice")
    show(chrome, inspector, "contexts")
    audit = chrome.find_element(By.CSS_SELECTOR, f"tr[data-context={RELEASE}] td.audit")
    audit.find_element(By.TAG_NAME, "button").click()
    WebDriverWait(chrome, 60).until(lambda _: audit.text not in ("audit", "auditing…"))
    assert audit.text.startswith("match (")  # alice administers the context
    show(chrome, inspector, f"timeline?context={RELEASE}")
    assert EVENT_SECRET not in chrome.page_source  # not unless asked
    chrome.find_element(By.ID, "reveal").click()
    wait_for(chrome, "#timeline tr[data-ref='@e7']")
    assert wait_view(chrome) == "ready"
    assert EVENT_SECRET in chrome.find_element(By.CSS_SELECTOR,
                                               "#timeline tr[data-ref='@e7']").text
    chrome.find_element(By.ID, "reveal").click()
    assert wait_view(chrome) == "ready"


def _get(url: str, token: str = "") -> tuple[int, dict]:
    req = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"} if token
                                 else {})
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"{}")


def test_ui_01_each_user_sees_only_what_its_principal_may_read(chrome, inspector):
    status, body = _get(f"{inspector.url}/api/contexts")
    assert status == 401 and body["error"]["reason"] == "UNAUTHENTICATED"
    status, _ = _get(f"{inspector.url}/api/contexts", "not-a-user")
    assert status == 401
    status, body = _get(f"{inspector.url}/api/contexts", UI_TOKENS["carol"])
    assert status == 200 and body["contexts"] == []
    status, body = _get(f"{inspector.url}/api/mind?context={RELEASE}", UI_TOKENS["carol"])
    assert status in (403, 404) and body["error"]["reason"]
    status, body = _get(f"{inspector.url}/api/contexts", UI_TOKENS["erin"])
    assert {RELEASE, BIG} <= {c["context"] for c in body["contexts"]}
    sign_in(chrome, inspector, "carol")
    show(chrome, inspector, "contexts")
    assert chrome.find_elements(By.CSS_SELECTOR, "#contexts tbody tr") == []
    chrome.delete_all_cookies()
    chrome.get(f"{inspector.url}/")
    wait_for(chrome, "input[name=token]")  # the page itself asks for a token first
    assert chrome.current_url.endswith("/login")


def test_ui_01_development_mode_says_so_on_the_page(chrome, token_server, certs, seeded,
                                                   tmp_path):
    dev = InspectorProcess(["--server", token_server.address, "--tls-ca",
                            certs.path("ca.crt")], tmp_path / "ui.log",
                           env={"MORPHZ_TOKEN": TOKENS["erin"]})
    try:
        chrome.get(f"{dev.url}/#/timeline?context={RELEASE}")
        assert wait_view(chrome) == "ready"
        assert wait_for(chrome, "#banner[data-mode=development]").text.startswith(
            "development mode: loopback only")
        assert "[secret @e7]" in chrome.find_element(By.CSS_SELECTOR,
                                                     "#timeline tr[data-ref='@e7']").text
    finally:
        dev.stop()


def test_ui_01_development_mode_serves_loopback_only(tmp_path):
    done = subprocess.run([sys.executable, "-m", "morphz.services.cli.main", "ui",
                           "--server", "127.0.0.1:1", "--listen", "0.0.0.0:0"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 1
    error = json.loads(done.stdout)["error"]
    assert error["reason"] == "CONTEXT_INPUT_INVALID" and error["details"]["field"] == "listen"


def test_ui_01_ui_02_ui_03_the_conformance_kits_ui_cases_pass_through_morphz_ui(
        inspector, token_server, certs, tmp_path):
    """The kit's UI extension, black-box over HTTP against this `morphz ui`: the kit acts
    as alice (its inspector token mapped to alice's Morphz token), its second principal as
    carol (no grant on the kit's contexts)."""
    files = {}
    for name, text in (("token", ALICE_TOKEN), ("second", TOKENS["carol"]),
                       ("ui", UI_TOKENS["alice"]), ("ui-second", UI_TOKENS["carol"])):
        files[name] = tmp_path / name
        files[name].write_text(text)
    report = tmp_path / "report.json"
    kit = Path(sys.executable).with_name("morphz-conformance")
    done = subprocess.run(
        [str(kit), "run", "--profile", "UI", "--target", token_server.address,
         "--tls-ca", certs.path("ca.crt"), "--token-file", str(files["token"]),
         "--second-token-file", str(files["second"]), "--inspector-url", inspector.url,
         "--inspector-token-file", str(files["ui"]),
         "--inspector-second-token-file", str(files["ui-second"]),
         "--report", str(report), "--quiet"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    cases = json.loads(report.read_text())["cases"]
    assert {c["id"]: c["outcome"] for c in cases} == {"UI-01": "pass", "UI-02": "pass",
                                                       "UI-03": "pass"}, cases
    for text in (report.read_text(), done.stdout, done.stderr):
        assert "PLANTED" not in text and UI_TOKENS["alice"] not in text
