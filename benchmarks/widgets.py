"""How fast every control of every explorer of the course is followed, measured in a real kernel.

For each explorer (every Explorer subclass in attention_course.widgets.nbNN, found by name, so a
new notebook's explorer is measured as soon as it exists), in one IPython kernel with the inline
backend, as in a notebook: build it, display it, then step each of its controls in turn through 8
values, from the explorer's starting setting (put back, untimed, after each control), and time
each step from setting the value until the control's observers have returned, the new frame
computed, drawn and sent to the front end. A list goes through its options in order, a slider
through values spread over its range, a check box on and off, a text box through new texts.
Printed: one row per control, with the median and the slowest step in ms and whether the median
meets the goal (a control over it is marked NOT met), and the machine's load.

Held to no goal, but measured and shown: 09's free-text box (:data:`EXEMPT`), whose every new
text needs a forward pass of the model while the explorer says that it is computing. Choosing
"(free text)" in 09's sentence list is that same forward pass, so the list's row steps through
the prepared sentences only (:data:`SKIP`). A control that is disabled in the starting setting,
or has one value only, is listed and not stepped.

Usage: python benchmarks/widgets.py [--src DIR] [--steps 8] [nbNN ...]

``--src DIR`` runs the kernel on another source tree (``DIR/attention_course``), to compare two
versions side by side in one run of this script.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import textwrap
import time
from pathlib import Path

from machine import cpu_kind, load_text

ROOT = Path(__file__).resolve().parents[1]
#: The most one update may take, median over the steps, for the picture to follow a slider.
GOAL_MS = 100.0
#: Controls held to no goal: (explorer, control) -> what the table says instead.
EXEMPT = {
    ("nb09 RealModelExplorer", "text"): "exempt: a forward pass per new text",
}
#: What a control needs set first (untimed) for its steps to do what a learner's do: explorer ->
#: control -> {other control: value}. 09's text box is drawn only under "(free text)".
SETUP = {
    "nb09 RealModelExplorer": {"text": {"sentence": "free"}},
}
#: Values a control's steps leave out, measured in another row: explorer -> control -> values.
SKIP = {
    "nb09 RealModelExplorer": {"sentence": ["free"]},
}
#: What a text box is given, one new text per step (a suffix keeps them new past the list's end).
TEXTS = [
    "A dog bites a man.",
    "The children played in the park until it got dark.",
    "My sister bought a new bicycle last week.",
    "Rain fell all night, so the river rose.",
    "The teacher asked the student to read the letter aloud.",
    "Two birds sat on the fence and sang.",
    "When the bell rang, everyone left the room.",
    "The old man gave his coat to the boy because he was cold.",
]

# Plain Python (tests run it without a kernel); run_in_kernel puts the inline backend first.
KERNEL_CODE = textwrap.dedent('''
    import importlib, inspect, json, pkgutil, statistics, time, traceback
    import ipywidgets as _w
    import attention_course.widgets as _pkg
    from attention_course.widgets import Explorer as _Explorer

    def _explorers(only):
        for info in sorted(pkgutil.iter_modules(_pkg.__path__), key=lambda m: m.name):
            if not info.name.startswith("nb") or (only and info.name not in only):
                continue
            module = importlib.import_module("attention_course.widgets." + info.name)
            for name, cls in inspect.getmembers(module, inspect.isclass):
                if issubclass(cls, _Explorer) and cls.__module__ == module.__name__:
                    yield info.name, name, cls

    def _build(cls):
        params = inspect.signature(cls).parameters
        kwargs = {"lang": "en"} if "lang" in params else {}
        if "rate" in params:
            kwargs["rate"] = 1e10          # a fixed rate: no measurement inside the timing run
        return cls(**kwargs)

    def _steps(control, n, texts=(), skip=()):
        """n values for the control, each different from the one before; none of ``skip``.
        Empty when the control has one value only."""
        if isinstance(control, _w.Text):
            return [texts[k % len(texts)] + ("" if k < len(texts) else f" ({k})")
                    for k in range(n)]
        options = getattr(control, "options", None)
        if options is not None and not isinstance(control, _w.FloatLogSlider):
            values = [o[1] if isinstance(o, tuple) else o for o in options]
            values = [v for v in values if v not in skip]
            if len(values) < 2 and control.value in values:
                return []
            i = values.index(control.value) if control.value in values else -1
            return [values[(i + 1 + k) % len(values)] for k in range(n)]
        if isinstance(control.value, bool):
            return [not control.value if k % 2 == 0 else control.value for k in range(n)]
        lo, hi = control.min, control.max
        if lo == hi:
            return []
        picks = [lo + (hi - lo) * (k + 1) / (n + 1) for k in range(n)]
        if isinstance(control, _w.FloatLogSlider):
            picks = [control.base ** p for p in picks]
            lo, hi = control.base ** lo, control.base ** hi
        if isinstance(control.value, int):
            picks = [int(round(p)) for p in picks]
        out = []
        for p in picks:
            if out and p == out[-1] or (not out and p == control.value):
                p = hi if p != hi else lo
            out.append(p)
        return out

    def _set_all(explorer, values):
        # in the controls' order: a control whose range follows another's comes after it
        for key, value in values.items():
            explorer.controls[key].value = value

    def _measure_explorer(label, explorer, n_steps, setup=None, skip=None, texts=()):
        """One row per control of a shown explorer, each stepped from the starting setting."""
        setup, skip = setup or {}, skip or {}
        start = explorer.values()
        rows = []
        for key, control in explorer.controls.items():
            row = {"explorer": label, "control": key}
            try:
                _set_all(explorer, setup.get(key, {}))
                values = [] if control.disabled else _steps(control, n_steps, texts,
                                                             skip.get(key, ()))
                if control.disabled:
                    row["note"] = "disabled: not stepped"
                elif not values:
                    row["note"] = "one value only: not stepped"
                else:
                    times = []
                    for value in values:
                        begin = time.perf_counter()
                        control.value = value
                        times.append(1000 * (time.perf_counter() - begin))
                    row.update(ms=times, median=statistics.median(times), worst=max(times))
                _set_all(explorer, start)
            except Exception:
                row["error"] = traceback.format_exc(limit=3)
            rows.append(row)
        return rows

    def _measure(only, n_steps, setups, skips, texts):
        results = []
        for module, name, cls in _explorers(only):
            label = f"{module} {name}"
            try:
                explorer = _build(cls)
                explorer.show()
            except Exception:
                results.append({"explorer": label, "control": "",
                                "error": traceback.format_exc(limit=3)})
                continue
            results += _measure_explorer(label, explorer, n_steps, setups.get(label),
                                         skips.get(label), texts)
        return results
''')


def run_in_kernel(src: Path, only: list[str], steps: int, timeout: float = 600) -> list[dict]:
    from jupyter_client.manager import start_new_kernel

    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(src)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]),
        PYTHONHASHSEED="0")
    km, kc = start_new_kernel(kernel_name="python3", env=env, cwd=str(ROOT))
    try:
        code = ("%matplotlib inline\n" + KERNEL_CODE
                + f"\nprint('RESULT' + json.dumps(_measure({only!r}, {steps}, {SETUP!r}, {SKIP!r}, "
                  f"{TEXTS!r})))\n")
        out = []

        def on_output(msg):
            if msg["msg_type"] == "stream" and msg["content"]["name"] == "stdout":
                out.append(msg["content"]["text"])
            elif msg["msg_type"] == "error":
                out.append("\n".join(msg["content"]["traceback"]))

        reply = kc.execute_interactive(code, timeout=timeout, output_hook=on_output)
        text = "".join(out)
        if reply["content"]["status"] != "ok" or "RESULT" not in text:
            raise RuntimeError(f"the kernel did not run the benchmark:\n{text}")
        return json.loads(text.split("RESULT", 1)[1].strip().splitlines()[0])
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)


def verdict(row: dict) -> str:
    """What the goal column says of one control's row."""
    if "error" in row:
        return "could not be measured"
    if "note" in row:
        return row["note"]
    exempt = EXEMPT.get((row["explorer"], row["control"]))
    if exempt:
        return exempt
    return f"≤ {GOAL_MS:.0f} ms: " + ("met" if row["median"] <= GOAL_MS else "NOT met")


def table(rows: list[dict]) -> list[str]:
    """The printed table: one line per control, each error's traceback under its line, then a
    line that counts the controls held to the goal and names those over it."""
    lines = [f"{'explorer':32} {'control':12} {'steps':>5} {'median ms':>10} {'slowest ms':>11}   goal"]
    held, over = 0, []
    for row in rows:
        if "median" in row:
            numbers = f"{len(row['ms']):5d} {row['median']:10.1f} {row['worst']:11.1f}"
        else:
            numbers = f"{'—':>5} {'—':>10} {'—':>11}"
        lines.append(f"{row['explorer']:32} {row['control']:12} {numbers}   {verdict(row)}")
        if "error" in row:
            lines.append(textwrap.indent(row["error"].rstrip(), "    "))
        elif "median" in row and (row["explorer"], row["control"]) not in EXEMPT:
            held += 1
            if row["median"] > GOAL_MS:
                over.append(f"{row['explorer']} {row['control']}")
    lines.append(f"median ≤ {GOAL_MS:.0f} ms: met by {held - len(over)} of the {held} controls held "
                 "to it" + (f"; NOT met by {', '.join(over)}" if over else ""))
    return lines


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--src", type=Path, default=ROOT / "src",
                        help="source tree the kernel imports attention_course from")
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("only", nargs="*", help="notebooks to measure, e.g. nb04 (default: all)")
    args = parser.parse_args(argv)

    print(f"explorers in a kernel with the inline backend: {args.steps} steps of every control; "
          f"from {args.src}")
    print(f"CPU: {cpu_kind()}; load before: {load_text()}")
    start = time.perf_counter()
    rows = run_in_kernel(args.src.resolve(), args.only, args.steps)
    print("\n".join(table(rows)))
    print(f"load after: {load_text()}; {time.perf_counter() - start:.0f} s in all")
    return 1 if any("error" in row for row in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
