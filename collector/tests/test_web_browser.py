# SPDX-License-Identifier: GPL-2.0
"""The dashboard in a real browser: Debian's chromium, headless, driven by
chromium-driver through python3-selenium, against `netoops-collector web`
(waitress) on a database that `serve` filled with dumps captured from
real guests.  Screenshots of each page type go to artifacts/dashboard/."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import urllib.request
from typing import Any, Iterator

import pytest

from collector_util import COLLECTOR, PYTHON, cli_env, dashboard_db

ARTIFACTS = COLLECTOR.parent / "artifacts" / "dashboard"
CHROMIUM = "/usr/bin/chromium"
DRIVER = "/usr/bin/chromedriver"


def follow(browser: Any, element: Any) -> None:
    """Click ``element`` and wait for the page it leads to (a click does not)."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions
    from selenium.webdriver.support.ui import WebDriverWait
    old = browser.find_element(By.TAG_NAME, "html")
    element.click()
    WebDriverWait(browser, 30).until(expected_conditions.staleness_of(old))


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    db = tmp_path_factory.mktemp("browser") / "dash.sqlite3"
    dashboard_db(db)
    proc = subprocess.Popen([PYTHON, "-m", "netoops_collector", "--db", str(db), "web",
                             "--listen", "127.0.0.1:0"], stderr=subprocess.PIPE, text=True,
                            env=cli_env())
    try:
        assert proc.stderr is not None
        line = proc.stderr.readline()
        assert "dashboard of" in line, line
        yield line.rsplit(" on ", 1)[1].strip()
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(10) == 0


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    profile = tmp_path_factory.mktemp("chromium-profile")
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--window-size=1280,900", f"--user-data-dir={profile}",
                "--no-first-run", "--disable-extensions", "--disable-background-networking"):
        opts.add_argument(arg)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(DRIVER), options=opts)
    driver.set_page_load_timeout(30)
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


def page_json(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=10) as res:
        return json.load(res)


def clean_console(driver: Any) -> None:
    """No error in the browser's console: a script or a resource the
    Content-Security-Policy blocked, a missing style sheet, a failed load."""
    bad = [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]
    assert not bad, bad


def test_groups_then_a_group_then_a_dump(site: str, browser: Any):
    from selenium.webdriver.common.by import By
    groups = page_json(site + "groups.json")["groups"]
    browser.get(site)
    assert browser.title == "crash groups · netoops"
    rows = browser.find_elements(By.CSS_SELECTOR, "table.groups tbody tr")
    assert len(rows) == len(groups) > 1
    first = rows[0]
    assert first.find_element(By.CSS_SELECTOR, "td.title a").text == groups[0]["title"]
    assert first.find_element(By.CSS_SELECTOR, "td.num").text.startswith(str(groups[0]["dumps"]))
    assert len(browser.find_elements(By.CSS_SELECTOR, "td.plot svg rect")) > len(groups)
    # the style sheet applied: the header has its dark background
    header = browser.find_element(By.TAG_NAME, "header")
    assert header.value_of_css_property("background-color") == "rgba(35, 49, 63, 1)"
    browser.save_screenshot(str(ARTIFACTS / "groups.png"))
    clean_console(browser)

    follow(browser, first.find_element(By.CSS_SELECTOR, "td.title a"))
    assert browser.current_url == f"{site}group/{groups[0]['signature']}"
    assert browser.find_element(By.TAG_NAME, "h1").text == groups[0]["title"]
    legend = browser.find_element(By.CSS_SELECTOR, "svg.by-kernel").text
    for kernel in groups[0]["kernels"]:
        assert kernel in legend
    links = browser.find_elements(By.CSS_SELECTOR, "table.dumps td.num a")
    assert len(links) == groups[0]["dumps"]
    browser.save_screenshot(str(ARTIFACTS / "group.png"))
    clean_console(browser)

    dump_id = links[0].text
    follow(browser, links[0])
    assert browser.current_url == f"{site}dump/{dump_id}"
    report = browser.find_element(By.CSS_SELECTOR, "pre.report").text
    assert report.startswith(f"dump       {dump_id}")
    assert "call trace:" in report and groups[0]["title"] in report
    assert browser.find_element(By.CSS_SELECTOR, "pre.log").text.strip()
    browser.save_screenshot(str(ARTIFACTS / "dump.png"))
    clean_console(browser)
    # back to the group through the crumb
    follow(browser, browser.find_element(By.CSS_SELECTOR, "header a.crumb"))
    assert browser.current_url == f"{site}group/{groups[0]['signature']}"


def test_the_filter_form(site: str, browser: Any):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select
    browser.get(site)
    Select(browser.find_element(By.NAME, "host")).select_by_visible_text("127.0.0.2")
    Select(browser.find_element(By.NAME, "sort")).select_by_value("new")
    follow(browser, browser.find_element(By.CSS_SELECTOR, "form.filters button"))
    assert "host=127.0.0.2" in browser.current_url and "sort=new" in browser.current_url
    want = page_json(site + "groups.json?host=127.0.0.2&sort=new")["groups"]
    rows = browser.find_elements(By.CSS_SELECTOR, "table.groups tbody tr")
    assert [r.find_element(By.CSS_SELECTOR, "td.title a").text for r in rows] == \
        [g["title"] for g in want]
    assert all(r.find_element(By.CSS_SELECTOR, "td:nth-child(3)").text == "127.0.0.2"
               for r in rows)
    browser.find_element(By.NAME, "since").send_keys("not a time")
    follow(browser, browser.find_element(By.CSS_SELECTOR, "form.filters button"))
    assert "not a time" in browser.find_element(By.CSS_SELECTOR, "p.error").text
