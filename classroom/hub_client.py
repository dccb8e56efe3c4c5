"""What the classroom test and the load benchmark share: throwaway Unix users, a hub started from
``classroom/jupyterhub_config.py``, and users who log in through the hub and run code in their own
server's kernel.

Everything goes through the hub as a learner's browser would: the login form (SharedPassword-
Authenticator), then a token the user makes for themself with that session, then the hub's REST API
(start the server) and the single-user server's REST and kernel WebSocket API, through the proxy.
Nothing here disables a token or a password.

Runs as root (useradd, and JupyterHub's LocalProcessSpawner needs it), with the classroom
environment's Python (``/opt/attention-classroom/venv/bin/python``), which has requests,
websocket-client and psutil.
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
import tempfile
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import psutil
import requests
import websocket

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
VENV = Path(os.environ.get("PREFIX", "/opt/attention-classroom")) / "venv"
RECV_WAKE = 10.0   # seconds a kernel channel may stay silent before the client asks after the kernel


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Users:
    """Throwaway Unix users named ``<prefix><role>``; ``remove()`` ends their processes and deletes them."""

    def __init__(self, prefix: str):
        self.prefix = prefix
        self.names: list[str] = []

    def add(self, role: str) -> str:
        name = f"{self.prefix}{role}"
        if len(name) > 32:
            raise ValueError(f"user name {name!r} longer than 32 characters")
        subprocess.run(["useradd", "--create-home", "--shell", "/bin/bash", name], check=True)
        self.names.append(name)
        home = Path(f"/home/{name}")
        home.chmod(0o700)   # a student's work, and the instructor's solutions, are theirs alone
        return name

    def kill_processes(self) -> None:
        uids = set()
        for name in self.names:
            try:
                uids.add(int(subprocess.run(["id", "-u", name], capture_output=True, text=True,
                                            encoding="utf-8", check=True).stdout))
            except (subprocess.CalledProcessError, ValueError):
                pass
        procs = [p for p in psutil.process_iter(["uids"]) if p.info["uids"] and p.info["uids"].real in uids]
        for p in procs:
            try:
                p.kill()
            except psutil.Error:
                pass
        psutil.wait_procs(procs, timeout=10)

    def remove(self) -> None:
        self.kill_processes()
        for name in reversed(self.names):
            subprocess.run(["userdel", "--remove", name], capture_output=True)
        self.names.clear()


def new_prefix(word: str) -> str:
    """A unique, short user-name prefix: ``<word><4 hex>-``."""
    return f"{word}{uuid.uuid4().hex[:4]}-"


class Hub:
    """JupyterHub with classroom/jupyterhub_config.py on free loopback ports, state in a temp folder."""

    def __init__(self, instructor: str, students: list[str], log: Path | None = None):
        self.state = Path(tempfile.mkdtemp(prefix="attention-classroom-hub-"))
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.student_password = secrets.token_urlsafe(12)
        self.admin_password = secrets.token_urlsafe(36)
        self.instructor = instructor
        self.log_path = log or self.state / "jupyterhub.log"
        self.env = dict(
            os.environ,
            PATH=os.pathsep.join([str(VENV / "bin"), "/usr/local/sbin", "/usr/local/bin", "/usr/sbin",
                                  "/usr/bin", "/sbin", "/bin"]),
            CLASSROOM_HUB_PORT=str(self.port),
            CLASSROOM_HUB_API_PORT=str(free_port()),
            CLASSROOM_PROXY_API_PORT=str(free_port()),
            CLASSROOM_STATE=str(self.state),
            CLASSROOM_INSTRUCTOR=instructor,
            CLASSROOM_STUDENTS=",".join(students),
            CLASSROOM_STUDENT_PASSWORD=self.student_password,
            CLASSROOM_ADMIN_PASSWORD=self.admin_password,
        )
        self.proc: subprocess.Popen | None = None

    def start(self, timeout: float = 60) -> float:
        """Start the hub; return the seconds until its API answered."""
        t0 = time.monotonic()
        self._log = open(self.log_path, "w", encoding="utf-8")
        self.proc = subprocess.Popen(
            [str(VENV / "bin" / "jupyterhub"), "-f", str(HERE / "jupyterhub_config.py")],
            cwd=self.state, env=self.env, stdout=self._log, stderr=subprocess.STDOUT,
            start_new_session=True)
        while time.monotonic() - t0 < timeout:
            if self.proc.poll() is not None:
                raise RuntimeError(f"the hub exited ({self.proc.returncode}):\n{self.log_tail()}")
            try:
                if requests.get(f"{self.url}/hub/api/", timeout=2).status_code == 200:
                    return time.monotonic() - t0
            except requests.RequestException:
                pass
            time.sleep(0.3)
        raise RuntimeError(f"the hub did not answer in {timeout} s:\n{self.log_tail()}")

    def log_tail(self, n: int = 40) -> str:
        try:
            return "\n".join(self.log_path.read_text(encoding="utf-8", errors="replace").splitlines()[-n:])
        except OSError:
            return ""

    def log_lines(self, pattern: str, n: int = 40) -> list[str]:
        """The last ``n`` lines of the hub's log (the servers' too) that match ``pattern``."""
        try:
            lines = self.log_path.read_text(encoding="utf-8", errors="replace").splitlines()
        except OSError:
            return []
        return [line[:300] for line in lines if re.search(pattern, line)][-n:]

    def stop(self) -> None:
        """Stop the hub (it stops the servers and the proxy it started), then whatever is left."""
        if self.proc is not None and self.proc.poll() is None:
            try:
                children = psutil.Process(self.proc.pid).children(recursive=True)
            except psutil.Error:
                children = []
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
            for p in children:
                try:
                    p.kill()
                except psutil.Error:
                    pass
            # configurable-http-proxy is in the hub's session; so is anything else it started
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        if getattr(self, "_log", None):
            self._log.close()
        shutil.rmtree(self.state, ignore_errors=True)

    def password_for(self, name: str) -> str:
        return self.admin_password if name == self.instructor else self.student_password


class _NotStarted(Exception):
    """The kernel went away before it began on the code sent (the cause is chained)."""


class Learner:
    """One user logged in through the hub's form, with a token of their own."""

    def __init__(self, hub: Hub, name: str):
        self.hub, self.name = hub, name
        self.session = requests.Session()
        self.token: str | None = None
        self.kernel_id: str | None = None
        self._ws: websocket.WebSocket | None = None
        self._used = 0.0   # when the kernel channel last carried a message
        self.kernel_losses: list[str] = []

    # --- the hub -----------------------------------------------------------------------------
    def login(self, password: str | None = None) -> requests.Response:
        """Log in through the hub's login form, as a browser does (the form's XSRF cookie included)."""
        s = self.session
        s.get(f"{self.hub.url}/hub/login", timeout=30)
        xsrf = s.cookies.get("_xsrf")
        return s.post(f"{self.hub.url}/hub/login?next=", timeout=60, allow_redirects=False,
                      data={"username": self.name, "password": password or self.hub.password_for(self.name),
                            "_xsrf": xsrf})

    def make_token(self) -> str:
        """A token for the REST APIs, made with the logged-in session (what the hub's token page does)."""
        r = self.session.post(f"{self.hub.url}/hub/api/users/{self.name}/tokens", timeout=30,
                              headers={"X-XSRFToken": self.session.cookies.get("_xsrf", "")},
                              json={"note": "classroom test", "expires_in": 3600})
        r.raise_for_status()
        self.token = r.json()["token"]
        return self.token

    @property
    def auth(self) -> dict:
        return {"Authorization": f"token {self.token}"}

    def hub_api(self, method: str, path: str, **kw) -> requests.Response:
        return requests.request(method, f"{self.hub.url}/hub/api{path}", headers=self.auth, timeout=60, **kw)

    def start_server(self) -> None:
        r = self.hub_api("POST", f"/users/{self.name}/server")
        if r.status_code not in (201, 202):
            raise RuntimeError(f"{self.name}: starting the server answered {r.status_code}: {r.text[:300]}")

    def wait_ready(self, timeout: float = 300) -> None:
        t0 = time.monotonic()
        while time.monotonic() - t0 < timeout:
            r = self.hub_api("GET", f"/users/{self.name}")
            server = r.json().get("servers", {}).get("", {})
            if server.get("ready"):
                return
            if not server.get("pending") and not server:
                raise RuntimeError(f"{self.name}: the server stopped while starting")
            time.sleep(0.5)
        raise TimeoutError(f"{self.name}: the server was not ready after {timeout} s")

    # --- the user's own server ---------------------------------------------------------------
    def server_url(self, path: str = "", user: str | None = None) -> str:
        return f"{self.hub.url}/user/{user or self.name}/{path}"

    def start_kernel(self) -> str:
        r = requests.post(self.server_url("api/kernels"), headers=self.auth, json={"name": "python3"},
                          timeout=60)
        r.raise_for_status()
        self.kernel_id = r.json()["id"]
        self._connect()
        return self.kernel_id

    def _kernel_known(self) -> bool:
        """Whether this user's server still has the kernel (False once it answers 404)."""
        r = requests.get(self.server_url(f"api/kernels/{self.kernel_id}"), headers=self.auth, timeout=60)
        return r.status_code != 404

    def _connect(self) -> None:
        ws_url = self.server_url(f"api/kernels/{self.kernel_id}/channels").replace("http://", "ws://")
        # recv wakes every RECV_WAKE s to see whether the kernel is still there (``run``)
        self._ws = websocket.create_connection(ws_url, header=[f"Authorization: token {self.token}"],
                                               timeout=300)
        self._ws.settimeout(RECV_WAKE)
        self._used = time.monotonic()

    def run(self, code: str, timeout: float = 300) -> tuple[str, str | None]:
        """Execute ``code`` in this user's kernel; return (stdout + stderr, error text or None).

        If the kernel is gone before it began on ``code`` (its channel closed, or the server no
        longer knows it: the server removes a kernel that died and could not be restarted), the
        code runs once in a new kernel, as a learner would restart one in JupyterLab; the loss is
        kept in ``kernel_losses`` for the test to report. Code the kernel had begun is never rerun.
        """
        try:
            return self._run_once(code, timeout)
        except _NotStarted as lost:
            self.kernel_losses.append(f"{self.name}: kernel {self.kernel_id} lost before it ran the"
                                      f" code ({lost.__cause__!r}); a new kernel ran it")
            self.close()
            self.kernel_id = None
            return self._run_once(code, timeout)

    def _run_once(self, code: str, timeout: float) -> tuple[str, str | None]:
        try:
            if self._ws is None:
                if self.kernel_id is None:
                    self.start_kernel()
                else:
                    self._connect()
            elif time.monotonic() - self._used > 20:
                # The server pings an open channel and closes it when no pong comes; this client
                # answers pings only while it reads. After a pause, a new connection to the kernel.
                self.close()
                self._connect()
        except websocket.WebSocketBadStatusException as e:
            if e.status_code == 404:
                raise _NotStarted() from e
            raise
        msg_id = uuid.uuid4().hex
        try:
            self._ws.send(json.dumps({
                "header": {"msg_id": msg_id, "username": self.name, "session": uuid.uuid4().hex,
                           "msg_type": "execute_request", "version": "5.3"},
                "parent_header": {}, "metadata": {}, "channel": "shell",
                "content": {"code": code, "silent": False, "store_history": False,
                            "user_expressions": {}, "allow_stdin": False, "stop_on_error": True}}))
        except (websocket.WebSocketConnectionClosedException, OSError) as e:
            if self._kernel_known():
                raise
            raise _NotStarted() from e
        out, error, replied, idle, began = [], None, False, False, False
        t0 = time.monotonic()
        while not (replied and idle):
            if time.monotonic() - t0 > timeout:
                raise TimeoutError(f"{self.name}: no reply after {timeout} s; output so far: {''.join(out)}")
            try:
                msg = json.loads(self._ws.recv())
            except websocket.WebSocketTimeoutException as e:
                # A channel to a kernel that was removed may stay open, silent: ask the server.
                if not began and not self._kernel_known():
                    raise _NotStarted() from e
                continue
            except websocket.WebSocketConnectionClosedException as e:
                if began or self._kernel_known():
                    raise   # it may have begun, or may still run: never run it twice
                raise _NotStarted() from e
            self._used = time.monotonic()
            if msg.get("parent_header", {}).get("msg_id") != msg_id:
                continue
            began = True
            kind, content = msg["msg_type"], msg["content"]
            if kind == "stream":
                out.append(content["text"])
            elif kind == "error":
                error = f"{content['ename']}: {content['evalue']}"
                out.append("\n".join(content.get("traceback", [])))
            elif kind == "execute_reply":
                replied = True
                if content.get("status") == "error" and error is None:
                    error = f"{content.get('ename')}: {content.get('evalue')}"
            elif kind == "status" and content["execution_state"] == "idle":
                idle = True
        return "".join(out), error

    def close(self) -> None:
        if self._ws is not None:
            try:
                self._ws.close()
            except Exception:  # noqa: BLE001 (closing a socket on the way out)
                pass
            self._ws = None


def parallel(fn, items, workers: int | None = None) -> list:
    """``fn`` on every item at once (threads); returns results or exceptions, in order."""
    def guarded(item):
        try:
            return fn(item)
        except Exception as e:  # noqa: BLE001 (reported by the caller, per user)
            return e
    pool = ThreadPoolExecutor(max_workers=workers or max(1, len(items)))
    try:
        return list(pool.map(guarded, items))
    finally:
        # On an interrupt, do not wait for the workers: the caller's clean-up stops the hub, and
        # their connections then fail.
        pool.shutdown(wait=False, cancel_futures=True)


def require_root() -> None:
    if os.geteuid() != 0:
        print("this needs root: it creates Unix users and starts JupyterHub, which starts each user's"
              " server as that user", file=sys.stderr)
        sys.exit(2)
