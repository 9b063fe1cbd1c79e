"""wfengine_worker: a small worker library for wfengine (psycopg 3).

    from wfengine_worker import Worker, TaskFailure

    def charge(task):
        return {"charge_id": "ch_" + task.idempotency_key}

    Worker("dbname=shop", ["payments"], {"charge_card": charge},
           concurrency=4).run()          # until SIGTERM or SIGINT

Connections (each in autocommit mode, so every call is its own
transaction):

- one claim connection: waiting claims (wf.claim_tasks with a wait, or
  wf.claim_tasks_any for several queues when the server has it; otherwise
  a claim on each queue and a LISTEN on their channels);
- one heartbeat connection: every `heartbeat` seconds one statement renews
  the leases of every task in flight (wf.heartbeat per task);
- one report connection per worker thread (wf.complete_task / wf.fail_task;
  with eager dispatch, the default on a server that has it,
  wf.complete_and_claim / wf.fail_and_claim, whose new lease of the task's
  queue, the next step of the same run first, the thread runs at once).

Shards: conninfo may be a list of the connection strings of a sharded
deployment's shards instead of one string.  The worker uses one shard at a
time for all its connections; when a call is refused with 55W01 (the shard
map gives the worker's tenant to another shard), or a connection cannot be
made or is lost, it moves all its connections to the next shard of the
list (round robin) and makes the call again there.  A report there of a
task leased on the old shard is answered stale (the move gave the leases
it took new fences there) and the task is dropped; the worker claims on.

Graceful shutdown: stop() (or SIGTERM/SIGINT in run()) cancels the waiting
claim, claims nothing more, and lets the tasks in flight finish and report,
heartbeating them meanwhile, for up to `drain_timeout` seconds.  wfengine has
no call that hands a lease back, so a task still running after that is left
to its lease: heartbeats stop, the lease expires, and the engine delivers the
attempt again (at least once); its result, if it comes later, is not reported.

Errors of the server are raised as WfError, which carries the SQLSTATE,
message, detail and hint.
"""

import datetime
import enum
import json
import logging
import os
import select
import signal
import socket
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple, Union

import psycopg
from psycopg import sql as pgsql
from psycopg.types.json import Jsonb

__all__ = ["Answer", "Client", "Task", "TaskFailure", "WfError", "Worker"]

log = logging.getLogger("wfengine_worker")

_COLUMNS = ("task_id, run_id, step, attempt, fence, idempotency_key, input, "
            "lease_expires_at, queue, activity, deliveries")


class WfError(Exception):
    """An error raised by the server: SQLSTATE, message, detail and hint."""

    def __init__(self, sqlstate: Optional[str], message: str,
                 detail: Optional[str] = None, hint: Optional[str] = None):
        super().__init__(message)
        self.sqlstate = sqlstate
        self.message = message
        self.detail = detail
        self.hint = hint

    @property
    def retryable(self) -> bool:
        """The call changed nothing and may be made again: a serialization
        failure or deadlock, a lock not available, a partition moving
        between shards (40001 through the router, 55W01 on a shard), a shard
        that cannot be reached (class 08) or shutting down (57P01)."""
        s = self.sqlstate or ""
        return s in ("40001", "40P01", "55P03", "55W01", "57P01") or s.startswith("08")

    @classmethod
    def from_psycopg(cls, e: psycopg.Error) -> "WfError":
        d = e.diag
        return cls(e.sqlstate, d.message_primary or str(e).strip(),
                   d.message_detail, d.message_hint)

    def __str__(self) -> str:
        s = f"{self.sqlstate}: {self.message}"
        if self.detail:
            s += f" (detail: {self.detail})"
        if self.hint:
            s += f" (hint: {self.hint})"
        return s


class Answer(str, enum.Enum):
    """The verdict on a report or heartbeat (docs/reference.md)."""
    ACCEPTED = "accepted"
    DUPLICATE = "duplicate"
    STALE = "stale"
    CANCEL_REQUESTED = "cancel_requested"
    OK = "ok"                   # a heartbeat that renewed the lease


class TaskFailure(Exception):
    """Raise from a handler to fail the attempt with an error code.

    retryable=True lets the step's retry policy try again."""

    def __init__(self, code: str, message: str = "", retryable: bool = True,
                 **details: Any):
        super().__init__(message or code)
        self.error = {"code": code, "message": message, **details}
        self.retryable = retryable


@dataclass
class Task:
    """One leased attempt, as wf.claim_tasks returns it."""
    task_id: int
    run_id: Any
    step: str
    attempt: int
    fence: int
    idempotency_key: str
    input: Any
    lease_expires_at: datetime.datetime
    queue: str
    activity: Optional[str]
    deliveries: int
    cancelled: threading.Event = field(default_factory=threading.Event,
                                       repr=False, compare=False)


def _seconds(x: Union[float, datetime.timedelta]) -> datetime.timedelta:
    return x if isinstance(x, datetime.timedelta) else datetime.timedelta(seconds=x)


Duration = Union[float, int, datetime.timedelta]


def _float_seconds(name: str, x: Optional[Duration]) -> Optional[float]:
    """A duration option as float seconds: a number of seconds or a
    datetime.timedelta; None stays None (the default)."""
    if x is None:
        return None
    if isinstance(x, datetime.timedelta):
        return x.total_seconds()
    if isinstance(x, (int, float)) and not isinstance(x, bool):
        return float(x)
    raise TypeError(f"{name} must be a number of seconds or a datetime.timedelta, not {type(x).__name__}")


class Client:
    """The worker calls of wfengine on one connection, typed.

    Every method raises WfError for an error of the server."""

    def __init__(self, conninfo: str = "", conn: Optional[psycopg.Connection] = None,
                 prepare: bool = True):
        # prepare: psycopg's own default (a statement is prepared after its
        # fifth execution on the connection); False sends every call
        # unprepared, for a pooler in transaction mode.  A connection given
        # as conn keeps its own setting.
        self.conninfo = conninfo
        self.conn = conn or psycopg.connect(conninfo, autocommit=True,
                                            **({} if prepare else {"prepare_threshold": None}))
        self.prepare = prepare
        self._has_any: Optional[bool] = None
        self.generation = 0              # the Worker's shard generation it was made under

    def close(self) -> None:
        self.conn.close()

    def _rows(self, sql: str, params: Sequence[Any]) -> List[tuple]:
        try:
            return self.conn.execute(sql, params).fetchall()
        except psycopg.Error as e:
            if e.sqlstate is None:       # connection trouble, not the server
                raise
            raise WfError.from_psycopg(e) from e

    def claim(self, queue: str, worker: str, max_tasks: int = 1,
              lease: Union[float, datetime.timedelta] = 30.0,
              wait: Union[None, float, datetime.timedelta] = None) -> List[Task]:
        rows = self._rows(
            f"SELECT {_COLUMNS} FROM wf.claim_tasks(%s, %s, %s, %s, %s)",
            (queue, worker, max_tasks, _seconds(lease),
             None if wait is None else _seconds(wait)))
        return [Task(*r) for r in rows]

    def has_claim_any(self) -> bool:
        """Whether the server has wf.claim_tasks_any (wfengine 0.2.0)."""
        if self._has_any is None:
            self._has_any = self._rows(
                "SELECT pg_catalog.to_regprocedure("
                "'wf.claim_tasks_any(text[],text,integer,interval,interval)') IS NOT NULL",
                ())[0][0]
        return self._has_any

    def claim_any(self, queues: Sequence[str], worker: str, max_tasks: int = 1,
                  lease: Union[float, datetime.timedelta] = 30.0,
                  wait: Union[None, float, datetime.timedelta] = None) -> List[Task]:
        rows = self._rows(
            f"SELECT {_COLUMNS} FROM wf.claim_tasks_any(%s, %s, %s, %s, %s)",
            (list(queues), worker, max_tasks, _seconds(lease),
             None if wait is None else _seconds(wait)))
        return [Task(*r) for r in rows]

    def complete(self, task_id: int, fence: int, output: Any = None) -> Answer:
        return Answer(self._rows("SELECT wf.complete_task(%s, %s, %s)",
                                 (task_id, fence, Jsonb(output if output is not None else {})))[0][0])

    def fail(self, task_id: int, fence: int, error: Mapping[str, Any],
             retryable: bool = True) -> Answer:
        return Answer(self._rows("SELECT wf.fail_task(%s, %s, %s, %s)",
                                 (task_id, fence, Jsonb(dict(error)), retryable))[0][0])

    def has_eager(self) -> bool:
        """Whether the server has wf.complete_and_claim and
        wf.fail_and_claim (eager dispatch, wfengine 0.2.0)."""
        if getattr(self, "_has_eager", None) is None:
            self._has_eager = self._rows(
                "SELECT pg_catalog.to_regprocedure("
                "'wf.complete_and_claim(bigint,bigint,jsonb,text,text,integer,interval)') IS NOT NULL",
                ())[0][0]
        return self._has_eager

    def complete_and_claim(self, task_id: int, fence: int, output: Any, queue: str,
                           worker: str, max_tasks: int = 1,
                           lease: Union[float, datetime.timedelta] = 30.0
                           ) -> Tuple[Answer, List[Task]]:
        """wf.complete_task, then up to max_tasks new leases of the queue
        (the next step of the same run first), in one call and one commit."""
        rows = self._rows(
            f"SELECT answer, {_COLUMNS} FROM wf.complete_and_claim(%s, %s, %s, %s, %s, %s, %s)",
            (task_id, fence, Jsonb(output if output is not None else {}), queue, worker,
             max_tasks, _seconds(lease)))
        return Answer(rows[0][0]), [Task(*r[1:]) for r in rows if r[1] is not None]

    def fail_and_claim(self, task_id: int, fence: int, error: Mapping[str, Any],
                       retryable: bool, queue: str, worker: str, max_tasks: int = 1,
                       lease: Union[float, datetime.timedelta] = 30.0
                       ) -> Tuple[Answer, List[Task]]:
        """wf.fail_task, then up to max_tasks new leases of the queue, in one
        call and one commit."""
        rows = self._rows(
            f"SELECT answer, {_COLUMNS} FROM wf.fail_and_claim(%s, %s, %s, %s, %s, %s, %s, %s)",
            (task_id, fence, Jsonb(dict(error)), retryable, queue, worker, max_tasks,
             _seconds(lease)))
        return Answer(rows[0][0]), [Task(*r[1:]) for r in rows if r[1] is not None]

    def heartbeat(self, task_id: int, fence: int, details: Any = None) -> Answer:
        return Answer(self._rows("SELECT wf.heartbeat(%s, %s, %s)",
                                 (task_id, fence, Jsonb(details if details is not None else {})))[0][0])

    def heartbeat_many(self, tasks: Sequence[Task]) -> Dict[int, Answer]:
        """Renew the leases of many tasks in one statement."""
        rows = self._rows(
            "SELECT u.t, wf.heartbeat(u.t, u.f) FROM unnest(%s::bigint[], %s::bigint[]) AS u(t, f)",
            ([t.task_id for t in tasks], [t.fence for t in tasks]))
        return {r[0]: Answer(r[1]) for r in rows}

    def channel(self, queue: str) -> str:
        return self._rows("SELECT wf.channel('queue', %s)", (queue,))[0][0]


Handler = Callable[[Task], Any]


class Worker:
    """A worker loop: claims from `queues`, runs the tasks' handlers on up
    to `concurrency` tasks at once (threads), heartbeats them, reports.
    The options and their defaults are those of every wfengine worker
    library (docs/workers.md).

    handlers maps an activity (or, for a step without one, its queue) to a
    callable(task) -> output; handler= is the catch-all for a task no entry
    matches (a callable given as handlers is taken as the catch-all, as
    before).  A task without either fails with code "unknown_activity", not
    retryable.  A handler returns the output (JSON-able), raises
    TaskFailure to fail the attempt (retryable unless retryable=False), or
    any other exception to fail it as retryable with code "exception".

    lease, wait, heartbeat and drain_timeout are float seconds or
    datetime.timedelta.

    conninfo is one connection string, or a list (or tuple) of the
    connection strings of the shards of a sharded deployment: the worker
    then moves all its connections to the next shard when a call is refused
    with 55W01 or a connection fails (see the module's docstring)."""

    def __init__(self, conninfo: Union[str, Sequence[str]], queues: Sequence[str],
                 handlers: Union[None, Handler, Mapping[str, Handler]] = None, *,
                 handler: Optional[Handler] = None,
                 name: Optional[str] = None, concurrency: int = 4,
                 lease: Duration = 30.0, wait: Duration = 10.0,
                 heartbeat: Optional[Duration] = None,
                 drain_timeout: Optional[Duration] = None,
                 eager: bool = True, prepare: bool = True):
        if not queues:
            raise ValueError("a worker needs at least one queue")
        if callable(handlers) and not isinstance(handlers, Mapping):
            if handler is not None:
                raise ValueError("give the catch-all once: handlers is a callable and handler= is set")
            handlers, handler = {}, handlers
        self.handlers: Dict[str, Handler] = dict(handlers or {})
        self.handler = handler
        if not self.handlers and self.handler is None:
            raise ValueError("a worker needs a handler: give handlers, handler= or both")
        if concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        self.shards = [conninfo] if isinstance(conninfo, str) else list(conninfo)
        if not self.shards:
            raise ValueError("a worker needs at least one connection string")
        self.conninfo = self.shards[0]          # the shard in use
        self._generation = 0                    # one more at each move to another shard
        self.moves = 0                          # moves to another shard so far
        self.queues = list(queues)
        self.name = name or f"{socket.gethostname()}-{os.getpid()}"
        self.concurrency = concurrency
        self.lease = _float_seconds("lease", lease)
        self.wait = _float_seconds("wait", wait)
        heartbeat = _float_seconds("heartbeat", heartbeat)
        drain_timeout = _float_seconds("drain_timeout", drain_timeout)
        self.heartbeat_every = heartbeat if heartbeat is not None else self.lease / 3
        self.drain_timeout = drain_timeout if drain_timeout is not None else self.lease
        self.eager = eager
        self.prepare = prepare                  # prepared statements (see Client)
        self.answers: List[tuple] = []          # (task, Answer) of every report
        self.handed_on = 0                      # tasks leased by a report (eager)
        self.max_in_flight = 0
        self._in_flight: Dict[int, Task] = {}
        self._lock = threading.Condition()
        self._stopping = threading.Event()
        self._drain_over = threading.Event()    # tasks still running are left to their leases
        self._local = threading.local()
        self._claimer: Optional[Client] = None

    # ---- public ----

    def stop(self) -> None:
        """Ask the worker to stop: claim nothing more, finish the tasks in
        flight.  Safe from a signal handler or another thread."""
        if self._stopping.is_set():
            return
        self._stopping.set()
        claimer = self._claimer
        if claimer is not None:
            try:
                claimer.conn.cancel()    # end a waiting claim now
            except Exception:            # pragma: no cover
                pass
        with self._lock:
            self._lock.notify_all()

    def run(self) -> None:
        """Run until stop(), or SIGTERM/SIGINT when called in the main thread."""
        if threading.current_thread() is not threading.main_thread():
            return self._run()
        # The loop runs in a thread of its own: a signal handler runs only in
        # the main thread, between bytecodes, not while it waits in libpq.
        restore = {s: signal.signal(s, lambda *_: self.stop())
                   for s in (signal.SIGTERM, signal.SIGINT)}
        error: List[BaseException] = []

        def loop() -> None:
            try:
                self._run()
            except BaseException as e:   # re-raised in the caller's thread
                error.append(e)

        t = threading.Thread(target=loop, name="wf-claim")
        try:
            t.start()
            while t.is_alive():
                t.join(0.2)
        finally:
            for s, h in restore.items():
                signal.signal(s, h)
        if error:
            raise error[0]

    # ---- shards ----

    def _connect(self) -> Client:
        """A new connection to the shard in use, tagged with its generation."""
        with self._lock:
            generation, conninfo = self._generation, self.conninfo
        c = Client(conninfo, prepare=self.prepare)
        c.generation = generation
        return c

    def _current(self, c: Optional[Client]) -> bool:
        """Whether c is a usable connection to the shard in use."""
        return (c is not None and not c.conn.closed and not c.conn.broken
                and c.generation == self._generation)

    def _calls_for_move(self, e: BaseException) -> bool:
        """Whether e moves a worker with a shard list to the next shard: a
        call refused with 55W01, or a connection not made or lost."""
        if len(self.shards) < 2:
            return False                 # one connection string: as ever
        if isinstance(e, WfError):
            s = e.sqlstate or ""
            return s == "55W01" or s == "57P01" or s.startswith("08")
        return isinstance(e, psycopg.OperationalError) and (
            e.sqlstate is None or e.sqlstate.startswith("08") or e.sqlstate == "57P01")

    def _move(self, generation: int, why: BaseException) -> None:
        """Moves to the next shard, unless another thread already moved on
        from generation (one move per failure, however many see it)."""
        with self._lock:
            if generation != self._generation:
                return
            self._generation += 1
            self.moves += 1
            old = self.conninfo
            self.conninfo = self.shards[self._generation % len(self.shards)]
        log.warning("worker %s: moving from shard %r to %r (%s)", self.name, old,
                    self.conninfo, why)

    # ---- the loop ----

    def _run(self) -> None:
        if len(self.shards) < 2:
            self._claimer = Client(self.conninfo, prepare=self.prepare)
            if self._stopping.is_set():  # stop() before the claim connection
                self._claimer.conn.cancel()
        beat = threading.Thread(target=self._heartbeats, name="wf-heartbeat", daemon=True)
        pool = ThreadPoolExecutor(self.concurrency, thread_name_prefix="wf-task")
        beat_stop = threading.Event()
        self._beat_stop = beat_stop
        beat.start()
        log.info("worker %s: queues %s, concurrency %d", self.name, self.queues, self.concurrency)
        backoff = 0.1
        failed_moves = 0                 # moves since the last claim that worked
        try:
            while not self._stopping.is_set():
                with self._lock:
                    while len(self._in_flight) >= self.concurrency and not self._stopping.is_set():
                        self._lock.wait()
                    free = self.concurrency - len(self._in_flight)
                if self._stopping.is_set():
                    break
                generation = self._generation
                try:
                    if not self._current(self._claimer):
                        old, self._claimer = self._claimer, None
                        if old is not None:
                            old.close()
                        self._claimer = self._connect()
                        generation = self._claimer.generation
                        self._listening = False
                        if self._stopping.is_set():
                            break
                    tasks = self._claim(free)
                except psycopg.errors.QueryCanceled:
                    if self._stopping.is_set():
                        break
                    raise
                except (WfError, psycopg.OperationalError) as e:
                    if getattr(e, "sqlstate", None) == "57014" and self._stopping.is_set():
                        break
                    if self._calls_for_move(e):
                        # another shard's tenant, or a shard down: the next shard
                        self._move(generation, e)
                        failed_moves += 1
                        if failed_moves >= len(self.shards):   # all the way round
                            self._stopping.wait(backoff)
                            backoff = min(backoff * 2, 2.0)
                        continue
                    if not isinstance(e, WfError) or not e.retryable:
                        raise
                    # a move's cut-over, a shard failing over: claim again soon
                    log.warning("worker %s: claim refused (%s), trying again in %.1f s",
                                self.name, e, backoff)
                    self._stopping.wait(backoff)
                    backoff = min(backoff * 2, 2.0)
                    continue
                backoff = 0.1
                failed_moves = 0
                with self._lock:
                    for t in tasks:
                        self._in_flight[t.task_id] = t
                    self.max_in_flight = max(self.max_in_flight, len(self._in_flight))
                for t in tasks:
                    pool.submit(self._execute, t)
            # graceful shutdown: let the tasks in flight finish
            deadline = time.monotonic() + self.drain_timeout
            with self._lock:
                while self._in_flight and time.monotonic() < deadline:
                    self._lock.wait(max(0.0, deadline - time.monotonic()))
                left = list(self._in_flight.values())
                if left:
                    self._drain_over.set()
            for t in left:
                t.cancelled.set()
                log.warning("worker %s: task %d still running at shutdown; its lease will expire",
                            self.name, t.task_id)
        finally:
            self._stopping.set()
            beat_stop.set()
            pool.shutdown(wait=False)
            beat.join()
            if self._claimer is not None:
                self._claimer.close()
            log.info("worker %s stopped", self.name)

    def _claim(self, free: int) -> List[Task]:
        c = self._claimer
        if len(self.queues) == 1:
            return c.claim(self.queues[0], self.name, free, self.lease, self.wait)
        if c.has_claim_any():
            return c.claim_any(self.queues, self.name, free, self.lease, self.wait)
        # An older server: claim on each queue without a wait, and if all
        # were empty, sleep on their LISTEN channels (docs/notifications.md).
        if not getattr(self, "_listening", False):
            for q in self.queues:
                c.conn.execute(pgsql.SQL("LISTEN {}").format(pgsql.Identifier(c.channel(q))))
            self._listening = True
        tasks: List[Task] = []
        for q in self.queues:
            tasks += c.claim(q, self.name, free - len(tasks), self.lease)
            if len(tasks) >= free:
                break
        if not tasks:
            # until a notification, the wait's end or stop() (in short steps)
            end = time.monotonic() + self.wait
            while not self._stopping.is_set() and time.monotonic() < end:
                if select.select([c.conn.fileno()], [], [], min(0.25, end - time.monotonic()))[0]:
                    break
            c.conn.execute("SELECT 1")   # consume the notifications
        return tasks

    def _handler_for(self, task: Task) -> Handler:
        """The handler of task: the entry of handlers for its activity (for
        its queue when the step has none), else the catch-all, else a
        failure "unknown_activity" that is not retryable (no attempt will
        find a handler)."""
        key = task.activity or task.queue
        h = self.handlers.get(key, self.handler)
        if h is None:
            raise TaskFailure("unknown_activity", f"no handler for {key}", retryable=False)
        return h

    def _reporter(self) -> Client:
        c = getattr(self._local, "client", None)
        if not self._current(c):
            if c is not None:
                c.close()
            self._local.client = None
            c = self._local.client = self._connect()
        return c

    def _execute(self, task: Optional[Task]) -> None:
        # With eager dispatch a report may lease the thread its next task
        # (the next step of the same run first): the thread keeps its slot
        # and runs it at once.
        while task is not None:
            task = self._execute_one(task)

    def _execute_one(self, task: Task) -> Optional[Task]:
        """Runs task and reports it; returns the task the report leased to
        this thread (eager dispatch), or None."""
        nxt: Optional[Task] = None
        try:
            # no new lease while stopping: nothing more is claimed then
            # (looked at again after the handler: a stop may come meanwhile)
            eager = self.eager and not self._stopping.is_set()
            if eager:
                try:
                    eager = self._reporter().has_eager()
                except (WfError, psycopg.Error):
                    eager = False        # the report's own retries deal with the connection
            try:
                output = self._handler_for(task)(task)
                eager = eager and not self._stopping.is_set()   # stopped meanwhile
                if eager:
                    report = lambda c: c.complete_and_claim(task.task_id, task.fence, output,
                                                            task.queue, self.name, 1, self.lease)
                else:
                    report = lambda c: c.complete(task.task_id, task.fence, output)
            except TaskFailure as f:
                eager = eager and not self._stopping.is_set()
                if eager:
                    report = lambda c, f=f: c.fail_and_claim(task.task_id, task.fence, f.error,
                                                             f.retryable, task.queue, self.name,
                                                             1, self.lease)
                else:
                    report = lambda c, f=f: c.fail(task.task_id, task.fence, f.error, f.retryable)
            except Exception as e:
                log.exception("task %d: handler raised", task.task_id)
                err = {"code": "exception", "message": f"{type(e).__name__}: {e}"}
                eager = eager and not self._stopping.is_set()
                if eager:
                    report = lambda c: c.fail_and_claim(task.task_id, task.fence, err, True,
                                                        task.queue, self.name, 1, self.lease)
                else:
                    report = lambda c: c.fail(task.task_id, task.fence, err, True)
            if self._drain_over.is_set():
                # finished after the drain timeout: not reported, left to its
                # lease like a task still running (and as the other libraries do)
                log.warning("task %d: finished after the drain timeout, not reported", task.task_id)
                return None
            # A lost connection: report again (a repeat answers duplicate).
            # With eager dispatch a lease handed out with a lost answer is
            # never seen here; it expires and the attempt is delivered again.
            # With a shard list, a report refused with 55W01 or whose
            # connection fails moves the worker to the next shard and is
            # made there (answered stale there after a real move).
            for attempt in range(30):
                generation = self._generation
                try:
                    c = self._reporter()
                    generation = c.generation
                    answer = report(c)
                    break
                except (WfError, psycopg.OperationalError) as e:
                    if self._calls_for_move(e) and attempt < 29:
                        log.warning("task %d: report failed on this shard (%s), moving on",
                                    task.task_id, e)
                        self._move(generation, e)
                        answer = e
                        if attempt + 1 >= len(self.shards):     # all the way round
                            time.sleep(min(0.1 * (attempt + 1), 1.0))
                        continue
                    if not isinstance(e, WfError):
                        log.warning("task %d: report failed (%s), retrying", task.task_id, e)
                        answer = e
                        if attempt >= 2:
                            break
                        time.sleep(0.2 * (attempt + 1))
                        continue
                    answer = e
                    if e.retryable and attempt < 29:
                        # a move's cut-over: the report is made again (after
                        # the move its fence is stale, and the task delivered again)
                        log.warning("task %d: report refused (%s), retrying", task.task_id, e)
                        time.sleep(min(0.1 * (attempt + 1), 1.0))
                        continue
                    log.error("task %d: report refused: %s", task.task_id, e)
                    break
            if isinstance(answer, tuple):
                answer, leased = answer
                nxt = leased[0] if leased else None
            with self._lock:
                self.answers.append((task, answer))
        finally:
            with self._lock:
                self._in_flight.pop(task.task_id, None)
                if nxt is not None:
                    self._in_flight[nxt.task_id] = nxt
                    self.handed_on += 1
                    self.max_in_flight = max(self.max_in_flight, len(self._in_flight))
                self._lock.notify_all()
        return nxt

    def _heartbeats(self) -> None:
        client = None
        while not self._beat_stop.wait(self.heartbeat_every):
            with self._lock:
                tasks = list(self._in_flight.values())
            if not tasks:
                continue
            generation = self._generation
            try:
                if not self._current(client):
                    if client is not None:
                        client.close()
                    client = None
                    client = self._connect()
                generation = client.generation
                answers = client.heartbeat_many(tasks)
            except (WfError, psycopg.Error) as e:
                log.warning("heartbeat failed: %s", e)
                if self._calls_for_move(e):
                    self._move(generation, e)
                continue
            for t in tasks:
                if answers.get(t.task_id) in (Answer.STALE, Answer.CANCEL_REQUESTED):
                    t.cancelled.set()
        if client is not None:
            client.close()
