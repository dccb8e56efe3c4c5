"""How fast every explorer of the course follows its controls, measured in a real kernel.

For each explorer (every Explorer subclass in attention_course.widgets.nbNN, found by name, so a
new notebook's explorer is measured as soon as it exists), in one IPython kernel with the inline
backend, as in a notebook: build it, display it, then step one control through 8 values (its
first slider, else its first control) and time each step from setting the value until the
control's observers have returned, the new frame computed, drawn and sent to the front end.
Printed: the median and the slowest step per explorer, in ms, with the machine's load.

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

KERNEL_CODE = textwrap.dedent('''
    %matplotlib inline
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

    def _steps(control, n):
        """n values for the control, each different from the one before."""
        options = getattr(control, "options", None)
        if options is not None and not isinstance(control, _w.FloatLogSlider):
            values = [o[1] if isinstance(o, tuple) else o for o in options]
            i = values.index(control.value)
            return [values[(i + 1 + k) % len(values)] for k in range(n)]
        if isinstance(control.value, bool):
            return [not control.value if k % 2 == 0 else control.value for k in range(n)]
        lo, hi = control.min, control.max
        picks = [lo + (hi - lo) * (k + 1) / (n + 1) for k in range(n)]
        if isinstance(control, _w.FloatLogSlider):
            picks = [control.base ** p for p in picks]
        if isinstance(control.value, int):
            picks = [int(round(p)) for p in picks]
        out = []
        for p in picks:
            if out and p == out[-1] or (not out and p == control.value):
                p = hi if p != hi else lo
            out.append(p)
        return out

    def _pick(explorer):
        sliders = [k for k, c in explorer.controls.items()
                   if isinstance(c, (_w.IntSlider, _w.FloatSlider, _w.FloatLogSlider,
                                     _w.SelectionSlider)) and not c.disabled]
        movable = [k for k, c in explorer.controls.items() if not c.disabled]
        return (sliders or movable)[0]

    def _measure(only, n_steps):
        results = []
        for module, name, cls in _explorers(only):
            row = {"explorer": f"{module} {name}"}
            try:
                explorer = _build(cls)
                explorer.show()
                key = _pick(explorer)
                control = explorer.controls[key]
                times = []
                for value in _steps(control, n_steps):
                    start = time.perf_counter()
                    control.value = value
                    times.append(1000 * (time.perf_counter() - start))
                row.update(control=key, ms=times, median=statistics.median(times),
                           worst=max(times))
            except Exception:
                row["error"] = traceback.format_exc(limit=3)
            results.append(row)
        return results
''')






def run_in_kernel(src: Path, only: list[str], steps: int, timeout: float = 600) -> list[dict]:
    from jupyter_client.manager import start_new_kernel

    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(src)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]),
        PYTHONHASHSEED="0")
    km, kc = start_new_kernel(kernel_name="python3", env=env, cwd=str(ROOT))
    try:
        code = KERNEL_CODE + f"\nprint('RESULT' + json.dumps(_measure({only!r}, {steps})))\n"
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


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--src", type=Path, default=ROOT / "src",
                        help="source tree the kernel imports attention_course from")
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("only", nargs="*", help="notebooks to measure, e.g. nb04 (default: all)")
    args = parser.parse_args(argv)

    print(f"explorers in a kernel with the inline backend: {args.steps} steps of one control; "
          f"from {args.src}")
    print(f"CPU: {cpu_kind()}; load before: {load_text()}")
    start = time.perf_counter()
    rows = run_in_kernel(args.src.resolve(), args.only, args.steps)
    failed = 0
    print(f"{'explorer':36} {'control':12} {'median ms':>10} {'slowest ms':>11}   goal")
    for row in rows:
        if "error" in row:
            failed += 1
            print(f"{row['explorer']:36} could not be measured:\n"
                  + textwrap.indent(row["error"], "    "))
            continue
        verdict = (f"≤ {GOAL_MS:.0f} ms: " + ("met" if row["median"] <= GOAL_MS else "NOT met"))
        print(f"{row['explorer']:36} {row['control']:12} {row['median']:10.1f} "
              f"{row['worst']:11.1f}   {verdict}")
    print(f"load after: {load_text()}; {time.perf_counter() - start:.0f} s in all")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
