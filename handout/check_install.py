"""make test: is the course installed, and does every notebook run?

It imports the library, then runs every notebook in notebooks/ from top to bottom in a fresh kernel,
without saving anything. A check cell may stop: with NotImplementedError while its exercise is not
answered yet, or with the check's message while the answer is wrong. A cell after it that uses the
learner's function (07 trains with your own Adam step, 08 draws with your own scores) may stop with
NotImplementedError too while that exercise is not answered. Any other cell that stops means the
installation is broken: this script names it and exits with status 1.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
LANG = "@LANG@"

TEXT = {
    "en": {
        "library": "attention_course {version} imported from {path}",
        # Both forms: Windows' shells cannot run the POSIX one (Command Prompt has no rm, Windows
        # PowerShell 5 no &&).
        "no_library": "the library attention_course does not import ({error}): run make test again; "
                      "if it still fails, delete the folder .venv and set it up again. "
                      "macOS, Linux: rm -rf .venv && make test. Windows: rmdir /s /q .venv "
                      "(Command Prompt) or Remove-Item -Recurse -Force .venv (PowerShell), then the "
                      "steps of README.md without make.",
        "line": "{status:<5} {name}  {seconds:5.1f} s  {n} check cells: {todo} not answered yet "
                "(NotImplementedError), {passed} passed, {wrong} rejected your answer",
        "ok": "ok", "fail": "FAIL",
        "broken": "      cell {index} from the top stopped with {ename}: {evalue}\n      {first_line}",
        "done": "The installation works: every notebook runs; only exercise checks stopped.",
        "failed": "{n} cell(s) outside the exercise checks stopped: the installation is broken.",
    },
    "zh": {
        "library": "已导入 attention_course {version}，位置：{path}",
        "no_library": "无法导入课程库 attention_course（{error}）：请重新运行 make test；"
                      "还是不行的话，删除文件夹 .venv 后重新安装。macOS、Linux：rm -rf .venv && make test。"
                      "Windows：rmdir /s /q .venv（命令提示符）或 Remove-Item -Recurse -Force .venv"
                      "（PowerShell），然后按 README.zh-CN.md 里不用 make 的步骤安装。",
        "line": "{status:<5} {name}  {seconds:5.1f} 秒  检查单元格 {n} 个：未作答 {todo} 个"
                "（NotImplementedError），已通过 {passed} 个，答案未通过 {wrong} 个",
        "ok": "正常", "fail": "出错",
        "broken": "      从上往下第 {index} 个单元格出错，{ename}：{evalue}\n      {first_line}",
        "done": "安装正常：每本 notebook 都能运行，停下的只有练习的检查单元格。",
        "failed": "练习检查以外有 {n} 个单元格出错：安装有问题。",
    },
}[LANG if LANG in ("en", "zh") else "en"]


def _unanswered(error) -> bool:
    """Whether a stored error is an exercise stub's ``NotImplementedError``."""
    return error.ename == "NotImplementedError" or any(
        "NotImplementedError" in line for line in error.traceback)


def run(path: Path) -> dict:
    """Execute one notebook in memory; sort the cells that stopped into check cells and others."""
    import nbformat
    from nbclient import NotebookClient, output_widget

    # An Output widget's state echo can stall a headless run (jupyter/nbclient#312); not needed here.
    output_widget.OutputWidget.sync_state = lambda self: None
    nb = nbformat.read(path, as_version=4)
    start = time.perf_counter()
    # The kernel's own log stays at errors: its warning that local TCP is unencrypted says nothing
    # to a learner checking an installation, seven times over.
    NotebookClient(nb, timeout=300, kernel_name="python3", allow_errors=True,
                   extra_arguments=["--IPKernelApp.log_level=ERROR"],
                   resources={"metadata": {"path": str(path.parent)}}).execute()
    result = {"seconds": time.perf_counter() - start, "n": 0, "todo": 0, "passed": 0, "wrong": 0,
              "broken": []}
    for index, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        is_check = cell.metadata.get("nbgrader", {}).get("grade", False)
        errors = [o for o in cell.outputs if o.output_type == "error"]
        if is_check:
            result["n"] += 1
            if not errors:
                result["passed"] += 1
            elif _unanswered(errors[0]):
                result["todo"] += 1
            else:
                result["wrong"] += 1
        elif errors and _unanswered(errors[0]):
            continue                       # uses the learner's function, not written yet
        elif errors:
            first = next((line for line in cell.source.splitlines() if line.strip()), "")
            result["broken"].append(dict(index=index + 1, ename=errors[0].ename,
                                         evalue=errors[0].evalue.splitlines()[0][:200]
                                         if errors[0].evalue else "", first_line=first[:100]))
    return result


def main() -> int:
    try:
        from importlib.metadata import version

        import attention_course
    except Exception as error:  # what the learner sees first when the installation failed
        print(TEXT["no_library"].format(error=error))
        return 1
    print(TEXT["library"].format(version=version("attention_course"),
                                 path=Path(attention_course.__file__).parent))
    notebooks = sorted(HERE.glob("notebooks/*/*.ipynb"))
    totals = {"n": 0, "todo": 0, "passed": 0, "wrong": 0, "broken": 0}
    for path in notebooks:
        r = run(path)
        status = TEXT["fail"] if r["broken"] else TEXT["ok"]
        print(TEXT["line"].format(status=status, name=path.name, **{k: v for k, v in r.items()
                                                                   if k != "broken"}), flush=True)
        for b in r["broken"]:
            print(TEXT["broken"].format(**b))
        for k in ("n", "todo", "passed", "wrong"):
            totals[k] += r[k]
        totals["broken"] += len(r["broken"])
    # One line that reads the same in every language, for scripts.
    print(f"summary: notebooks={len(notebooks)} check_cells={totals['n']} "
          f"not_answered={totals['todo']} passed={totals['passed']} rejected={totals['wrong']} "
          f"errors_elsewhere={totals['broken']}")
    if totals["broken"] or not notebooks:
        print(TEXT["failed"].format(n=totals["broken"]))
        return 1
    print(TEXT["done"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
