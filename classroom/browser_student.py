"""One student in a real browser: headless Chromium logs in through the hub, fetches the released
assignment from JupyterLab's *Assignments* tab, opens notebook 01, runs it, moves a slider of its
first widget, saves, and submits from the *Assignments* tab.

``test_classroom.py`` runs it, with the Python that has Playwright (the course's ``.venv``, from
the dev dependency group), against Debian's Chromium (``bash .ci/browser_setup.sh`` installs it).
Prints one JSON line: what was done, or the step that failed; screenshots go to ``--shots``.

    python classroom/browser_student.py --hub URL --user NAME --password PW --assignment 01-en --shots DIR
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

CHROMIUM = "/usr/bin/chromium"
# Headless, and nothing that reaches past this machine.
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
NOTEBOOK = "01_library_analogy.ipynb"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for name in ("hub", "user", "password", "assignment", "shots"):
        parser.add_argument(f"--{name}", required=True)
    args = parser.parse_args()
    shots = Path(args.shots)
    shots.mkdir(parents=True, exist_ok=True)
    from playwright.sync_api import sync_playwright

    done: list[str] = []
    step = "start"
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        page.set_default_timeout(120_000)
        try:
            step = "log in through the hub's form"
            page.goto(f"{args.hub}/hub/login")
            page.fill("#username_input", args.user)
            page.fill("#password_input", args.password)
            page.click("#login_submit")
            page.wait_for_url(re.compile(rf"/user/{re.escape(args.user)}/lab"))
            page.locator(".lm-MenuBar-itemLabel", has_text=re.compile(r"^Nbgrader$")).wait_for()
            done.append(step)

            step = "fetch from the Assignments tab"
            page.locator(".lm-MenuBar-itemLabel", has_text=re.compile(r"^Nbgrader$")).click()
            page.locator(".lm-Menu-itemLabel", has_text=re.compile(r"^Assignment List$")).click()
            def row(list_id):   # the row of the assignment named args.assignment ("01-en")
                return page.locator(f"#{list_id} .list_item").filter(
                    has=page.get_by_text(args.assignment, exact=True)).first
            row("released_assignments_list").locator("button", has_text=re.compile(r"^Fetch$")).click()
            fetched = row("fetched_assignments_list")
            fetched.wait_for()
            page.screenshot(path=str(shots / "1_assignments_fetched.png"))
            done.append(step)

            step = "open the fetched notebook"
            link = page.locator("#fetched_assignments_list a", has_text=NOTEBOOK.removesuffix(".ipynb")).first
            for _ in range(3):   # unfold the assignment's notebooks ("01-en ▸")
                page.locator(f'#fetched_assignments_list a.assignment-notebooks-link'
                             f'[aria-controls$="-{args.assignment}"]').click()
                try:
                    link.wait_for(state="visible", timeout=10_000)
                    break
                except Exception:  # noqa: BLE001 (playwright's TimeoutError: click again)
                    pass
            link.click()
            page.locator(".jp-NotebookPanel").first.wait_for()
            page.locator(".jp-Notebook-ExecutionIndicator[data-status='idle'], "
                         ".jp-Notebook .jp-Cell").first.wait_for()
            done.append(step)

            step = "run all cells and find the first widget's slider"
            page.wait_for_timeout(3000)   # the kernel's start
            page.locator(".lm-MenuBar-itemLabel", has_text=re.compile(r"^Run$")).click()
            page.locator(".lm-Menu-itemLabel", has_text=re.compile(r"^Run All Cells$")).click()
            handle = page.locator(".jp-Notebook .widget-slider .noUi-handle").first
            handle.wait_for()
            done.append(step)

            step = "move the slider; the kernel redraws the widget's figure"
            # Run All stops at the first check cell (the stubs raise): wait for that, kernel idle.
            page.wait_for_function(
                "() => ![...document.querySelectorAll('.jp-InputPrompt')]"
                ".some(p => p.textContent.includes('*'))"
                " && /Idle/.test(document.querySelector('#jp-main-statusbar').innerText)",
                timeout=300_000, polling=500)
            handle.scroll_into_view_if_needed()
            figure = ".jp-Cell:has(.widget-slider) .jp-Cell-outputArea img"
            page.locator(figure).first.wait_for()
            before = page.locator(figure).first.get_attribute("src")
            was = handle.get_attribute("aria-valuenow")
            key = "ArrowLeft" if float(was) >= float(handle.get_attribute("aria-valuemax")) else "ArrowRight"
            handle.focus()
            handle.press(key)
            page.wait_for_function(
                "([sel, old]) => { const img = document.querySelector(sel); return img && img.src !== old; }",
                arg=[figure, before], timeout=60_000)
            now = handle.get_attribute("aria-valuenow")
            page.screenshot(path=str(shots / "2_widget_moved.png"))
            done.append(f"{step} ({key}: {was} -> {now})")

            step = "save"
            page.keyboard.press("Control+s")
            page.wait_for_function("() => !document.querySelector('.jp-mod-dirty')", timeout=60_000)
            done.append(step)

            step = "submit from the Assignments tab"
            page.locator(".lm-TabBar-tabLabel", has_text=re.compile(r"^Assignments$")).first.click()
            row("fetched_assignments_list").locator("button", has_text=re.compile(r"^Submit$")).click()
            row("submitted_assignments_list").wait_for()
            page.screenshot(path=str(shots / "3_submitted.png"))
            done.append(step)
        except Exception as e:  # noqa: BLE001 (reported as the step that failed)
            try:
                page.screenshot(path=str(shots / "failed.png"))
            except Exception:  # noqa: BLE001
                pass
            print(json.dumps({"ok": False, "done": done, "failed": step,
                              "error": f"{type(e).__name__}: {e}"[:1500]}))
            return 1
        finally:
            browser.close()
    print(json.dumps({"ok": True, "done": done}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
