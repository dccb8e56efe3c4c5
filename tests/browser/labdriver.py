"""Drive JupyterLab in headless Chromium: a private server, a notebook run, its widgets moved.

The pieces are plain functions and one small class so that the test reads as the steps a learner
takes: open the notebook, Run > Run All Cells, wait for the kernel, move each widget's controls.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import quote

REPO = Path(__file__).resolve().parents[2]
FIGURES = REPO / "figures"
# The browser test's screenshots: never over the stored ones in figures/ (make screenshots).
SCREENSHOTS = REPO / "build" / "screenshots"
CHROMIUM = Path("/usr/bin/chromium")
# Headless, and nothing that reaches past this machine: no QUIC, no component or sync traffic.
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
VIEWPORT = {"width": 1200, "height": 900}
OVERRIDES = Path(__file__).with_name("overrides.json")

STDERR_MIME = "application/vnd.jupyter.stderr"
ERROR_MIME = "application/vnd.jupyter.error"


def notebooks_dir() -> Path:
    return Path(os.environ.get("BROWSER_TEST_NOTEBOOKS", REPO / "notebooks")).resolve()


def course_notebooks() -> list[str]:
    """``zh/01_x.ipynb``-style paths of every notebook there is, Chinese first."""
    root = notebooks_dir()
    return [f"{lang}/{p.name}" for lang in ("zh", "en")
            for p in sorted((root / lang).glob("*.ipynb"))]


def screenshot_name(rel_path: str) -> str:
    """``zh/03_x.ipynb`` -> ``screenshot_zh_03.png``."""
    lang, name = rel_path.split("/")
    return f"screenshot_{lang}_{name[:2]}.png"


def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def free_port() -> int:
    """A loopback port that is free right now (the operating system picks it at random)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LabServer:
    """A JupyterLab server of its own: loopback only, random port and token, throw-away config.

    Config, data, runtime, IPython and settings directories all live under ``work_dir`` so that
    neither the learner's own Jupyter settings nor their kernels leak in, and the settings
    override in ``overrides.json`` (news pop-up off, kernel started without asking) applies.
    """

    def __init__(self, root_dir: Path, work_dir: Path):
        self.root_dir = Path(root_dir)
        self.work_dir = Path(work_dir)
        self.port = free_port()
        self.token = secrets.token_hex(24)
        self.base_url = f"http://127.0.0.1:{self.port}"
        self.log_path = self.work_dir / "jupyterlab.log"
        self.proc: subprocess.Popen | None = None

    # -- lifecycle -------------------------------------------------------------------------
    def _env(self) -> dict:
        dirs = {name: self.work_dir / name for name in
                ("config", "data", "runtime", "ipython")}
        for d in dirs.values():
            d.mkdir(parents=True, exist_ok=True)
        # JupyterLab reads default-setting overrides from every <config dir>/labconfig.
        labconfig = dirs["config"] / "labconfig"
        labconfig.mkdir(exist_ok=True)
        shutil.copy(OVERRIDES, labconfig / "default_setting_overrides.json")
        # The learner's set has no nbgrader (an instructor tool): the test shows the learner's lab.
        (labconfig / "page_config.json").write_text(json.dumps(
            {"disabledExtensions": {"@jupyter/nbgrader": True}}), encoding="utf-8")
        (dirs["config"] / "jupyter_server_config.json").write_text(json.dumps(
            {"ServerApp": {"jpserver_extensions": {
                f"nbgrader.server_extensions.{name}": False for name in
                ("formgrader", "validate_assignment", "assignment_list", "course_list")}}}), encoding="utf-8")
        env = dict(os.environ)
        env.update(
            JUPYTER_CONFIG_DIR=str(dirs["config"]),
            JUPYTER_DATA_DIR=str(dirs["data"]),
            JUPYTER_RUNTIME_DIR=str(dirs["runtime"]),
            IPYTHONDIR=str(dirs["ipython"]),
            PYTHONHASHSEED="0",
        )
        env.pop("JUPYTER_PATH", None)
        env.pop("JUPYTER_TOKEN", None)
        return env

    def command(self) -> list[str]:
        return [
            sys.executable, "-m", "jupyter", "lab",
            "--no-browser",
            "--ServerApp.ip=127.0.0.1",
            f"--ServerApp.port={self.port}",
            "--ServerApp.port_retries=0",
            f"--IdentityProvider.token={self.token}",
            f"--ServerApp.root_dir={self.root_dir}",
            "--ServerApp.terminals_enabled=False",
            f"--LabApp.user_settings_dir={self.work_dir / 'config' / 'lab' / 'user-settings'}",
            f"--LabApp.workspaces_dir={self.work_dir / 'config' / 'lab' / 'workspaces'}",
            # window.jupyterapp: how the test waits for the session context to be ready.
            "--LabApp.expose_app_in_browser=True",
            # No news feed, no update check, no extension listing: nothing leaves 127.0.0.1.
            "--LabApp.news_url=None",
            "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
            "--LabApp.extension_manager=readonly",
        ] + (["--allow-root"] if os.geteuid() == 0 else [])  # CI runs as root

    def start(self, timeout: float = 90.0) -> None:
        env = self._env()
        log = open(self.log_path, "wb")  # closed in stop(), with the process
        self.proc = subprocess.Popen(self.command(), cwd=self.root_dir, env=env, stdout=log,
                                     stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                     start_new_session=True)
        self._log = log
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"JupyterLab exited with {self.proc.returncode}:\n"
                                   f"{self.log_tail()}")
            try:
                self.api("GET", "/api/status")
                return
            except (urllib.error.URLError, ConnectionError, OSError):
                time.sleep(0.3)
        self.stop()
        raise RuntimeError(f"JupyterLab did not answer within {timeout:.0f} s:\n"
                           f"{self.log_tail()}")

    def stop(self) -> None:
        if self.proc is None:
            return
        if self.proc.poll() is None:
            # SIGTERM lets the server shut its kernels down cleanly.
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=10)
        self._log.close()
        self.proc = None

    def log_tail(self, n: int = 40) -> str:
        try:
            lines = self.log_path.read_text(encoding="utf-8", errors="replace").splitlines()
        except OSError:
            return ""
        return "\n".join(lines[-n:])

    # -- REST ------------------------------------------------------------------------------
    def api(self, method: str, path: str):
        req = urllib.request.Request(self.base_url + path, method=method,
                                     headers={"Authorization": f"token {self.token}"})
        with urllib.request.urlopen(req, timeout=10) as resp:
            body = resp.read()
        return json.loads(body) if body else None

    def shutdown_sessions(self) -> None:
        """End every kernel the last notebook started, so notebooks do not pile up kernels."""
        for session in self.api("GET", "/api/sessions") or []:
            self.api("DELETE", f"/api/sessions/{session['id']}")

    def lab_url(self, rel_path: str, workspace: str) -> str:
        # A workspace of its own per notebook: the last notebook's tabs are not restored (nor
        # its kernel restarted) when the next one opens.
        return (f"{self.base_url}/lab/workspaces/{quote(workspace)}/tree/{quote(rel_path)}"
                f"?token={self.token}")


# -- the page --------------------------------------------------------------------------------
@dataclass
class ConsoleLog:
    """Everything the page reported as an error: console errors and uncaught exceptions."""

    errors: list[str] = field(default_factory=list)

    def attach(self, page) -> None:
        page.on("console", self._on_console)
        page.on("pageerror", self._on_pageerror)

    def _on_console(self, msg) -> None:
        if msg.type == "error":
            url = (msg.location or {}).get("url")
            self.errors.append(f"console.error: {msg.text}" + (f" ({url})" if url else ""))

    def _on_pageerror(self, exc) -> None:
        self.errors.append(f"pageerror: {exc}")


# JavaScript run in the page. window.jupyterapp is there because of expose_app_in_browser.
JS_NOTEBOOK_READY = """async (path) => {
    const app = window.jupyterapp;
    await app.restored;
    const panel = app.shell.currentWidget;
    if (!panel || !panel.context || panel.context.path !== path) return null;
    await panel.context.ready;
    // The kernel-selection dialog appears when one acts before the session context is ready.
    await panel.sessionContext.ready;
    const kernel = panel.sessionContext.session && panel.sessionContext.session.kernel;
    return kernel ? kernel.name : 'no kernel';
}"""

JS_CURRENT_IS = """(path) => {
    const app = window.jupyterapp;
    if (!app || !app.shell) return false;
    const w = app.shell.currentWidget;
    return !!(w && w.context && w.context.path === path);
}"""

JS_KERNEL_STATUS = """() => {
    const s = window.jupyterapp.shell.currentWidget.sessionContext;
    return s.session && s.session.kernel ? s.session.kernel.status : 'none';
}"""

# Done when the kernel is idle, no cell shows [*], and every non-empty code cell has run, or a
# cell raised and so stopped Run All part way (then: which cell, and what it raised).
JS_RUN_FINISHED = """() => {
    const panel = window.jupyterapp.shell.currentWidget;
    const kernel = panel.sessionContext.session && panel.sessionContext.session.kernel;
    if (!kernel) return false;
    if (kernel.status === 'dead') return 'dead';
    if (kernel.status !== 'idle') return false;
    const cells = panel.content.widgets.filter(
        c => c.model.type === 'code' && c.model.sharedModel.getSource().trim() !== '');
    const pending = cells.some(c => {
        const p = c.node.querySelector('.jp-InputPrompt');
        return p && p.textContent.includes('*');
    });
    if (pending) return false;
    if (cells.every(c => c.model.executionCount !== null)) return 'done';
    // Run All stops at the first cell that raises: report that cell instead of waiting on.
    for (const c of cells) {
        const outs = c.model.outputs;
        for (let i = 0; i < outs.length; i++) {
            const out = outs.get(i).toJSON();
            if (out.output_type === 'error') {
                return `stopped at cell [${c.model.executionCount}]: ${out.ename}: ${out.evalue}`;
            }
        }
    }
    return false;
}"""

# Top-level widget views (not the ones nested in an Output widget), tagged for later lookups,
# with the controls found in each (in page order), also tagged.
# Returns [{id, controls: [{id, kind, label, disabled}]}].
JS_TAG_WIDGETS = """() => {
    const roots = Array.from(document.querySelectorAll(
        '.jp-Notebook .jp-OutputArea-output > .jupyter-widgets'))
        .filter(el => !el.parentElement.closest('.widget-output'));
    const kinds = [
        ['toggle-buttons', '.widget-toggle-buttons'],
        ['slider', '.widget-slider'],
        ['dropdown', '.widget-dropdown select'],
        ['toggle', '.widget-toggle-button'],
        ['checkbox', '.widget-checkbox input[type=checkbox]'],
        ['radio', '.widget-radio-box'],
        ['select', '.widget-select select'],
        ['number', '.widget-text input[type=number]'],
    ];
    const clean = (t) => (t || '').replace(/\\u200b/g, '').trim();
    const labelOf = (el) => {
        const box = el.closest('.widget-inline-hbox') || el;
        for (const sel of ['.widget-label', '.widget-label-basic span', 'button']) {
            const found = box.querySelector(sel);
            if (found && clean(found.textContent)) return clean(found.textContent);
        }
        return clean(el.textContent);
    };
    return roots.map((root, i) => {
        root.setAttribute('data-bt-widget', String(i));
        const found = [];
        for (const [kind, sel] of kinds) {
            for (const el of root.querySelectorAll(sel)) {
                if (el.closest('.widget-output')) continue;
                // a ToggleButtons group is one control, not one per button
                if (kind === 'toggle' && el.closest('.widget-toggle-buttons')) continue;
                if (found.some(f => f.el === el)) continue;
                found.push({el, kind});
            }
        }
        found.sort((a, b) =>
            a.el.compareDocumentPosition(b.el) & Node.DOCUMENT_POSITION_FOLLOWING ? -1 : 1);
        const controls = found.map(({el, kind}, j) => {
            const id = i + '-' + j;
            el.setAttribute('data-bt-control', id);
            return {id, kind, label: labelOf(el),
                    disabled: !!(el.disabled || el.closest('.mod-disabled') ||
                                 el.querySelector('[disabled]'))};
        });
        return {id: String(i), controls};
    });
}"""

# How many widget views the cells' outputs hold (in the notebook model, not the page).
JS_WIDGET_OUTPUTS_IN_MODEL = """() => {
    const panel = window.jupyterapp.shell.currentWidget;
    let n = 0;
    for (const cell of panel.content.widgets) {
        if (cell.model.type !== 'code') continue;
        const outs = cell.model.outputs;
        for (let i = 0; i < outs.length; i++) {
            const data = outs.get(i).data;
            if (data && data['application/vnd.jupyter.widget-view+json']) n++;
        }
    }
    return n;
}"""

# The log console's entries for the current notebook: where JupyterLab puts kernel output that
# belongs to no cell, e.g. a traceback raised in a widget's callback.
JS_LOG_STATUS = """() => {
    const item = document.querySelector('.jp-LogConsoleStatusItem');
    return item ? item.textContent.trim() : '';
}"""

JS_LOG_ENTRIES = """async () => {
    await window.jupyterapp.commands.execute('logconsole:open');
    await new Promise(r => setTimeout(r, 500));
    return Array.from(document.querySelectorAll(
        '.jp-LogConsolePanel .jp-Scrolling:not(.lm-mod-hidden) .jp-OutputArea-child'))
        .map(e => ({
            // an entry may be a picture, not text: say what kind of output it is
            kinds: Array.from(e.querySelectorAll('[data-mime-type]'))
                .map(o => o.getAttribute('data-mime-type')),
            text: e.innerText,
        }));
}"""

# What the learner sees of a widget's result: the images (as data or blob URLs) and the text of
# its Output widget(s) and Image widget(s); plus whether every image has been decoded. An Image
# widget gets a new blob URL for every frame it is sent, and none for a frame it is not.
JS_FIGURES = """(root) => {
    const outs = Array.from(root.querySelectorAll('.widget-output'));
    const imgs = Array.from(root.querySelectorAll('.widget-output img, img.widget-image'));
    return {outs, imgs};
}"""

JS_OUTPUT_STATE = """(id) => {
    const root = document.querySelector(`[data-bt-widget="${id}"]`);
    if (!root) return null;
    const {outs, imgs} = (""" + JS_FIGURES + """)(root);
    return {
        signature: imgs.map(im => im.getAttribute('src') || '').join('|') + '#' +
                   outs.map(o => o.textContent).join('|'),
        images: imgs.length,
        decoded: imgs.every(im => im.complete && im.naturalWidth > 0),
        outputs: outs.length + root.querySelectorAll('img.widget-image').length,
    };
}"""

JS_WAIT_CHANGED = """([id, old]) => {
    const root = document.querySelector(`[data-bt-widget="${id}"]`);
    const {outs, imgs} = (""" + JS_FIGURES + """)(root);
    const sig = imgs.map(im => im.getAttribute('src') || '').join('|') + '#' +
                outs.map(o => o.textContent).join('|');
    return sig !== old && imgs.every(im => im.complete && im.naturalWidth > 0);
}"""

# The bytes of the pictures a widget shows now, as one SHA-256 per picture: two frames of the
# same values are the same bytes, whatever their URLs.
JS_PICTURE_DIGEST = """async (id) => {
    const root = document.querySelector(`[data-bt-widget="${id}"]`);
    const {imgs} = (""" + JS_FIGURES + """)(root);
    const digests = [];
    for (const im of imgs) {
        const bytes = await (await fetch(im.src)).arrayBuffer();
        const d = new Uint8Array(await crypto.subtle.digest('SHA-256', bytes));
        digests.push(Array.from(d).map(x => x.toString(16).padStart(2, '0')).join(''));
    }
    return digests.join('|');
}"""

JS_ERROR_OUTPUTS = f"""() => Array.from(document.querySelectorAll(
        '.jp-OutputArea-output[data-mime-type="{STDERR_MIME}"], ' +
        '[data-mime-type="{ERROR_MIME}"], .jp-RenderedText[data-mime-type*="error"]'))
    .map(el => el.textContent.slice(0, 2000))"""


def open_notebook(page, server: LabServer, rel_path: str, timeout_ms: int = 60_000) -> str:
    """Open ``rel_path`` in JupyterLab and wait until its kernel is started and idle."""
    workspace = "t-" + "".join(ch if ch.isalnum() else "-" for ch in rel_path)
    page.goto(server.lab_url(rel_path, workspace), wait_until="domcontentloaded")
    page.wait_for_function(JS_CURRENT_IS, arg=rel_path, timeout=timeout_ms)
    kernel_name = page.evaluate(JS_NOTEBOOK_READY, rel_path)
    dialogs = page.locator(".jp-Dialog")
    if dialogs.count():
        raise AssertionError(f"a dialog is open after the notebook became ready: "
                             f"{dialogs.first.inner_text()!r}")
    page.wait_for_function(f"() => ({JS_KERNEL_STATUS})() === 'idle'", timeout=timeout_ms)
    return kernel_name


def run_all_cells(page) -> None:
    """Run > Run All Cells, clicked in the menu bar as a learner would."""
    page.locator(".lm-MenuBar-itemLabel", has_text=re.compile(r"^Run$")).click()
    # exact: "Restart Kernel and Run All Cells…" is in the same menu
    page.locator(".lm-Menu-itemLabel", has_text=re.compile(r"^Run All Cells$")).click()


def wait_for_run(page, timeout_ms: int = 120_000) -> str:
    handle = page.wait_for_function(JS_RUN_FINISHED, timeout=timeout_ms, polling=200)
    return handle.json_value()


def wait_idle(page, timeout_ms: int = 60_000) -> None:
    page.wait_for_function(f"() => ({JS_KERNEL_STATUS})() === 'idle'", timeout=timeout_ms,
                           polling=100)


def error_outputs(page) -> list[str]:
    return page.evaluate(JS_ERROR_OUTPUTS)


def tag_widgets(page) -> list[dict]:
    return page.evaluate(JS_TAG_WIDGETS)


def output_state(page, widget_id: str) -> dict:
    return page.evaluate(JS_OUTPUT_STATE, widget_id)


def widget_locator(page, widget_id: str):
    return page.locator(f'[data-bt-widget="{widget_id}"]')


def scroll_to_top_of(page, widget_id: str) -> None:
    """Put the widget's cell at the top of the notebook view.

    Cells out of view are laid out with an estimated height (JupyterLab's windowing), which
    becomes the real one as they come into view: scroll again until the cell stays put.
    """
    cell = ("(id) => document.querySelector(`[data-bt-widget=\"${id}\"]`)"
            ".closest('.jp-Cell')")
    for _ in range(10):
        placed = page.evaluate(f"""(id) => {{ const c = ({cell})(id);
            c.scrollIntoView({{block: 'start'}}); return c.getBoundingClientRect().top; }}""",
                               widget_id)
        page.wait_for_timeout(250)
        now = page.evaluate(f"(id) => ({cell})(id).getBoundingClientRect().top", widget_id)
        if abs(now - placed) < 1:
            break


CONTINUOUS = ("slider", "number")


def is_disabled(page, control: dict) -> bool:
    return page.locator(f'[data-bt-control="{control["id"]}"]').evaluate(
        "el => !!(el.disabled || el.closest('.mod-disabled') || el.querySelector('[disabled]'))")


def move_control(page, control: dict) -> str:
    """Move one control the way a learner would; return what was done, e.g. 'ArrowRight'."""
    el = page.locator(f'[data-bt-control="{control["id"]}"]')
    kind = control["kind"]
    el.scroll_into_view_if_needed()
    if kind == "slider":
        handle = el.locator(".noUi-handle").first
        now = float(handle.get_attribute("aria-valuenow"))
        top = float(handle.get_attribute("aria-valuemax"))
        key = "ArrowLeft" if now >= top else "ArrowRight"
        # What the learner reads beside the slider (a SelectionSlider's handle counts indices,
        # a log slider's exponents); the handle's own value when there is no readout.
        readout = el.locator(".widget-readout")
        shown = ((lambda: readout.first.text_content().strip()) if readout.count()
                 else (lambda: f"{float(handle.get_attribute('aria-valuenow')):g}"))
        was = shown()
        handle.focus()
        handle.press(key)
        return f"{key} ({was} -> {shown()})"
    if kind in ("dropdown", "select"):
        options = el.locator("option")
        n = options.count()
        if n < 2:
            raise AssertionError(f"{kind} {control['label']!r} has fewer than two options")
        current = el.evaluate("s => s.selectedIndex")
        target = (current + 1) % n
        label = options.nth(target).text_content().replace("\xa0", " ").strip()
        el.select_option(index=target)
        return f"select {label!r}"
    if kind == "toggle":
        el.click()
        return "click"
    if kind == "toggle-buttons":
        button = el.locator("button:not(.mod-active)").first
        label = button.text_content().strip()
        button.click()
        return f"click {label!r}"
    if kind == "checkbox":
        el.click()
        return "click"
    if kind == "radio":
        radio = el.locator("input[type=radio]:not(:checked)").first
        radio.click()
        return "click"
    if kind == "number":
        el.focus()
        el.press("ArrowUp")
        el.press("Enter")
        return "ArrowUp Enter"
    raise AssertionError(f"no way to move a {kind}")


def slider_readout(page, control: dict) -> str:
    """What the learner reads beside a slider (its handle's own value when there is no readout)."""
    el = page.locator(f'[data-bt-control="{control["id"]}"]')
    readout = el.locator(".widget-readout")
    if readout.count():
        return readout.first.text_content().strip()
    return f"{float(el.locator('.noUi-handle').first.get_attribute('aria-valuenow')):g}"


def drag_slider(page, control: dict) -> str:
    """Drag a slider's handle quickly back and forth with the mouse, then let go."""
    el = page.locator(f'[data-bt-control="{control["id"]}"]')
    el.scroll_into_view_if_needed()
    handle = el.locator(".noUi-handle").first
    track = el.locator(".noUi-target").first
    hb, tb = handle.bounding_box(), track.bounding_box()
    y = hb["y"] + hb["height"] / 2
    was = slider_readout(page, control)
    start = (hb["x"] + hb["width"] / 2 - tb["x"]) / tb["width"]
    end = 0.65 if start < 0.5 else 0.35      # let go away from where the handle started
    page.mouse.move(hb["x"] + hb["width"] / 2, y)
    page.mouse.down()
    for frac in (0.95, 0.05, 0.8, 0.3, end):
        page.mouse.move(tb["x"] + frac * tb["width"], y, steps=8)
    page.mouse.up()
    return f"dragged ({was} -> {slider_readout(page, control)})"


def wait_settled(page, widget_id: str, quiet_ms: int = 500, timeout_ms: int = 60_000) -> str:
    """Wait until the kernel is idle and the widget's pictures stay put for ``quiet_ms``."""
    deadline = time.monotonic() + timeout_ms / 1000
    last = None
    while time.monotonic() < deadline:
        wait_idle(page, timeout_ms)
        state = output_state(page, widget_id)
        if state["decoded"] and state["signature"] == last:
            return last
        last = state["signature"]
        page.wait_for_timeout(quiet_ms)
    raise AssertionError(f"widget {widget_id}: its pictures did not settle within "
                         f"{timeout_ms / 1000:.0f} s")


def picture_digest(page, widget_id: str) -> str:
    return page.evaluate(JS_PICTURE_DIGEST, widget_id)


MAX_NOTCHES = 30          # how far check_drag steps away looking for another picture
NOTCH_WAIT_MS = 3000      # how long it waits for one notch's picture before stepping on


def check_drag(page, widget_id: str, control: dict, timeout_ms: int) -> tuple[str, str | None]:
    """Drag the slider fast; the picture it ends on must be the one of its final value.

    The one of its final value: what the widget shows after the slider is stepped away, notch by
    notch until the picture changes (neighbouring values may share a picture, as checkpoints of a
    training run do), and back by as many notches. No time is asserted.
    Returns what was done and the problem found, if any.
    """
    before = output_state(page, widget_id)["signature"]
    action = drag_slider(page, control)
    wait_settled(page, widget_id)
    final = slider_readout(page, control)
    if output_state(page, widget_id)["signature"] == before:
        return action, "the picture did not change while dragging"
    if final == action.split(" -> ")[0].split("(")[-1]:
        return action, "the drag ended on the value it started from"
    shown = picture_digest(page, widget_id)
    handle = page.locator(f'[data-bt-control="{control["id"]}"] .noUi-handle').first
    now = float(handle.get_attribute("aria-valuenow"))
    top = float(handle.get_attribute("aria-valuemax"))
    keys = ("ArrowLeft", "ArrowRight") if now >= top else ("ArrowRight", "ArrowLeft")
    away, toward = keys
    old = output_state(page, widget_id)["signature"]
    handle.focus()
    for notches in range(1, MAX_NOTCHES + 1):
        handle.press(away)
        patience = timeout_ms if notches == MAX_NOTCHES else min(timeout_ms, NOTCH_WAIT_MS)
        if wait_output_changed(page, widget_id, old, patience):
            break
    else:
        return action, (f"stepping {away} {MAX_NOTCHES} times after the drag did not change the "
                        f"picture within {timeout_ms / 1000:.0f} s")
    wait_settled(page, widget_id)
    old = output_state(page, widget_id)["signature"]
    handle.focus()
    for _ in range(notches):
        handle.press(toward)
    if not wait_output_changed(page, widget_id, old, timeout_ms):
        return action, (f"stepping {toward} {notches} times back did not change the picture "
                        f"within {timeout_ms / 1000:.0f} s")
    wait_settled(page, widget_id)
    back = slider_readout(page, control)
    if back != final:
        return action, f"stepping away and back ended on {back}, not on {final}"
    if picture_digest(page, widget_id) != shown:
        return action, (f"the picture shown after the drag is not the one of the slider's "
                        f"final value {final}")
    return action, None


def wait_output_changed(page, widget_id: str, old_signature: str, timeout_ms: int) -> bool:
    try:
        page.wait_for_function(JS_WAIT_CHANGED, arg=[widget_id, old_signature],
                               timeout=timeout_ms, polling=100)
        return True
    except Exception as exc:  # playwright's TimeoutError
        if type(exc).__name__ == "TimeoutError":
            return False
        raise


def log_entries(page) -> list[dict]:
    """Entries of the notebook's log console: ``{"kinds": [mime types], "text": str}``.

    Empty when the log console's status item shows no count (then nothing is opened).
    """
    if not page.evaluate(JS_LOG_STATUS).strip("0 "):
        return []
    return page.evaluate(JS_LOG_ENTRIES)


def describe(entry: dict) -> str:
    return f"[{', '.join(entry['kinds']) or 'no output'}] {last_lines(entry['text'])}"


# The one kind of log-console entry the test lets pass, and why.
#
# A figure (image/png, or its text/plain "<Figure size ... with N Axes>") and nothing else: with
# ipykernel 7.4, a widget comm message that arrives while the kernel is busy in another
# callback is handled at once on a second thread; the comm package fires IPython's
# post_execute event around every comm message, and matplotlib-inline's flush_figures then
# displays (and closes) every pyplot figure that exists at that moment, among them the one an
# Explorer is still drawing. That stray copy, often half drawn, has no Output widget to land
# in, so JupyterLab files it in the log console. The widget itself still shows the right
# figure (every move is checked for that). It happens in roughly one notebook run in fifteen.
# Tracebacks and stderr in the log console are never let pass.
FIGURE_REPR = re.compile(r"<Figure size \d+x\d+ with \d+ Axes>")


def stray_figure(entry: dict) -> bool:
    kinds = set(entry["kinds"])
    if not kinds or not kinds <= {"image/png", "text/plain"}:
        return False
    if "text/plain" in kinds and "image/png" not in kinds:
        return bool(FIGURE_REPR.search(entry["text"]))
    return True


def last_lines(text: str, n: int = 3) -> str:
    lines = [line for line in text.splitlines() if line.strip()]
    return " | ".join(lines[-n:])


def save_screenshot(page, widget_id: str | None, path: Path) -> None:
    """The notebook area with the first widget at the top, as a small palette PNG."""
    page.evaluate("() => { window.jupyterapp.shell.collapseLeft();"
                  " window.jupyterapp.shell.collapseRight(); }")
    if widget_id is not None:
        scroll_to_top_of(page, widget_id)
    page.evaluate("() => document.activeElement && document.activeElement.blur()")
    page.mouse.move(0, VIEWPORT["height"] - 1)
    page.wait_for_timeout(300)  # let the layout settle after the panels collapse
    path.parent.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(path))
    shrink_png(path)


def shrink_png(path: Path) -> None:
    """256 colours are plenty for a screenshot of a notebook and make the file ~4x smaller."""
    from PIL import Image

    with Image.open(path) as im:
        small = im.convert("RGB").quantize(colors=256, method=Image.Quantize.MEDIANCUT)
    small.save(path, optimize=True)


@dataclass
class NotebookRun:
    """What happened to one notebook in the browser."""

    path: str
    problems: list[str] = field(default_factory=list)
    moved: list[str] = field(default_factory=list)      # "widget 1: slider 'n' ArrowRight ..."
    seconds: dict[str, float] = field(default_factory=dict)
    widgets: int = 0
    planted: bool = False   # the self-test's notebook: its problems are put there on purpose
    tolerated: list[str] = field(default_factory=list)   # let pass, each with its reason

    @property
    def total(self) -> float:
        return sum(self.seconds.values())


def exercise_notebook(page, server: LabServer, rel_path: str, screenshot: Path | None,
                      change_timeout_ms: int = 15_000) -> NotebookRun:
    """Open, run all, move every widget control; collect every problem instead of stopping."""
    run = NotebookRun(rel_path)
    console = ConsoleLog()
    console.attach(page)
    clock = time.perf_counter()

    def lap(name: str) -> None:
        nonlocal clock
        now = time.perf_counter()
        run.seconds[name] = now - clock
        clock = now

    kernel = open_notebook(page, server, rel_path)
    if kernel != "python3":
        run.problems.append(f"the notebook opened with kernel {kernel!r}, not 'python3'")
    lap("open")

    run_all_cells(page)
    status = wait_for_run(page)
    lap("run all")
    if status != "done":
        run.problems.append(f"Run All Cells did not run every cell: {status}")

    widgets = tag_widgets(page)
    run.widgets = len(widgets)
    in_model = page.evaluate(JS_WIDGET_OUTPUTS_IN_MODEL)
    if len(widgets) != in_model:
        run.problems.append(f"{in_model} widget outputs in the cells but {len(widgets)} "
                            "widget views rendered on the page")
    if not widgets:
        run.problems.append("no widget on the page")

    for n, widget in enumerate(widgets, start=1):
        widget_locator(page, widget["id"]).scroll_into_view_if_needed()
        state = output_state(page, widget["id"])
        if not state["outputs"] or not state["images"] or not state["decoded"]:
            run.problems.append(f"widget {n}: no figure in its output area before any move "
                                f"({state['outputs']} Output widgets, {state['images']} images, "
                                f"decoded={state['decoded']})")
        movable = [c for c in widget["controls"] if not c["disabled"]]
        if not movable:
            run.problems.append(f"widget {n}: no control to move "
                                f"({len(widget['controls'])} found, all disabled)")
        # Sliders first, then the discrete controls: a mode switch may grey out a slider
        # (a shared W_K has no angle to turn), and the slider should have had its turn.
        movable.sort(key=lambda c: c["kind"] not in CONTINUOUS)
        moved_any = False
        for control in movable:
            if is_disabled(page, control):
                run.moved.append(f"widget {n}: {control['kind']} {control['label']!r} not moved: "
                                 "disabled by an earlier move")
                continue
            before = output_state(page, widget["id"])["signature"]
            action = move_control(page, control)
            what = f"widget {n}: {control['kind']} {control['label']!r} {action}"
            if wait_output_changed(page, widget["id"], before, change_timeout_ms):
                run.moved.append(what)
                moved_any = True
            else:
                run.problems.append(f"{what}: the displayed output did not change within "
                                    f"{change_timeout_ms / 1000:.0f} s")
        if movable and not moved_any:
            run.problems.append(f"widget {n}: no control changed the output")
        # Then each slider dragged fast: the picture must end on the final value's.
        for control in movable:
            if control["kind"] != "slider" or is_disabled(page, control):
                continue
            action, problem = check_drag(page, widget["id"], control, change_timeout_ms)
            what = f"widget {n}: slider {control['label']!r} {action}"
            if problem:
                run.problems.append(f"{what}: {problem}")
            else:
                run.moved.append(f"{what}: ends on the final value's picture")
    wait_idle(page)
    lap("widgets")

    for text in error_outputs(page):
        run.problems.append(f"error output on the page: {last_lines(text)}")
    if screenshot is not None:
        save_screenshot(page, widgets[0]["id"] if widgets else None, screenshot)
    for entry in log_entries(page):
        if stray_figure(entry):
            run.tolerated.append(f"log console: {describe(entry)} (a stray figure, see "
                                 "stray_figure in labdriver.py)")
        else:
            run.problems.append(f"log console: {describe(entry)}")
    for text in console.errors:
        if not tolerated(text):
            run.problems.append(f"browser {text}")
    lap("checks")
    return run


# Browser console errors the test lets pass, each with the reason. Empty: nothing is ignored.
TOLERATED_CONSOLE_ERRORS: list[tuple[str, str]] = []


def tolerated(text: str) -> bool:
    return any(fragment in text for fragment, _why in TOLERATED_CONSOLE_ERRORS)
