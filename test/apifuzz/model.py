"""model.py -- the reference model of the API fuzzer (apifuzz.py).

The model holds what the engine should hold for the two tenants of one
sequence: their definitions, runs, task attempts, timers, signals,
buffered events, approval tokens and quota state, and predicts the answer
of every API call from it.  It is written from docs/reference.md,
docs/tenancy.md, docs/timers.md, docs/definitions.md and docs/approvals.md,
not from the C code: where it and the engine disagree, one of the two (or
the documentation) is wrong.

Time.  Every timer of the fuzzer's definitions, every retry backoff and
every short lease lasts 1 ms, and every long lease an hour; the fuzzer
sleeps a few milliseconds before each wf.tick(), so a short item is due at
the next tick and a long one never within a sequence.  The model's clock
is the index of the step (the engine uses the clock time of each call,
which grows with it), so the claim order (available_at, then task id) is
known.

What the model leaves to the engine (and re-reads after each step): the
fence a timeout draws, the ids of tasks it schedules (bound by run, step
and attempt), the ids of runs started by the engine (none here).
"""

import copy
import time

# ---------------------------------------------------------------------------
# Definitions: the same five for each tenant (same names, same queues, so
# that a mix-up of tenants would show), each step kind the model knows.


class StepDef:
    def __init__(self, name, kind, queue=None, max_attempts=1, comp=None,
                 event=None, skippable=None):
        self.name = name
        self.kind = kind            # task, wait, approval, sleep
        self.queue = queue          # task queue, or notify_queue of an approval
        self.max_attempts = max_attempts
        self.comp = comp            # compensation: dict(queue, max_attempts) or None
        self.event = event
        if skippable is None:
            skippable = kind != "approval"
        self.skippable = skippable


RETRY_SHORT = {"initial_interval": "1ms", "jitter": 0}


def _task(name, queue, max_attempts, comp=None):
    spec = {"name": name, "queue": queue,
            "retry": dict(RETRY_SHORT, max_attempts=max_attempts)}
    if comp is not None:
        spec["compensate"] = {"activity": "undo_" + name, "queue": comp["queue"],
                              "retry": dict(RETRY_SHORT, max_attempts=comp["max_attempts"])}
    return spec, StepDef(name, "task", queue, max_attempts, comp)


def _definitions():
    defs = {}

    def add(name, items, extra=None):
        spec = {"steps": [s for s, _ in items]}
        if extra:
            spec.update(extra)
        defs[name] = (spec, [d for _, d in items])

    add("one", [_task("a", "q1", 2)])
    # b's input is a's whole output (a mapping): one output in three is
    # large, and b's attempt then keeps its input in the history only
    b_spec, b_def = _task("b", "q2", 1)
    b_spec["input"] = {"prev": "$.steps.a.output"}
    add("two", [_task("a", "q1", 2, {"queue": "qc", "max_attempts": 2}),
                (b_spec, b_def)])
    add("evt", [({"name": "w", "type": "wait_event", "event": "go"},
                 StepDef("w", "wait", event="go")),
                _task("c", "q2", 1)],
        {"correlation": {"k": "$.input.k"}})
    add("apv", [({"name": "ok", "type": "approval", "approvers": "$.input.approvers",
                  "policy": "any", "notify_queue": "qn",
                  "retry": dict(RETRY_SHORT, max_attempts=2)},
                 StepDef("ok", "approval", "qn", 2)),
                _task("b", "q1", 2)])
    add("nap", [({"name": "s", "type": "sleep", "duration": "1ms"},
                 StepDef("s", "sleep")),
                _task("a", "q1", 2, {"queue": "qc", "max_attempts": 1})])
    return defs


DEFINITIONS = _definitions()
DEF_NAMES = sorted(DEFINITIONS)
QUEUES = ["q1", "q2", "qc", "qn"]

# the job roles and what each may execute (docs/tenancy.md, "The job roles")
APP_FUNCS = {"start_run", "start_runs", "run_status", "history", "explain", "verify_run",
             "signal", "send_event"}
WORKER_FUNCS = {"claim_tasks", "claim_tasks_any", "complete_task", "fail_task", "heartbeat",
                "complete_tasks", "fail_tasks", "complete_and_claim", "fail_and_claim",
                "complete_tasks_and_claim", "fail_tasks_and_claim", "issue_approval_tokens"}
APPROVER_FUNCS = {"decide"}
OPERATOR_FUNCS = APP_FUNCS | {"terminate_run", "pause_run", "resume_run", "retry_step",
                              "skip_step", "cancel_run", "cancel_runs", "retry_runs",
                              "resume_runs", "set_legal_hold"}
ADMIN_FUNCS = OPERATOR_FUNCS | {"publish_definition"}
ROLE_FUNCS = {"app": APP_FUNCS, "worker": WORKER_FUNCS, "approver": APPROVER_FUNCS,
              "operator": OPERATOR_FUNCS, "admin": ADMIN_FUNCS}
ROLES = ["app", "worker", "approver", "operator", "admin"]

LIVE = ("running", "paused", "cancelling")
ENDED = ("completed", "failed", "terminated", "cancelled", "compensation_failed")

DECIDE_FAILURE_LIMIT = 10

# apifuzz.py --selftest: the model makes one planted wrong prediction
SELFTEST = False
POISON_THRESHOLD = 3


class Mismatch(Exception):
    """The engine's answer or state differs from the model's."""

    def __init__(self, kind, message):
        super().__init__(message)
        self.kind = kind


class KnownBug(Exception):
    """A difference that is a known engine bug (named): counted, the model
    takes the engine's answer and the sequence goes on."""

    def __init__(self, name, message):
        super().__init__(message)
        self.name = name


# ---------------------------------------------------------------------------
# State


class Task:
    __slots__ = ("uid", "id", "run", "step", "attempt", "visit", "queue", "status",
                 "fence", "fences", "short", "expirations", "avail", "comp_of",
                 "notif", "deadline", "deliveries", "withdrawn_reason")

    def __init__(self, uid, run, step, attempt, visit, queue, avail, comp_of=None, notif=False):
        self.uid = uid              # creation order (the order of task ids)
        self.id = None              # task_id, once seen
        self.run = run              # run uid
        self.step = step            # "a", or "compensate:a"
        self.attempt = attempt
        self.visit = visit
        self.queue = queue
        self.status = "ready"
        self.fence = None           # the current fence (None: never claimed)
        self.fences = []            # the fences claims of it returned
        self.short = False          # leased with a short lease
        self.expirations = 0
        self.avail = avail          # (clock, uid): claim order within a priority
        self.comp_of = comp_of      # the step a compensation undoes
        self.notif = notif          # the notification task of an approval step
        self.deadline = False       # deadline_at has passed at the next tick
        self.deliveries = 0
        self.withdrawn_reason = None

    @property
    def live(self):
        return self.status in ("ready", "leased")

    @property
    def quarantined(self):
        return self.status == "ready" and self.expirations >= POISON_THRESHOLD


class Timer:
    __slots__ = ("uid", "run", "kind", "step", "state", "gen")

    def __init__(self, uid, run, kind, step, gen):
        self.uid = uid
        self.run = run
        self.kind = kind            # retry, sleep, comp_retry
        self.step = step
        self.state = "pending"      # pending, held, done
        self.gen = gen              # the run's wait generation it belongs to


class Run:
    def __init__(self, uid, tenant, defname, version, inp, key):
        self.uid = uid
        self.id = None              # run_id (text), once returned
        self.tenant = tenant
        self.defname = defname
        self.version = version
        self.input = inp
        self.key = key              # idempotency key
        self.status = "running"
        self.step = None            # index of the current step, or None
        self.visits = {}            # step name -> visits so far
        self.attempt = 0            # attempt number of the current step's visit
        self.task = None            # the live task (uid) of the step
        self.wait = None            # None, task, retry, sleep, event, approval
        self.wait_gen = 0           # generation of the retry/sleep the run waits for
        self.gen_counter = 0
        self.held = None            # a result held while paused: dict
        self.resched = False        # the pause withdrew an unclaimed attempt
        self.done = []              # completed visits of compensable steps (step, visit)
        self.signals = []           # stored signals: names, oldest first
        self.eids = set()           # event ids the run took
        self.keys = set()           # correlation keys declared
        self.approvers = {}         # name -> pending, decided, closed
        self.tokens_visit = 0
        self.legal_hold = False
        self.cancel = None          # while cancelling: dict(pending=[...], started=bool, inflight=uid)
        self.failed_at = None       # (step index, kind) of a failure, for retry/skip
        self.fail_reason = None
        self.comp_failed = None     # the compensation that gave up (step, visit)
        self.finished_clock = None
        self.held_dropped = False
        self.revived = False        # brought back from failed by an operator   # a known bug: see apifuzz.KNOWN_HELD


class Bucket:
    """The start-rate token bucket of a tenant (shared memory, per database
    and tenant): it refills at RATE tokens a second by the server's clock,
    so the model follows the clock too.  It keeps the interval [lo, hi] the
    level can be in at time `at`: a call is known only to have happened
    between t0 and t1 (before and after it, by the same clock), so its
    answer is certain when the lowest level at t0 is a whole token (allowed)
    or the highest at t1 is not (refused); in between, the engine's answer
    is taken and narrows the interval."""

    RATE = 0.2

    def __init__(self, burst):
        self.cap = float(burst)
        self.lo = self.hi = float(burst)
        self.at = time.time()

    def _at(self, t):
        d = max(0.0, t - self.at) * self.RATE
        return min(self.cap, self.lo + d), min(self.cap, self.hi + d)

    def predict(self, t0, t1):
        """'yes', 'no' or 'either': is a token there for a start in [t0, t1]?"""
        if self._at(t0)[0] >= 1.0:
            return "yes"
        if self._at(t1)[1] < 1.0:
            return "no"
        return "either"

    def took(self, t0, t1):
        lo = max(self._at(t0)[0], 1.0) - 1.0
        hi = self._at(t1)[1] - 1.0 + self.RATE * (t1 - t0)
        self.lo, self.hi, self.at = lo, max(lo, hi), t1

    def unsure(self, t0, t1):
        """A failed batch of starts took a token here or not: both."""
        lo = max(0.0, self._at(t0)[0] - 1.0)
        self.lo, self.hi, self.at = lo, self._at(t1)[1], t1

    def refused(self, t0, t1):
        lo = self._at(t0)[0]
        hi = min(self._at(t1)[1], 1.0 + self.RATE * (t1 - t0))
        self.lo, self.hi, self.at = min(lo, hi), hi, t1


class Txn:
    """An open transaction of a session: what it touched (locked) and made,
    and the originals of the objects it changed, for a rollback."""

    def __init__(self, session, clock):
        self.session = session
        self.clock = clock
        self.runs = set()           # run uids locked (and their tasks)
        self.tasks = set()          # task uids locked
        self.created_runs = set()
        self.created_tasks = set()
        self.created_timers = set()
        self.saved = {}             # ("run"|"task"|"timer", uid) -> copy
        self.undo = []              # functions that undo its changes of tenant state
        self.start_tenants = set()  # tenants it started runs of (quota lock)
        self.keys = set()           # (tenant, idempotency key)
        self.corr = set()           # (tenant, correlation key)
        self.claim_queues = set()   # (tenant, queue) claimed under max_tasks_in_flight
        self.tokens = []            # tokens minted (dropped on rollback)
        self.tenants = set()        # tenants whose logins called in it
        self.buffer_tenants = set() # tenants whose buffer quota lock it holds
        self.consumed_tenants = set()   # tenants whose buffered events it delivered
        self.approvers = set()      # (tenant, approver or token) whose decide_failures row it locked
        self.other = False          # did something the model cannot undo


class TenantState:
    def __init__(self, name, policy):
        self.name = name
        self.policy = policy        # dict: max_live_runs, max_tasks_in_flight, burst, max_buffered, retention
        self.versions = {d: {} for d in DEF_NAMES}   # def -> {variant: version}
        self.latest = {d: 1 for d in DEF_NAMES}
        self.buffered = []          # dicts: key, name, eid, delivered
        self.corr_eids = {}         # correlation key -> set of event ids seen (keep)
        self.decide_failures = {}   # approver -> failures in the window


class Model:
    def __init__(self, tenants):
        self.tenants = {t.name: t for t in tenants}
        self.runs = {}              # uid -> Run
        self.tasks = {}             # uid -> Task
        self.timers = {}            # uid -> Timer
        self.tokens = {}            # token -> dict(tenant, run, visit, approver, decision, live)
        self.next_uid = 1
        self.clock = 0
        self.txns = {}              # session name -> Txn
        self.scratch = None         # undo list of a batch prediction (apifuzz.op_start_runs)
        self.known_bugs = {}        # name -> count
        # start tokens of the rate limit (None: no rate); a token taken is
        # not given back by a rollback
        self.start_tokens = {t.name: (Bucket(t.policy["burst"]) if t.policy.get("burst") else None)
                             for t in tenants}

    # -- helpers ------------------------------------------------------------
    def uid(self):
        self.next_uid += 1
        return self.next_uid

    def run_by_id(self, run_id):
        for r in self.runs.values():
            if r.id == run_id:
                return r
        return None

    def task_by_id(self, task_id):
        for t in self.tasks.values():
            if t.id == task_id:
                return t
        return None

    def steps(self, run):
        return DEFINITIONS[run.defname][1]

    def cur_step(self, run):
        return None if run.step is None else self.steps(run)[run.step]

    # -- transactions (copy on write) ---------------------------------------
    def txn_of(self, session):
        return self.txns.get(session)

    def touch_run(self, txn, run, lock=True):
        """Keep the original of the run (for a rollback and for what other
        sessions see); lock: the transaction holds the run's row lock."""
        if txn is None:
            return
        if lock:
            txn.runs.add(run.uid)
        if run.uid in txn.created_runs:
            return
        txn.saved.setdefault(("run", run.uid), copy.deepcopy(run))

    def touch_task(self, txn, task):
        if txn is None:
            return
        txn.tasks.add(task.uid)
        if task.uid not in txn.created_tasks:
            txn.saved.setdefault(("task", task.uid), copy.copy(task))

    def touch_timer(self, txn, timer):
        if txn is None or timer.uid in txn.created_timers:
            return
        txn.saved.setdefault(("timer", timer.uid), copy.copy(timer))

    def undo(self, txn, fn):
        """A change of a tenant's shared state (buffered events, event ids,
        failed decisions) made in a transaction: fn undoes it on rollback
        (and at once, when a batch whose prediction made it fails: scratch)."""
        if self.scratch is not None:
            self.scratch.append(fn)
        if txn is not None:
            txn.undo.append(fn)

    def begin(self, session):
        self.txns[session] = Txn(session, self.clock)

    def commit(self, session):
        self.txns.pop(session, None)

    def rollback(self, session):
        txn = self.txns.pop(session, None)
        if txn is None:
            return
        for (kind, uid), obj in txn.saved.items():
            if kind == "run":
                self.runs[uid] = obj
            elif kind == "task":
                self.tasks[uid] = obj
            elif kind == "timer":
                self.timers[uid] = obj
        for fn in reversed(txn.undo):
            fn()
        for uid in txn.created_runs:
            self.runs.pop(uid, None)
        for uid in txn.created_tasks:
            self.tasks.pop(uid, None)
        for uid in txn.created_timers:
            self.timers.pop(uid, None)
        for tok in txn.tokens:
            self.tokens.pop(tok, None)
        # tokens of the runs it touched: restore their liveness
        for tok, info in self.tokens.items():
            if ("tokrun", tok) in txn.saved:
                info.update(txn.saved[("tokrun", tok)])

    def locked_by_other(self, session, run=None, task=None):
        """Whether another session's open transaction holds the run (and its
        tasks) or the task."""
        for name, txn in self.txns.items():
            if name == session:
                continue
            if run is not None and run.uid in txn.runs:
                return True
            if task is not None and task.uid in txn.tasks:
                return True
        return False

    def invisible_to(self, session, run=None, task=None):
        """Whether the object was made by another session's open transaction."""
        for name, txn in self.txns.items():
            if name == session:
                continue
            if run is not None and run.uid in txn.created_runs:
                return True
            if task is not None and task.uid in txn.created_tasks:
                return True
        return False

    def view_run(self, session, run):
        """The run as the session sees it (another open transaction's
        changes are not committed)."""
        for name, txn in self.txns.items():
            if name != session and ("run", run.uid) in txn.saved:
                return txn.saved[("run", run.uid)]
        return run

    def view_task(self, session, task):
        for name, txn in self.txns.items():
            if name != session and ("task", task.uid) in txn.saved:
                return txn.saved[("task", task.uid)]
        return task

    def committed_view(self):
        """(runs, tasks) as another session sees them: the originals of what
        open transactions changed, without what they made."""
        runs = dict(self.runs)
        tasks = dict(self.tasks)
        timers = dict(self.timers)
        for txn in self.txns.values():
            for (kind, uid), obj in txn.saved.items():
                if kind == "run":
                    runs[uid] = obj
                elif kind == "task":
                    tasks[uid] = obj
                elif kind == "timer":
                    timers[uid] = obj
            for uid in txn.created_runs:
                runs.pop(uid, None)
            for uid in txn.created_tasks:
                tasks.pop(uid, None)
            for uid in txn.created_timers:
                timers.pop(uid, None)
        return runs, tasks, timers

    # -- scheduling ---------------------------------------------------------
    def new_task(self, txn, run, step, attempt, visit, queue, comp_of=None, notif=False):
        uid = self.uid()
        t = Task(uid, run.uid, step, attempt, visit, queue, (self.clock, uid), comp_of, notif)
        self.tasks[uid] = t
        if txn is not None:
            txn.created_tasks.add(uid)
            txn.tasks.add(uid)
        return t

    def new_timer(self, txn, run, kind, step):
        uid = self.uid()
        run.gen_counter += 1
        tm = Timer(uid, run.uid, kind, step, run.gen_counter)
        self.timers[uid] = tm
        if txn is not None:
            txn.created_timers.add(uid)
        return tm

    def run_timers(self, run, states=("pending", "held")):
        return [tm for tm in self.timers.values() if tm.run == run.uid and tm.state in states]

    def end_timers(self, txn, run):
        """The run ended: its pending timers are cancelled (not fired)."""
        for tm in self.run_timers(run):
            self.touch_timer(txn, tm)
            tm.state = "done"

    def finish(self, txn, run, status):
        run.status = status
        run.wait = None
        run.task = None
        run.finished_clock = self.clock
        self.end_timers(txn, run)
        if status != "compensation_failed":
            # the engine closes the pending approval rows of a run that
            # ends (their tokens answer already_decided); docs/reference.md
            # (wf.approvals) says they stay pending and answer invalid
            self.close_tokens(txn, run, "closed")

    def withdraw(self, txn, run, reason):
        """Withdraw the run's live task (task_cancelled)."""
        if run.task is None:
            return None
        t = self.tasks[run.task]
        if t.live:
            self.touch_task(txn, t)
            t.status = "cancelled"
            t.deadline = False
            t.withdrawn_reason = reason
        run.task = None
        return t

    def close_tokens(self, txn, run, how):
        """The approval rows of the run's visit: closed (step ended: their
        unused tokens answer already_decided) or dead (invalid)."""
        for name, st in list(run.approvers.items()):
            if st == "pending":
                run.approvers[name] = "closed" if how == "closed" else "dead"

    # -- entering steps -----------------------------------------------------
    def enter(self, txn, run, idx):
        """The run enters step idx (or completes past the last step)."""
        steps = self.steps(run)
        run.wait = None
        run.task = None
        run.wait_gen = 0
        if idx >= len(steps):
            run.step = None
            self.finish(txn, run, "completed")
            return
        sd = steps[idx]
        run.step = idx
        run.visits[sd.name] = run.visits.get(sd.name, 0) + 1
        run.attempt = 0
        run.approvers = {}
        if sd.kind == "task":
            self.schedule_attempt(txn, run)
        elif sd.kind == "sleep":
            tm = self.new_timer(txn, run, "sleep", sd.name)
            run.wait = "sleep"
            run.wait_gen = tm.gen
        elif sd.kind == "wait":
            run.wait = "event"
            if run.status == "running" and sd.event in run.signals:
                run.signals.remove(sd.event)
                self.enter(txn, run, idx + 1)
        elif sd.kind == "approval":
            names = []
            for n in run.input.get("approvers", []):
                if n not in names:
                    names.append(n)
            if not names:
                run.failed_at = (idx, "approval")
                run.fail_reason = "no_approvers"
                self.finish(txn, run, "failed")
                return
            run.approvers = {n: "pending" for n in names}
            run.tokens_visit += 1
            self.schedule_attempt(txn, run)

    def schedule_attempt(self, txn, run):
        sd = self.cur_step(run)
        run.attempt += 1
        t = self.new_task(txn, run, sd.name, run.attempt, run.visits[sd.name], sd.queue,
                          notif=(sd.kind == "approval"))
        run.task = t.uid
        run.wait = "task" if sd.kind == "task" else "approval"
        run.wait_gen = 0
        return t

    # -- results ------------------------------------------------------------
    def apply_result(self, txn, run, task, rep):
        """Apply an accepted report (complete or fail) of the run's live task."""
        if task.comp_of is not None:
            self.apply_comp_result(txn, run, task, rep)
            return
        sd = self.cur_step(run)
        if run.status == "cancelling":
            # the attempt in flight settles: a completion is undone too
            run.task = None
            if rep["kind"] == "complete" and not task.notif:
                run.done.append((sd.name, task.visit)) if sd.comp else None
            self.start_compensation(txn, run)
            return
        if sd.kind == "approval":
            # the notification task
            run.task = None
            if rep["kind"] == "complete":
                run.wait = "approval"
                return
            self.fail_attempt(txn, run, sd, rep, approval=True)
            return
        run.task = None
        if rep["kind"] == "complete":
            if sd.comp:
                run.done.append((sd.name, task.visit))
            self.enter(txn, run, run.step + 1)
            return
        self.fail_attempt(txn, run, sd, rep)

    def fail_attempt(self, txn, run, sd, rep, approval=False):
        final = (not rep["retryable"]) or self.counted(run, sd.name, run.visits[sd.name]) >= sd.max_attempts
        if final:
            run.failed_at = (run.step, sd.kind)
            run.fail_reason = "non_retryable" if not rep["retryable"] else "attempts_exhausted"
            if approval:
                # the approvers' rows stay as they were
                pass
            self.finish(txn, run, "failed")
            return
        tm = self.new_timer(txn, run, "retry", sd.name)
        run.wait = "retry"
        run.wait_gen = tm.gen

    def counted(self, run, step, visit):
        """The attempts of a step's visit that count against its retry
        policy: those a worker claimed (each attempt is a task row)."""
        return sum(1 for t in self.tasks.values()
                   if t.run == run.uid and t.step == step and t.visit == visit and t.deliveries > 0)

    # -- compensation -------------------------------------------------------
    def start_compensation(self, txn, run):
        """compensation_started: the pending list, newest first."""
        pending = list(reversed(run.done))
        run.cancel = {"pending": pending, "visit_attempts": {}}
        run.step = None
        run.wait = None
        self.next_compensation(txn, run)

    def next_compensation(self, txn, run):
        c = run.cancel
        if not c["pending"]:
            self.finish(txn, run, "cancelled")
            return
        step, visit = c["pending"][0]
        c["cur"] = (step, visit)
        c["attempt"] = c.get("attempt_of", {}).get((step, visit), 0)
        self.schedule_comp(txn, run)

    def schedule_comp(self, txn, run):
        c = run.cancel
        step, visit = c["cur"]
        sd = next(s for s in self.steps(run) if s.name == step)
        c["attempt"] += 1
        c.setdefault("attempt_of", {})[(step, visit)] = c["attempt"]
        t = self.new_task(txn, run, "compensate:" + step, c["attempt"], visit,
                          sd.comp["queue"], comp_of=step)
        run.task = t.uid
        run.wait = "task"
        run.wait_gen = 0

    def apply_comp_result(self, txn, run, task, rep):
        c = run.cancel
        run.task = None
        if rep["kind"] == "complete":
            c["pending"].pop(0)
            self.next_compensation(txn, run)
            return
        step, visit = c["cur"]
        sd = next(s for s in self.steps(run) if s.name == step)
        final = (not rep["retryable"]) or \
            self.counted(run, "compensate:" + step, visit) >= sd.comp["max_attempts"]
        if final:
            run.status = "compensation_failed"
            run.wait = None
            run.comp_failed = c["cur"]
            run.finished_clock = self.clock
            self.end_timers(txn, run)
            return
        tm = self.new_timer(txn, run, "comp_retry", task.step)
        run.wait = "retry"
        run.wait_gen = tm.gen

    # -- claims -------------------------------------------------------------
    def claimable(self, session, tenant, queue):
        """Tasks a claim of the session would find, in claim order."""
        out = []
        for t in self.tasks.values():
            run = self.runs.get(t.run)
            if run is None or run.tenant != tenant or t.queue != queue:
                continue
            if t.status != "ready" or t.quarantined:
                continue
            if self.invisible_to(session, task=t) or self.locked_by_other(session, task=t):
                continue
            out.append(t)
        out.sort(key=lambda t: t.avail)
        return out

    def leased_count(self, tenant, queue, session=None):
        """Leased tasks of the tenant's queue, as the session's latest
        snapshot counts them."""
        n = 0
        for t in self.tasks.values():
            run = self.runs.get(t.run)
            if run is None or run.tenant != tenant or t.queue != queue:
                continue
            if session is not None:
                if self.invisible_to(session, task=t):
                    continue
                t = self.view_task(session, t)
            if t.status == "leased":
                n += 1
        return n

    def lease(self, txn, task, fence, short):
        self.touch_task(txn, task)
        run = self.runs[task.run]
        if task.fence is not None and fence <= task.fence:
            raise Mismatch("answer", "claim of task %s returned fence %s, not above its fence %s"
                           % (task.id, fence, task.fence))
        task.status = "leased"
        task.fence = fence
        task.fences.append(fence)
        task.short = short
        task.deliveries += 1
        task.deadline = short and run.status != "paused"

    # -- timers and deadlines -----------------------------------------------
    def in_txn(self, timer=None, task=None):
        """Whether an open transaction made or holds it: the engine (which
        sees committed rows) does not see it due."""
        for txn in self.txns.values():
            if timer is not None and (timer.uid in txn.created_timers or timer.run in txn.runs):
                return True
            if task is not None and (task.uid in txn.tasks or task.uid in txn.created_tasks
                                     or task.run in txn.runs):
                return True
        return False

    def due_timers(self):
        return sorted((tm for tm in self.timers.values() if tm.state == "pending"
                       and not self.in_txn(timer=tm)), key=lambda tm: tm.uid)

    def due_deadlines(self):
        return sorted((t for t in self.tasks.values() if t.live and t.deadline
                       and not self.in_txn(task=t)), key=lambda t: t.uid)

    def tick(self):
        """What wf.tick() (or the engine worker) does: every due timer, then
        every due task deadline.  Returns how many it handled."""
        n = 0
        for tm in self.due_timers():
            n += 1
            run = self.runs.get(tm.run)
            self.fire_timer(run, tm)
        for t in self.due_deadlines():
            n += 1
            self.fire_deadline(t)
        return n

    def fire_timer(self, run, tm):
        applies = run is not None and run.wait_gen == tm.gen and (
            (tm.kind == "sleep" and run.wait == "sleep") or
            (tm.kind in ("retry", "comp_retry") and run.wait == "retry"))
        if applies and run.status == "cancelling" and tm.kind != "comp_retry":
            applies = False
        if applies and run.status not in ("running", "paused", "cancelling"):
            applies = False
        if not applies:
            tm.state = "done"       # stale
            return
        if run.status == "paused":
            tm.state = "held"
            return
        tm.state = "done"
        run.wait_gen = 0
        if tm.kind == "sleep":
            self.enter(None, run, run.step + 1)
        elif tm.kind == "retry":
            self.schedule_attempt(None, run)
        else:
            self.schedule_comp(None, run)

    def fire_deadline(self, t):
        run = self.runs[t.run]
        t.deadline = False
        if run.status == "paused":
            return
        if t.status != "leased" or not t.short:
            return
        if run.status == "cancelling" and t.comp_of is None:
            # the attempt in flight of a cancelled run: withdrawn, undone as if done
            t.status = "cancelled"
            t.withdrawn_reason = "lease"
            run.task = None
            sd = self.cur_step(run)
            if sd is not None and sd.comp and not t.notif:
                run.done.append((sd.name, t.visit))
            self.start_compensation(None, run)
            return
        # the lease expires: back on the queue
        t.status = "ready"
        t.expirations += 1
        t.short = False
        t.avail = (self.clock, t.uid)

    # -- explain ------------------------------------------------------------
    def waiting_for(self, run, tasks, timers):
        if run.status in ENDED:
            return None
        if run.status == "paused":
            return "operator"
        sd = self.cur_step(run)
        if run.status == "running" and sd is not None and sd.kind == "approval":
            return "approval"
        if run.task is not None and run.task in tasks:
            t = tasks[run.task]
            if t.status == "leased":
                return "worker_result"
            if t.status == "ready":
                if t.quarantined:
                    return "quarantine"
                ten = self.tenants[run.tenant]
                lim = ten.policy.get("max_tasks_in_flight")
                if lim is not None:
                    leased = sum(1 for x in tasks.values()
                                 if x.status == "leased" and x.queue == t.queue
                                 and self.runs.get(x.run) is not None
                                 and self.runs[x.run].tenant == run.tenant)
                    if leased >= lim:
                        return "tenant_quota"
                return "worker"
        if run.wait == "retry":
            return "retry_backoff"
        if run.wait == "sleep":
            return "sleep"
        if run.wait == "event":
            return "event"
        if run.wait == "approval":
            return "approval"
        return "?"
