'use strict';
// wfengine-worker: a small worker library for wfengine (node-postgres).
//
//   const { Worker, TaskFailure } = require('wfengine-worker');
//   new Worker({ queues: ['payments'], handlers: { charge_card: async (task) => ({ ok: true }) } })
//     .run();                               // until SIGTERM or SIGINT
//
// Connections (each query its own transaction): one claim client (waiting
// claims: wf.claim_tasks for one queue, wf.claim_tasks_any for several when
// the server has it, else a claim per queue and LISTEN on their channels),
// one heartbeat client (one statement renews every lease in flight), and a
// pool of `concurrency` clients for reports (with eager dispatch, the default
// where the server has it, wf.complete_and_claim / wf.fail_and_claim: a
// report that leases the next task of the same queue runs it at once in the
// same slot).  Concurrency is async: up to
// `concurrency` handlers run at once on the event loop.
//
// task_id and fence are BigInt (bigint columns; a Number would lose
// precision past 2^53 and a fence carries the timeline in its high bits).
//
// Shards: `connection` may be an array of the connections (strings or pg
// configs) of a sharded deployment's shards.  The worker uses one shard at a
// time for all its clients; when a call is refused with 55W01 (the shard map
// gives the worker's tenant to another shard), or a connection cannot be made
// or is lost, it moves all its clients to the next shard of the array (round
// robin) and makes the call again there.  A report there of a task leased on
// the old shard is answered stale and the task dropped; the worker claims on.
//
// Graceful shutdown: stop() (SIGTERM/SIGINT in run()) cancels the waiting
// claim (pg_cancel_backend on the heartbeat client; the cancelled claim rolls
// back and leased nothing), claims nothing more, and lets the tasks in
// flight finish, heartbeaten, for up to drainTimeout seconds.  wfengine has
// no call that hands a lease back: a task still running after that is left
// to its lease, which expires, and the engine delivers the attempt again
// (its result, if it comes later, is not reported).

const crypto = require('crypto');
const os = require('os');
const pg = require('pg');

const COLUMNS = 'task_id, run_id, step, attempt, fence, idempotency_key, input,' +
  ' lease_expires_at, queue, activity, deliveries';

// An error of the server: SQLSTATE, message, detail, hint.
class WfError extends Error {
  constructor(sqlstate, message, detail, hint) {
    super(message);
    this.name = 'WfError';
    this.sqlstate = sqlstate;
    this.detail = detail;
    this.hint = hint;
  }

  static from(e) {
    if (!e || !e.code || !/^[0-9A-Z]{5}$/.test(e.code)) return e; // not the server's
    return new WfError(e.code, e.message, e.detail, e.hint);
  }

  // The call changed nothing and may be made again: a serialization failure
  // or deadlock, a lock not available, a partition moving between shards
  // (40001 through the router, 55W01 on a shard), a shard that cannot be
  // reached (class 08) or shutting down (57P01).
  get retryable() {
    return ['40001', '40P01', '55P03', '55W01', '57P01'].includes(this.sqlstate)
      || (this.sqlstate || '').startsWith('08');
  }
}

// The verdict on a report or heartbeat (docs/reference.md).
const Answer = Object.freeze({
  ACCEPTED: 'accepted',
  DUPLICATE: 'duplicate',
  STALE: 'stale',
  CANCEL_REQUESTED: 'cancel_requested',
  OK: 'ok',
});

// Throw from a handler to fail the attempt with an error code; retryable
// unless { retryable: false } (the step's retry policy decides).
class TaskFailure extends Error {
  constructor(code, message = '', { retryable = true, ...details } = {}) {
    super(message || code);
    this.error = { code, message, ...details };
    this.retryable = retryable;
  }
}

function toTask(r) {
  return {
    taskId: BigInt(r.task_id),
    runId: r.run_id,
    step: r.step,
    attempt: r.attempt,
    fence: BigInt(r.fence),
    idempotencyKey: r.idempotency_key,
    input: r.input,
    leaseExpiresAt: r.lease_expires_at,
    queue: r.queue,
    activity: r.activity,
    deliveries: r.deliveries,
    cancelled: false, // set when a heartbeat answers stale or cancel_requested
  };
}

const secs = (s) => (s == null ? null : `${seconds('duration', s)} seconds`);

// The name of the prepared statement of sql: the same text, the same name
// on every connection (node-postgres prepares a named statement once per
// connection and then only binds and executes it).
const statementNames = new Map();
function statementName(sql) {
  let name = statementNames.get(sql);
  if (name === undefined) {
    name = `wfw_${crypto.createHash('sha1').update(sql).digest('hex').slice(0, 16)}`;
    statementNames.set(sql, name);
  }
  return name;
}

// The worker calls on one client or pool, typed; errors are WfError.  With
// prepare (the default), each statement is prepared once per connection
// and then only bound and executed: the server neither parses nor plans it
// again (about 30 % more steps a second on a 2-core server with 8 loops of
// completeAndClaim, docs/workers.md).  prepare false sends every call as
// an unnamed statement, for a pooler in transaction mode that does not
// carry prepared statements (pgbouncer before 1.21, or without
// max_prepared_statements).
class Client {
  constructor(db, prepare = true) {
    this.db = db; // a pg.Client or pg.Pool
    this.prepare = prepare;
  }

  async rows(sql, params) {
    try {
      const q = this.prepare ? { name: statementName(sql), text: sql, values: params }
        : { text: sql, values: params };
      return (await this.db.query(q)).rows;
    } catch (e) {
      throw WfError.from(e);
    }
  }

  async claim(queue, worker, maxTasks = 1, lease = 30, wait = null) {
    const rows = await this.rows(
      `SELECT ${COLUMNS} FROM wf.claim_tasks($1, $2, $3, $4::interval, $5::interval)`,
      [queue, worker, maxTasks, secs(lease), secs(wait)]);
    return rows.map(toTask);
  }

  async claimAny(queues, worker, maxTasks = 1, lease = 30, wait = null) {
    const rows = await this.rows(
      `SELECT ${COLUMNS} FROM wf.claim_tasks_any($1::text[], $2, $3, $4::interval, $5::interval)`,
      [queues, worker, maxTasks, secs(lease), secs(wait)]);
    return rows.map(toTask);
  }

  async hasClaimAny() {
    const rows = await this.rows("SELECT pg_catalog.to_regprocedure(" +
      "'wf.claim_tasks_any(text[],text,integer,interval,interval)') IS NOT NULL AS has", []);
    return rows[0].has;
  }

  async complete(taskId, fence, output = {}) {
    const rows = await this.rows('SELECT wf.complete_task($1::bigint, $2::bigint, $3::jsonb) AS a',
      [String(taskId), String(fence), JSON.stringify(output ?? {})]);
    return rows[0].a;
  }

  async fail(taskId, fence, error, retryable = true) {
    const rows = await this.rows('SELECT wf.fail_task($1::bigint, $2::bigint, $3::jsonb, $4) AS a',
      [String(taskId), String(fence), JSON.stringify(error), retryable]);
    return rows[0].a;
  }

  // Whether the server has wf.complete_and_claim (eager dispatch, wfengine 0.2.0).
  async hasEager() {
    if (this.eager === undefined) {
      const rows = await this.rows("SELECT pg_catalog.to_regprocedure(" +
        "'wf.complete_and_claim(bigint,bigint,jsonb,text,text,integer,interval)') IS NOT NULL AS has", []);
      this.eager = rows[0].has;
    }
    return this.eager;
  }

  // wf.complete_task, then up to maxTasks new leases of the queue (the next
  // step of the same run first), in one call and one commit:
  // { answer, tasks }.
  async completeAndClaim(taskId, fence, output, queue, worker, maxTasks = 1, lease = 30) {
    const rows = await this.rows(
      `SELECT answer, ${COLUMNS} FROM wf.complete_and_claim($1::bigint, $2::bigint, $3::jsonb,` +
      ' $4, $5, $6, $7::interval)',
      [String(taskId), String(fence), JSON.stringify(output ?? {}), queue, worker, maxTasks, secs(lease)]);
    return { answer: rows[0].answer, tasks: rows.filter((r) => r.task_id !== null).map(toTask) };
  }

  // wf.fail_task, then up to maxTasks new leases of the queue: { answer, tasks }.
  async failAndClaim(taskId, fence, error, retryable, queue, worker, maxTasks = 1, lease = 30) {
    const rows = await this.rows(
      `SELECT answer, ${COLUMNS} FROM wf.fail_and_claim($1::bigint, $2::bigint, $3::jsonb, $4,` +
      ' $5, $6, $7, $8::interval)',
      [String(taskId), String(fence), JSON.stringify(error), retryable, queue, worker, maxTasks,
        secs(lease)]);
    return { answer: rows[0].answer, tasks: rows.filter((r) => r.task_id !== null).map(toTask) };
  }

  async heartbeat(taskId, fence, details = {}) {
    const rows = await this.rows('SELECT wf.heartbeat($1::bigint, $2::bigint, $3::jsonb) AS a',
      [String(taskId), String(fence), JSON.stringify(details)]);
    return rows[0].a;
  }

  // Renews the leases of many tasks in one statement: Map taskId (string) -> answer.
  async heartbeatMany(tasks) {
    const rows = await this.rows(
      'SELECT u.t::text AS t, wf.heartbeat(u.t, u.f) AS a FROM unnest($1::bigint[], $2::bigint[]) AS u(t, f)',
      [tasks.map((t) => String(t.taskId)), tasks.map((t) => String(t.fence))]);
    return new Map(rows.map((r) => [r.t, r.a]));
  }

  async channel(queue) {
    return (await this.rows("SELECT wf.channel('queue', $1) AS c", [queue]))[0].c;
  }
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

const UNIT_SECONDS = { ms: 0.001, s: 1, m: 60, h: 3600 };

// A duration option in seconds: a number of seconds (as ever), or a string
// of <number><unit> parts, unit ms, s, m or h ('30s', '250ms', '2m', '1h',
// '1m30s').  JavaScript has no duration type; this is Node's form of the
// options every library shares (docs/workers.md).  null/undefined: the
// default.
function seconds(name, v) {
  if (v === undefined || v === null) return undefined;
  if (typeof v === 'number' && Number.isFinite(v) && v >= 0) return v;
  if (typeof v === 'string' && /^(\d+(\.\d+)?(ms|s|m|h))+$/.test(v)) {
    let total = 0;
    for (const [, n, , unit] of v.matchAll(/(\d+(\.\d+)?)(ms|s|m|h)/g)) total += Number(n) * UNIT_SECONDS[unit];
    return total;
  }
  throw new Error(`${name} must be a number of seconds or a string such as '30s', '250ms', '2m' or '1h', not ${JSON.stringify(v)}`);
}

class Worker {
  // options (those of every library, docs/workers.md): connection (pg
  // client config or connection string; default: the libpq environment; or
  // an array of them, one per shard: see above), queues, handlers
  // ({activity: async (task) => output}; a step without activity goes by
  // its queue), handler (the catch-all for a task no entry of handlers
  // matches; a task with neither fails "unknown_activity", not retryable),
  // name, concurrency (4), lease (30 s), wait (10 s), heartbeat (lease/3),
  // drainTimeout (lease), eager (true: report with wf.complete_and_claim /
  // wf.fail_and_claim where the server has them), prepare (true: prepared
  // statements; false behind a pooler in transaction mode, see Client),
  // log (console).  Durations
  // are numbers of seconds or strings: '30s', '250ms', '2m', '1h'.
  constructor(opts) {
    if (!opts.queues || opts.queues.length === 0) throw new Error('a worker needs at least one queue');
    if (!opts.handler && Object.keys(opts.handlers || {}).length === 0) {
      throw new Error('a worker needs a handler: give handlers, handler or both');
    }
    this.shards = Array.isArray(opts.connection) ? [...opts.connection] : [opts.connection];
    if (this.shards.length === 0) throw new Error('a worker needs at least one connection');
    this.connection = this.shards[0]; // the shard in use
    this.generation = 0; // one more at each move to another shard
    this.moves = 0; // moves to another shard so far
    this.conns = null; // { generation, claimer, beater, pool, ... } of the shard in use
    this.queues = opts.queues;
    this.handler = opts.handler;
    this.handlers = opts.handlers || {};
    this.name = opts.name || `${os.hostname()}-${process.pid}`;
    this.concurrency = opts.concurrency || 4;
    this.lease = seconds('lease', opts.lease) || 30;
    this.wait = seconds('wait', opts.wait) || 10;
    this.heartbeatEvery = seconds('heartbeat', opts.heartbeat) || this.lease / 3;
    this.drainTimeout = seconds('drainTimeout', opts.drainTimeout) || this.lease;
    this.eager = opts.eager !== false; // eager dispatch where the server has it
    this.prepare = opts.prepare !== false; // prepared statements (see Client)
    this.handedOn = 0; // tasks leased by a report (eager dispatch)
    this.log = opts.log || console;
    this.inFlight = new Map(); // taskId string -> task
    this.answers = []; // [task, answer or error] of every report
    this.maxInFlight = 0;
    this.stopping = false;
    this.drainOver = false; // tasks still running are left to their leases
    this.slotFreed = null;
  }

  async stop() {
    if (this.stopping) return;
    this.stopping = true;
    if (this.slotFreed) this.slotFreed();
    if (this.wakeListen) this.wakeListen();
    const c = this.conns;
    if (c && c.claimer.processID) {
      try { // end a waiting claim now
        await c.beater.query('SELECT pg_catalog.pg_cancel_backend($1)', [c.claimer.processID]);
      } catch (e) { /* it ends by its wait anyway */ }
    }
  }

  // ---- shards ----

  // The clients of the shard in use (a promise), made anew after a move.
  current() {
    if (!this.connsP || this.connsGeneration !== this.generation) {
      const old = this.connsP;
      this.connsGeneration = this.generation;
      if (old) old.then((c) => this.close(c), () => {});
      this.connsP = this.open(this.generation, this.connection);
      this.connsP.catch(() => {}); // its callers see the error
    }
    return this.connsP;
  }

  async open(generation, connection) {
    const c = {
      generation,
      claimer: new pg.Client(connection),
      beater: new pg.Client(connection),
      pool: new pg.Pool({ ...(typeof connection === 'string'
        ? { connectionString: connection } : connection), max: this.concurrency }),
    };
    c.pool.on('error', (e) => this.log.warn(`wfengine-worker: pool: ${e.message}`));
    if (this.shards.length > 1) { // a lost connection moves on to the next shard
      for (const cl of [c.claimer, c.beater]) {
        cl.on('error', (e) => this.log.warn(`wfengine-worker: connection lost: ${e.message}`));
      }
    }
    c.claims = new Client(c.claimer, this.prepare);
    c.reports = new Client(c.pool, this.prepare);
    c.beats = new Client(c.beater, this.prepare);
    this.conns = c;
    try {
      await c.claimer.connect();
      await c.beater.connect();
    } catch (e) {
      this.close(c);
      throw e;
    }
    return c;
  }

  close(c) {
    c.claimer.end().catch(() => {});
    c.beater.end().catch(() => {});
    c.pool.end().catch(() => {}); // a handler still running may hold a client
  }

  // Whether e moves a worker with a shard array to the next shard: a call
  // refused with 55W01, or a connection not made or lost.
  callsForMove(e) {
    if (this.shards.length < 2) return false; // one connection: as ever
    if (!(e instanceof WfError)) return true; // not the server's: the connection
    return e.sqlstate === '55W01' || e.sqlstate === '57P01' || (e.sqlstate || '').startsWith('08');
  }

  // Moves to the next shard, unless another call already moved on from
  // generation (one move per failure, however many calls see it).
  move(generation, why) {
    if (generation !== this.generation) return;
    const old = this.connection;
    this.generation++;
    this.moves++;
    this.connection = this.shards[this.generation % this.shards.length];
    this.log.warn(`wfengine-worker: moving from shard ${JSON.stringify(old)} to ` +
      `${JSON.stringify(this.connection)} (${why && (why.sqlstate || why.code)} ${why && why.message})`);
  }

  // Runs until stop(), SIGTERM or SIGINT.
  async run() {
    const onSignal = () => { this.stop(); };
    process.on('SIGTERM', onSignal);
    process.on('SIGINT', onSignal);
    if (this.shards.length < 2) await this.current(); // as ever: a failure here throws
    const beat = this.heartbeats();
    const running = new Set();
    try {
      let backoff = 100;
      let failedMoves = 0; // moves since the last claim that worked
      while (!this.stopping) {
        if (this.inFlight.size >= this.concurrency) {
          await new Promise((resolve) => { this.slotFreed = resolve; });
          this.slotFreed = null;
          continue;
        }
        let tasks;
        let generation = this.generation;
        try {
          const c = await this.current();
          generation = c.generation;
          if (c.hasAny === undefined) {
            c.hasAny = this.queues.length > 1 && await c.claims.hasClaimAny();
            if (this.queues.length > 1 && !c.hasAny) await this.listen(c);
          }
          tasks = await this.claim(c.claims, c.hasAny, this.concurrency - this.inFlight.size);
          backoff = 100;
          failedMoves = 0;
        } catch (e) {
          if (this.stopping && e.sqlstate === '57014') break; // our cancel
          if (this.callsForMove(e)) {
            // another shard's tenant, or a shard down: the next shard
            this.move(generation, e);
            if (++failedMoves >= this.shards.length) { // all the way round
              await sleep(backoff);
              backoff = Math.min(backoff * 2, 2000);
            }
            continue;
          }
          if (!(e instanceof WfError) || !e.retryable) throw e;
          // a move's cut-over, a shard failing over: claim again soon
          this.log.warn(`wfengine-worker: claim refused (${e.sqlstate} ${e.message}), trying again in ${backoff} ms`);
          await sleep(backoff);
          backoff = Math.min(backoff * 2, 2000);
          continue;
        }
        for (const t of tasks) {
          this.inFlight.set(String(t.taskId), t);
          const p = this.execute(t).finally(() => running.delete(p));
          running.add(p);
        }
        this.maxInFlight = Math.max(this.maxInFlight, this.inFlight.size);
      }
      // graceful shutdown: let the tasks in flight finish
      // (the timer is cleared either way: a pending one would keep the
      // process alive for the whole drain timeout after run() returns)
      const drained = Promise.all(running);
      let drainTimer;
      const timedOut = await Promise.race([drained.then(() => false),
        new Promise((resolve) => {
          drainTimer = setTimeout(() => resolve(true), this.drainTimeout * 1000);
        })]);
      clearTimeout(drainTimer);
      if (timedOut) {
        this.drainOver = true;
        for (const t of this.inFlight.values()) {
          t.cancelled = true;
          this.log.warn(`wfengine-worker: task ${t.taskId} still running at shutdown; its lease will expire`);
        }
      }
    } finally {
      this.stopping = true;
      this.beatStop = true;
      if (this.wakeBeat) this.wakeBeat();
      await beat;
      process.removeListener('SIGTERM', onSignal);
      process.removeListener('SIGINT', onSignal);
      if (this.connsP) await this.connsP.then((c) => this.close(c), () => {});
    }
  }

  async listen(c) {
    for (const q of this.queues) {
      const ch = await c.claims.channel(q);
      await c.claimer.query(`LISTEN "${ch.replace(/"/g, '""')}"`);
    }
    c.claimer.on('notification', () => { if (this.wakeListen) this.wakeListen(); });
  }

  async claim(claims, hasAny, free) {
    if (this.queues.length === 1) {
      return claims.claim(this.queues[0], this.name, free, this.lease, this.wait);
    }
    if (hasAny) return claims.claimAny(this.queues, this.name, free, this.lease, this.wait);
    // an older server: a claim per queue, then sleep until a notification
    const tasks = [];
    for (const q of this.queues) {
      if (tasks.length >= free) break;
      tasks.push(...await claims.claim(q, this.name, free - tasks.length, this.lease));
    }
    if (tasks.length === 0 && !this.stopping) {
      await new Promise((resolve) => {
        const timer = setTimeout(resolve, this.wait * 1000);
        this.wakeListen = () => { clearTimeout(timer); resolve(); };
      });
      this.wakeListen = null;
    }
    return tasks;
  }

  // The handler of task: the entry of handlers for its activity (for its
  // queue when the step has none), else the catch-all handler, else a
  // failure "unknown_activity" that is not retryable (no attempt will find
  // a handler).
  handlerFor(task) {
    const key = task.activity || task.queue;
    const fn = Object.prototype.hasOwnProperty.call(this.handlers, key) ? this.handlers[key] : this.handler;
    if (!fn) throw new TaskFailure('unknown_activity', `no handler for ${key}`, { retryable: false });
    return fn;
  }

  // Runs task and reports it; with eager dispatch a report may lease the
  // next task (the next step of the same run first), which runs at once in
  // the same slot.
  async execute(task) {
    while (task) task = await this.executeOne(task);
  }

  async executeOne(task) {
    const hasEager = this.eager &&
      await this.current().then((c) => c.reports.hasEager()).catch(() => false);
    let report;
    let eager = false;
    try {
      const fn = this.handlerFor(task);
      const output = await fn(task);
      // no new lease while stopping (looked at after the handler: a stop may
      // come meanwhile): nothing more is claimed then
      eager = hasEager && !this.stopping;
      report = eager
        ? (reports) => reports.completeAndClaim(task.taskId, task.fence, output, task.queue, this.name, 1, this.lease)
        : (reports) => reports.complete(task.taskId, task.fence, output);
    } catch (e) {
      eager = hasEager && !this.stopping;
      let err = e && e.error;
      let retryable = e && e.retryable;
      if (!(e instanceof TaskFailure)) {
        this.log.error(`wfengine-worker: task ${task.taskId}: handler threw: ${e && e.stack}`);
        err = { code: 'exception', message: String(e && e.message) };
        retryable = true;
      }
      report = eager
        ? (reports) => reports.failAndClaim(task.taskId, task.fence, err, retryable, task.queue, this.name, 1, this.lease)
        : (reports) => reports.fail(task.taskId, task.fence, err, retryable);
    }
    if (this.drainOver) {
      // finished after the drain timeout: not reported (the clients are
      // closed), left to its lease like a task still running
      this.log.warn(`wfengine-worker: task ${task.taskId}: finished after the drain timeout, not reported`);
      this.inFlight.delete(String(task.taskId));
      return null;
    }
    // A lost connection: report again (a repeat is "duplicate").  With eager
    // dispatch a lease handed out with a lost answer is never seen here; it
    // expires and the attempt is delivered again.
    let answer;
    let next = null;
    // With a shard array, a report refused with 55W01 or whose connection
    // fails moves the worker to the next shard and is made there (answered
    // stale there after a real move).
    for (let i = 0, lost = 0; i < 30; i++) {
      let generation = this.generation;
      try {
        const c = await this.current();
        generation = c.generation;
        answer = await report(c.reports);
        break;
      } catch (e) {
        answer = e;
        if (this.callsForMove(e) && i < 29) {
          this.log.warn(`wfengine-worker: task ${task.taskId}: report failed on this shard (${e.sqlstate || e.code} ${e.message}), moving on`);
          this.move(generation, e);
          if (i + 1 >= this.shards.length) await sleep(Math.min(100 * (i + 1), 1000)); // all the way round
          continue;
        }
        if (e instanceof WfError && e.retryable && i < 29) {
          // a move's cut-over: report again (after the move the fence is
          // stale, and the task is delivered again)
          this.log.warn(`wfengine-worker: task ${task.taskId}: report refused (${e.sqlstate}), retrying`);
          await sleep(Math.min(100 * (i + 1), 1000));
          continue;
        }
        if (e instanceof WfError) {
          this.log.error(`wfengine-worker: task ${task.taskId}: report refused: ${e.sqlstate} ${e.message}`);
          break;
        }
        if (++lost >= 3) break;
        await sleep(200 * lost);
      }
    }
    if (answer && typeof answer === 'object' && 'tasks' in answer) {
      next = answer.tasks[0] || null;
      answer = answer.answer;
    }
    this.answers.push([task, answer]);
    this.inFlight.delete(String(task.taskId));
    if (next) {
      this.inFlight.set(String(next.taskId), next);
      this.handedOn++;
      this.maxInFlight = Math.max(this.maxInFlight, this.inFlight.size);
    } else if (this.slotFreed) {
      this.slotFreed();
    }
    return next;
  }

  async heartbeats() {
    while (!this.beatStop) {
      await new Promise((resolve) => {
        const timer = setTimeout(resolve, this.heartbeatEvery * 1000);
        this.wakeBeat = () => { clearTimeout(timer); resolve(); };
      });
      const tasks = [...this.inFlight.values()];
      if (this.beatStop || tasks.length === 0) continue;
      let generation = this.generation;
      try {
        const c = await this.current();
        generation = c.generation;
        const answers = await c.beats.heartbeatMany(tasks);
        for (const t of tasks) {
          const a = answers.get(String(t.taskId));
          if (a === Answer.STALE || a === Answer.CANCEL_REQUESTED) t.cancelled = true;
        }
      } catch (e) {
        this.log.warn(`wfengine-worker: heartbeat failed: ${e.message}`);
        if (this.callsForMove(e)) this.move(generation, e);
      }
    }
  }
}

module.exports = { Answer, Client, TaskFailure, WfError, Worker, seconds };
