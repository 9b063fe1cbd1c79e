// bench/peers/node/gw_bench.js -- graphile-worker (from ../shared/perf/node):
// bulk-enqueue N no-op jobs in one add_jobs call, then drain them with one
// worker pool of concurrency C, one job per fetch (perjob) or with the local
// queue and batched completions (batched).
// usage: node gw_bench.js <perjob|batched> N C [seconds, ignored]
// Connects with the libpq environment (PGHOST, PGPORT, PGUSER, PGDATABASE).
// Prints one JSON line; jobs_per_s is the drain rate (N / time until every
// job's completion is committed).
const { run, runMigrations, Logger } = require('graphile-worker');
const { Pool } = require('pg');
const mode = process.argv[2] || 'perjob';
const N = parseInt(process.argv[3] || '20000', 10);
const C = parseInt(process.argv[4] || '8', 10);
const payload = require('fs').readFileSync(__dirname + '/../floor/payload.json', 'utf8').trim();

(async () => {
  const pool = new Pool({ max: 2 });
  const pgPool = new Pool({ max: C + 2 });
  pool.on('error', e => console.error(e));
  pgPool.on('error', e => console.error(e));
  await pool.query('DROP SCHEMA IF EXISTS graphile_worker CASCADE');
  await runMigrations({ pgPool });
  await pool.query('CHECKPOINT');
  // bulk enqueue (one add_jobs call, one transaction)
  const jobs = Array.from({ length: N }, () => ({ identifier: 'noop', payload: JSON.parse(payload) }));
  let t0 = process.hrtime.bigint();
  await pool.query(`select 1 from graphile_worker.add_jobs(array(select json_populate_recordset(null::graphile_worker.job_spec, $1::json)))`, [JSON.stringify(jobs)]);
  const enqMs = Number(process.hrtime.bigint() - t0) / 1e6;
  await pool.query('VACUUM ANALYZE graphile_worker._private_jobs');

  let done = 0;
  const workerPreset = mode === 'batched'
    ? { worker: { localQueue: { size: C + 1 }, completeJobBatchDelay: 0, failJobBatchDelay: 0 } }
    : { worker: {} };
  t0 = process.hrtime.bigint();
  const runner = await run({
    pgPool, concurrency: C, noHandleSignals: true, pollInterval: 1000,
    logger: new Logger(() => () => {}),
    preset: workerPreset,
    taskList: { noop: async () => { done++; } },
  });
  // wait until all jobs processed AND their completion committed
  for (;;) {
    await new Promise(r => setTimeout(r, 20));
    if (done >= N) {
      const { rows } = await pool.query('select count(*)::int n from graphile_worker._private_jobs');
      if (rows[0].n === 0) break;
    }
  }
  const runMs = Number(process.hrtime.bigint() - t0) / 1e6;
  await runner.stop();
  await pgPool.end();
  await pool.end();
  console.log(JSON.stringify({ system: 'graphile-worker', mode, N, concurrency: C,
    enqueue_bulk_jobs_per_s: +(N / enqMs * 1000).toFixed(0),
    jobs_per_s: +(N / runMs * 1000).toFixed(1),
    seconds: +(runMs / 1000).toFixed(2) }));
})().catch(e => { console.error(e); process.exit(1); });
