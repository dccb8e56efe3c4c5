# -*- coding: utf-8 -*-  # noqa: UP009  (Python 2 reads the Chinese below only with it)
"""Can this Python make the course's venv? Checked before anything is created.

Without it, a Python outside the supported range created .venv and then failed inside pip with
"requires a different Python", and a Debian or Ubuntu Python without the python3-venv package
left a .venv without pip behind. make setup, make lab and make test run it with $(PYTHON) before
they create .venv, and with the venv's own Python (--venv) before they install into a venv made
earlier. The hand-out ships it as check_python.py, first step of its route without make.

It has to run on the Pythons it turns away, so it is written for every Python from 2.7 on: no
f-strings, no annotations, nothing imported that an old Python lacks.

    python3 check_python.py              # status 0: this Python will do; 1: the message says what to do
    .venv/bin/python check_python.py --venv .venv     # the same for the venv this Python belongs to
"""

import os
import sys

# pyproject.toml's requires-python, ">=3.10,<3.14" (tests/test_check_python.py checks they agree).
OLDEST = (3, 10)
NEWEST = (3, 13)


def supported():
    return ["%d.%d" % (OLDEST[0], minor) for minor in range(OLDEST[1], NEWEST[1] + 1)]  # noqa: UP031


def newest():
    return "%d.%d" % NEWEST  # noqa: UP031


def how_to_pick():
    """What to run instead, in both languages: with make, without make, on Windows, with pyenv."""
    py = newest()
    return [
        "Pick one of them:",
        "  with make:     make lab PYTHON=python" + py + "   (or make test PYTHON=python" + py + ")",
        "  without make:  python" + py + " -m venv .venv   (Windows: py -" + py + " -m venv .venv;"
        " py --list shows the Pythons installed)",
        "  with pyenv:    pyenv install " + py + ", then make lab PYTHON=\"$(pyenv prefix " + py
        + ")/bin/python\"",
        "If none is installed: python.org/downloads, your system's packages, or pyenv.",
        "",
        "请换用其中一个：",
        "  用 make：      make lab PYTHON=python" + py + "（或者 make test PYTHON=python" + py + "）",
        "  不用 make：    python" + py + " -m venv .venv（Windows：py -" + py + " -m venv .venv；"
        "py --list 列出已安装的 Python）",
        "  用 pyenv：     pyenv install " + py + "，然后 make lab PYTHON=\"$(pyenv prefix " + py
        + ")/bin/python\"",
        "如果一个都没有装：可以从 python.org/downloads、系统的软件包或 pyenv 安装。",
    ]


def how_to_remove(venv):
    return [
        "Delete the folder " + venv + " and make it again: rm -rf " + venv + " (macOS, Linux);"
        " rmdir /s /q " + venv + " (Windows, Command Prompt); Remove-Item -Recurse -Force " + venv
        + " (Windows, PowerShell).",
        "删除文件夹 " + venv + " 后重新创建：rm -rf " + venv + "（macOS、Linux）；rmdir /s /q " + venv
        + "（Windows 命令提示符）；Remove-Item -Recurse -Force " + venv + "（Windows PowerShell）。",
    ]


def problems(version, executable, venv=None, has_module=None):
    """The lines to print for a Python of ``version`` (sys.version_info) at ``executable``, or []
    when it will do. ``venv``: the venv folder this Python belongs to, made earlier."""
    here = ".".join(str(part) for part in version[:3]) + " (" + executable + ")"
    names = ", ".join(supported())
    span = supported()[0] + "-" + supported()[-1]
    if not OLDEST <= tuple(version[:2]) <= NEWEST:
        lines = ["This is Python " + here + "; the course needs Python " + span + " (" + names + ").",
                 "这是 Python " + here + "；本课程需要 Python " + span + "（" + "、".join(supported())
                 + "）。"]
        if venv:
            return lines + [""] + how_to_remove(venv) + [""] + how_to_pick()
        return lines + ["Nothing was created. 什么都还没有创建。", ""] + how_to_pick()
    if has_module is None:
        has_module = module_exists
    if venv and not has_module("pip"):
        return ["The venv " + venv + " has no pip: it was made when venv could not install pip"
                " (on Debian and Ubuntu, without the package python3-venv).",
                "venv " + venv + " 里没有 pip：创建它时 venv 没能装上 pip（在 Debian 和 Ubuntu 上是因为缺少"
                " python3-venv 软件包）。", ""] + how_to_remove(venv)
    if not venv and not has_module("ensurepip"):
        package = "python%d.%d-venv" % tuple(version[:2])  # noqa: UP031
        return ["Python " + here + " cannot make a venv with pip: its module ensurepip is missing.",
                "On Debian and Ubuntu it comes in a package of its own: sudo apt install python3-venv"
                " (for this very version: sudo apt install " + package + ").",
                "Python " + here + " 无法创建带 pip 的 venv：缺少 ensurepip 模块。",
                "在 Debian 和 Ubuntu 上它在单独的软件包里：sudo apt install python3-venv"
                "（对应这个版本的是 sudo apt install " + package + "）。",
                "Nothing was created. 什么都还没有创建。"]
    return []


def module_exists(name):
    import importlib.util

    return importlib.util.find_spec(name) is not None


def write(text):
    """To stderr, even where its encoding cannot show Chinese (Python 3.6 in the C locale)."""
    stream = sys.stderr
    try:
        stream.write(text)
    except UnicodeEncodeError:
        encoding = getattr(stream, "encoding", None) or "ascii"
        stream.write(text.encode(encoding, "replace").decode(encoding))
    stream.flush()


def main(argv):
    venv = None
    if len(argv) == 2 and argv[0] == "--venv":
        venv = argv[1]
    elif argv:
        write("usage: check_python.py [--venv FOLDER]\n")
        return 2
    lines = problems(sys.version_info, os.path.abspath(sys.executable), venv)
    if lines:
        write("\n".join(lines) + "\n")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
