"""Course-wide nbgrader settings for a classroom hub: what every user's nbgrader reads.

``classroom/install.sh`` puts this file in the hub environment's system-wide Jupyter folder
(``<venv>/etc/jupyter/nbgrader_config.py``) and, beside it, the repository's own
``nbgrader_config.py`` as ``attention_course/nbgrader_config.py``. This file loads that one: the
course id, the exchange and the grading settings are written once, at the repository's root.

Students need only the exchange part (``course_id``, ``Exchange.root``): they fetch and submit in
their home. The instructor works in a clone of the repository in their home, by default
``~/attention-course``: the repository's file places the course directory beside itself
(``<repository>/course``), which, read from here, would be a folder inside the hub's environment,
outside every home. So every path of ``CourseDirectory`` that the repository's file puts under its
own folder is moved to the same place under ``~/attention-course`` of the user who runs nbgrader.
That is what the formgrader needs: it runs in the instructor's own server, reads only the settings
files of the Jupyter path and of the server's working folder (the home, not the clone), and serves
a course only when the course directory lies under the server's root folder (the home); else it
answers every page with "bad setup". An instructor whose clone lives elsewhere writes
``~/.jupyter/nbgrader_config.py`` (read after this file, so it wins)::

    c = get_config()
    c.CourseDirectory.root = "/home/teacher/courses/attention-course/course"

The exchange is a folder that every user of the machine can write to (``Exchange.root``, default
``/srv/nbgrader/exchange``); create it once, as root, before the first release::

    mkdir -p /srv/nbgrader/exchange && chmod 777 /srv/nbgrader/exchange
"""

import os

c = get_config()  # noqa: F821 (provided by traitlets when it loads this file)

COURSE_SETTINGS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "attention_course")
load_subconfig(os.path.join(COURSE_SETTINGS, "nbgrader_config.py"))  # noqa: F821 (traitlets's too)

# The instructor's clone, in the home of whoever runs nbgrader (a student's nbgrader never uses it:
# students fetch into and submit from their home, nbgrader's default).
CLONE = os.path.expanduser("~/attention-course")
for _name, _value in list(c.CourseDirectory.items()):
    if isinstance(_value, str) and (_value == COURSE_SETTINGS
                                    or _value.startswith(COURSE_SETTINGS + os.sep)):
        setattr(c.CourseDirectory, _name, CLONE + _value[len(COURSE_SETTINGS):])
