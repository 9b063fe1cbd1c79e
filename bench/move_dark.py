#!/usr/bin/env python3
"""move_dark.py CONNINFO OUT: the client of bench/move_dark.sh.

One connection (through the router, as the moving tenant) starts a
one-step run, claims its task and completes it, without pause, until
SIGINT.  Every call refused as retryable (40001: a cut-over, 55W01, 08xxx)
starts or extends a refused span, which the next success ends.  Writes to
OUT one line per refused span, "span START_EPOCH_S DURATION_MS", and a
last line "cycles N".
"""
import signal
import sys
import time

import psycopg

stop = False


def on_int(*_):
    global stop
    stop = True


signal.signal(signal.SIGINT, on_int)
conn = psycopg.connect(sys.argv[1], autocommit=True)
spans, since, since_wall, cycles = [], None, None, 0
while not stop:
    try:
        conn.execute("SELECT wf.start_run('hop')")
        rows = conn.execute("SELECT task_id, fence FROM wf.claim_tasks('hop_q', 'dark', 1)").fetchall()
        for task_id, fence in rows:
            conn.execute("SELECT wf.complete_task(%s, %s, '{}')", (task_id, fence))
        cycles += 1
        if since is not None:
            spans.append((since_wall, 1000 * (time.monotonic() - since)))
            since = None
    except psycopg.Error as e:
        state = e.sqlstate or ""
        if state not in ("40001", "55W01") and not state.startswith("08"):
            raise
        if since is None:
            since, since_wall = time.monotonic(), time.time()
        time.sleep(0.001)

with open(sys.argv[2], "w") as f:
    for start, ms in spans:
        f.write("span %.3f %.1f\n" % (start, ms))
    f.write("cycles %d\n" % cycles)
