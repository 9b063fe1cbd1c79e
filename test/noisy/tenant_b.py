"""tenant_b.py -- the steady workload of the well-behaved tenant B in
test/t/150_noisy_neighbour.pl (not a test by itself).

    tenant_b.py CONNINFO SECONDS OUTFILE

For SECONDS it runs, each in a connection of its own (libpq conninfo
CONNINFO, a login of tenant B with the job roles):

  nap       a run of "b_nap" (a 100 ms sleep) every 100 ms, so that one of
            B's timers falls due every 100 ms (their lag is read from
            wf.timers by the test);
  producer  a run of "b_task" (a task on queue b_q) every 100 ms, the time
            before the start sent recorded per run;
  consumer  wf.claim_tasks('b_q', ..., wait => 2 s) in a loop, the time it
            returned recorded per task, each task completed;
  lease     every 500 ms a run of "b_lease" (a task on queue b_l) that it
            claims with a 1 s lease and never reports (the engine must
            expire the lease; the test reads when);
  listener  LISTEN on B's run channel and on wf_overflow, every notification
            with the time it arrived.

Then it writes OUTFILE as JSON: the runs it started, the start and claim
times of the tasks, the notifications heard, and any error.  Times are
seconds since the epoch (the same clock as the database's).
"""
import json
import signal
import sys
import threading
import time

import psycopg

conninfo, seconds, outfile = sys.argv[1], float(sys.argv[2]), sys.argv[3]
stop_at = time.time() + seconds


def stop(signum, frame):
    """SIGTERM: the test is done; finish what is under way and report."""
    global stop_at
    stop_at = min(stop_at, time.time())


signal.signal(signal.SIGTERM, stop)
lock = threading.Lock()
out = {"nap_runs": [], "task_runs": {}, "claimed": {}, "lease_runs": [],
       "heard": [], "overflow": [], "errors": []}


def record_error(where, e):
    with lock:
        out["errors"].append("%s: %s" % (where, e))


def nap():
    try:
        with psycopg.connect(conninfo, autocommit=True) as c:
            nxt = time.time()
            while time.time() < stop_at:
                rid = c.execute("SELECT wf.start_run('b_nap')").fetchone()[0]
                with lock:
                    out["nap_runs"].append(str(rid))
                nxt += 0.1
                time.sleep(max(0.0, nxt - time.time()))
    except Exception as e:      # noqa: BLE001 -- reported, and the test fails
        record_error("nap", e)


def producer():
    try:
        with psycopg.connect(conninfo, autocommit=True) as c:
            nxt = time.time()
            while time.time() < stop_at:
                t0 = time.time()
                rid = c.execute("SELECT wf.start_run('b_task')").fetchone()[0]
                with lock:
                    out["task_runs"][str(rid)] = t0
                nxt += 0.1
                time.sleep(max(0.0, nxt - time.time()))
    except Exception as e:      # noqa: BLE001
        record_error("producer", e)


def consumer():
    try:
        with psycopg.connect(conninfo, autocommit=True) as c:
            while time.time() < stop_at + 1:
                rows = c.execute(
                    "SELECT task_id, fence, run_id FROM wf.claim_tasks('b_q', 'b_worker', 1,"
                    " '30 seconds', '2 seconds')").fetchall()
                now = time.time()
                for task_id, fence, run_id in rows:
                    with lock:
                        out["claimed"][str(run_id)] = now
                    c.execute("SELECT wf.complete_task(%s, %s, '{}')", [task_id, fence])
    except Exception as e:      # noqa: BLE001
        record_error("consumer", e)


def lease():
    try:
        with psycopg.connect(conninfo, autocommit=True) as c:
            nxt = time.time()
            while time.time() < stop_at:
                rid = c.execute("SELECT wf.start_run('b_lease')").fetchone()[0]
                c.execute("SELECT count(*) FROM wf.claim_tasks('b_l', 'b_dead', 1, '1 second')")
                with lock:
                    out["lease_runs"].append(str(rid))
                nxt += 0.5
                time.sleep(max(0.0, nxt - time.time()))
    except Exception as e:      # noqa: BLE001
        record_error("lease", e)


def listener(ready):
    def heard(n):
        now = time.time()
        with lock:
            if n.channel == "wf_overflow":
                out["overflow"].append(now)
            else:
                p = json.loads(n.payload)
                out["heard"].append([p.get("run_id"), p.get("kind"), now])

    try:
        with psycopg.connect(conninfo, autocommit=True) as c:
            channel = c.execute("SELECT wf.channel('runs')").fetchone()[0]
            c.add_notify_handler(heard)
            c.execute('LISTEN "%s"' % channel.replace('"', '""'))
            c.execute("LISTEN wf_overflow")
            ready.set()
            # notifications are handed to heard() whenever the connection
            # reads from the server: look every 20 ms
            while time.time() < stop_at + 3:
                c.execute("SELECT 1")
                time.sleep(0.02)
    except Exception as e:      # noqa: BLE001
        record_error("listener", e)
        ready.set()


ready = threading.Event()
threads = [threading.Thread(target=listener, args=(ready,), daemon=True)]
threads[0].start()
ready.wait(10)
for fn in (nap, producer, consumer, lease):
    t = threading.Thread(target=fn, daemon=True)
    t.start()
    threads.append(t)
for t in threads[1:]:
    t.join()
threads[0].join(timeout=8)
with open(outfile, "w") as f:
    json.dump(out, f)
