"""nbgrader settings for the whole course: the one place they live.

nbgrader reads this file when it runs from the repository's root (``nbgrader generate_assignment zh``
...); ``make student`` and ``make grade`` load it too and change only where files go. A JupyterHub
with formgrader and the exchange loads it as well (classroom/README.md), so the course id, the
exchange and the grading settings are written here once.

Layout (nbgrader's ``{nbgrader_step}/{student_id}/{assignment_id}/{notebook_id}.ipynb``):

- assignments: one per language, ids ``zh`` and ``en``; an assignment is every notebook of that
  language, so its source is the instructor folder itself, ``notebooks/zh/`` or ``notebooks/en/``;
- everything nbgrader writes (``release/``, ``submitted/``, ``autograded/``, ``feedback/`` and
  ``gradebook.db``) goes under ``course/`` at the repository's root, kept out of version control.
"""

import os

c = get_config()  # noqa: F821 (provided by traitlets when it loads this file)

HERE = os.path.dirname(os.path.abspath(__file__))

# --- Course directory -------------------------------------------------------------------------
# The course id names the course in the exchange (release_assignment, fetch, submit, collect).
c.CourseDirectory.course_id = "attention_course"
# Everything nbgrader writes; the gradebook defaults to <root>/gradebook.db.
c.CourseDirectory.root = os.path.join(HERE, "course")
# The instructor notebooks are the source: source/<assignment>/ is notebooks/<lang>/. The path is
# absolute so that a different root (make grade uses build/grade/) still reads these notebooks.
c.CourseDirectory.source_directory = os.path.join(HERE, "notebooks")
# Notebooks only: nothing else in notebooks/<lang>/ belongs in the learner's copy.
c.CourseDirectory.ignore = [".ipynb_checkpoints", "*.pyc", "__pycache__", "feedback"]

# --- Student version (generate_assignment) ----------------------------------------------------
# What replaces the code between ### BEGIN SOLUTION and ### END SOLUTION, in both languages.
c.ClearSolutions.code_stub = {
    "python": "# 在这里写你的代码 · YOUR CODE HERE\nraise NotImplementedError()",
}
c.ClearSolutions.text_stub = "在这里写你的回答 · YOUR ANSWER HERE"

# --- Autograding ------------------------------------------------------------------------------
# A check cell that was deleted is added back where it was, so deleting it earns nothing.
# (Changed or wrapped check cells need no setting: autograde always restores locked cells from
# the gradebook and logs "Attribute 'checksum' ... has changed".)
c.OverwriteCells.add_missing_cells = True
# The slowest notebook runs in well under a minute on two cores; a cell that takes longer is a
# learner's runaway loop, which then scores 0 instead of stopping the whole class's grading.
c.Execute.timeout = 120
# Notebooks print seeded values; a fixed hash seed keeps the rest (set order) repeatable too.
os.environ.setdefault("PYTHONHASHSEED", "0")
# nbclient mirrors each ipywidgets Output widget and echoes its state back to the kernel while it
# waits for the execute reply; now and then the reply is missed and the cell runs into the timeout
# (jupyter/nbclient#312). Grading needs no echo (maintainer/execute_notebooks.py does the same).
try:
    from nbclient import output_widget

    output_widget.OutputWidget.sync_state = lambda self: None
except ImportError:  # another nbclient layout: grading still works, without the guard
    pass

# --- Exchange (release_assignment, collect; fetch_assignment, submit on the learner's side) ----
# A folder every user of the machine or hub can write to; it must exist before the first release
# (for example: sudo mkdir -p /srv/nbgrader/exchange && sudo chmod 777 /srv/nbgrader/exchange).
c.Exchange.root = "/srv/nbgrader/exchange"
# True keeps each course under its course_id when several share an exchange; the learners'
# nbgrader_config.py must then say the same, so the default (False) is spelled out here.
c.Exchange.path_includes_course = False
c.Exchange.timezone = "UTC"
