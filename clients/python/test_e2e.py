"""End-to-end test of wfengine_worker: the order workflow of test/demo.

Connects with the libpq environment (PGHOST, PGPORT, PGDATABASE, ...) to a
database where wfengine is installed and the caller is a superuser (it
publishes the definition and calls wf.tick(), which the engine worker
would do; `make test` runs with wfengine.enabled = off).  Exit status 0
when every check passed.

Checks: six runs of "order" driven to completion by one Worker of three
queues with concurrency 4 (a charge that fails once and is retried after
its backoff; a reservation that runs longer than its lease and survives
through heartbeats); wf.verify_run on each; a server error carrying its
SQLSTATE and hint; SIGTERM while a task is in flight: the task finishes
and is reported, and nothing more is claimed; eager dispatch: a report
hands the worker the next step of its run on the same queue; a shard
list: a worker given three shards, the first of which the shard map says
is not its tenant's (55W01) and the second down, moves to the third and
completes the runs there.
"""

import datetime
import json
import os
import signal
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import psycopg  # noqa: E402
from psycopg import sql as pgsql  # noqa: E402
from wfengine_worker import Answer, Client, TaskFailure, WfError, Worker  # noqa: E402

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
failures = []


def check(cond, what):
    print(("ok     " if cond else "NOT OK ") + what, flush=True)
    if not cond:
        failures.append(what)


# The options every library shares (docs/workers.md), without a server.
def _refused(**kw):
    try:
        Worker("", **kw)
    except (ValueError, TypeError) as e:
        return str(e)
    return None


check("needs a handler" in (_refused(queues=["q"]) or ""), "a worker without a handler is refused")
check("timedelta" in (_refused(queues=["q"], handler=print, lease="30s") or ""),
      "a duration that is neither seconds nor a timedelta is refused")
_w = Worker("", ["q"], {"a": lambda t: "by activity", "q": lambda t: "by queue"},
            lease=datetime.timedelta(minutes=1), drain_timeout=datetime.timedelta(seconds=5))
check((_w.lease, _w.wait, _w.heartbeat_every, _w.drain_timeout) == (60.0, 10.0, 20.0, 5.0),
      "durations: timedelta or seconds, defaults wait 10 s, heartbeat lease/3")


def _task(activity, queue="q"):
    return type("T", (), {"activity": activity, "queue": queue})()


check(_w._handler_for(_task("a"))(None) == "by activity" and
      _w._handler_for(_task(None))(None) == "by queue",
      "a handler by activity; a step without activity by its queue")
try:
    _w._handler_for(_task("other"))
    check(False, "no handler: unknown_activity")
except TaskFailure as f:
    check(f.error["code"] == "unknown_activity" and not f.retryable,
          "no handler: unknown_activity, not retryable")
_w.handler = lambda t: "catch-all"
check(_w._handler_for(_task("other"))(None) == "catch-all" and
      _w._handler_for(_task("a"))(None) == "by activity",
      "handler= is the catch-all, after the entries of handlers")
check(TaskFailure("x").retryable, "a TaskFailure is retryable unless it says otherwise")


admin = psycopg.connect("", autocommit=True)
with open(os.path.join(ROOT, "test", "demo", "order.json")) as f:
    admin.execute("SELECT wf.publish_definition('order', %s::jsonb)", (f.read(),))

runs = [admin.execute(
    "SELECT wf.start_run('order', %s::jsonb)",
    (json.dumps({"amount": 10 + i, "currency": "EUR", "customer": f"c{i}@example.com",
                 "sku": f"SKU-{i}"}),)).fetchone()[0] for i in range(6)]

# the engine worker's part: fire due timers (retry backoff), expire leases
ticking = threading.Event()


def ticker():
    conn = psycopg.connect("", autocommit=True)
    while not ticking.wait(0.2):
        conn.execute("SELECT wf.tick()")
    conn.close()


threading.Thread(target=ticker, daemon=True).start()

failed_once = set()
slow_started = threading.Event()


def charge_card(task):
    if task.input["customer"] == "c0@example.com" and task.attempt == 1:
        failed_once.add(task.task_id)
        raise TaskFailure("timeout", "simulated gateway timeout", retryable=True)
    if task.input["customer"] == "slow@example.com":
        slow_started.set()
        time.sleep(1.5)
    return {"charge_id": "ch_" + task.idempotency_key, "status": "captured"}


def reserve_stock(task):
    if task.input["sku"] == "SKU-1":
        time.sleep(2.5)            # longer than the 1 s lease: heartbeats keep it
    else:
        time.sleep(0.3)
    return {"reservation_id": "rsv_" + task.idempotency_key, "sku": task.input["sku"]}


def send_receipt(task):
    return {"message_id": "msg_" + str(task.task_id), "to": task.input["customer"]}


worker = Worker("", ["payments", "warehouse", "email"],
                {"charge_card": charge_card, "reserve_stock": reserve_stock,
                 "send_receipt": send_receipt},
                name="py-e2e", concurrency=4, lease=datetime.timedelta(seconds=1), wait=1.0,
                heartbeat=datetime.timedelta(milliseconds=300), drain_timeout=10)


def driver():
    """Waits for the six runs, then starts a slow one and sends SIGTERM."""
    deadline = time.time() + 60
    while time.time() < deadline:
        n = admin.execute("SELECT count(*) FROM wf.runs WHERE status = 'completed'").fetchone()[0]
        if n == len(runs):
            break
        time.sleep(0.2)
    global slow_run
    slow_run = admin.execute(
        "SELECT wf.start_run('order', %s::jsonb)",
        (json.dumps({"amount": 1, "currency": "EUR", "customer": "slow@example.com",
                     "sku": "SKU-SLOW"}),)).fetchone()[0]
    if slow_started.wait(20):
        os.kill(os.getpid(), signal.SIGTERM)
    else:
        worker.stop()


slow_run = None
d = threading.Thread(target=driver, daemon=True)
d.start()
t0 = time.time()
worker.run()                      # in the main thread: SIGTERM stops it
elapsed = time.time() - t0
d.join(5)
ticking.set()

statuses = [admin.execute("SELECT wf.run_status(%s)", (r,)).fetchone()[0] for r in runs]
check(statuses == ["completed"] * 6, f"six order runs completed: {statuses}")
check(all(admin.execute("SELECT wf.verify_run(%s)", (r,)).fetchone()[0] for r in runs),
      "wf.verify_run holds for every run")
check(len(failed_once) == 1, "a charge failed once (retryable) and was retried")
# (a completed attempt's row is deleted since 0.3.0: its completion is read
# from its task_completed event, its deliveries from the lease expiries
# before it, each followed by one delivery more)
retried = admin.execute(
    "SELECT count(*) FROM wf.event_log"
    " WHERE type = 'task_completed' AND step = 'charge' AND attempt = 2").fetchone()[0]
check(retried == 1, "the retry (attempt 2) completed")
slow_reserve = admin.execute(
    "SELECT CASE WHEN c.seq IS NULL THEN t.status ELSE 'completed' END,"
    " 1 + (SELECT count(*)::int FROM wf.event_log x WHERE x.run_id = s.run_id AND x.type = 'lease_expired'"
    "      AND x.step = s.step AND x.attempt = s.attempt)"
    " FROM wf.runs r JOIN wf.event_log s ON s.run_id = r.run_id AND s.type = 'task_scheduled' AND s.step = 'reserve'"
    " LEFT JOIN wf.tasks t ON t.task_id = (s.payload->>'task_id')::bigint"
    " LEFT JOIN wf.event_log c ON c.run_id = s.run_id AND c.type = 'task_completed'"
    "      AND c.payload->>'task_id' = s.payload->>'task_id'"
    " WHERE r.input->>'sku' = 'SKU-1'").fetchone()
check(slow_reserve == ("completed", 1),
      f"a task longer than its lease was kept by heartbeats, delivered once: {slow_reserve}")
stale = [a for _, a in worker.answers if a != Answer.ACCEPTED]
check(not stale, f"every report accepted ({len(worker.answers)} reports; others: {stale})")
check(worker.max_in_flight >= 2, f"tasks ran concurrently (at most {worker.max_in_flight} at once)")

# SIGTERM while the slow charge ran: it finished and was reported, and the
# worker claimed nothing more (the run's reservation waits, unclaimed).
slow = admin.execute(
    "SELECT s.step, CASE WHEN c.seq IS NULL THEN t.status ELSE 'completed' END"
    " FROM wf.event_log s LEFT JOIN wf.tasks t ON t.task_id = (s.payload->>'task_id')::bigint"
    " LEFT JOIN wf.event_log c ON c.run_id = s.run_id AND c.type = 'task_completed'"
    "      AND c.payload->>'task_id' = s.payload->>'task_id'"
    " WHERE s.run_id = %s AND s.type = 'task_scheduled' ORDER BY s.seq",
    (slow_run,)).fetchall() if slow_run else []
check(slow == [("charge", "completed"), ("reserve", "ready")],
      f"SIGTERM: the task in flight finished and nothing more was claimed: {slow}")
check(elapsed < 60, f"the worker stopped ({elapsed:.1f} s)")

# typed errors: SQLSTATE and hint of the server's error
client = Client("")
try:
    client.complete(1, 1 << 40, {})
    check(False, "a fence never issued is refused")
except WfError as e:
    check(e.sqlstate == "22023" and e.hint is not None and "fence" in e.message,
          f"WfError carries SQLSTATE and hint: {e}")
try:
    client.claim("payments", "")
    check(False, "an empty worker name is refused")
except WfError as e:
    check(e.sqlstate == "22023" and e.hint.startswith("Name the worker"), f"claim error: {e}")
check(client.heartbeat(1, 1) == Answer.STALE, "a heartbeat of a finished attempt is stale")

# prepared statements: psycopg prepares a call after its fifth execution on
# the connection; a Client with prepare=False (a pooler in transaction
# mode) never does
unprepared = Client("", prepare=False)
for _ in range(6):
    client.heartbeat(1, 1)
    unprepared.heartbeat(1, 1)
count = "SELECT count(*) FROM pg_catalog.pg_prepared_statements"
n_client = client.conn.execute(count).fetchone()[0]
n_unprepared = unprepared.conn.execute(count).fetchone()[0]
check(n_client >= 1 and n_unprepared == 0,
      f"calls prepared by default, not with prepare=False ({n_client}, {n_unprepared})")
unprepared.close()
client.close()

# eager dispatch: a report hands the thread the next step of its run when
# it is on the same queue, written leased (one call and one commit per step)
admin.execute("""SELECT wf.publish_definition('py_pair', '{"steps": [
  {"name": "first", "queue": "py_eager"}, {"name": "second", "queue": "py_eager"}]}')""")
pair = admin.execute("SELECT wf.start_run('py_pair', '{}')").fetchone()[0]
seen_leased = {}


def pair_handler(t):
    # the second attempt's row as its handler sees it, leased (the row of
    # a completed attempt is deleted since 0.3.0)
    if t.step == "second":
        with psycopg.connect("", autocommit=True) as c:
            seen_leased["second"] = c.execute(
                "SELECT worker, claimed_at = created_at, deliveries, status FROM wf.tasks"
                " WHERE task_id = %s", (t.task_id,)).fetchone()
    return {"step": t.step}


eager_worker = Worker("", ["py_eager"], handler=pair_handler, name="py-eager",
                      concurrency=1, lease=5.0, wait=0.5)
et = threading.Thread(target=eager_worker.run)
et.start()
deadline = time.time() + 20
while time.time() < deadline and admin.execute(
        "SELECT wf.run_status(%s)", (pair,)).fetchone()[0] != "completed":
    time.sleep(0.1)
eager_worker.stop()
et.join(10)
second = (seen_leased.get("second"), admin.execute(
    "SELECT payload->>'worker' FROM wf.event_log"
    " WHERE run_id = %s AND type = 'task_completed' AND step = 'second'", (pair,)).fetchone())
check(second == (("py-eager", True, 1, "leased"), ("py-eager",)),
      f"eager dispatch: the second step was leased by the first one's report: {second}")
check(eager_worker.handed_on == 1 and
      [a for _, a in eager_worker.answers] == [Answer.ACCEPTED, Answer.ACCEPTED],
      f"eager dispatch: one task handed on, both reports accepted "
      f"({eager_worker.handed_on}, {[a for _, a in eager_worker.answers]})")
check(admin.execute("SELECT wf.verify_run(%s)", (pair,)).fetchone()[0], "the pair's run verifies")

# a shard list: the first database is shard s1, a second one shard s2, and
# the shard map gives the test tenant's partition to s2.  A worker given
# [s1, a shard down, s2] is refused by s1 (55W01), cannot connect to the
# next, moves to s2 and completes the runs there.  The login is no superuser (superusers skip the shard check).
db1 = admin.info.dbname
db2 = db1 + "_s2"
tenant, login = "wfc_py", "wfc_py_login"
shard_map = ("CASE wf.tenant_partition(%s, 2) WHEN 0 THEN ARRAY['s2', 's1']"
             " ELSE ARRAY['s1', 's2'] END")
admin.execute(f"DROP DATABASE IF EXISTS {db2} WITH (FORCE)")
admin.execute(f"DROP ROLE IF EXISTS {login}")
admin.execute(f"DROP ROLE IF EXISTS wf_tenant_{tenant}")
admin.execute("SELECT wf.create_tenant(%s)", (tenant,))
# the login's password is the environment's (pg_virtualenv asks for one over
# TCP; libpq sends PGPASSWORD), so that its connections need no other set-up
admin.execute(pgsql.SQL("CREATE ROLE {} LOGIN PASSWORD {} IN ROLE wfengine_app, wfengine_worker, wfengine_admin")
              .format(pgsql.Identifier(login), os.environ.get("PGPASSWORD", "wfc_py")))
admin.execute("SELECT wf.add_tenant_member(%s, %s)", (tenant, login))
try:
    admin.execute(f"SELECT wf.configure_shard('s1', {shard_map}, 1)", (tenant,))
    admin.execute(f"CREATE DATABASE {db2}")
    with psycopg.connect(f"dbname={db2}", autocommit=True) as a2:
        a2.execute("CREATE EXTENSION wfengine")
        a2.execute(f"SELECT wf.configure_shard('s2', {shard_map}, 2)", (tenant,))
    s2 = psycopg.connect(f"dbname={db2} user={login}", autocommit=True)
    s2.execute("""SELECT wf.publish_definition('shard_pair', '{"steps": [
      {"name": "first", "queue": "py_shard"}, {"name": "second", "queue": "py_shard"}]}')""")
    shard_runs = [s2.execute("SELECT wf.start_run('shard_pair', '{}')").fetchone()[0]
                  for _ in range(3)]
    try:
        Client(f"user={login}").claim("py_shard", "probe")
        check(False, "shard s1 refuses the tenant")
    except WfError as e:
        check(e.sqlstate == "55W01", f"shard s1 refuses the tenant: {e}")
    # s1, then a shard that cannot be reached (its connection fails), then s2
    shard_worker = Worker([f"user={login}", f"host=/nonexistent user={login}",
                           f"dbname={db2} user={login}"], ["py_shard"],
                          lambda t: {"step": t.step}, name="py-shard", concurrency=2,
                          lease=5.0, wait=0.5)
    st = threading.Thread(target=shard_worker.run)
    st.start()
    deadline = time.time() + 30
    while time.time() < deadline and s2.execute(
            "SELECT count(*) FROM wf.runs WHERE status = 'completed'").fetchone()[0] < 3:
        time.sleep(0.1)
    shard_worker.stop()
    st.join(10)
    done = [s2.execute("SELECT wf.run_status(%s)", (r,)).fetchone()[0] for r in shard_runs]
    check(done == ["completed"] * 3, f"shard list: the runs on s2 completed: {done}")
    check(shard_worker.moves == 2 and shard_worker.conninfo.startswith(f"dbname={db2}"),
          f"shard list: the worker moved to s2 ({shard_worker.moves} moves)")
    check([a for _, a in shard_worker.answers] == [Answer.ACCEPTED] * 6,
          f"shard list: every report accepted: {[a for _, a in shard_worker.answers]}")

    # A move of the tenant's partition from s2 to s1 while a task leased on
    # s2 runs, emulated as wfrouter.move_partition leaves it: s1 holds the
    # same task (s1 takes s2's id block, so the run started there has the
    # task's id), leased there under a newer fence (the cut-over re-fences
    # the leases it takes), and both maps give the partition to s1.  The
    # worker, on [s2, s1] (at s2 now), reports: s2 refuses (55W01), the
    # worker moves to s1, where the report is stale; it drops the task,
    # claims on s1 and completes the run there once the lease has expired.
    moved = {}
    shard_map_s1 = ("CASE wf.tenant_partition(%s, 2) WHEN 0 THEN ARRAY['s1', 's2']"
                    " ELSE ARRAY['s2', 's1'] END")
    # the last task id s2 issued (a completed attempt has no row since 0.3.0)
    last_id = s2.execute("SELECT pg_catalog.max((payload->>'task_id')::bigint) FROM wf.event_log"
                         " WHERE type = 'task_scheduled'").fetchone()[0]
    admin.execute(f"SELECT wf.configure_shard('s1', {shard_map}, 2)", (tenant,))
    admin.execute("SELECT pg_catalog.setval('wf.task_id_seq', %s)", (last_id,))
    s2.execute("SELECT wf.start_run('shard_pair', '{}')")

    def move_under(task):
        if not moved:
            moved["task"], moved["fence"] = task.task_id, task.fence
            with psycopg.connect(f"dbname={db2}", autocommit=True) as a2:
                a2.execute(f"SELECT wf.configure_shard('s2', {shard_map_s1})", (tenant,))
            admin.execute(f"SELECT wf.configure_shard('s1', {shard_map_s1})", (tenant,))
            admin.execute("SELECT pg_catalog.setval('wf.fence_seq', %s)", (task.fence + 1000,))
            with psycopg.connect(f"user={login}", autocommit=True) as s1:
                s1.execute("""SELECT wf.publish_definition('shard_pair', '{"steps": [
                  {"name": "first", "queue": "py_shard"}, {"name": "second", "queue": "py_shard"}]}')""")
                moved["run"] = s1.execute("SELECT wf.start_run('shard_pair', '{}')").fetchone()[0]
                moved["lease"] = s1.execute(
                    "SELECT task_id, fence FROM wf.claim_tasks('py_shard', 'old-shard', 1, '1 second')"
                ).fetchone()
        return {"step": task.step}

    move_worker = Worker([f"dbname={db2} user={login}", f"user={login}"], ["py_shard"],
                         move_under, name="py-move", concurrency=1, lease=5.0, wait=0.5,
                         eager=False)
    s1 = psycopg.connect(f"user={login}", autocommit=True)     # the tenant's runs on s1
    mt = threading.Thread(target=move_worker.run)
    mt.start()
    deadline = time.time() + 30
    while time.time() < deadline and not (moved.get("run") and s1.execute(
            "SELECT wf.run_status(%s)", (moved["run"],)).fetchone()[0] == "completed"):
        admin.execute("SELECT wf.tick()")        # takes the expired lease back
        time.sleep(0.2)
    move_worker.stop()
    mt.join(10)
    check(moved.get("lease") is not None and moved["lease"][0] == moved.get("task")
          and moved["lease"][1] > moved["fence"], f"a move: s1 holds the task leased on s2, re-fenced: {moved}")
    answers = [(t.task_id, a) for t, a in move_worker.answers]
    check(answers[:1] == [(moved.get("task"), Answer.STALE)] and move_worker.moves == 1,
          f"a move: the report of the lease from s2 is stale on s1 ({move_worker.moves} moves): {answers}")
    check(moved.get("run") is not None and s1.execute(
        "SELECT wf.run_status(%s)", (moved["run"],)).fetchone()[0] == "completed",
        "a move: the worker claimed on s1 and completed the run there")
    s1.close()
    s2.close()
finally:
    admin.execute("SELECT wf.configure_shard(NULL, NULL)")
    admin.execute(f"DROP DATABASE IF EXISTS {db2} WITH (FORCE)")
    admin.execute(f"DROP ROLE IF EXISTS {login}")
    admin.execute(f"DROP ROLE IF EXISTS wf_tenant_{tenant}")
admin.close()

print(f"python client: {'FAILED' if failures else 'passed'}")
sys.exit(1 if failures else 0)
