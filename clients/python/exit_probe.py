"""exit_probe.py — a worker of queue "exitprobe" for test/scripts/client_exit.sh
(issue 32: does the process stop on SIGTERM?).  Its handler holds each task
WF_PROBE_HOLD seconds, giving up (failing the attempt) when the library marks
the task cancelled; the drain timeout is WF_PROBE_DRAIN seconds.  Connects
with the libpq environment; runs until SIGTERM, then simply returns."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from wfengine_worker import TaskFailure, Worker  # noqa: E402

HOLD = float(os.environ.get("WF_PROBE_HOLD", "2"))


def hold(task):
    if task.cancelled.wait(HOLD):
        raise TaskFailure("cancelled", "given up at shutdown")
    return {"held": HOLD}


Worker("", ["exitprobe"], hold, name="exitprobe", concurrency=2, lease=30, wait=10,
       drain_timeout=float(os.environ.get("WF_PROBE_DRAIN", "5"))).run()
