"""This library's driver of the shared conformance scenario
(test/conformance/README.md): the scenario's handlers, written with the
public API, and a worker that runs until every run has ended.  Run by
test/conformance/run.sh, which publishes the definition, starts the runs and
compares their history with test/conformance/expected.txt.  Exit status 0
when the runs ended within 60 s.
"""

import datetime
import os
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import psycopg  # noqa: E402
from wfengine_worker import TaskFailure, Worker  # noqa: E402


def out(handler, task):
    return {"handler": handler, "attempt": task.attempt}


def flaky(task):
    if task.attempt == 1:
        raise TaskFailure("flaky", "the first attempt fails")     # retryable: the default
    return out("flaky", task)


def throw(task):
    if task.attempt == 1:
        raise RuntimeError("the first attempt throws")
    return out("throw", task)


def permanent(task):
    raise TaskFailure("permanent", "retrying cannot help", retryable=False)


worker = Worker("", ["conf_main", "conf_plain"], {
    "conf_echo": lambda t: out("echo", t),
    "conf_plain": lambda t: out("plain", t),        # by queue: a step without activity
    "conf_flaky": flaky,
    "conf_throw": throw,
    "conf_permanent": permanent,
    "conf_undo": lambda t: out("undo", t),
}, name="conformance-python", lease=datetime.timedelta(seconds=30), wait=1.0)

ended = threading.Event()


def poll():
    """wf_conformance_poll(): one tick, and whether every run has ended."""
    with psycopg.connect("", autocommit=True) as admin:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if admin.execute("SELECT wf_conformance_poll()").fetchone()[0]:
                ended.set()
                break
            time.sleep(0.1)
    worker.stop()


threading.Thread(target=poll, daemon=True).start()
worker.run()
if not ended.is_set():
    print("conformance: the runs did not end within 60 s", file=sys.stderr)
sys.exit(0 if ended.is_set() else 1)
