#!/usr/bin/env python3
"""bench/large_outputs.py -- 20-step runs whose steps return large outputs:
steps per second, the backend's CPU per step and WAL per step.  A
measurement, never a test.

One client (psycopg 3, python3-psycopg) on the server of the libpq
environment (PGHOST, PGPORT, PGUSER: a superuser on the same machine, since
the backend's CPU time is read from /proc), in a database made afresh
(DB, default wf_large_outputs): a definition of 20 task steps on one queue,
each but the first with an input mapping that reads the step before's
output (MAP=0: no mappings), STEPS / 20 + 20 runs started, one task claimed,
then STEPS calls of wf.complete_and_claim (eager steps), each reporting an
output of about OUTPUT_BYTES bytes of hex digits (64 different ones, so that
the outputs of a run differ), with synchronous_commit off (the processor,
not the flush).  Prints one line: steps/s, backend CPU microseconds per
step (utime + stime of the backend), WAL bytes per step.

Environment: STEPS (2000), OUTPUT_BYTES (2048), MAP (1), DB.
"""
import json
import os
import time

import psycopg

N = int(os.environ.get("STEPS", "2000"))
B = int(os.environ.get("OUTPUT_BYTES", "2048"))
MAP = os.environ.get("MAP", "1") == "1"
DB = os.environ.get("DB", "wf_large_outputs")

admin = psycopg.connect(dbname="postgres", autocommit=True)
admin.execute("DROP DATABASE IF EXISTS " + DB)
admin.execute("CREATE DATABASE " + DB)
c = psycopg.connect(dbname=DB, autocommit=True)
c.execute("CREATE EXTENSION wfengine")
steps = [{"name": "s1", "queue": "big"}]
for i in range(2, 21):
    s = {"name": "s%d" % i, "queue": "big"}
    if MAP:
        s["input"] = {"prev": "$.steps.s%d.output.n" % (i - 1)}
    steps.append(s)
c.execute("SELECT wf.publish_definition('big20', %s)", [json.dumps({"steps": steps})])
c.execute("SELECT count(wf.start_run('big20', '{}')) FROM generate_series(1, %s)", [N // 20 + 20])
c.execute("VACUUM ANALYZE")
c.execute("SET synchronous_commit = off")
pid = c.execute("SELECT pg_backend_pid()").fetchone()[0]


def cpu_seconds():
    """utime + stime of the backend, from /proc"""
    fields = open("/proc/%d/stat" % pid).read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


outputs = ["".join("%032x" % int.from_bytes(os.urandom(16), "big") for _ in range(max(1, B // 32)))
           for _ in range(64)]
tid, fence = c.execute("SELECT task_id, fence FROM wf.claim_tasks('big', 'w1', 1, '60 seconds')").fetchone()
lsn0 = c.execute("SELECT pg_current_wal_insert_lsn()").fetchone()[0]
cpu0 = cpu_seconds()
t0 = time.time()
for i in range(N):
    tid, fence = c.execute(
        "SELECT task_id, fence FROM wf.complete_and_claim(%s, %s, %s::jsonb, 'big', 'w1', 1, '60 seconds')",
        [tid, fence, json.dumps({"n": i, "blob": outputs[i % 64]})]).fetchone()
elapsed = time.time() - t0
cpu1 = cpu_seconds()
wal = c.execute("SELECT pg_wal_lsn_diff(pg_current_wal_insert_lsn(), %s)", [lsn0]).fetchone()[0]
print("mappings %s, outputs of %d B: %.0f steps/s, backend CPU %.0f us a step, WAL %.0f B a step"
      % ("on" if MAP else "off", B, N / elapsed, (cpu1 - cpu0) * 1e6 / N, wal / N))
c.close()
admin.execute("DROP DATABASE " + DB)
