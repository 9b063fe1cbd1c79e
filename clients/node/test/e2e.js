'use strict';
// End-to-end test of wfengine-worker: the order workflow of test/demo.
// Connects with the libpq environment (PGHOST, PGDATABASE, ...) to a database
// with wfengine, as a superuser (it publishes and calls wf.tick(), the engine
// worker's part: `make test` runs with wfengine.enabled = off).  The same
// checks as clients/python/test_e2e.py; exit status 0 when all passed.
const fs = require('fs');
const path = require('path');
const pg = require('pg');
const { Answer, Client, TaskFailure, WfError, Worker, seconds } = require('..');

const failures = [];
function check(ok, what) {
  console.log(`${ok ? 'ok    ' : 'NOT OK'} ${what}`);
  if (!ok) failures.push(what);
}
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// The options every library shares (docs/workers.md), without a server.
function checkOptions() {
  const refused = (opts) => { try { new Worker(opts); return ''; } catch (e) { return e.message; } };
  const h = async () => ({});
  check(refused({ queues: ['q'] }).includes('needs a handler'), 'a worker without a handler is refused');
  check(refused({ queues: ['q'], handler: h, lease: '30 s' }).includes("'30s'"), 'a duration string that does not parse is refused');
  check(seconds('x', '30s') === 30 && seconds('x', '250ms') === 0.25 && seconds('x', '2m') === 120 &&
    seconds('x', '1h') === 3600 && seconds('x', '1m30s') === 90 && seconds('x', 12.5) === 12.5,
    "durations: seconds, or '30s', '250ms', '2m', '1h'");
  const w = new Worker({ queues: ['q'], lease: '1m', handlers: { a: () => 'by activity', q: () => 'by queue' } });
  check(w.lease === 60 && w.wait === 10 && w.heartbeatEvery === 20 && w.drainTimeout === 60,
    'defaults: wait 10 s, heartbeat lease/3, drainTimeout lease');
  check(w.handlerFor({ activity: 'a', queue: 'q' })() === 'by activity' && w.handlerFor({ activity: null, queue: 'q' })() === 'by queue',
    'a handler by activity; a step without activity by its queue');
  let f = null;
  try { w.handlerFor({ activity: 'other', queue: 'q' }); } catch (e) { f = e; }
  check(f instanceof TaskFailure && f.error.code === 'unknown_activity' && f.retryable === false,
    'no handler: unknown_activity, not retryable');
  w.handler = () => 'catch-all';
  check(w.handlerFor({ activity: 'other', queue: 'q' })() === 'catch-all' && w.handlerFor({ activity: 'a', queue: 'q' })() === 'by activity',
    'handler is the catch-all, after the entries of handlers');
  check(new TaskFailure('x').retryable === true, 'a TaskFailure is retryable unless it says otherwise');
}

async function main() {
  checkOptions();
  const admin = new pg.Client();
  await admin.connect();
  const one = async (sql, params) => Object.values((await admin.query(sql, params)).rows[0])[0];
  const spec = fs.readFileSync(path.join(__dirname, '..', '..', '..', 'test', 'demo', 'order.json'), 'utf8');
  await admin.query("SELECT wf.publish_definition('order', $1::jsonb)", [spec]);
  const runs = [];
  for (let i = 0; i < 6; i++) {
    runs.push(await one("SELECT wf.start_run('order', $1::jsonb)", [JSON.stringify(
      { amount: 10 + i, currency: 'EUR', customer: `c${i}@example.com`, sku: `SKU-${i}` })]));
  }

  // the engine worker's part: due timers (retry backoff), expired leases
  const ticker = new pg.Client();
  await ticker.connect();
  let ticking = true;
  const ticks = (async () => { while (ticking) { await ticker.query('SELECT wf.tick()'); await sleep(200); } })();

  let failedOnce = 0;
  let slowStarted = false;
  const worker = new Worker({
    queues: ['payments', 'warehouse', 'email'],
    name: 'node-e2e', concurrency: 4, lease: '1s', wait: 1, heartbeat: '300ms', drainTimeout: 10,
    log: { info() {}, warn: console.warn, error: console.error },
    handlers: {
      charge_card: async (t) => {
        if (t.input.customer === 'c0@example.com' && t.attempt === 1) {
          failedOnce++;
          throw new TaskFailure('timeout', 'simulated gateway timeout', { retryable: true });
        }
        if (t.input.customer === 'slow@example.com') { slowStarted = true; await sleep(1500); }
        return { charge_id: `ch_${t.idempotencyKey}`, status: 'captured' };
      },
      reserve_stock: async (t) => {
        await sleep(t.input.sku === 'SKU-1' ? 2500 : 300); // SKU-1: longer than the 1 s lease
        return { reservation_id: `rsv_${t.idempotencyKey}` };
      },
      send_receipt: async (t) => ({ message_id: `msg_${t.taskId}`, to: t.input.customer }),
    },
  });

  let slowRun = null;
  const driver = (async () => {
    for (let i = 0; i < 300; i++) {
      if (Number(await one("SELECT count(*) FROM wf.runs WHERE status = 'completed'")) === 6) break;
      await sleep(200);
    }
    slowRun = await one("SELECT wf.start_run('order', $1::jsonb)", [JSON.stringify(
      { amount: 1, currency: 'EUR', customer: 'slow@example.com', sku: 'SKU-SLOW' })]);
    for (let i = 0; i < 200 && !slowStarted; i++) await sleep(100);
    if (slowStarted) process.kill(process.pid, 'SIGTERM'); else worker.stop();
  })();

  const t0 = Date.now();
  await worker.run();
  const elapsed = (Date.now() - t0) / 1000;
  await driver;
  ticking = false;
  await ticks;
  await ticker.end();

  const statuses = [];
  for (const r of runs) statuses.push(await one('SELECT wf.run_status($1)', [r]));
  check(statuses.every((s) => s === 'completed'), `six order runs completed: ${statuses}`);
  let verified = true;
  for (const r of runs) verified = verified && await one('SELECT wf.verify_run($1)', [r]);
  check(verified, 'wf.verify_run holds for every run');
  check(failedOnce === 1, 'a charge failed once (retryable)');
  // (a completed attempt's row is deleted since 0.3.0: its completion is
  // read from its task_completed event, its deliveries from the lease
  // expiries before it, each followed by one delivery more)
  check(Number(await one("SELECT count(*) FROM wf.event_log WHERE type = 'task_completed' AND step = 'charge' AND attempt = 2")) === 1,
    'the retry (attempt 2) completed');
  const slowReserve = await one("SELECT CASE WHEN c.seq IS NULL THEN t.status ELSE 'completed' END || '/' ||" +
    " (1 + (SELECT count(*) FROM wf.event_log x WHERE x.run_id = s.run_id AND x.type = 'lease_expired'" +
    "       AND x.step = s.step AND x.attempt = s.attempt))" +
    " FROM wf.runs r JOIN wf.event_log s ON s.run_id = r.run_id AND s.type = 'task_scheduled' AND s.step = 'reserve'" +
    " LEFT JOIN wf.tasks t ON t.task_id = (s.payload->>'task_id')::bigint" +
    " LEFT JOIN wf.event_log c ON c.run_id = s.run_id AND c.type = 'task_completed'" +
    "      AND c.payload->>'task_id' = s.payload->>'task_id'" +
    " WHERE r.input->>'sku' = 'SKU-1'");
  check(slowReserve === 'completed/1', `a task longer than its lease was kept by heartbeats, delivered once: ${slowReserve}`);
  const others = worker.answers.filter(([, a]) => a !== Answer.ACCEPTED);
  check(others.length === 0 && worker.answers.length === 20, `every report accepted (${worker.answers.length} reports)`);
  check(worker.maxInFlight >= 2, `tasks ran concurrently (at most ${worker.maxInFlight} at once)`);
  const slow = slowRun && await one("SELECT string_agg(s.step || ':' || CASE WHEN c.seq IS NULL THEN t.status ELSE 'completed' END," +
    " ',' ORDER BY s.seq)" +
    " FROM wf.event_log s LEFT JOIN wf.tasks t ON t.task_id = (s.payload->>'task_id')::bigint" +
    " LEFT JOIN wf.event_log c ON c.run_id = s.run_id AND c.type = 'task_completed'" +
    "      AND c.payload->>'task_id' = s.payload->>'task_id'" +
    " WHERE s.run_id = $1 AND s.type = 'task_scheduled'", [slowRun]);
  check(slow === 'charge:completed,reserve:ready', `SIGTERM: the task in flight finished and nothing more was claimed: ${slow}`);
  check(elapsed < 60, `the worker stopped (${elapsed} s)`);

  const client = new Client(admin);
  try {
    await client.complete(1n, 1n << 40n, {});
    check(false, 'a fence never issued is refused');
  } catch (e) {
    check(e instanceof WfError && e.sqlstate === '22023' && e.hint && /fence/.test(e.message),
      `WfError carries SQLSTATE and hint: ${e.sqlstate} ${e.message} (hint: ${e.hint})`);
  }
  try {
    await client.claim('payments', '');
    check(false, 'an empty worker name is refused');
  } catch (e) {
    check(e instanceof WfError && e.sqlstate === '22023' && /^Name the worker/.test(e.hint), `claim error: ${e.message}`);
  }
  check(await client.heartbeat(1n, 1n) === Answer.STALE, 'a heartbeat of a finished attempt is stale');

  // prepared statements: each of the three calls above was prepared once on
  // the client's connection; calling again binds and executes it, and a
  // Client with prepare false (a pooler in transaction mode) prepares nothing
  const preparedHere = async () => Number(await one(
    "SELECT count(*) FROM pg_catalog.pg_prepared_statements WHERE name LIKE 'wfw\\_%'"));
  const nPrepared = await preparedHere();
  check(nPrepared === 3, `the calls were prepared on the connection (${nPrepared} statements)`);
  check(await client.heartbeat(1n, 1n) === Answer.STALE && await preparedHere() === 3,
    'a call made again reuses its prepared statement');
  check(await new Client(admin, false).claim('node_unprepared', 'probe').then((t) => t.length) === 0 &&
    await preparedHere() === 3, 'prepare false sends an unnamed statement');

  // eager dispatch: a report hands the worker the next step of its run when
  // it is on the same queue, written leased (one call and one commit per step)
  await admin.query(`SELECT wf.publish_definition('node_pair', '{"steps": [
    {"name": "first", "queue": "node_eager"}, {"name": "second", "queue": "node_eager"}]}')`);
  const pair = await one("SELECT wf.start_run('node_pair', '{}')");
  let seenLeased = null;
  const ew = new Worker({
    queues: ['node_eager'], name: 'node-eager', concurrency: 1, lease: 5, wait: 0.5,
    log: { info() {}, warn: console.warn, error: console.error },
    handler: async (t) => {
      // the second attempt's row as its handler sees it, leased (the row of
      // a completed attempt is deleted since 0.3.0)
      if (t.step === 'second') {
        seenLeased = await one("SELECT worker || '/' || (claimed_at = created_at) || '/' || deliveries || '/' || status" +
          ' FROM wf.tasks WHERE task_id = $1', [String(t.taskId)]);
      }
      return { step: t.step };
    },
  });
  const ewRun = ew.run();
  for (let i = 0; i < 200; i++) {
    if (await one('SELECT wf.run_status($1)', [pair]) === 'completed') break;
    await sleep(100);
  }
  await ew.stop();
  await ewRun;
  const second = seenLeased + ' ' + await one("SELECT payload->>'worker' FROM wf.event_log" +
    " WHERE run_id = $1 AND type = 'task_completed' AND step = 'second'", [pair]);
  check(second === 'node-eager/true/1/leased node-eager',
    `eager dispatch: the second step was leased by the first one's report: ${second}`);
  const eagerAnswers = ew.answers.map(([, a]) => a).join(',');
  check(ew.handedOn === 1 && eagerAnswers === 'accepted,accepted',
    `eager dispatch: one task handed on, both reports accepted (${ew.handedOn}, ${eagerAnswers})`);
  check(await one('SELECT wf.verify_run($1)', [pair]), "the pair's run verifies");

  // a shard list: this database is shard s1, a second one shard s2, and the
  // shard map gives the test tenant's partition to s2.  A worker given
  // [s1, a shard down, s2] is refused by s1 (55W01), cannot connect to the
  // next, moves to s2 and completes the runs there.  The login is no
  // superuser (superusers skip the shard check).
  const db1 = await one('SELECT current_database()');
  const db2 = `${db1}_s2`;
  const tenant = 'wfc_node';
  const login = 'wfc_node_login';
  const shardMap = "CASE wf.tenant_partition($1, 2) WHEN 0 THEN ARRAY['s2', 's1'] ELSE ARRAY['s1', 's2'] END";
  await admin.query(`DROP DATABASE IF EXISTS ${db2} WITH (FORCE)`);
  await admin.query(`DROP ROLE IF EXISTS ${login}`);
  await admin.query(`DROP ROLE IF EXISTS wf_tenant_${tenant}`);
  await admin.query('SELECT wf.create_tenant($1)', [tenant]);
  // the login's password is the environment's (pg_virtualenv asks for one over
  // TCP; pg sends PGPASSWORD), so that its connections need no other set-up
  const pw = (process.env.PGPASSWORD || 'wfc_node').replace(/'/g, "''");
  await admin.query(`CREATE ROLE ${login} LOGIN PASSWORD '${pw}' IN ROLE wfengine_app, wfengine_worker, wfengine_admin`);
  await admin.query('SELECT wf.add_tenant_member($1, $2)', [tenant, login]);
  try {
    await admin.query(`SELECT wf.configure_shard('s1', ${shardMap}, 1)`, [tenant]);
    await admin.query(`CREATE DATABASE ${db2}`);
    const a2 = new pg.Client({ database: db2 });
    await a2.connect();
    await a2.query('CREATE EXTENSION wfengine');
    await a2.query(`SELECT wf.configure_shard('s2', ${shardMap}, 2)`, [tenant]);
    await a2.end();
    const s2 = new pg.Client({ database: db2, user: login });
    await s2.connect();
    const one2 = async (sql, params) => Object.values((await s2.query(sql, params)).rows[0])[0];
    await s2.query(`SELECT wf.publish_definition('shard_pair', '{"steps": [
      {"name": "first", "queue": "node_shard"}, {"name": "second", "queue": "node_shard"}]}')`);
    const shardRuns = [];
    for (let i = 0; i < 3; i++) shardRuns.push(await one2("SELECT wf.start_run('shard_pair', '{}')"));
    const s1 = new pg.Client({ user: login });
    await s1.connect();
    try {
      await new Client(s1).claim('node_shard', 'probe');
      check(false, 'shard s1 refuses the tenant');
    } catch (e) {
      check(e instanceof WfError && e.sqlstate === '55W01', `shard s1 refuses the tenant: ${e.sqlstate} ${e.message}`);
    }
    await s1.end();
    const sw = new Worker({
      connection: [{ user: login }, { user: login, host: '/nonexistent' }, { user: login, database: db2 }],
      queues: ['node_shard'], name: 'node-shard', concurrency: 2, lease: 5, wait: 0.5,
      log: { info() {}, warn: console.warn, error: console.error },
      handler: async (t) => ({ step: t.step }),
    });
    const swRun = sw.run();
    for (let i = 0; i < 300; i++) {
      if (Number(await one2("SELECT count(*) FROM wf.runs WHERE status = 'completed'")) === 3) break;
      await sleep(100);
    }
    await sw.stop();
    await swRun;
    const done = [];
    for (const r of shardRuns) done.push(await one2('SELECT wf.run_status($1)', [r]));
    check(done.join(',') === 'completed,completed,completed', `shard list: the runs on s2 completed: ${done}`);
    check(sw.moves === 2 && sw.connection.database === db2, `shard list: the worker moved to s2 (${sw.moves} moves)`);
    const shardAnswers = sw.answers.map(([, a]) => a).join(',');
    check(shardAnswers === Array(6).fill('accepted').join(','), `shard list: every report accepted: ${shardAnswers}`);

    // A move of the tenant's partition from s2 to s1 while a task leased on
    // s2 runs, emulated as wfrouter.move_partition leaves it: s1 holds the
    // same task (s1 takes s2's id block, so the run started there has the
    // task's id), leased there under a newer fence (the cut-over re-fences
    // the leases it takes), and both maps give the partition to s1.  The
    // worker, on [s2, s1] (at s2 now), reports: s2 refuses (55W01), the
    // worker moves to s1, where the report is stale; it drops the task,
    // claims on s1 and completes the run there once the lease has expired.
    const shardMapS1 = "CASE wf.tenant_partition($1, 2) WHEN 0 THEN ARRAY['s1', 's2'] ELSE ARRAY['s2', 's1'] END";
    // the last task id s2 issued (a completed attempt has no row since 0.3.0)
    const lastId = await one2("SELECT max((payload->>'task_id')::bigint)::text FROM wf.event_log WHERE type = 'task_scheduled'");
    await admin.query(`SELECT wf.configure_shard('s1', ${shardMap}, 2)`, [tenant]);
    await admin.query("SELECT pg_catalog.setval('wf.task_id_seq', $1::bigint)", [lastId]);
    await s2.query("SELECT wf.start_run('shard_pair', '{}')");
    const moved = {};
    const moveUnder = async (t) => {
      if (!moved.task) {
        moved.task = t.taskId;
        moved.fence = t.fence;
        const c2 = new pg.Client({ database: db2 });
        await c2.connect();
        await c2.query(`SELECT wf.configure_shard('s2', ${shardMapS1})`, [tenant]);
        await c2.end();
        await admin.query(`SELECT wf.configure_shard('s1', ${shardMapS1})`, [tenant]);
        await admin.query("SELECT pg_catalog.setval('wf.fence_seq', $1::bigint)", [String(t.fence + 1000n)]);
        const l1 = new pg.Client({ user: login });
        await l1.connect();
        await l1.query(`SELECT wf.publish_definition('shard_pair', '{"steps": [
          {"name": "first", "queue": "node_shard"}, {"name": "second", "queue": "node_shard"}]}')`);
        moved.run = (await l1.query("SELECT wf.start_run('shard_pair', '{}') AS r")).rows[0].r;
        const l = (await l1.query("SELECT task_id::text AS t, fence::text AS f FROM wf.claim_tasks('node_shard', 'old-shard', 1, '1 second')")).rows[0];
        moved.lease = [BigInt(l.t), BigInt(l.f)];
        await l1.end();
      }
      return { step: t.step };
    };
    const mw = new Worker({
      connection: [{ user: login, database: db2 }, { user: login }],
      queues: ['node_shard'], name: 'node-move', concurrency: 1, lease: 5, wait: 0.5, eager: false,
      log: { info() {}, warn: console.warn, error: console.error },
      handler: moveUnder,
    });
    const s1c = new pg.Client({ user: login }); // the tenant's runs on s1
    await s1c.connect();
    const mwRun = mw.run();
    let moveStatus = '';
    for (let i = 0; i < 150 && moveStatus !== 'completed'; i++) {
      await sleep(200);
      await admin.query('SELECT wf.tick()'); // takes the expired lease back
      if (moved.run) moveStatus = (await s1c.query('SELECT wf.run_status($1) AS s', [moved.run])).rows[0].s;
    }
    await mw.stop();
    await mwRun;
    await s1c.end();
    check(moved.lease && moved.lease[0] === moved.task && moved.lease[1] > moved.fence,
      `a move: s1 holds the task leased on s2, re-fenced: ${moved.task}/${moved.fence}, ${moved.lease}`);
    const moveAnswers = mw.answers.map(([t, a]) => `${t.taskId}:${a && a.sqlstate ? a.sqlstate : a}`).join(',');
    check(mw.answers.length > 0 && mw.answers[0][1] === Answer.STALE && mw.moves === 1,
      `a move: the report of the lease from s2 is stale on s1 (${mw.moves} moves): ${moveAnswers}`);
    check(moveStatus === 'completed', `a move: the worker claimed on s1 and completed the run there: ${moveStatus}`);
    await s2.end();
  } finally {
    await admin.query('SELECT wf.configure_shard(NULL, NULL)');
    await admin.query(`DROP DATABASE IF EXISTS ${db2} WITH (FORCE)`);
    await admin.query(`DROP ROLE IF EXISTS ${login}`);
    await admin.query(`DROP ROLE IF EXISTS wf_tenant_${tenant}`);
  }
  await admin.end();
  console.log(`node client: ${failures.length ? 'FAILED' : 'passed'}`);
  process.exit(failures.length ? 1 : 0);
}

main().catch((e) => { console.error(e); process.exit(2); });
