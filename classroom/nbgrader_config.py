"""Course-wide nbgrader settings for a classroom hub: what every user's nbgrader reads.

``classroom/install.sh`` puts this file in the hub environment's system-wide Jupyter folder
(``<venv>/etc/jupyter/nbgrader_config.py``) and, beside it, the repository's own
``nbgrader_config.py`` as ``attention_course/nbgrader_config.py``. This file loads that one: the
course id, the exchange and the grading settings are written once, at the repository's root.

Students need only the exchange part (``course_id``, ``Exchange.root``): they fetch and submit in
their home. The instructor runs nbgrader from a clone of the repository, where the clone's own
``nbgrader_config.py`` also applies (course directory ``<clone>/course/``, notebooks in
``<clone>/notebooks/``).

The exchange is a folder that every user of the machine can write to (``Exchange.root``, default
``/srv/nbgrader/exchange``); create it once, as root, before the first release::

    mkdir -p /srv/nbgrader/exchange && chmod 777 /srv/nbgrader/exchange
"""

import os

c = get_config()  # noqa: F821 (provided by traitlets when it loads this file)

load_subconfig(  # noqa: F821 (provided by traitlets too)
    os.path.join(os.path.dirname(os.path.abspath(__file__)), "attention_course", "nbgrader_config.py"))

# Nothing else: students fetch into and submit from their home (nbgrader's default), and the
# instructor's course directory is set by the clone's own nbgrader_config.py, which nbgrader reads
# after this one when it runs in the clone's root.
