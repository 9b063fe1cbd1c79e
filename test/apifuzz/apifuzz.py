#!/usr/bin/env python3
"""apifuzz.py -- a model-based fuzzer of wfengine's SQL API.

Each sequence sets up two fresh tenants, each with a login per job role
(app, worker, approver, operator, admin), publishes the same definitions
in both, and then runs a random sequence of API calls (generated from the
sequence's seed alone) by those logins, interleaved over 2 to 4 sessions,
some of them inside transactions left open across steps.  model.py
predicts every answer; after every step the fuzzer checks:

  * the answer is the one the model predicts (accepted, stale, duplicate,
    unknown_task, consumed, the error's SQLSTATE, the tasks a claim
    leases, ...);
  * the runs and task attempts of both tenants are those of the model,
    with the same status and fences;
  * wf.verify_run holds for every run of both tenants;
  * every live run has an explanation (wf.explain's waiting_for is the
    model's, never null or "stuck");
  * max_live_runs and max_tasks_in_flight hold;
  * a call of one tenant changed nothing of the other tenant (a digest of
    its rows), and a login sees no row of the other tenant.

A failing sequence is shrunk (delta debugging over its steps, each
candidate re-run with fresh tenants) and printed as SQL per session.

Time: with wfengine.enabled = off (make test), the step "tick" sleeps a
few milliseconds and calls wf.tick(); with the engine worker on, the
fuzzer waits after every step until the worker has handled every due
timer and deadline (and "tick" calls wf.tick() beside it).

Usage:
  apifuzz.py [--seed N] [--sequences N | --seconds S] [--steps N]
             [--tap] [--replay FILE] [--save DIR] [-v]
The libpq environment (PGHOST, PGPORT, PGUSER, PGDATABASE) names a
database where the fuzzer may create the extension (as a superuser); with
--database NAME it creates that database first.
"""

import argparse
import hashlib
import json
import os
import random
import sys
import time

import psycopg
from psycopg import sql as pgsql

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import model as M  # noqa: E402
from model import Mismatch, KnownBug  # noqa: E402

# ---------------------------------------------------------------------------
# Generation: a sequence is a list of abstract steps, made from the seed
# alone; the targets (which run, which task, which fence) are chosen when
# a step runs, from the model's state, so that a shrunk sequence still
# means something.

WEIGHTS = {
    "start": 20, "start_runs": 5, "claim": 20, "claim_any": 4,
    "complete": 16, "fail": 6, "complete_batch": 3, "fail_batch": 2,
    "complete_eager": 4, "fail_eager": 1, "complete_batch_eager": 2,
    "heartbeat": 4, "signal": 5, "send_event": 5, "issue_tokens": 5,
    "decide": 6, "pause": 3, "resume": 4, "cancel": 3, "terminate": 2,
    "skip": 2, "retry_step": 3, "batch_cmd": 2, "publish": 1,
    "tick": 8, "purge": 1, "legal_hold": 1, "peek": 1,
    "begin": 3, "commit": 3, "rollback": 1, "nobody": 1, "blocked": 2,
}
KINDS = sorted(WEIGHTS)

RIGHT_ROLE = {
    "start": "app", "start_runs": "app", "claim": "worker", "claim_any": "worker",
    "complete": "worker", "fail": "worker", "complete_batch": "worker",
    "fail_batch": "worker", "complete_eager": "worker", "fail_eager": "worker",
    "complete_batch_eager": "worker", "heartbeat": "worker", "signal": "app",
    "send_event": "app", "issue_tokens": "worker", "decide": "approver",
    "pause": "operator", "resume": "operator", "cancel": "operator",
    "terminate": "operator", "skip": "operator", "retry_step": "operator",
    "batch_cmd": "operator", "publish": "admin", "legal_hold": "operator",
    "peek": "app",
}


def generate(seed, nsteps):
    rnd = random.Random(seed)
    kinds = [k for k in KINDS for _ in range(WEIGHTS[k])]
    steps = []
    tenant = rnd.randrange(2)
    for i in range(nsteps):
        k = rnd.choice(kinds)
        if i < 4 and rnd.random() < 0.5:
            k = "start"
        if rnd.random() < 0.3:
            tenant = 1 - tenant     # runs of one tenant for a while, then the other's
        st = {"k": k, "s": rnd.randrange(4), "t": tenant,
              "x": rnd.randrange(1 << 30), "y": rnd.randrange(1 << 30),
              "z": rnd.randrange(1 << 30)}
        if k in RIGHT_ROLE and rnd.random() < 0.07:
            st["role"] = rnd.choice(M.ROLES)
        if rnd.random() < 0.06:
            st["xt"] = True     # aim at the other tenant's objects
        steps.append(st)
    return steps


def seq_params(seed):
    """What a sequence's seed fixes besides its steps: the sessions and the
    tenants' policies."""
    rnd = random.Random(seed * 7919 + 1)
    pol = []
    for _ in range(2):
        p = {}
        if rnd.random() < 0.6:
            p["max_live_runs"] = rnd.choice([2, 3, 5, 8])
        if rnd.random() < 0.4:
            p["max_tasks_in_flight"] = rnd.choice([1, 2, 3])
        if rnd.random() < 0.3:
            p["burst"] = rnd.choice([3, 6, 10])
        if rnd.random() < 0.25:
            p["max_buffered"] = rnd.choice([0, 1, 2])
        if rnd.random() < 0.5:
            p["retention"] = True
        pol.append(p)
    return {"sessions": rnd.choice([2, 2, 3, 4]), "policies": pol}


# ---------------------------------------------------------------------------
# SQL rendering for the reproduction


def lit(v):
    """A parameter as an SQL literal, for the printed reproduction."""
    if v is None:
        return "NULL"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, Json):
        return "'" + v.text.replace("'", "''") + "'"
    if isinstance(v, list):
        return "ARRAY[" + ", ".join(lit(x) for x in v) + "]"
    return "'" + str(v).replace("'", "''") + "'"


def fuzz_output(by, st):
    """A task's output: one in three large enough (256 bytes or more) to be
    kept in the history only, its run's context referring to it."""
    if st["z"] % 3 == 0:
        return {"by": by, "pad": "p" * 300}
    return {"by": by}


class Json:
    """A JSON parameter (rendered with sorted keys)."""

    def __init__(self, obj):
        self.text = json.dumps(obj, sort_keys=True)


def render(sqltext, params):
    """The statement with its parameters inlined."""
    out = sqltext
    for p in params:
        out = out.replace("%s", lit(p), 1)
    return out


def adapt(p):
    """A parameter as psycopg sends it."""
    if isinstance(p, Json):
        return psycopg.types.json.Jsonb(json.loads(p.text))
    if isinstance(p, list) and p and isinstance(p[0], Json):
        return [psycopg.types.json.Jsonb(json.loads(x.text)) for x in p]
    return p


# ---------------------------------------------------------------------------
# Sessions


class Res:
    """The result of a call: rows, or an error's SQLSTATE and message."""

    def __init__(self, rows=None, err=None, msg=None):
        self.rows = rows
        self.err = err
        self.msg = msg
        self.t0 = self.t1 = None    # the clock before and after the call

    def __repr__(self):
        if self.err:
            return "ERROR %s: %s" % (self.err, self.msg)
        return repr(self.rows)

    def one(self):
        return self.rows[0][0] if self.rows else None


class Session:
    """A connection of a superuser that calls as the logins of the
    tenants (SET SESSION AUTHORIZATION: the session user decides the
    tenant), optionally inside a transaction left open across steps."""

    def __init__(self, name, conninfo):
        self.name = name
        self.conn = psycopg.connect(conninfo, autocommit=True)
        self.conn.execute("SET lock_timeout = '1s'")
        self.conn.execute("SET statement_timeout = '60s'")
        self.conn.execute("SET wfengine.decide_failure_window = '1h'")
        self.conn.execute("SET client_min_messages = warning")
        self.notices = []
        self.conn.add_notice_handler(lambda d: self.notices.append(
            "%s: %s (%s)" % (d.severity, d.message_primary, d.message_detail)))
        self.auth = None
        self.in_txn = False
        self.savepoints = False     # each statement of the transaction in a savepoint

    def as_login(self, login):
        if login != self.auth:
            if login is None:
                self.conn.execute("RESET SESSION AUTHORIZATION")
            else:
                self.conn.execute(pgsql.SQL("SET SESSION AUTHORIZATION {}").format(
                    pgsql.Identifier(login)))
            self.auth = login

    def run(self, login, sqltext, params=()):
        sp = self.in_txn and self.savepoints
        t0 = None
        try:
            self.as_login(login)
            if sp:
                self.conn.execute("SAVEPOINT fz")
            t0 = time.time()
            cur = self.conn.execute(sqltext, [adapt(p) for p in params])
            res = Res(rows=cur.fetchall() if cur.description else [])
            res.t0, res.t1 = t0, time.time()
            if sp:
                self.conn.execute("RELEASE SAVEPOINT fz")
            return res
        except psycopg.Error as e:
            res = Res(err=e.sqlstate, msg=e.diag.message_primary)
            res.t0, res.t1 = t0 or time.time(), time.time()
            if sp:
                self.conn.execute("ROLLBACK TO SAVEPOINT fz")
            return res

    def end_txn(self, how):
        self.conn.execute(how)
        self.in_txn = False
        self.auth = None    # a rollback undoes SET SESSION AUTHORIZATION

    def close(self):
        try:
            self.conn.close()
        except Exception:
            pass


# ---------------------------------------------------------------------------


class Failure(Exception):
    def __init__(self, kind, message, step):
        super().__init__(message)
        self.kind = kind
        self.step = step


class Skip(Exception):
    """The step finds nothing to act on (or would wait for a lock an open
    transaction holds): it is skipped."""


def answers(res):
    return [r[0] for r in res.rows]


class Fuzzer:
    """The database side: one admin connection, the sessions, and the tags
    of tenant names."""

    def __init__(self, conninfo, worker_on, verbose=False):
        self.conninfo = conninfo
        self.admin = Session("admin", conninfo)
        self.admin.conn.execute("CREATE EXTENSION IF NOT EXISTS wfengine")
        self.sessions = [Session("s%d" % (i + 1), conninfo) for i in range(4)]
        self.worker_on = worker_on
        self.verbose = verbose
        self.tag = os.urandom(2).hex()
        self.count = 0
        self.known = {}
        self.stats = {}
        self.nobody = "fz%s_nobody" % self.tag
        self.admin.run(None, pgsql.SQL("CREATE ROLE {} LOGIN IN ROLE wfengine_app, wfengine_worker")
                       .format(pgsql.Identifier(self.nobody)))

    def close(self):
        for s in self.sessions:
            s.close()
        self.admin.run(None, pgsql.SQL("DROP ROLE IF EXISTS {}").format(pgsql.Identifier(self.nobody)))
        self.admin.close()

    def run_sequence(self, seed, steps, params, log=None):
        self.count += 1
        seq = Sequence(self, "fz%s%d" % (self.tag, self.count), seed, steps, params, log)
        try:
            return seq.run()
        finally:
            seq.teardown()


class Sequence:
    def __init__(self, fz, prefix, seed, steps, params, log):
        self.fz = fz
        self.prefix = prefix
        self.seed = seed
        self.steps = steps
        self.params = params
        self.log = log if log is not None else []
        self.sessions = fz.sessions[:params["sessions"]]
        self.tnames = [prefix + "a", prefix + "b"]
        self.logins = {t: {r: "%s_%s" % (t, r) for r in M.ROLES} for t in self.tnames}
        self.model = None
        self.step_no = 0
        self.digests = None
        self.skipped = 0
        self.executed = 0
        self.known_broken = set()   # runs a known bug broke: verify_run not asked
        self.verified = {}          # run id -> (seq, task rows) when last verified
        self.quota_stamp = {}       # tenant -> its leased tasks when last explained

    # -- logging ------------------------------------------------------------
    def note(self, session, login, text, res):
        self.log.append((0 if session == "setup" else self.step_no, session, login, text, res))

    def call(self, sess, login, sqltext, params=()):
        res = sess.run(login, sqltext, params)
        self.tally(res)
        self.note(sess.name, login, render(sqltext, params), res)
        if self.fz.verbose:
            print("  [%d %s %s] %s -> %r" % (self.step_no, sess.name, login,
                                             render(sqltext, params), res), file=sys.stderr)
        if res.err is not None and sess.in_txn and sess.savepoints:
            # the statement was rolled back to its savepoint: the
            # transaction goes on (the step applies nothing for an error)
            self.note(sess.name, login, "ROLLBACK TO SAVEPOINT fz", Res(rows=[]))
        elif res.err is not None and sess.in_txn:
            # a client rolls back after an error; the model does once the
            # step has made its prediction (do_step)
            sess.end_txn("ROLLBACK")
            self.note(sess.name, login, "ROLLBACK", Res(rows=[]))
            self.aborted = sess.name
        return res

    def admin_sql(self, text, params=()):
        res = self.fz.admin.run(None, text, params)
        if res.err:
            raise RuntimeError("setup statement failed: %s: %r" % (text, res))
        if not isinstance(text, str):
            text = text.as_string(self.fz.admin.conn)
        self.note("setup", None, render(text, params), res)
        return res

    def tally(self, res):
        """Counts the answers of each kind of step (--stats)."""
        if res.err:
            out = "error " + res.err
        elif not res.rows:
            out = "no rows"
        else:
            vals = set()
            for row in res.rows:
                v = row[0]
                if isinstance(v, list):
                    vals.update(v)
                elif isinstance(v, str) and len(v) < 24 and not v.startswith("fz"):
                    vals.add(v)
                elif len(row) > 1 and isinstance(row[1], str) and len(row[1]) < 20:
                    vals.add(row[1])
                else:
                    vals.add("rows")
            out = ",".join(sorted(str(v) for v in vals))
        key = (self.cur_kind, out)
        self.fz.stats[key] = self.fz.stats.get(key, 0) + 1

    # -- setup and teardown --------------------------------------------------
    def setup(self):
        tenants = []
        for i, t in enumerate(self.tnames):
            pol = dict(self.params["policies"][i])
            self.admin_sql("SELECT wf.create_tenant(%s)", [t])
            for r in M.ROLES:
                self.admin_sql(pgsql.SQL("CREATE ROLE {} LOGIN IN ROLE {}, {}").format(
                    pgsql.Identifier(self.logins[t][r]), pgsql.Identifier("wfengine_" + r),
                    pgsql.Identifier("wf_tenant_" + t)))
            policy = {}
            if "max_live_runs" in pol:
                policy["max_live_runs"] = pol["max_live_runs"]
            if "max_tasks_in_flight" in pol:
                policy["max_tasks_in_flight"] = pol["max_tasks_in_flight"]
            if "burst" in pol:
                policy["max_starts_per_second"] = M.Bucket.RATE
                policy["start_burst"] = pol["burst"]
            if "max_buffered" in pol:
                policy["max_buffered_events"] = pol["max_buffered"]
            if pol.get("retention"):
                policy["retention"] = "1 microsecond"
            if policy:
                self.admin_sql("SELECT wf.set_tenant_policy(%s, %s)", [t, Json(policy)])
            tenants.append(M.TenantState(t, pol))
        self.model = M.Model(tenants)
        sess = self.sessions[0]
        for t in self.tnames:
            for d in M.DEF_NAMES:
                res = sess.run(self.logins[t]["admin"], "SELECT wf.publish_definition(%s, %s)",
                               [d, Json(M.DEFINITIONS[d][0])])
                self.note("setup", self.logins[t]["admin"],
                          render("SELECT wf.publish_definition(%s, %s)", [d, Json(M.DEFINITIONS[d][0])]), res)
                if res.err or res.one() != 1:
                    raise RuntimeError("publish of %s failed: %r" % (d, res))
                self.model.tenants[t].versions[d]["v0"] = 1
        self.digests = self.tenant_digests()

    def teardown(self):
        for s in self.sessions:
            try:
                if s.in_txn:
                    s.end_txn("ROLLBACK")
                s.as_login(None)
            except psycopg.Error:
                s.close()
                idx = self.fz.sessions.index(s)
                self.fz.sessions[idx] = Session(s.name, self.fz.conninfo)
        if self.model is None:
            return
        s = self.fz.sessions[0]
        for t in self.tnames:
            # end what lives (and release holds), so that nothing of this
            # sequence is ever due again and the purge can take it all
            s.run(self.logins[t]["operator"],
                  "SELECT wf.terminate_run(run_id, 'fuzz teardown') FROM wf.runs "
                  "WHERE status IN ('running', 'paused', 'cancelling', 'compensating', "
                  "'compensation_failed')")
            s.run(self.logins[t]["operator"],
                  "SELECT wf.set_legal_hold(run_id, false, 'fuzz teardown') FROM wf.runs "
                  "WHERE legal_hold")
        s.as_login(None)
        for t in self.tnames:
            self.fz.admin.run(None, "SELECT wf.set_tenant_policy(%s, %s)",
                              [t, Json({"retention": "1 microsecond"})])
        self.fz.admin.run(None, "SELECT wf.purge_runs(100000)")
        for table in ("buffered_events", "decide_failures", "tenant_policies"):
            self.fz.admin.run(None, "DELETE FROM wf.%s WHERE tenant_id = ANY(%%s)" % table, [self.tnames])
        for t in self.tnames:
            for r in M.ROLES:
                self.fz.admin.run(None, pgsql.SQL("DROP ROLE IF EXISTS {}").format(
                    pgsql.Identifier(self.logins[t][r])))
            self.fz.admin.run(None, pgsql.SQL("DROP ROLE IF EXISTS {}").format(
                pgsql.Identifier("wf_tenant_" + t)))

    # -- the run ------------------------------------------------------------
    def run(self):
        """Runs the sequence; returns None, or the Failure."""
        try:
            self.setup()
        except Exception as e:
            return Failure("setup", "setup failed: %s" % e, 0)
        for i, st in enumerate(self.steps):
            self.step_no = i + 1
            self.model.clock = self.step_no
            try:
                self.do_step(st)
                self.executed += 1
            except Skip as e:
                self.skipped += 1
                key = (st["k"], "skipped(%s)" % e)
                self.fz.stats[key] = self.fz.stats.get(key, 0) + 1
                continue
            except KnownBug as e:
                self.fz.known[e.name] = self.fz.known.get(e.name, 0) + 1
                self.executed += 1
            except Mismatch as e:
                return Failure(e.kind, str(e), self.step_no)
            except Failure as e:
                return e
            except psycopg.Error as e:
                return Failure("driver", "%s: %s" % (type(e).__name__, e), self.step_no)
            try:
                if self.fz.worker_on:
                    self.settle()
                self.check(st)
            except Mismatch as e:
                return Failure(e.kind, str(e), self.step_no)
            except Failure as e:
                return e
        return None

    # -- step dispatch ------------------------------------------------------
    def do_step(self, st):
        k = st["k"]
        self.sess = self.sessions[st["s"] % len(self.sessions)]
        self.txn = self.model.txn_of(self.sess.name)
        self.tenant = self.tnames[st["t"]]
        self.other = self.tnames[1 - st["t"]]
        role = st.get("role") or RIGHT_ROLE.get(k)
        self.role = role
        self.login = self.logins[self.tenant][role] if role else None
        if self.txn is not None and k not in ("commit", "rollback", "begin"):
            self.txn.tenants.add(self.tenant)
        self.aborted = None
        self.blocked_step = False
        self.cur_kind = k
        try:
            getattr(self, "op_" + k)(st)
        finally:
            if self.aborted is not None:
                self.model.rollback(self.aborted)

    def denied(self, func):
        """The SQLSTATE a call of func by the step's login must fail with
        before anything else: 42501 when its job role may not execute it."""
        if func in M.ROLE_FUNCS[self.role]:
            return None
        return "42501"

    def expect(self, res, want, what):
        """want: a value, or ("error", sqlstate)."""
        if isinstance(want, tuple) and want[0] == "error":
            if res.err != want[1]:
                raise Mismatch("answer", "%s: expected error %s, got %r" % (what, want[1], res))
            return
        if res.err is not None:
            raise Mismatch("answer", "%s: expected %r, got %r" % (what, want, res))
        got = res.one()
        if got != want:
            raise Mismatch("answer", "%s: expected %r, got %r" % (what, want, got))

    def expect_error(self, res, code, what):
        if res.err != code:
            raise Mismatch("answer", "%s: expected error %s, got %r" % (what, code, res))

    # -- choosing targets ---------------------------------------------------
    def pick(self, items, st, key="x"):
        if not items:
            raise Skip("pick")
        return items[st[key] % len(items)]

    def tenant_runs(self, tenant):
        return [r for r in sorted(self.model.runs.values(), key=lambda r: r.uid)
                if r.tenant == tenant and r.id is not None
                and not self.model.invisible_to(self.sess.name, run=r)]

    def tenant_tasks(self, tenant):
        out = []
        for t in sorted(self.model.tasks.values(), key=lambda t: t.uid):
            run = self.model.runs.get(t.run)
            if run is None or run.tenant != tenant or t.id is None:
                continue
            if self.model.invisible_to(self.sess.name, task=t):
                continue
            out.append(t)
        return out

    def free_run(self, run):
        if self.model.locked_by_other(self.sess.name, run=run):
            raise Skip("free_run")

    def free_run_task(self, run):
        """A command locks the run's live task, then the run."""
        self.free_run(run)
        if run.task is not None:
            t = self.model.tasks.get(run.task)
            if t is not None and self.model.locked_by_other(self.sess.name, task=t):
                raise Skip("free_run_task")

    def free_task(self, task):
        if self.model.locked_by_other(self.sess.name, task=task):
            raise Skip("free_task")
        run = self.model.runs[task.run]
        if self.model.locked_by_other(self.sess.name, run=run):
            raise Skip("free_task")

    def choose_task(self, st, pref=("leased",), key="x"):
        """A task of the step's tenant (or of the other tenant, xt), with a
        preference for the given statuses."""
        tenant = self.other if st.get("xt") else self.tenant
        tasks = self.tenant_tasks(tenant)
        good = [t for t in tasks if t.status in pref]
        if good and st["z"] % 7 != 0:
            tasks = good
        elif tasks and st["z"] % 7 != 0:
            # no task in the preferred state: a recent one
            tasks = tasks[-4:]
        return self.pick(tasks, st, key)

    def choose_fence(self, task, st):
        """current (mostly), an older one, one never issued, 0."""
        m = st["y"] % 12
        cur = task.fence if task.fence is not None else 0
        if m < 9 or cur == 0:
            if cur == 0 and m >= 8:
                return cur + 1 + (st["y"] % 3)
            return cur if cur else 1
        if m < 11 and len(task.fences) > 1:
            return task.fences[-2]
        if m < 11 and cur > 1:
            return cur - 1
        return cur + 1000 + (st["y"] % 7)

    def choose_run(self, st, pref=None):
        tenant = self.other if st.get("xt") else self.tenant
        runs = self.tenant_runs(tenant)
        if pref:
            good = [r for r in runs if r.status in pref]
            if good and st["z"] % 6 != 0:
                runs = good
        return self.pick(runs, st)

    def own(self, obj_tenant):
        return obj_tenant == self.tenant

    # -- model helpers ------------------------------------------------------
    def due_on(self, run):
        m = self.model
        return any(tm.run == run.uid for tm in m.due_timers()) or \
            any(t.run == run.uid for t in m.due_deadlines())

    def touch(self, run):
        """The step's transaction locks the run: keep the originals of the
        run and its timers (nobody else changes them while it is locked)
        for a rollback; tasks are kept as they are changed (touch_task)."""
        self.model.touch_run(self.txn, run)
        if self.txn is not None:
            for tm in self.model.timers.values():
                if tm.run == run.uid:
                    self.model.touch_timer(self.txn, tm)

    def lock_live_task(self, run):
        if self.txn is not None and run.task is not None:
            self.txn.tasks.add(run.task)

    # =======================================================================
    # Operations
    # =======================================================================

    def run_input(self, d, st):
        v = st["y"] % 7
        if d == "evt":
            return {"k": "k%d" % (v % 3)}
        if d == "apv":
            return {"approvers": [[], ["ann", "ben"], ["ann"], ["ben", "ann"]][v % 4]}
        return {"n": v % 2}

    # -- start ----------------------------------------------------------------
    def predict_start(self, ten, d, inp, key, batch_seen=None, window=None):
        """The run a start returns: an existing one (by key), a new one, or
        an error SQLSTATE.  Returns ("run", Run) / ("new", None) / ("error", code)."""
        m = self.model
        if key is not None:
            for r in m.runs.values():
                if r.tenant == ten.name and r.key == key and not m.invisible_to(self.sess.name, run=r):
                    if r.defname != d or r.input != inp:
                        return ("error", "23505")
                    return ("run", r)
            if batch_seen is not None and key in batch_seen:
                r = batch_seen[key]
                if r.defname != d or r.input != inp:
                    return ("error", "23505")
                return ("run", r)
        lim = ten.policy.get("max_live_runs")
        if lim is not None:
            live = sum(1 for r in m.runs.values() if r.tenant == ten.name
                       and not m.invisible_to(self.sess.name, run=r)
                       and m.view_run(self.sess.name, r).status in M.LIVE)
            if live >= lim:
                return ("error", "54000")
        b = m.start_tokens[ten.name]
        if b is not None:
            p = b.predict(*window)
            if p == "no":
                return ("error", "54000")
            if p == "either":
                return ("either", None)     # too close to call: take the answer
        return ("new", None)
        return ("new", None)

    def new_run(self, ten, d, inp, key, window):
        m = self.model
        if m.start_tokens[ten.name] is not None:
            m.start_tokens[ten.name].took(*window)
        r = M.Run(m.uid(), ten.name, d, ten.latest[d], inp, key)
        m.runs[r.uid] = r
        if self.txn is not None:
            self.txn.created_runs.add(r.uid)
            self.txn.runs.add(r.uid)
        if d == "evt":
            r.keys.add("k:" + inp["k"])
        m.enter(self.txn, r, 0)
        if r.keys:
            self.deliver_buffered(ten, r)
        return r

    def deliver_buffered(self, ten, run):
        """A new run that declares a key takes the buffered events of the
        key whose name one of its wait_event steps waits for, in order."""
        waits = {s.event for s in self.model.steps(run) if s.kind == "wait"}
        for ev in ten.buffered:
            if ev["delivered"] or ev["key"] not in run.keys or ev["name"] not in waits:
                continue
            ev["delivered"] = True
            self.model.undo(self.txn, lambda ev=ev: ev.__setitem__("delivered", False))
            if self.txn is not None:
                self.txn.consumed_tenants.add(ten.name)
            if ev["eid"] is not None:
                run.eids.add(ev["eid"])
            self.give_signal(run, ev["name"])

    def give_signal(self, run, name):
        """A signal the run takes: consumed or stored.  Returns the outcome."""
        sd = self.model.cur_step(run)
        if run.status == "running" and sd is not None and sd.kind == "wait" and run.wait == "event" \
                and sd.event == name:
            self.model.enter(self.txn, run, run.step + 1)
            return "consumed"
        run.signals.append(name)
        return "stored"

    def start_guard(self, ten, key):
        """Skip a start that would wait for a lock another open transaction
        holds: the tenant's start quota lock, or the same key."""
        for sname, txn in self.model.txns.items():
            if sname == self.sess.name:
                continue
            if ten.name in txn.start_tenants and (ten.policy.get("max_live_runs") is not None
                                                  or ten.policy.get("burst") is not None):
                raise Skip("start_guard")
            if key is not None and (ten.name, key) in txn.keys:
                raise Skip("start_guard")

    def op_start(self, st):
        d = M.DEF_NAMES[st["x"] % len(M.DEF_NAMES)]
        inp = self.run_input(d, st)
        key = None if st["z"] % 2 == 0 else "key%d" % (st["z"] % 5)
        ten = self.model.tenants[self.tenant]
        self.start_guard(ten, key)
        if d == "evt":
            self.corr_guard(ten, "k:" + inp["k"])
        res = self.call(self.sess, self.login, "SELECT wf.start_run(%s, %s, %s)", [d, Json(inp), key])
        if not res.err and self.txn is not None and key is not None:
            self.txn.keys.add((ten.name, key))      # the key's lock, also for a run found
        den = self.denied("start_run")
        if den:
            return self.expect_error(res, den, "start_run by %s" % self.role)
        window = (res.t0, res.t1)
        kind, r = self.predict_start(ten, d, inp, key, window=window)
        if kind == "either":
            if res.err == "54000":
                self.model.start_tokens[ten.name].refused(*window)
                return
            kind = "new"
        if kind == "error":
            if r == "54000" and "starts runs faster" in (res.msg or ""):
                self.model.start_tokens[ten.name].refused(*window)
            return self.expect_error(res, r, "start_run(%s, key %s)" % (d, key))
        if res.err:
            raise Mismatch("answer", "start_run(%s, key %s): expected a run, got %r" % (d, key, res))
        run_id = str(res.one())
        if kind == "run":
            if run_id != r.id:
                raise Mismatch("answer", "start_run with key %s returned %s, not the run %s of the key"
                               % (key, run_id, r.id))
            return
        self.note_start(ten, key)
        r = self.new_run(ten, d, inp, key, window)
        r.id = run_id
        if self.model.run_by_id(run_id) is not r:
            raise Mismatch("answer", "start_run returned the id %s of another run" % run_id)

    def note_start(self, ten, key):
        if self.txn is not None:
            self.txn.start_tenants.add(ten.name)
            if key is not None:
                self.txn.keys.add((ten.name, key))

    def corr_guard(self, ten, ckey):
        for sname, txn in self.model.txns.items():
            if sname != self.sess.name and (ten.name, ckey) in txn.corr:
                raise Skip("corr_guard")
        if self.txn is not None:
            self.txn.corr.add((ten.name, ckey))

    def op_start_runs(self, st):
        d = M.DEF_NAMES[st["x"] % len(M.DEF_NAMES)]
        n = 1 + st["y"] % 3
        inputs, keys = [], []
        for i in range(n):
            inputs.append(self.run_input(d, {"y": st["y"] // (i + 1)}))
            keys.append(None if (st["z"] >> i) % 3 == 0 else "key%d" % ((st["z"] >> (2 * i)) % 4))
        ten = self.model.tenants[self.tenant]
        for key in keys:
            self.start_guard(ten, key)
        for inp in inputs:
            if d == "evt":
                self.corr_guard(ten, "k:" + inp["k"])
        res = self.call(self.sess, self.login, "SELECT run_id FROM wf.start_runs(%s, %s, %s)",
                        [d, [Json(i) for i in inputs], keys])
        if not res.err and self.txn is not None:
            for key in keys:
                if key is not None:
                    self.txn.keys.add((ten.name, key))
        den = self.denied("start_runs")
        if den:
            return self.expect_error(res, den, "start_runs by %s" % self.role)
        # predict element by element; an error fails the whole batch, and
        # what the elements before it made is taken back (scratch)
        m = self.model
        made = (set(m.runs), set(m.tasks), set(m.timers))
        m.scratch = []
        seen = {}
        out = []
        err = None
        window = (res.t0, res.t1)
        for inp, key in zip(inputs, keys):
            kind, r = self.predict_start(ten, d, inp, key, seen, window=window)
            if kind == "either":
                if res.err == "54000" and "starts runs faster" in (res.msg or ""):
                    # a refused batch does not tell whether this element
                    # took a token and a later one was refused
                    self.model.start_tokens[ten.name].unsure(*window)
                    err = "54000"
                    break
                kind = "new"
            if kind == "error":
                err = r
                if r == "54000" and "starts runs faster" in (res.msg or "") and \
                        self.model.start_tokens[ten.name] is not None:
                    self.model.start_tokens[ten.name].refused(*window)
                break
            if kind == "run":
                out.append(r)
                continue
            self.note_start(ten, key)
            r = self.new_run(ten, d, inp, key, window)
            if key is not None:
                seen[key] = r
            out.append(r)
        scratch, m.scratch = m.scratch, None
        if err is not None or res.err:
            # taken back; the tokens taken stay taken
            for fn in reversed(scratch):
                fn()
                if self.txn is not None and fn in self.txn.undo:
                    self.txn.undo.remove(fn)
            for objs, before in ((m.runs, made[0]), (m.tasks, made[1]), (m.timers, made[2])):
                for uid in [u for u in objs if u not in before]:
                    del objs[uid]
                    if self.txn is not None:
                        for sset in (self.txn.created_runs, self.txn.created_tasks, self.txn.created_timers,
                                     self.txn.runs, self.txn.tasks):
                            sset.discard(uid)
        if err is not None:
            if res.err != err:
                raise Mismatch("answer", "start_runs: expected error %s, got %r" % (err, res))
            return
        if res.err:
            raise Mismatch("answer", "start_runs: expected %d runs, got %r" % (len(out), res))
        ids = [str(x) for x in answers(res)]
        if len(ids) != len(out):
            raise Mismatch("answer", "start_runs returned %d ids for %d inputs" % (len(ids), len(out)))
        for r, rid in zip(out, ids):
            if r.id is None:
                r.id = rid
            elif r.id != rid:
                raise Mismatch("answer", "start_runs returned %s where the model has %s" % (rid, r.id))
        if len(set(ids)) != len(set(r.uid for r in out)):
            raise Mismatch("answer", "start_runs: the ids %s do not match the runs of the keys" % ids)

    # -- claims ---------------------------------------------------------------
    def claim_guard(self, ten, queues):
        if ten.policy.get("max_tasks_in_flight") is None:
            return
        for sname, txn in self.model.txns.items():
            if sname == self.sess.name:
                continue
            for q in queues:
                if (ten.name, q) in txn.claim_queues:
                    raise Skip("claim_guard")
        if self.txn is not None:
            for q in queues:
                self.txn.claim_queues.add((ten.name, q))

    def predict_claim(self, ten, queues, n, already=()):
        """The tasks a claim leases, in order (the queues in the order given)."""
        out = []
        room = None
        lim = ten.policy.get("max_tasks_in_flight")
        seenq = []
        for q in queues:
            if q in seenq:
                continue
            seenq.append(q)
            cand = [t for t in self.model.claimable(self.sess.name, ten.name, q) if t not in already]
            if lim is not None:
                # the continuations this call leased count too
                made = sum(1 for t in already if t.queue == q)
                room = max(0, lim - self.model.leased_count(ten.name, q, self.sess.name) - made)
                cand = cand[:room]
            for t in cand:
                if len(out) + len(already) >= n:
                    break
                out.append(t)
        return out

    def apply_claim(self, rows, predicted, what, short, col=0):
        """rows: (task_id, run_id, step, attempt, fence) per leased task."""
        got = []
        for row in rows:
            task_id, run_id, step, attempt, fence = row[col:col + 5]
            if task_id is None:
                continue
            got.append((task_id, str(run_id), step, attempt, fence))
        if len(got) != len(predicted):
            raise Mismatch("answer", "%s leased %d tasks, the model expects %d: got %s, expected %s"
                           % (what, len(got), len(predicted), [g[:4] for g in got],
                              [self.describe(t) for t in predicted]))
        for (task_id, run_id, step, attempt, fence), t in zip(got, predicted):
            run = self.model.runs[t.run]
            if run.id != run_id or t.step != step or t.attempt != attempt or \
                    (t.id is not None and t.id != task_id):
                raise Mismatch("answer", "%s leased task %s (run %s, %s attempt %s), the model expects %s"
                               % (what, task_id, run_id, step, attempt, self.describe(t)))
            t.id = task_id
            self.model.lease(self.txn, t, fence, short)

    def describe(self, t):
        run = self.model.runs.get(t.run)
        return "task %s (run %s, %s attempt %s, %s)" % (t.id, run.id if run else "?", t.step,
                                                        t.attempt, t.status)

    def busy_queues(self):
        ten = self.tenant
        return sorted({t.queue for t in self.model.tasks.values()
                       if t.status == "ready" and self.model.runs.get(t.run) is not None
                       and self.model.runs[t.run].tenant == ten})

    def pick_queue(self, st, key="x"):
        busy = self.busy_queues()
        if busy and st["z"] % 5:
            return busy[st[key] % len(busy)]
        return M.QUEUES[st[key] % len(M.QUEUES)]

    def op_claim(self, st):
        q = self.pick_queue(st)
        n = 1 + st["y"] % 3
        short = st["z"] % 4 == 0
        lease = "1 millisecond" if short else "1 hour"
        ten = self.model.tenants[self.tenant]
        self.claim_guard(ten, [q])
        res = self.call(self.sess, self.login,
                        "SELECT task_id, run_id, step, attempt, fence FROM wf.claim_tasks(%s, %s, %s, %s)",
                        [q, "w" + str(st["s"]), n, lease])
        den = self.denied("claim_tasks")
        if den:
            return self.expect_error(res, den, "claim_tasks by %s" % self.role)
        pred = self.predict_claim(ten, [q], n)
        if res.err:
            raise Mismatch("answer", "claim_tasks(%s): %r" % (q, res))
        self.apply_claim(res.rows, pred, "claim_tasks(%s, max %d)" % (q, n), short)

    def op_claim_any(self, st):
        qs = [M.QUEUES[(st["x"] >> (2 * i)) % len(M.QUEUES)] for i in range(1 + st["y"] % 3)]
        busy = self.busy_queues()
        if busy and st["z"] % 3:
            qs[st["y"] % len(qs)] = busy[st["x"] % len(busy)]
        n = 1 + st["z"] % 4
        short = st["z"] % 5 == 0
        lease = "1 millisecond" if short else "1 hour"
        ten = self.model.tenants[self.tenant]
        self.claim_guard(ten, qs)
        res = self.call(self.sess, self.login,
                        "SELECT task_id, run_id, step, attempt, fence FROM wf.claim_tasks_any(%s, %s, %s, %s)",
                        [qs, "w" + str(st["s"]), n, lease])
        den = self.denied("claim_tasks_any")
        if den:
            return self.expect_error(res, den, "claim_tasks_any by %s" % self.role)
        pred = self.predict_claim(ten, qs, n)
        if res.err:
            raise Mismatch("answer", "claim_tasks_any(%s): %r" % (qs, res))
        self.apply_claim(res.rows, pred, "claim_tasks_any(%s, max %d)" % (qs, n), short)

    # -- reports --------------------------------------------------------------
    def predict_report(self, task, fence, lenient=False):
        """The verdict of a report under fence (result.c's rules, as
        docs/reference.md tells them); None for a task of another tenant."""
        if task is None or self.model.runs[task.run].tenant != self.tenant:
            return "unknown_task" if lenient else ("error", "42704")
        cur = task.fence or 0
        if fence <= 0 or fence > cur:
            return "unknown_fence" if lenient else ("error", "22023")
        run = self.model.runs[task.run]
        if run.status in ("running", "paused", "cancelling") and task.status == "leased" and fence == cur:
            if run.status == "cancelling" and task.comp_of is None:
                return "cancel_requested"
            return "accepted"
        if fence == cur and task.status in ("completed", "failed"):
            # --selftest plants a wrong prediction here
            return "stale" if M.SELFTEST else "duplicate"
        return "stale"

    def apply_report(self, task, verdict, rep):
        if verdict not in ("accepted", "cancel_requested"):
            return
        run = self.model.runs[task.run]
        self.touch(run)
        self.model.touch_task(self.txn, task)
        task.status = "completed" if rep["kind"] == "complete" else "failed"
        task.deadline = False
        if run.status == "paused":
            run.held = dict(rep, task=task.uid)
            return
        self.model.apply_result(self.txn, run, task, rep)

    def report_target(self, st):
        task = self.choose_task(st, ("leased",))
        if st.get("xt"):
            return task, self.choose_fence(task, st), True
        self.free_task(task)
        return task, self.choose_fence(task, st), False

    def report_rep(self, kind, st):
        if kind == "complete":
            return {"kind": "complete"}
        return {"kind": "fail", "retryable": st["z"] % 4 != 0}

    def op_complete(self, st):
        self.single_report("complete", st)

    def op_fail(self, st):
        self.single_report("fail", st)

    def single_report(self, kind, st):
        task, fence, foreign = self.report_target(st)
        rep = self.report_rep(kind, st)
        if kind == "complete":
            res = self.call(self.sess, self.login, "SELECT wf.complete_task(%s, %s, %s)",
                            [task.id, fence, Json(fuzz_output("fuzz", st))])
        else:
            res = self.call(self.sess, self.login, "SELECT wf.fail_task(%s, %s, %s, %s)",
                            [task.id, fence, Json({"code": "boom"}), rep["retryable"]])
        func = "complete_task" if kind == "complete" else "fail_task"
        den = self.denied(func)
        if den:
            return self.expect_error(res, den, "%s by %s" % (func, self.role))
        want = self.predict_report(None if foreign else task, fence)
        self.expect(res, want, "%s(%s, fence %s) of %s" % (func, task.id, fence, self.describe(task)))
        if not foreign and not isinstance(want, tuple):
            self.lock_task_run(task)
            self.apply_report(task, want, rep)

    def lock_task_run(self, task):
        run = self.model.runs[task.run]
        self.touch(run)
        if self.txn is not None:
            self.txn.tasks.add(task.uid)

    def batch_targets(self, st):
        n = 1 + st["y"] % 3
        items = []
        for i in range(n):
            sub = dict(st, x=st["x"] // (i + 1) + i, y=(st["y"] >> i) + i)
            if i > 0 and (st["z"] >> i) % 4 == 0 and items:
                items.append(items[0])      # the same task twice
                continue
            task, fence, foreign = self.report_target(sub)
            items.append((task, fence, foreign))
        return items

    def run_batch(self, items, kind, st, what):
        """The verdicts of a batch, applied in task id order (elements of one
        id in input order); returns the verdicts in input order."""
        order = sorted(range(len(items)), key=lambda i: (items[i][0].id, i))
        verdicts = [None] * len(items)
        rep = self.report_rep(kind, st)
        for i in order:
            task, fence, foreign = items[i]
            v = self.predict_report(None if foreign else task, fence, lenient=True)
            verdicts[i] = v
            if not foreign and v in ("accepted", "cancel_requested"):
                self.lock_task_run(task)
                self.apply_report(task, v, rep)
            elif not foreign and v in ("duplicate", "stale", "unknown_fence"):
                self.lock_task_run(task)
        return verdicts, rep

    def op_complete_batch(self, st):
        self.batch_report("complete", st)

    def op_fail_batch(self, st):
        self.batch_report("fail", st)

    def batch_report(self, kind, st):
        items = self.batch_targets(st)
        ids = [t.id for t, _, _ in items]
        fences = [f for _, f, _ in items]
        if kind == "complete":
            res = self.call(self.sess, self.login, "SELECT task_id, answer FROM wf.complete_tasks(%s, %s)",
                            [ids, fences])
            func = "complete_tasks"
        else:
            retry = st["z"] % 4 != 0
            res = self.call(self.sess, self.login,
                            "SELECT task_id, answer FROM wf.fail_tasks(%s, %s, %s, %s)",
                            [ids, fences, [Json({"code": "boom"})] * len(ids), [retry] * len(ids)])
            func = "fail_tasks"
        den = self.denied(func)
        if den:
            return self.expect_error(res, den, "%s by %s" % (func, self.role))
        if res.err:
            raise Mismatch("answer", "%s(%s, %s): %r" % (func, ids, fences, res))
        verdicts, _ = self.run_batch(items, kind, st, func)
        got = [(r[0], r[1]) for r in res.rows]
        want = list(zip(ids, verdicts))
        if got != want:
            raise Mismatch("answer", "%s(%s, %s): expected %s, got %s" % (func, ids, fences, want, got))

    def continuation(self, run, queue, was_live):
        """The attempt a report's transition scheduled on queue, available
        now: the eager claim leases it first."""
        if run.task is None or run.task == was_live:
            return None
        t = self.model.tasks[run.task]
        if t.status == "ready" and t.queue == queue and not t.quarantined and t.attempt >= 1:
            return t
        return None

    def next_queue(self, task, st):
        """The claim queue of an eager report: the queue of the task's next
        step (a continuation) or of the task, or any."""
        run = self.model.runs.get(task.run)
        m = st["z"] % 4
        if run is not None and m < 2 and run.step is not None:
            steps = self.model.steps(run)
            if run.step + 1 < len(steps) and steps[run.step + 1].queue:
                return steps[run.step + 1].queue
        if m < 3:
            return task.queue
        return M.QUEUES[st["z"] % len(M.QUEUES)]

    def op_complete_eager(self, st):
        self.eager_report("complete", st)

    def op_fail_eager(self, st):
        self.eager_report("fail", st)

    def eager_report(self, kind, st):
        task, fence, foreign = self.report_target(st)
        q = self.next_queue(task, st)
        n = 1 + (st["z"] >> 3) % 2
        ten = self.model.tenants[self.tenant]
        self.claim_guard(ten, [q])
        rep = self.report_rep(kind, st)
        if kind == "complete":
            func = "complete_and_claim"
            res = self.call(self.sess, self.login,
                            "SELECT answer, task_id, run_id, step, attempt, fence FROM "
                            "wf.complete_and_claim(%s, %s, %s, %s, %s, %s, %s)",
                            [task.id, fence, Json(fuzz_output("eager", st)), q, "e" + str(st["s"]), n, "1 hour"])
        else:
            func = "fail_and_claim"
            res = self.call(self.sess, self.login,
                            "SELECT answer, task_id, run_id, step, attempt, fence FROM "
                            "wf.fail_and_claim(%s, %s, %s, %s, %s, %s, %s, %s)",
                            [task.id, fence, Json({"code": "boom"}), rep["retryable"], q,
                             "e" + str(st["s"]), n, "1 hour"])
        den = self.denied(func)
        if den:
            return self.expect_error(res, den, "%s by %s" % (func, self.role))
        want = self.predict_report(None if foreign else task, fence)
        if isinstance(want, tuple):
            return self.expect_error(res, want[1], "%s(%s, fence %s)" % (func, task.id, fence))
        if res.err:
            raise Mismatch("answer", "%s(%s, fence %s): expected %s, got %r" % (func, task.id, fence, want, res))
        gotv = {r[0] for r in res.rows}
        if gotv != {want}:
            raise Mismatch("answer", "%s(%s, fence %s) of %s: expected %s, got %s"
                           % (func, task.id, fence, self.describe(task), want, sorted(gotv)))
        cont = None
        if not foreign:
            run = self.model.runs[task.run]
            before = run.task
            self.lock_task_run(task)
            self.apply_report(task, want, rep)
            cont = self.continuation(run, q, before) if want == "accepted" else None
        lim = ten.policy.get("max_tasks_in_flight")
        if cont is not None and lim is not None and \
                self.model.leased_count(ten.name, q, self.sess.name) >= lim:
            cont = None     # at the limit the continuation is not leased either
        first = [cont] if cont is not None else []
        pred = first + self.predict_claim(ten, [q], n, already=first)
        self.apply_claim(res.rows, pred, "%s(%s) claim of %s" % (func, task.id, q), False, col=1)

    def op_complete_batch_eager(self, st):
        items = self.batch_targets(st)
        ids = [t.id for t, _, _ in items]
        fences = [f for _, f, _ in items]
        q = self.next_queue(items[0][0], st)
        n = 1 + (st["z"] >> 3) % 3
        ten = self.model.tenants[self.tenant]
        self.claim_guard(ten, [q])
        fail = st["y"] & 8 != 0
        if fail:
            func = "fail_tasks_and_claim"
            rep = self.report_rep("fail", st)
            res = self.call(self.sess, self.login,
                            "SELECT answers, task_id, run_id, step, attempt, fence FROM "
                            "wf.fail_tasks_and_claim(%s, %s, %s, %s, %s, %s, %s, %s)",
                            [ids, fences, [Json({"code": "boom"})] * len(ids), [rep["retryable"]] * len(ids),
                             q, "b" + str(st["s"]), n, "1 hour"])
        else:
            func = "complete_tasks_and_claim"
            rep = {"kind": "complete"}
            res = self.call(self.sess, self.login,
                            "SELECT answers, task_id, run_id, step, attempt, fence FROM "
                            "wf.complete_tasks_and_claim(%s, %s, NULL, %s, %s, %s, %s)",
                            [ids, fences, q, "b" + str(st["s"]), n, "1 hour"])
        den = self.denied(func)
        if den:
            return self.expect_error(res, den, "%s by %s" % (func, self.role))
        if res.err:
            raise Mismatch("answer", "%s(%s, %s): %r" % (func, ids, fences, res))
        # the continuations: reports in task id order offer the lease
        order = sorted(range(len(items)), key=lambda i: (items[i][0].id, i))
        verdicts = [None] * len(items)
        conts = []
        lim = ten.policy.get("max_tasks_in_flight")
        for i in order:
            task, fence, foreign = items[i]
            v = self.predict_report(None if foreign else task, fence, lenient=True)
            verdicts[i] = v
            if foreign or v not in ("accepted", "cancel_requested", "duplicate", "stale",
                                    "unknown_fence"):
                continue
            self.lock_task_run(task)
            if v not in ("accepted", "cancel_requested"):
                continue
            run = self.model.runs[task.run]
            before = run.task
            self.apply_report(task, v, rep)
            c = self.continuation(run, q, before) if v == "accepted" else None
            if c is not None and len(conts) < n:
                if lim is None or self.model.leased_count(ten.name, q, self.sess.name) + len(conts) < lim:
                    conts.append(c)
        gotv = {tuple(r[0]) for r in res.rows}
        if gotv != {tuple(verdicts)}:
            raise Mismatch("answer", "%s(%s, %s): expected %s, got %s"
                           % (func, ids, fences, verdicts, sorted(gotv)))
        # continuations are leased as they are made; the rest from the queue
        pred = conts + self.predict_claim(ten, [q], n, already=conts)
        self.apply_claim(res.rows, pred, "%s claim of %s" % (func, q), False, col=1)

    def op_heartbeat(self, st):
        task = self.choose_task(st, ("leased",))
        fence = self.choose_fence(task, st)
        foreign = bool(st.get("xt"))
        if not foreign:
            if self.model.locked_by_other(self.sess.name, task=task):
                raise Skip("op_heartbeat")
        res = self.call(self.sess, self.login, "SELECT wf.heartbeat(%s, %s, %s)",
                        [task.id, fence, Json({"pct": st["z"] % 100})])
        den = self.denied("heartbeat")
        if den:
            return self.expect_error(res, den, "heartbeat by %s" % self.role)
        if foreign:
            return self.expect_error(res, "42704", "heartbeat of another tenant's task")
        cur = task.fence or 0
        run = self.model.runs[task.run]
        if fence <= 0 or fence > cur:
            want = ("error", "22023")
        elif task.status == "leased" and fence == cur:
            want = "cancel_requested" if run.status == "cancelling" and task.comp_of is None else "ok"
        elif fence == cur and task.status == "cancelled":
            want = "cancel_requested"
        else:
            want = "stale"
        self.expect(res, want, "heartbeat(%s, %s) of %s" % (task.id, fence, self.describe(task)))
        if want in ("ok", "cancel_requested") and task.status == "leased":
            self.model.touch_task(self.txn, task)
            if self.txn is not None:
                self.txn.tasks.add(task.uid)
            # deadline_at: the new lease expiry (looked at even while paused)
            task.deadline = task.short

    # -- signals and events ---------------------------------------------------
    def op_signal(self, st):
        run = self.choose_run(st, ("running", "paused"))
        foreign = bool(st.get("xt"))
        if not foreign:
            self.free_run_task(run)
        name = "go" if st["y"] % 4 else "other"
        eid = None if st["z"] % 3 == 0 else "e%d" % (st["z"] % 4)
        res = self.call(self.sess, self.login, "SELECT wf.signal(%s, %s, %s, %s)",
                        [run.id, name, Json({"n": st["z"] % 10}), eid])
        den = self.denied("signal")
        if den:
            return self.expect_error(res, den, "signal by %s" % self.role)
        if foreign:
            return self.expect_error(res, "42704", "signal to another tenant's run")
        if run.status not in ("running", "paused"):
            return self.expect_error(res, "55000", "signal to a %s run" % run.status)
        self.touch(run)
        self.lock_live_task(run)
        if eid is not None and eid in run.eids:
            return self.expect(res, "duplicate", "signal %s with event id %s again" % (name, eid))
        want = self.give_signal_pred(run, name)
        self.expect(res, want, "signal(%s, %s, %s) to %s run at %s" % (run.id, name, eid, run.status,
                                                                      run.wait))
        if eid is not None:
            run.eids.add(eid)
        self.give_signal(run, name)

    def give_signal_pred(self, run, name):
        sd = self.model.cur_step(run)
        if run.status == "running" and sd is not None and sd.kind == "wait" and run.wait == "event" \
                and sd.event == name:
            return "consumed"
        return "stored"

    def op_send_event(self, st):
        ten = self.model.tenants[self.tenant]
        ckey = "k:k%d" % (st["x"] % 3)
        name = "go" if st["y"] % 4 else "other"
        eid = None if st["z"] % 4 == 0 else "e%d" % (st["z"] % 3)
        # the runs of the key, as the send's latest snapshot finds them
        targets = [r for r in self.tenant_runs(self.tenant)
                   if ckey in r.keys and self.model.view_run(self.sess.name, r).status
                   in ("running", "paused", "cancelling")]
        for r in targets:
            self.free_run_task(r)
        self.corr_guard(ten, ckey)
        # buffering takes the tenant's buffer quota lock until commit; and an
        # event another open transaction delivered still counts against the
        # tenant's max_buffered_events for the others until it commits
        for sname, txn in self.model.txns.items():
            if sname != self.sess.name and (ten.name in txn.buffer_tenants or
                                            ten.name in txn.consumed_tenants):
                raise Skip("op_send_event")
        if self.txn is not None and not targets:
            self.txn.buffer_tenants.add(ten.name)
        res = self.call(self.sess, self.login,
                        "SELECT run_id, outcome FROM wf.send_event(%s, %s, %s, %s)",
                        [ckey, name, Json({"n": st["z"] % 10}), eid])
        den = self.denied("send_event")
        if den:
            return self.expect_error(res, den, "send_event by %s" % self.role)
        live = [r for r in targets if r.status in ("running", "paused")]
        live.sort(key=lambda r: r.id)
        seen = ten.corr_eids.setdefault(ckey, set())
        if res.err:
            if res.err == "55000" and any(r.status == "cancelling" for r in targets):
                return
            lim = ten.policy.get("max_buffered")
            undelivered = sum(1 for e in ten.buffered if not e["delivered"])
            if not live and res.err == "54000" and lim is not None and lim > 0 and undelivered >= lim:
                return
            raise Mismatch("answer", "send_event(%s, %s, %s): %r" % (ckey, name, eid, res))
        got = [(str(r[0]) if r[0] is not None else None, r[1]) for r in res.rows]
        if eid is not None and eid in seen:
            # an event id the key has had (within its keep): one row, delivered
            # to no run, whatever ended or started since (issue 29, point 4)
            want = [(None, "duplicate")]
            if got != want:
                self.event_mismatch(ckey, name, eid, want, got, seen)
            return
        if not live:
            lim = ten.policy.get("max_buffered")
            undelivered = sum(1 for e in ten.buffered if not e["delivered"])
            if lim == 0:
                want = [(None, "dropped")]
            elif lim is not None and undelivered >= lim:
                raise Mismatch("answer", "send_event(%s) beyond max_buffered_events %d: expected "
                               "an error, got %s" % (ckey, lim, got))
            else:
                want = [(None, "buffered")]
            if got != want:
                self.event_mismatch(ckey, name, eid, want, got, seen)
                return
            if want[0][1] == "buffered":
                self.buffer_event(ten, ckey, name, eid)
            else:
                self.see_eid(ten, ckey, eid)    # a dropped event's id is kept too
            return
        want = []
        for r in live:
            self.touch(r)
            self.lock_live_task(r)
            if eid is not None and eid in r.eids:
                want.append((r.id, "duplicate"))    # wf.signal's own, per run
            else:
                want.append((r.id, self.give_signal_pred(r, name)))
        if got != want:
            self.event_mismatch(ckey, name, eid, want, got, seen)
            return
        for r, (_, outcome) in zip(live, want):
            if outcome != "duplicate":
                if eid is not None:
                    r.eids.add(eid)
                self.give_signal(r, name)
        self.see_eid(ten, ckey, eid)

    def buffer_event(self, ten, ckey, name, eid):
        """The tenant keeps an event for a key (undone by a rollback)."""
        ev = {"key": ckey, "name": name, "eid": eid, "delivered": False}
        ten.buffered.append(ev)
        self.model.undo(self.txn, lambda: ten.buffered.remove(ev))
        self.see_eid(ten, ckey, eid)

    def see_eid(self, ten, ckey, eid):
        """The key has had this event id (undone by a rollback)."""
        seen = ten.corr_eids.setdefault(ckey, set())
        if eid is not None and eid not in seen:
            seen.add(eid)
            self.model.undo(self.txn, lambda: seen.discard(eid))

    def event_mismatch(self, ckey, name, eid, want, got, seen):
        """send_event answered otherwise than the model predicts."""
        raise Mismatch("answer", "send_event(%s, %s, %s): expected %s, got %s" % (ckey, name, eid, want, got))

    # -- approvals --------------------------------------------------------------
    def op_issue_tokens(self, st):
        tenant = self.other if st.get("xt") else self.tenant
        alltasks = self.tenant_tasks(tenant)
        notif = [t for t in alltasks if t.notif]
        leased = [t for t in notif if t.status == "leased"]
        m = st["z"] % 10
        if leased and m < 8:
            tasks = leased
        elif notif and m < 9:
            tasks = notif
        else:
            tasks = alltasks
        task = self.pick(tasks, st)
        fence = self.choose_fence(task, st)
        foreign = bool(st.get("xt"))
        if not foreign:
            self.free_task(task)
        res = self.call(self.sess, self.login,
                        "SELECT approver, decision, token FROM wf.issue_approval_tokens(%s, %s)",
                        [task.id, fence])
        den = self.denied("issue_approval_tokens")
        if den:
            return self.expect_error(res, den, "issue_approval_tokens by %s" % self.role)
        if foreign:
            return self.expect_error(res, "42704", "issue_approval_tokens of another tenant's task")
        run = self.model.runs[task.run]
        if not task.notif:
            return self.expect_error(res, "42809", "issue_approval_tokens of %s" % self.describe(task))
        if not (task.status == "leased" and fence == task.fence and run.task == task.uid
                and run.status == "running"):
            return self.expect_error(res, "55000", "issue_approval_tokens(%s, %s) of %s, run %s"
                                     % (task.id, fence, self.describe(task), run.status))
        if res.err:
            raise Mismatch("answer", "issue_approval_tokens(%s, %s): %r" % (task.id, fence, res))
        pending = sorted(n for n, s in run.approvers.items() if s == "pending")
        got = sorted((r[0], r[1]) for r in res.rows)
        want = sorted((n, d) for n in pending for d in ("approve", "reject"))
        if got != want:
            raise Mismatch("answer", "issue_approval_tokens: expected %s, got %s" % (want, got))
        self.touch(run)
        self.lock_live_task(run)
        # earlier tokens of these approvers stop working
        for tok, info in self.model.tokens.items():
            if info["run"] == run.uid and info["approver"] in pending and info["live"]:
                if self.txn is not None:
                    self.txn.saved.setdefault(("tokrun", tok), dict(info))
                info["live"] = False
        for approver, decision, token in res.rows:
            self.model.tokens[token] = {"tenant": self.tenant, "run": run.uid, "visit": run.tokens_visit,
                                        "approver": approver, "decision": decision, "live": True}
            if self.txn is not None:
                self.txn.tokens.append(token)

    def op_decide(self, st):
        ten = self.model.tenants[self.tenant]
        m = st["y"] % 10
        toks = sorted(tok for tok, i in self.model.tokens.items()
                      if not self.model.invisible_to(self.sess.name, run=self.model.runs.get(i["run"]))
                      and i["run"] in self.model.runs)
        own = [t for t in toks if self.model.tokens[t]["tenant"] == self.tenant]
        if st.get("xt"):
            own = [t for t in toks if self.model.tokens[t]["tenant"] != self.tenant]
        good = [t for t in own if self.good_token(t)]
        token = None
        if m < 4 and good:
            token = good[st["x"] % len(good)]
        elif m < 7 and own:
            token = own[st["x"] % len(own)]
        elif m == 7:
            token = "wfa_" + hashlib.sha256(str(st["x"]).encode()).hexdigest()[:43]
        elif m == 8 and own:
            t = own[st["x"] % len(own)]
            token = t[:-1] + ("A" if t[-1] != "A" else "B")
        else:
            token = "not a token %d" % (st["x"] % 5)
        info = self.model.tokens.get(token)
        decision = info["decision"] if info and st["z"] % 6 else ("approve" if st["z"] % 2 else "reject")
        approver = info["approver"] if info and st["z"] % 5 else ["ann", "ben"][st["z"] % 2]
        run = self.model.runs.get(info["run"]) if info else None
        if run is not None and info["tenant"] == self.tenant:
            # an accepted decision that ends the step withdraws the live
            # notification task: its row too
            self.free_run_task(run)
        # a failure is counted in the approver's (and the token's) row of
        # wf.decide_failures, locked until the transaction ends
        for sname, txn in self.model.txns.items():
            if sname != self.sess.name and ((self.tenant, approver) in txn.approvers
                                           or (self.tenant, token) in txn.approvers):
                raise Skip("op_decide")
        if self.txn is not None:
            self.txn.approvers.add((self.tenant, approver))
            self.txn.approvers.add((self.tenant, token))
        res = self.call(self.sess, self.login, "SELECT wf.decide(%s, %s, %s)", [token, decision, approver])
        den = self.denied("decide")
        if den:
            return self.expect_error(res, den, "decide by %s" % self.role)
        if info is not None and run is not None and info["tenant"] == self.tenant and info["live"] \
                and info["decision"] == decision and not res.err:
            # the token found its row: the run is locked to answer (and a
            # refusal tied to the run is recorded in its history)
            self.touch(run)
        fails = ten.decide_failures.get(approver, 0)
        if fails >= M.DECIDE_FAILURE_LIMIT:
            return self.expect(res, "throttled", "decide by %s after %d failures" % (approver, fails))
        want = self.predict_decide(info, decision, approver, run)
        self.expect(res, want, "decide(%s..., %s, %s) %s" % (token[:10], decision, approver,
                                                             "run %s %s" % (run.status, run.wait) if run else ""))
        if want != "accepted":
            ten.decide_failures[approver] = fails + 1
            self.model.undo(self.txn, lambda: ten.decide_failures.__setitem__(approver, fails))
            return
        self.touch(run)
        if self.txn is not None:
            self.txn.saved.setdefault(("tokrun", token), dict(info))
        run.approvers[approver] = "decided"
        idx = run.step
        if decision == "approve":
            self.model.withdraw(self.txn, run, "approval_completed")
            self.model.close_tokens(self.txn, run, "closed")
            self.model.enter(self.txn, run, idx + 1)
        else:
            self.model.withdraw(self.txn, run, "approval_completed")
            self.model.close_tokens(self.txn, run, "closed")
            run.failed_at = (idx, "approval")
            run.fail_reason = "rejected"
            self.model.finish(self.txn, run, "failed")

    def good_token(self, tok):
        """A token that should be accepted now."""
        info = self.model.tokens[tok]
        run = self.model.runs.get(info["run"])
        if run is None or not info["live"] or info["visit"] != run.tokens_visit:
            return False
        sd = self.model.cur_step(run)
        return run.status == "running" and sd is not None and sd.kind == "approval" \
            and run.approvers.get(info["approver"]) == "pending"

    def predict_decide(self, info, decision, approver, run):
        if info is None or info["tenant"] != self.tenant or not info["live"] or run is None:
            return "invalid"
        if info["decision"] != decision or info["approver"] != approver:
            return "invalid"
        st = run.approvers.get(approver) if info["visit"] == run.tokens_visit else "closed"
        if st == "decided":
            return "already_decided"
        if st in ("closed", "dead") or st is None:
            return "already_decided" if st == "closed" or st is None else "invalid"
        sd = self.model.cur_step(run)
        if run.status != "running" or sd is None or sd.kind != "approval":
            return "invalid"
        return "accepted"

    # -- operator commands ------------------------------------------------------
    def op_cmd(self, st, func, pref):
        run = self.choose_run(st, pref)
        foreign = bool(st.get("xt"))
        if not foreign:
            self.free_run_task(run)
        reason = "" if st["z"] % 23 == 0 else "fuzz %d" % self.step_no
        return run, foreign, reason

    def cmd_common(self, res, func, run, foreign, reason):
        den = self.denied(func)
        if den:
            self.expect_error(res, den, "%s by %s" % (func, self.role))
            return True
        if not reason:
            self.expect_error(res, "22023", "%s with an empty reason" % func)
            return True
        if foreign:
            self.expect_error(res, "42704", "%s of another tenant's run" % func)
            return True
        return False

    def op_pause(self, st):
        run, foreign, reason = self.op_cmd(st, "pause_run", ("running",))
        res = self.call(self.sess, self.login, "SELECT wf.pause_run(%s, %s)", [run.id, reason])
        if self.cmd_common(res, "pause_run", run, foreign, reason):
            return
        if run.status != "running":
            return self.expect_error(res, "55000", "pause of a %s run" % run.status)
        self.expect(res, "paused", "pause_run")
        self.touch(run)
        self.lock_live_task(run)
        self.do_pause(run)

    def do_pause(self, run):
        run.status = "paused"
        if run.task is not None:
            t = self.model.tasks[run.task]
            if t.status == "ready":
                self.model.withdraw(self.txn, run, "paused")
                run.resched = True

    def op_resume(self, st):
        run, foreign, reason = self.op_cmd(st, "resume_run", ("paused",))
        res = self.call(self.sess, self.login, "SELECT wf.resume_run(%s, %s)", [run.id, reason])
        if self.cmd_common(res, "resume_run", run, foreign, reason):
            return
        if run.status != "paused":
            return self.expect_error(res, "55000", "resume of a %s run" % run.status)
        self.touch(run)
        self.lock_live_task(run)
        self.do_resume(run)
        self.expect(res, run.status, "resume_run")

    def do_resume(self, run):
        m = self.model
        run.status = "running"
        if run.held is not None:
            rep = run.held
            run.held = None
            task = m.tasks[rep["task"]]
            m.apply_result(self.txn, run, task, rep)
            return
        if run.resched:
            run.resched = False
            m.schedule_attempt(self.txn, run)
            return
        if run.task is not None:
            t = m.tasks[run.task]
            if t.status == "leased":
                m.touch_task(self.txn, t)
                t.deadline = True
            return
        for tm in m.run_timers(run, ("held",)):
            m.touch_timer(self.txn, tm)
            tm.state = "pending"
        sd = m.cur_step(run)
        if sd is not None and sd.kind == "wait" and run.wait == "event" and sd.event in run.signals:
            run.signals.remove(sd.event)
            m.enter(self.txn, run, run.step + 1)

    def op_cancel(self, st):
        run, foreign, reason = self.op_cmd(st, "cancel_run", ("running", "paused", "failed"))
        res = self.call(self.sess, self.login, "SELECT wf.cancel_run(%s, %s)", [run.id, reason])
        if self.cmd_common(res, "cancel_run", run, foreign, reason):
            return
        if run.status not in ("running", "paused", "failed"):
            return self.expect_error(res, "55000", "cancel of a %s run" % run.status)
        self.touch(run)
        self.lock_live_task(run)
        self.do_cancel(run)
        self.expect(res, run.status, "cancel_run")

    def do_cancel(self, run):
        m = self.model
        old = run.status
        run.status = "cancelling"
        if old == "failed":
            run.revived = True
            run.task = None
            m.start_compensation(self.txn, run)
            return
        # a result held while paused settles at once
        if run.held is not None:
            rep = run.held
            run.held = None
            task = m.tasks[rep["task"]]
            if task.notif:
                run.held_dropped = True
            m.apply_result(self.txn, run, task, rep)
            return
        m.close_tokens(self.txn, run, "closed")
        if run.task is not None:
            t = m.tasks[run.task]
            if t.status == "leased" and not t.notif:
                # in flight: it settles first; its deadlines are looked at
                # again at the next tick (deadline_at := now)
                m.touch_task(self.txn, t)
                t.deadline = True
                return
            m.withdraw(self.txn, run, "cancelled")
        run.resched = False
        m.start_compensation(self.txn, run)

    def op_terminate(self, st):
        run, foreign, reason = self.op_cmd(st, "terminate_run", ("running", "paused", "cancelling",
                                                                  "compensation_failed"))
        res = self.call(self.sess, self.login, "SELECT wf.terminate_run(%s, %s)", [run.id, reason])
        if self.cmd_common(res, "terminate_run", run, foreign, reason):
            return
        if run.status not in ("running", "paused", "cancelling", "compensation_failed"):
            return self.expect_error(res, "55000", "terminate of a %s run" % run.status)
        self.expect(res, run.status, "terminate_run")
        self.touch(run)
        self.lock_live_task(run)
        if run.held is not None:
            run.held_dropped = True
        self.model.withdraw(self.txn, run, "terminated")
        run.held = None
        run.resched = False
        self.model.close_tokens(self.txn, run, "closed")
        self.model.finish(self.txn, run, "terminated")

    def op_skip(self, st):
        run, foreign, reason = self.op_cmd(st, "skip_step", ("running", "failed"))
        res = self.call(self.sess, self.login, "SELECT wf.skip_step(%s, %s, %s)",
                        [run.id, Json({"skipped": True}), reason])
        if self.cmd_common(res, "skip_step", run, foreign, reason):
            return
        m = self.model
        if run.status == "compensation_failed":
            self.touch(run)
            self.lock_live_task(run)
            run.status = "cancelling"
            run.revived = True
            run.cancel["pending"].pop(0)
            run.finished_clock = None
            m.next_compensation(self.txn, run)
            return self.expect(res, run.status, "skip_step of a compensation")
        sd = m.cur_step(run)
        if run.status not in ("running", "failed") or sd is None:
            return self.expect_error(res, "55000", "skip of a %s run" % run.status)
        if not sd.skippable:
            return self.expect_error(res, "55000", "skip of step %s" % sd.name)
        self.touch(run)
        self.lock_live_task(run)
        m.withdraw(self.txn, run, "skipped")
        if run.status == "failed":
            run.status = "running"
            run.revived = True
            run.finished_clock = None
        m.close_tokens(self.txn, run, "closed")
        m.enter(self.txn, run, run.step + 1)
        self.expect(res, run.status, "skip_step of %s" % sd.name)

    def op_retry_step(self, st):
        run, foreign, reason = self.op_cmd(st, "retry_step", ("failed",))
        res = self.call(self.sess, self.login, "SELECT wf.retry_step(%s, %s)", [run.id, reason])
        if self.cmd_common(res, "retry_step", run, foreign, reason):
            return
        self.do_retry(run, res)

    def do_retry(self, run, res, batch=False):
        m = self.model
        if run.status == "compensation_failed":
            self.touch(run)
            run.status = "cancelling"
            run.revived = True
            run.finished_clock = None
            m.schedule_comp(self.txn, run)
            return self.expect(res, "cancelling", "retry_step of a compensation") if not batch else "cancelling"
        if run.status != "failed":
            return self.expect_error(res, "55000", "retry of a %s run" % run.status) if not batch else None
        sd = m.cur_step(run)
        if sd is None or sd.kind != "task" or run.fail_reason not in ("non_retryable", "attempts_exhausted"):
            return self.expect_error(res, "55000", "retry of a run failed at %s (%s)"
                                     % (sd.name if sd else None, run.fail_reason)) if not batch else None
        self.touch(run)
        run.status = "running"
        run.revived = True
        run.finished_clock = None
        m.schedule_attempt(self.txn, run)
        return self.expect(res, "running", "retry_step") if not batch else "running"

    def op_batch_cmd(self, st):
        which = ["cancel_runs", "resume_runs", "retry_runs"][st["y"] % 3]
        statuses = {"cancel_runs": ("running", "paused"), "resume_runs": ("paused",),
                    "retry_runs": ("failed", "compensation_failed")}[which]
        d = M.DEF_NAMES[st["x"] % len(M.DEF_NAMES)]
        filt = {"definition": d}
        if st["z"] % 4 == 0:
            filt["status"] = ["running", "paused", "failed"][st["z"] % 3]
        maxr = 1 + st["z"] % 4
        view = self.model.view_run
        sel = [r for r in self.tenant_runs(self.tenant) if r.defname == d
               and view(self.sess.name, r).status in statuses
               and view(self.sess.name, r).status == filt.get("status", view(self.sess.name, r).status)]
        sel.sort(key=lambda r: r.id)
        sel = sel[:maxr]
        for r in sel:
            self.free_run(r)
            if r.task is not None and self.model.locked_by_other(self.sess.name, task=self.model.tasks[r.task]):
                raise Skip("op_batch_cmd")
        res = self.call(self.sess, self.login, "SELECT run_id, outcome, detail FROM wf.%s(%%s, %%s, %%s)" % which,
                        ["fuzz batch", Json(filt), maxr])
        den = self.denied(which)
        if den:
            return self.expect_error(res, den, "%s by %s" % (which, self.role))
        if "status" in filt and filt["status"] not in statuses:
            return self.expect_error(res, "22023", "%s with status %s" % (which, filt["status"]))
        if res.err:
            raise Mismatch("answer", "%s(%s): %r" % (which, filt, res))
        want = []
        for r in sel:
            self.touch(r)
            self.lock_live_task(r)
            if which == "cancel_runs":
                self.do_cancel(r)
                want.append((r.id, "done", r.status))
            elif which == "resume_runs":
                self.do_resume(r)
                want.append((r.id, "done", r.status))
            else:
                out = self.do_retry(r, None, batch=True)
                want.append((r.id, "done" if out else "refused", out))
        got = [(str(a), b, c if b == "done" else None) for a, b, c in res.rows]
        if got != want:
            raise Mismatch("answer", "%s(%s, %d): expected %s, got %s" % (which, filt, maxr, want, got))

    def op_legal_hold(self, st):
        run = self.choose_run(st)
        foreign = bool(st.get("xt"))
        if not foreign:
            self.free_run_task(run)
        hold = st["z"] % 3 != 0
        res = self.call(self.sess, self.login, "SELECT wf.set_legal_hold(%s, %s, %s)",
                        [run.id, hold, "fuzz hold"])
        if not foreign and not res.err:
            self.lock_live_task(run)
        den = self.denied("set_legal_hold")
        if den:
            return self.expect_error(res, den, "set_legal_hold by %s" % self.role)
        if foreign:
            return self.expect_error(res, "42704", "set_legal_hold of another tenant's run")
        self.expect(res, run.legal_hold, "set_legal_hold")
        self.touch(run)
        run.legal_hold = hold

    # -- publish, tick, purge -------------------------------------------------
    def op_publish(self, st):
        if self.txn is not None:
            raise Skip("op_publish")
        d = M.DEF_NAMES[st["x"] % len(M.DEF_NAMES)]
        variant = "v%d" % (st["y"] % 3)
        spec = dict(M.DEFINITIONS[d][0])
        if variant != "v0":
            spec["description"] = "variant " + variant
        res = self.call(self.sess, self.login, "SELECT wf.publish_definition(%s, %s)", [d, Json(spec)])
        den = self.denied("publish_definition")
        if den:
            return self.expect_error(res, den, "publish_definition by %s" % self.role)
        ten = self.model.tenants[self.tenant]
        vers = ten.versions[d]
        want = vers.get(variant)
        if want is None:
            want = max(vers.values()) + 1
        self.expect(res, want, "publish_definition(%s, %s)" % (d, variant))
        if variant not in vers:
            vers[variant] = want
            ten.latest[d] = want

    def op_tick(self, st):
        if self.model.txns:
            raise Skip("op_tick")
        time.sleep(0.004)
        res = self.call(self.fz.admin, None, "SELECT wf.tick()")
        n = self.model.tick()
        if res.err:
            raise Mismatch("answer", "wf.tick(): %r" % res)
        if not self.fz.worker_on and res.one() != n:
            raise Mismatch("answer", "wf.tick() handled %s, the model expects %d" % (res.one(), n))

    def op_purge(self, st):
        if self.model.txns:
            raise Skip("op_purge")
        res = self.call(self.fz.admin, None, "SELECT wf.purge_runs()")
        if res.err:
            raise Mismatch("answer", "wf.purge_runs(): %r" % res)
        gone = []
        for r in list(self.model.runs.values()):
            ten = self.model.tenants[r.tenant]
            if ten.policy.get("retention") and r.status in ("completed", "failed", "terminated", "cancelled") \
                    and not r.legal_hold:
                gone.append(r)
        if res.one() != len(gone):
            raise Mismatch("answer", "wf.purge_runs() purged %s runs, the model expects %d"
                           % (res.one(), len(gone)))
        for r in gone:
            del self.model.runs[r.uid]
            for t in [t for t in self.model.tasks.values() if t.run == r.uid]:
                del self.model.tasks[t.uid]
            for tm in [tm for tm in self.model.timers.values() if tm.run == r.uid]:
                del self.model.timers[tm.uid]
            for tok in [tok for tok, i in self.model.tokens.items() if i["run"] == r.uid]:
                del self.model.tokens[tok]

    # -- transactions -----------------------------------------------------------
    def op_begin(self, st):
        if self.sess.in_txn:
            raise Skip("op_begin")
        res = self.call(self.sess, None if self.sess.auth is None else self.sess.auth, "BEGIN")
        if res.err:
            raise Mismatch("driver", "BEGIN: %r" % res)
        self.sess.in_txn = True
        self.sess.savepoints = st["x"] % 2 == 0
        if self.sess.savepoints:
            self.note(self.sess.name, None, "-- (each statement below in SAVEPOINT fz ... RELEASE SAVEPOINT fz)",
                      Res(rows=[]))
        self.model.begin(self.sess.name)

    def txn_session(self, st):
        open_ = [x for x in self.sessions if x.in_txn]
        if not open_:
            raise Skip("txn_session")
        self.sess = open_[st["x"] % len(open_)]

    def op_commit(self, st):
        self.txn_session(st)
        self.cur_kind = "commit"
        self.tally(Res(rows=[("done",)]))
        self.ended_txn_tenants = self.model.txns[self.sess.name].tenants
        self.sess.end_txn("COMMIT")
        self.note(self.sess.name, None, "COMMIT", Res(rows=[]))
        self.model.commit(self.sess.name)

    def op_rollback(self, st):
        self.txn_session(st)
        self.ended_txn_tenants = set()
        self.sess.end_txn("ROLLBACK")
        self.note(self.sess.name, None, "ROLLBACK", Res(rows=[]))
        self.model.rollback(self.sess.name)

    # -- lock waits -------------------------------------------------------------
    def op_blocked(self, st):
        """A call that must wait for a run another session's open transaction
        holds, with a short lock_timeout: it fails with 55P03 and changes
        nothing (it is not taken for anything else)."""
        if self.sess.in_txn:
            raise Skip("op_blocked")
        locked = []
        for name, txn in sorted(self.model.txns.items()):
            if name == self.sess.name:
                continue
            for uid in sorted(txn.runs):
                r = self.model.runs.get(uid)
                if r is not None and r.id is not None and uid not in txn.created_runs:
                    locked.append(r)
        run = self.pick(locked, st)
        self.tenant = run.tenant
        self.other = self.tnames[1 - self.tnames.index(run.tenant)]
        view = self.model.view_run(self.sess.name, run)
        calls = [("app", "SELECT wf.signal(%s, %s, '{}', %s)", [run.id, "go", "blk%d" % self.step_no]),
                 ("operator", "SELECT wf.pause_run(%s, 'blocked')", [run.id]),
                 ("operator", "SELECT wf.terminate_run(%s, 'blocked')", [run.id])]
        if view.keys and view.status in ("running", "paused"):
            key = sorted(view.keys)[0]
            ten = self.model.tenants[run.tenant]
            try:
                self.corr_guard(ten, key)
                calls.append(("app", "SELECT run_id, outcome FROM wf.send_event(%s, 'go', '{}', %s)",
                              [key, "blk%d" % self.step_no]))
            except Skip:
                pass
        if len(calls) > 3 and st["z"] % 2 == 0:
            role, text, params = calls[3]       # the send_event, half the time it can be
        else:
            role, text, params = calls[st["y"] % len(calls)]
        self.role = role
        login = self.logins[run.tenant][role]
        self.sess.conn.execute("SET lock_timeout = '50ms'")
        try:
            res = self.call(self.sess, login, text, params)
        finally:
            self.sess.conn.execute("SET lock_timeout = '1s'")
        self.blocked_step = True
        if res.err == "55P03":
            return
        raise Mismatch("answer", "%s must wait for the lock of run %s, which another transaction holds, "
                       "and time out (55P03); got %r" % (render(text, params), run.id, res))

    # -- isolation probes -------------------------------------------------------
    def op_peek(self, st):
        """A login reads the other tenant's rows by id: it must see none."""
        runs = self.tenant_runs(self.other)
        run = self.pick(runs, st)
        res = self.call(self.sess, self.login,
                        "SELECT (SELECT count(*) FROM wf.runs WHERE run_id = %s)"
                        " + (SELECT count(*) FROM wf.events WHERE run_id = %s)"
                        " + (SELECT count(*) FROM wf.event_log WHERE run_id = %s)"
                        " + (SELECT count(*) FROM wf.tasks WHERE run_id = %s)"
                        " + (SELECT count(*) FROM wf.runs WHERE tenant_id <> wf.current_tenant())",
                        [run.id, run.id, run.id, run.id])
        if res.err:
            raise Mismatch("answer", "a login of %s reading wf.runs: %r" % (self.tenant, res))
        if res.one() != 0:
            raise Mismatch("isolation", "a login of %s sees %s rows of tenant %s"
                           % (self.tenant, res.one(), self.other))
        res = self.call(self.sess, self.login, "SELECT wf.run_status(%s)", [run.id])
        if self.role in ("worker", "approver"):
            return self.expect_error(res, "42501", "run_status by %s" % self.role)
        self.expect_error(res, "42704", "run_status of another tenant's run")

    def op_nobody(self, st):
        """A login in job roles but in no tenant: every call is refused."""
        if self.txn is not None:
            raise Skip("op_nobody")
        runs = self.tenant_runs(self.tenant)
        rid = runs[st["x"] % len(runs)].id if runs else "00000000-0000-0000-0000-000000000000"
        calls = [("SELECT wf.run_status(%s)", [rid]),
                 ("SELECT count(*) FROM wf.claim_tasks('q1', 'w')", []),
                 ("SELECT wf.start_run('one', '{}')", []),
                 ("SELECT count(*) FROM wf.runs", [])]
        text, params = calls[st["y"] % len(calls)]
        res = self.call(self.sess, self.fz.nobody, text, params)
        self.expect_error(res, "42501", "%s by a login of no tenant" % text)

    # =======================================================================
    # Checks after each step
    # =======================================================================

    def settle(self):
        """With the engine worker on: wait until it has handled every due
        timer and deadline of the two tenants, then apply them to the model."""
        if not self.model.due_timers() and not self.model.due_deadlines():
            return
        time.sleep(0.003)
        deadline = time.time() + 30
        # What an open transaction holds is not the worker's to handle (it
        # never waits on a client's lock), as the model's due_timers and
        # due_deadlines leave it out: a run the transaction locked, with its
        # timers and tasks, and a task it locked (a report of an attempt
        # whose lease has run out, its row taken, not yet committed).
        m = self.model
        held_runs = sorted({m.runs[u].id for txn in m.txns.values() for u in txn.runs
                            if u in m.runs and m.runs[u].id is not None})
        held_tasks = sorted({m.tasks[u].id for txn in m.txns.values() for u in txn.tasks
                             if u in m.tasks and m.tasks[u].id is not None})
        while True:
            res = self.fz.admin.run(None,
                                    "SELECT (SELECT count(*) FROM wf.timers WHERE tenant_id = ANY(%s) "
                                    "AND status = 'pending' AND fire_at <= clock_timestamp() "
                                    "AND NOT run_id = ANY(%s::uuid[]))"
                                    " + (SELECT count(*) FROM wf.tasks WHERE tenant_id = ANY(%s) "
                                    "AND status IN ('ready', 'leased') AND deadline_at <= clock_timestamp() "
                                    "AND NOT run_id = ANY(%s::uuid[]) AND NOT task_id = ANY(%s::bigint[]))",
                                    [self.tnames, held_runs, self.tnames, held_runs, held_tasks])
            if res.err:
                raise Mismatch("driver", "settle: %r" % res)
            if res.one() == 0:
                break
            if time.time() > deadline:
                raise Mismatch("stuck", "the engine worker left %s due timers and deadlines for 30 s"
                               % res.one())
            time.sleep(0.005)
        self.model.clock = self.step_no + 0.5
        self.model.tick()

    def tenant_digests(self):
        res = self.fz.admin.run(None, """
            SELECT t, md5(coalesce((SELECT string_agg(run_id::text || seq || status || legal_hold, ',' ORDER BY run_id)
                                     FROM wf.runs WHERE tenant_id = t), '')
                       || coalesce((SELECT string_agg(task_id || status || coalesce(fence, 0)
                                       || coalesce(lease_expires_at::text, ''), ',' ORDER BY task_id)
                                     FROM wf.tasks WHERE tenant_id = t), '')
                       || (SELECT count(*) FROM wf.signals WHERE tenant_id = t)
                       || (SELECT count(*) FROM wf.buffered_events WHERE tenant_id = t)
                       || coalesce((SELECT string_agg(approver || status || token_generation, ',' ORDER BY run_id, approver)
                                     FROM wf.approvals WHERE tenant_id = t), '')
                       || coalesce((SELECT string_agg(timer_id || status, ',' ORDER BY timer_id)
                                     FROM wf.timers WHERE tenant_id = t), '')
                       || coalesce((SELECT string_agg(kind || subject || failures, ',' ORDER BY kind, subject)
                                     FROM wf.decide_failures WHERE tenant_id = t), ''))
            FROM unnest(%s::text[]) t""", [self.tnames])
        if res.err:
            raise Mismatch("driver", "digest: %r" % res)
        return dict(res.rows)

    def check(self, st):
        m = self.model
        # 1. no cross-tenant effect: a call of one tenant's login changed
        # nothing of the other tenant
        dig = self.tenant_digests()
        k = st["k"]
        if True:
            if k in ("commit", "rollback"):
                acted = self.ended_txn_tenants
                what = "a transaction of %s" % (", ".join(sorted(acted)) or "nobody")
            elif k == "blocked" and self.blocked_step:
                acted = set()
                what = "a call that timed out waiting for a lock"
            elif k in ("tick", "purge", "nobody", "begin", "blocked"):
                acted = set(self.tnames)
                what = ""
            else:
                acted = {self.tenant}
                what = "a %s call by a login of %s" % (k, self.tenant)
            for t in self.tnames:
                if t not in acted and dig[t] != self.digests[t]:
                    raise Mismatch("isolation", "%s changed rows of tenant %s" % (what, t))
        self.digests = dig
        runs, tasks, timers = m.committed_view()
        # 2. the runs and tasks are the model's
        res = self.fz.admin.run(None, "SELECT run_id::text, tenant_id, status, current_step, seq FROM wf.runs "
                                "WHERE tenant_id = ANY(%s)", [self.tnames])
        dbruns = {r[0]: r for r in res.rows}
        mruns = {r.id: r for r in runs.values() if r.id is not None}
        for rid, r in mruns.items():
            row = dbruns.get(rid)
            if row is None:
                raise Mismatch("state", "run %s (%s, %s) is missing" % (rid, r.defname, r.status))
            if row[1] != r.tenant:
                raise Mismatch("isolation", "run %s belongs to %s, not %s" % (rid, row[1], r.tenant))
            if row[2] != r.status:
                raise Mismatch("state", "run %s of %s is %s, the model says %s (at %s, waiting for %s)"
                               % (rid, r.defname, row[2], r.status, m.cur_step(r).name if m.cur_step(r)
                                  else None, r.wait))
        for rid in dbruns:
            if rid not in mruns:
                raise Mismatch("state", "run %s exists, the model has no such run (%s)" % (rid, dbruns[rid][1:]))
        res = self.fz.admin.run(None, "SELECT task_id, run_id::text, step, attempt, status, fence "
                                "FROM wf.tasks WHERE tenant_id = ANY(%s) ORDER BY task_id", [self.tnames])
        bound = {t.id: t for t in tasks.values() if t.id is not None}
        unbound = [t for t in tasks.values() if t.id is None]
        taskstate = {}
        for task_id, rid, step, attempt, status, fence in res.rows:
            taskstate.setdefault(rid, []).append((task_id, status, fence))
            t = bound.get(task_id)
            if t is None:
                for u in unbound:
                    ur = runs.get(u.run)
                    if ur is not None and ur.id == rid and u.step == step and u.attempt == attempt:
                        t = u
                        break
                if t is None:
                    raise Mismatch("state", "task %s (run %s, %s attempt %s, %s) exists, the model has no such task"
                                   % (task_id, rid, step, attempt, status))
                t.id = task_id
                unbound.remove(t)
                live = m.tasks.get(t.uid)
                if live is not None:
                    live.id = task_id
            if t.status != status:
                raise Mismatch("state", "task %s (%s attempt %s) is %s, the model says %s"
                               % (task_id, step, attempt, status, t.status))
            if (t.fence or 0) != (fence or 0):
                raise Mismatch("state", "task %s has fence %s, the model says %s" % (task_id, fence, t.fence))
        for u in unbound:
            ur = runs.get(u.run)
            raise Mismatch("state", "the model expects task %s attempt %s of run %s (%s), which does not exist"
                           % (u.step, u.attempt, ur.id if ur else "?", u.status))
        # 3. every run verifies, every live run is explained, as seen by the tenant
        # verify_run for the runs whose history or task rows changed since
        # they were last verified; explain for those and, when the tenant's
        # leased tasks changed (tenant_quota), for all its live runs
        for t in self.tnames:
            self.fz.admin.notices.clear()
            todo = []
            leased = tuple(sorted(x[0] for rid, row in dbruns.items() if row[1] == t
                                  for x in taskstate.get(rid, ()) if x[1] == "leased"))
            all_live = self.quota_stamp.get(t) != leased
            self.quota_stamp[t] = leased
            ask = []
            for rid, row in dbruns.items():
                if row[1] != t:
                    continue
                stamp = (row[4], tuple(taskstate.get(rid, ())))
                if self.verified.get(rid) != stamp:
                    todo.append(rid)
                    ask.append(rid)
                    self.verified[rid] = stamp
                elif all_live and row[2] in ("running", "paused", "cancelling"):
                    ask.append(rid)
            if not ask:
                continue
            res = self.fz.admin.run(self.logins[t]["app"],
                                    "SELECT run_id::text, CASE WHEN run_id::text = ANY(%s) THEN wf.verify_run(run_id) "
                                    "ELSE true END, e->>'waiting_for', e->'details'->>'stuck', "
                                    "e->'details'->'held_wait'->>'waiting_for' "
                                    "FROM (SELECT run_id, wf.explain(run_id) e FROM wf.runs "
                                    "WHERE run_id::text = ANY(%s)) x ORDER BY run_id",
                                    [todo, ask])
            if res.err:
                raise Mismatch("verify", "verify/explain as %s: %r" % (t, res))
            if len(res.rows) != len(ask):
                raise Mismatch("isolation", "a login of %s sees %d of its %d runs" % (t, len(res.rows), len(ask)))
            bad = [rid for rid, ok, _, _, _ in res.rows if not ok]
            notes = list(self.fz.admin.notices)
            for rid, note in zip(bad, notes):
                r = mruns.get(rid)
                if r is not None and r.uid in self.known_broken:
                    continue
                raise Mismatch("verify", "wf.verify_run(%s) of a %s run of %s is false: %s"
                               % (rid, r.status if r else "?", r.defname if r else "?", note))
            for rid, ok, wf_for, stuck, held_wait in res.rows:
                r = mruns.get(rid)
                if r is None:
                    raise Mismatch("isolation", "a login of %s sees run %s" % (t, rid))
                want = m.waiting_for(r, tasks, timers)
                if wf_for == "transaction":
                    # something of the run is due, but an open transaction
                    # holds the run (issue 29): the engine says so, with what
                    # the run waits for otherwise in held_wait
                    holders = [n for n, txn in m.txns.items() if r.uid in txn.runs]
                    if not holders:
                        raise Mismatch("explain", "wf.explain(%s) says waiting_for transaction, but no "
                                       "open transaction of the model holds the run" % rid)
                    wf_for = held_wait if held_wait is not None else want
                if r.status in M.LIVE and (wf_for is None or stuck):
                    raise Mismatch("stuck", "run %s (%s) is %s, and wf.explain says waiting_for %s%s"
                                   % (rid, r.defname, r.status, wf_for, " (stuck)" if stuck else ""))
                if wf_for != want:
                    raise Mismatch("explain", "wf.explain(%s) of a %s run of %s says waiting_for %s, "
                                   "the model %s" % (rid, r.status, r.defname, wf_for, want))
        self.fz.admin.as_login(None)
        # 4. quotas: a start never takes a run past max_live_runs (a run
        # an operator brings back from failed, with wf.retry_step,
        # wf.skip_step or wf.cancel_run, is not a start and may)
        for t in self.tnames:
            pol = m.tenants[t].policy
            if pol.get("max_live_runs") is not None:
                live = sum(1 for row in dbruns.values() if row[1] == t
                           and row[2] in ("running", "paused", "cancelling", "compensating"))
                revived = sum(1 for r in mruns.values() if r.tenant == t and r.revived and r.status in M.LIVE)
                if live - revived > pol["max_live_runs"]:
                    raise Mismatch("quota", "tenant %s has %d live runs (%d of them revived by an operator), "
                                   "its limit is %d" % (t, live, revived, pol["max_live_runs"]))
            if pol.get("max_tasks_in_flight") is not None:
                res = self.fz.admin.run(None, "SELECT queue, count(*) FROM wf.tasks WHERE tenant_id = %s "
                                        "AND status = 'leased' GROUP BY queue", [t])
                for q, n in res.rows:
                    if n > pol["max_tasks_in_flight"]:
                        raise Mismatch("quota", "tenant %s has %d leased tasks of queue %s, its limit is %d"
                                       % (t, n, q, pol["max_tasks_in_flight"]))


# ---------------------------------------------------------------------------
# Shrinking and the reproduction


def shrink(fz, seed, steps, params, failure, budget):
    """Delta debugging (ddmin) over the steps: the smallest subsequence
    found that still fails with the same kind of failure."""
    what = steps[failure.step - 1]["k"] if failure.step else None

    def fails(cand):
        f = fz.run_sequence(seed, cand, params)
        # the same kind of failure, at the same kind of step
        return f is not None and f.kind == failure.kind and \
            (not f.step or cand[f.step - 1]["k"] == what)

    cur = steps[:failure.step]
    if not fails(cur):
        cur = steps
    n = 2
    deadline = time.time() + budget
    while len(cur) >= 2 and time.time() < deadline:
        chunk = max(1, len(cur) // n)
        reduced = False
        for i in range(0, len(cur), chunk):
            cand = cur[:i] + cur[i + chunk:]
            if cand and fails(cand):
                cur = cand
                n = max(n - 1, 2)
                reduced = True
                break
            if time.time() > deadline:
                break
        if not reduced:
            if chunk == 1:
                break
            n = min(len(cur), n * 2)
    return cur


def reproduction(fz, seed, steps, params):
    """Runs the steps once more and prints them as SQL: the setup (as a
    superuser), then the steps of each session in order, with SET SESSION
    AUTHORIZATION where a session's login changes, and each answer."""
    log = []
    f = fz.run_sequence(seed, steps, params, log)
    lines = ["-- %d steps, %s sessions; the tenants' policies %s"
             % (len(steps), params["sessions"], json.dumps(params["policies"]))]
    lines.append("-- setup, as a superuser:")
    auth = {}
    last = None
    used = {d for d in M.DEF_NAMES for _, _, _, text, _ in log
            if "start_run('%s'" % d in text or "start_runs('%s'" % d in text}
    for step_no, sess, login, text, res in log:
        if step_no == 0:
            if "publish_definition" in text and not any("('%s'," % d in text for d in used):
                continue    # a definition no step starts
            if login is not None:
                text = "SET SESSION AUTHORIZATION %s; %s; RESET SESSION AUTHORIZATION" % (login, text)
            lines.append(text + ";")
            continue
        if sess != last:
            lines.append("-- session %s" % sess)
            last = sess
        if text.startswith("--"):
            lines.append("%s  -- step %d" % (text, step_no))
            continue
        if text in ("BEGIN", "COMMIT", "ROLLBACK", "ROLLBACK TO SAVEPOINT fz"):
            lines.append("%s;  -- step %d" % (text, step_no))
            if text in ("COMMIT", "ROLLBACK"):
                auth.pop(sess, None)
            continue
        if auth.get(sess) != login:
            lines.append("SET SESSION AUTHORIZATION %s;" % login if login else "RESET SESSION AUTHORIZATION;")
            auth[sess] = login
        lines.append("%s;  -- step %d => %r" % (text, step_no, res))
    if f is not None:
        lines.append("-- FAILS at step %d (%s): %s" % (f.step, f.kind, f))
    else:
        lines.append("-- it passed this time (a failure that depends on timing, or one fixed since)")
    return "\n".join(lines), f


# ---------------------------------------------------------------------------


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--sequences", type=int, default=None)
    ap.add_argument("--seconds", type=float, default=None)
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--tap", action="store_true", help="TAP output, one test per sequence")
    ap.add_argument("--database", default=None, help="create this database and fuzz in it")
    ap.add_argument("--replay", default=None, help="a saved sequence (JSON) to run once")
    ap.add_argument("--save", default=None, help="directory for the JSON of failing sequences")
    ap.add_argument("--shrink-seconds", type=float, default=120)
    ap.add_argument("--stats", action="store_true", help="print the answers each kind of step got")
    ap.add_argument("--selftest", action="store_true",
                    help="plant a wrong prediction in the model (a repeated report is 'stale', not "
                         "'duplicate') and check that it is found and shrunk to at most 6 steps")
    ap.add_argument("-v", "--verbose", action="store_true")
    args = ap.parse_args()

    conninfo = ""
    if args.database:
        with psycopg.connect("", autocommit=True) as c:
            c.execute(pgsql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(pgsql.Identifier(args.database)))
            c.execute(pgsql.SQL("CREATE DATABASE {}").format(pgsql.Identifier(args.database)))
        conninfo = "dbname=" + args.database
    with psycopg.connect(conninfo, autocommit=True) as c:
        worker_on = c.execute("SHOW wfengine.enabled").fetchone()[0] == "on"
    fz = Fuzzer(conninfo, worker_on, args.verbose)
    out = sys.stdout

    if args.selftest:
        M.SELFTEST = True
        for i in range(args.sequences or 50):
            seed = args.seed * 1000003 + i
            steps = generate(seed, args.steps)
            params = seq_params(seed)
            f = fz.run_sequence(seed, steps, params)
            if f is None:
                continue
            small = shrink(fz, seed, steps, params, f, args.shrink_seconds)
            text, _ = reproduction(fz, seed, small, params)
            print("selftest: sequence %d failed at step %d of %d (%s: %s); shrunk to %d steps:"
                  % (i + 1, f.step, len(steps), f.kind, f, len(small)))
            print(text)
            ok = f.kind == "answer" and "duplicate" in str(f) and len(small) <= 6
            print("selftest: %s" % ("passed" if ok else "FAILED (not the planted bug, or not shrunk)"))
            fz.close()
            sys.exit(0 if ok else 1)
        print("selftest: FAILED (the planted bug was not found)")
        fz.close()
        sys.exit(1)

    if args.replay:
        with open(args.replay) as f:
            saved = json.load(f)
        text, fail = reproduction(fz, saved["seed"], saved["steps"], saved["params"])
        print(text)
        fz.close()
        sys.exit(1 if fail else 0)

    if args.sequences is None and args.seconds is None:
        args.sequences = 100
    total = args.sequences
    started = time.time()
    last_note = started
    failed = 0
    i = 0
    steps_run = 0
    while True:
        if total is not None and i >= total:
            break
        if args.seconds is not None and time.time() - started > args.seconds:
            break
        seed = args.seed * 1000003 + i
        i += 1
        steps = generate(seed, args.steps)
        params = seq_params(seed)
        t0 = time.time()
        f = fz.run_sequence(seed, steps, params)
        steps_run += len(steps)
        if f is None:
            if args.tap:
                print("ok %d - sequence %d (seed %d, %d steps, %.2f s)" % (i, i, seed, len(steps),
                                                                         time.time() - t0), file=out)
            elif time.time() - last_note > 60:
                last_note = time.time()
                print("%d sequences, %d failed, %.0f s" % (i, failed, time.time() - started), file=out)
            out.flush()
            continue
        failed += 1
        counts = (dict(fz.known), dict(fz.stats))
        small = shrink(fz, seed, steps, params, f, args.shrink_seconds)
        text, f2 = reproduction(fz, seed, small, params)
        fz.known, fz.stats = counts
        msg = ["sequence %d (seed %d) failed at step %d of %d: %s: %s" % (i, seed, f.step, len(steps), f.kind, f),
               "shrunk to %d steps:" % len(small), text]
        if args.save:
            os.makedirs(args.save, exist_ok=True)
            path = os.path.join(args.save, "apifuzz-%d.json" % seed)
            with open(path, "w") as fh:
                json.dump({"seed": seed, "steps": small, "params": params}, fh, indent=1)
            msg.append("saved: %s (apifuzz.py --replay %s)" % (path, path))
        if args.tap:
            print("not ok %d - sequence %d (seed %d)" % (i, i, seed), file=out)
            out.flush()
            # diagnostics on stderr, where prove shows them
            for line in "\n".join(msg).splitlines():
                print("# " + line, file=sys.stderr)
            sys.stderr.flush()
        else:
            print("\n".join(msg), file=out)
        out.flush()
    n = i
    if args.tap:
        # the known engine bugs the sequences met (the model took the
        # engine's answer and went on): expected failures, named
        for name, count in sorted(fz.known.items()):
            n += 1
            print("not ok %d - known engine bug, met %d times: %s # TODO to be fixed" % (n, count, name), file=out)
        print("1..%d" % n, file=out)
    else:
        for name, count in sorted(fz.known.items()):
            print("known engine bug, met %d times: %s" % (count, name), file=out)
    summary = "%d sequences, %d failed, %d steps, %.1f s" % (i, failed, steps_run, time.time() - started)
    if args.stats:
        kinds = sorted({k for k, _ in fz.stats})
        for k in kinds:
            outs = sorted(((c, o) for (kk, o), c in fz.stats.items() if kk == k), reverse=True)
            print(("# " if args.tap else "") + "%-22s %s" % (k, ", ".join("%s %d" % (o, c) for c, o in outs)),
                  file=out)
    print(("# " if args.tap else "") + summary, file=out)
    fz.close()
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
