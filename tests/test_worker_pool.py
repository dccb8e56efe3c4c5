"""The worker processes of train_many: what a job prints cannot spoil its result, and a job that
cannot be unpickled there is an error here, not a hang."""

import os

import pytest

from attention_course.workers import WorkerPool

pytestmark = pytest.mark.slow          # worker processes


def test_what_a_job_prints_goes_to_stderr_and_its_result_still_arrives(capfd):
    pool = WorkerPool(1)
    try:
        # print() writes through Python, os.system's echo straight to descriptor 1
        assert pool.run(os.system, {"shell": ("echo printed by a shell",)}) == {"shell": 0}
        assert pool.run(print, {"python": ("printed by python",)}) == {"python": None}
    finally:
        pool.close()
    out, err = capfd.readouterr()
    assert "printed by a shell" in err and "printed by python" in err
    assert "printed" not in out


def _defined_only_in_this_test_module():
    return 1


def test_a_job_the_worker_cannot_import_is_an_error_here():
    pool = WorkerPool(1)
    try:
        with pytest.raises(ModuleNotFoundError):
            pool.run(_defined_only_in_this_test_module, {"a": ()})
    finally:
        pool.close()
    assert all(w.poll() is not None for w in pool.workers)
