"""JupyterHub for a whole class on one machine: the course's hub, as ``make test-classroom`` runs it.

Start it as root (LocalProcessSpawner starts each learner's server as that learner's Unix user)::

    export CLASSROOM_STUDENT_PASSWORD=...  CLASSROOM_ADMIN_PASSWORD=...   # see below
    /opt/attention-classroom/venv/bin/jupyterhub -f classroom/jupyterhub_config.py

Every setting a deployment changes is read from an environment variable, so this file is used as it
is, by the test too:

=================================  =============================================================
CLASSROOM_HUB_IP / _PORT           where learners connect; default 127.0.0.1:8000 (loopback: put
                                   a TLS reverse proxy in front before opening it to a network)
CLASSROOM_HUB_API_PORT             the hub's internal API (default 8081, loopback)
CLASSROOM_PROXY_API_PORT           configurable-http-proxy's API (default 8001, loopback)
CLASSROOM_STATE                    the hub's database and cookie secret (default
                                   /srv/attention-classroom), readable by root only
CLASSROOM_INSTRUCTOR               the instructor's Unix user name, the hub's one admin
                                   (default ``instructor``)
CLASSROOM_STUDENTS                 the students' Unix user names, separated by commas or spaces;
                                   or CLASSROOM_ROSTER, a file with one name per line
                                   (default <CLASSROOM_STATE>/students.txt)
CLASSROOM_STUDENT_PASSWORD         the students' shared password (8 characters or more)
CLASSROOM_ADMIN_PASSWORD           the instructor's password (32 characters or more, different)
=================================  =============================================================

The authenticator is JupyterHub's SharedPasswordAuthenticator: fit for a first try or a workshop
on a closed network, not for a term. Anyone who knows the students' password can log in as any
student on the roster. For a term, use PAM (each Unix user's own password:
``c.JupyterHub.authenticator_class = "pam"``) or the school's single sign-on (OAuthenticator);
nothing else here changes.
"""

import os
import sys

c = get_config()  # noqa: F821 (provided by traitlets when it loads this file)

env = os.environ.get
VENV_BIN = os.path.dirname(os.path.abspath(sys.executable))   # the hub's environment: the course's
STATE = env("CLASSROOM_STATE", "/srv/attention-classroom")

# --- Network: loopback unless told otherwise ---------------------------------------------------
c.JupyterHub.ip = env("CLASSROOM_HUB_IP", "127.0.0.1")
c.JupyterHub.port = int(env("CLASSROOM_HUB_PORT", "8000"))
c.JupyterHub.hub_ip = "127.0.0.1"
c.JupyterHub.hub_port = int(env("CLASSROOM_HUB_API_PORT", "8081"))
c.ConfigurableHTTPProxy.api_url = f"http://127.0.0.1:{env('CLASSROOM_PROXY_API_PORT', '8001')}"
c.ConfigurableHTTPProxy.command = [os.path.join(VENV_BIN, "configurable-http-proxy")]

# --- State: the database and the cookie secret, out of the course's checkout ------------------
os.makedirs(STATE, mode=0o700, exist_ok=True)
c.JupyterHub.db_url = f"sqlite:///{os.path.join(STATE, 'jupyterhub.sqlite')}"
c.JupyterHub.cookie_secret_file = os.path.join(STATE, "jupyterhub_cookie_secret")
c.JupyterHub.pid_file = os.path.join(STATE, "jupyterhub.pid")
c.ConfigurableHTTPProxy.pid_file = os.path.join(STATE, "jupyterhub-proxy.pid")

# --- Who may log in ----------------------------------------------------------------------------
instructor = env("CLASSROOM_INSTRUCTOR", "instructor")
students = env("CLASSROOM_STUDENTS")
if students is None:
    roster = env("CLASSROOM_ROSTER", os.path.join(STATE, "students.txt"))
    students = open(roster, encoding="utf-8").read() if os.path.exists(roster) else ""
students = {name for name in students.replace(",", " ").split() if not name.startswith("#")}

for var, least in (("CLASSROOM_STUDENT_PASSWORD", 8), ("CLASSROOM_ADMIN_PASSWORD", 32)):
    if len(env(var) or "") < least:
        raise SystemExit(f"jupyterhub_config.py: set {var} to a password of at least {least} characters"
                         f" (got {len(env(var) or '')}); see the table at the top of this file")
if not students:
    raise SystemExit("jupyterhub_config.py: no students: set CLASSROOM_STUDENTS, or list them in"
                     f" {env('CLASSROOM_ROSTER', os.path.join(STATE, 'students.txt'))}, one name per line")

c.JupyterHub.authenticator_class = "shared-password"
c.SharedPasswordAuthenticator.user_password = env("CLASSROOM_STUDENT_PASSWORD")
c.SharedPasswordAuthenticator.admin_password = env("CLASSROOM_ADMIN_PASSWORD")
c.Authenticator.admin_users = {instructor}
# Only the roster (and the instructor): the shared password alone must not create new accounts.
c.Authenticator.allowed_users = students | {instructor}
c.Authenticator.allow_all = False

# --- Each user's server: their own Unix user, the course's environment -------------------------
c.JupyterHub.spawner_class = "localprocess"
c.Spawner.cmd = [os.path.join(VENV_BIN, "jupyterhub-singleuser")]
c.Spawner.default_url = "/lab"
c.Spawner.notebook_dir = "~"
# nbgrader runs `alembic` by name, and the learners' terminals need `nbgrader` and `python`: the
# environment's bin/ comes first on every server's PATH.
c.Spawner.environment = {
    "PATH": os.pathsep.join([VENV_BIN, "/usr/local/bin", "/usr/bin", "/bin"]),
    "PYTHONHASHSEED": "0",
}
# A server takes about 10 s to start on two busy cores; give a whole class starting at once room.
c.Spawner.start_timeout = 120
c.Spawner.http_timeout = 120
# Servers left idle keep their memory; the hub's own culler is a separate service (jupyterhub-idle-
# culler) and is not needed for a class that logs out at the end of the lesson.
c.JupyterHub.shutdown_on_logout = True
