'use strict';
// End-to-end test of wfengine-worker: the order workflow of test/demo.
// Connects with the libpq environment (PGHOST, PGDATABASE, ...) to a database
// with wfengine, as a superuser (it publishes and calls wf.tick(), the engine
// worker's part: `make test` runs with wfengine.enabled = off).  The same
// checks as clients/python/test_e2e.py; exit status 0 when all passed.
const fs = require('fs');
const path = require('path');
const pg = require('pg');
const { Answer, Client, TaskFailure, WfError, Worker } = require('..');

const failures = [];
function check(ok, what) {
  console.log(`${ok ? 'ok    ' : 'NOT OK'} ${what}`);
  if (!ok) failures.push(what);
}
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function main() {
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
    name: 'node-e2e', concurrency: 4, lease: 1, wait: 1, heartbeat: 0.3, drainTimeout: 10,
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
  check(Number(await one("SELECT count(*) FROM wf.tasks WHERE step = 'charge' AND attempt = 2 AND status = 'completed'")) === 1,
    'the retry (attempt 2) completed');
  const slowReserve = await one("SELECT status || '/' || deliveries FROM wf.tasks WHERE step = 'reserve' AND input->>'sku' = 'SKU-1'");
  check(slowReserve === 'completed/1', `a task longer than its lease was kept by heartbeats, delivered once: ${slowReserve}`);
  const others = worker.answers.filter(([, a]) => a !== Answer.ACCEPTED);
  check(others.length === 0 && worker.answers.length === 20, `every report accepted (${worker.answers.length} reports)`);
  check(worker.maxInFlight >= 2, `tasks ran concurrently (at most ${worker.maxInFlight} at once)`);
  const slow = slowRun && await one("SELECT string_agg(step || ':' || status, ',' ORDER BY task_id) FROM wf.tasks WHERE run_id = $1", [slowRun]);
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

  // eager dispatch: a report hands the worker the next step of its run when
  // it is on the same queue, written leased (one call and one commit per step)
  await admin.query(`SELECT wf.publish_definition('node_pair', '{"steps": [
    {"name": "first", "queue": "node_eager"}, {"name": "second", "queue": "node_eager"}]}')`);
  const pair = await one("SELECT wf.start_run('node_pair', '{}')");
  const ew = new Worker({
    queues: ['node_eager'], name: 'node-eager', concurrency: 1, lease: 5, wait: 0.5,
    log: { info() {}, warn: console.warn, error: console.error },
    handler: async (t) => ({ step: t.step }),
  });
  const ewRun = ew.run();
  for (let i = 0; i < 200; i++) {
    if (await one('SELECT wf.run_status($1)', [pair]) === 'completed') break;
    await sleep(100);
  }
  await ew.stop();
  await ewRun;
  const second = await one("SELECT worker || '/' || (claimed_at = created_at) || '/' || deliveries || '/' || status" +
    " FROM wf.tasks WHERE run_id = $1 AND step = 'second'", [pair]);
  check(second === 'node-eager/true/1/completed',
    `eager dispatch: the second step was leased by the first one's report: ${second}`);
  const eagerAnswers = ew.answers.map(([, a]) => a).join(',');
  check(ew.handedOn === 1 && eagerAnswers === 'accepted,accepted',
    `eager dispatch: one task handed on, both reports accepted (${ew.handedOn}, ${eagerAnswers})`);
  check(await one('SELECT wf.verify_run($1)', [pair]), "the pair's run verifies");
  await admin.end();
  console.log(`node client: ${failures.length ? 'FAILED' : 'passed'}`);
  process.exit(failures.length ? 1 : 0);
}

main().catch((e) => { console.error(e); process.exit(2); });
