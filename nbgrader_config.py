"""nbgrader settings for the whole course: the one place they live.

nbgrader reads this file when it runs from the repository's root (``nbgrader generate_assignment
03-en`` ...); ``make student`` and ``make grade`` load it too and change only where files go. A
JupyterHub with formgrader and the exchange loads it as well (classroom/README.md), so the course
id, the exchange, the late-submission policy and the grading settings are written here once.

Layout (nbgrader's ``{nbgrader_step}/{student_id}/{assignment_id}/{notebook_id}.ipynb``):

- assignments: one per notebook and language, ids ``NN-lang`` (``01-zh``, ``01-en``, ...,
  ``09-en``), each with its own due date in the gradebook (``nbgrader db assignment add 03-en
  --duedate=...``) and its own submission, so week 3's hand-in never replaces week 2's;
- an assignment's source is ``course/source/NN-lang/`` holding that one notebook, copied from
  ``notebooks/<lang>/`` by ``python instructor/term.py source`` (nbgrader cannot map ``03-en``
  onto ``notebooks/en/03_scaled_dot_product.ipynb`` itself);
- everything nbgrader writes (``release/``, ``submitted/``, ``autograded/``, ``feedback/`` and
  ``gradebook.db``) goes under ``course/`` at the repository's root, kept out of version control;
- a student's zh and en work on the same notebook counts once, the better score: nbgrader keeps
  both, ``instructor/term.py export`` and ``make grade`` merge them (docs/instructors.md).
"""

import os

c = get_config()  # noqa: F821 (provided by traitlets when it loads this file)

HERE = os.path.dirname(os.path.abspath(__file__))

# --- Course directory -------------------------------------------------------------------------
# The course id names the course in the exchange (release_assignment, fetch, submit, collect).
c.CourseDirectory.course_id = "attention_course"
# Everything nbgrader writes; the gradebook defaults to <root>/gradebook.db. The source folders
# are nbgrader's default, <root>/source/NN-lang/ (python instructor/term.py source fills them).
c.CourseDirectory.root = os.path.join(HERE, "course")
# Notebooks only: nothing else in a source folder belongs in the learner's copy.
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

# --- Late submissions -------------------------------------------------------------------------
# Due dates live in the gradebook, one per assignment; an extension (instructor/term.py extend)
# moves one student's. autograde compares the time collect recorded with it and asks this plugin
# for the penalty, which nbgrader subtracts from the notebook's score.
try:
    from nbgrader.plugins import LateSubmissionPlugin
    from traitlets import Float
except ImportError:  # read without nbgrader (a test of the settings): no plugin to define
    LateSubmissionPlugin = None

if LateSubmissionPlugin is not None:
    import math

    class StartedDayPenalty(LateSubmissionPlugin):
        """Each started day after the due date costs ``per_day`` of the notebook's score, at most
        ``cap`` of it: one minute late is one day, a week late still earns half."""

        per_day = Float(0.10, help="share of the score taken per started day late").tag(config=True)
        cap = Float(0.50, help="the largest share taken, however late").tag(config=True)

        def late_submission_penalty(self, student_id, score, total_seconds_late):
            if total_seconds_late <= 0 or not score:
                return 0.0
            days = math.ceil(total_seconds_late / 86400)
            return round(min(self.cap, self.per_day * days) * score, 6)

    c.AssignLatePenalties.plugin_class = StartedDayPenalty

# --- Exchange (release_assignment, collect; fetch_assignment, submit on the learner's side) ----
# A folder every user of the machine or hub can write to; it must exist before the first release
# (for example: sudo mkdir -p /srv/nbgrader/exchange && sudo chmod 777 /srv/nbgrader/exchange).
c.Exchange.root = "/srv/nbgrader/exchange"
# True keeps each course under its course_id when several share an exchange; the learners'
# nbgrader_config.py must then say the same, so the default (False) is spelled out here.
c.Exchange.path_includes_course = False
c.Exchange.timezone = "UTC"
