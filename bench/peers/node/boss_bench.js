// bench/peers/node/boss_bench.js -- pg-boss: C concurrent loops for S seconds,
// each doing send + fetch + complete of one job (perjob), or insert of 10
// jobs + fetch(batchSize 10) + complete of the 10 ids (batched): three
// transactions per loop, as pgmq send + read + delete.  The queue starts with
// a backlog of 1,000 jobs (as the pgmq cells).
// usage: node boss_bench.js <perjob|batched> N(ignored) C S
// Connects with the libpq environment (PGHOST, PGPORT, PGUSER, PGDATABASE).
// Prints one JSON line; jobs_per_s = completed jobs / elapsed seconds.
const PgBoss = require('pg-boss');
const { Pool } = require('pg');
const mode = process.argv[2] || 'perjob';
const C = parseInt(process.argv[4] || '8', 10);
const S = parseFloat(process.argv[5] || '10');
const B = mode === 'batched' ? 10 : 1;
const payload = JSON.parse(require('fs').readFileSync(__dirname + '/../floor/payload.json', 'utf8'));
const Q = 'bench';

(async () => {
  const pool = new Pool({ max: 1 });
  await pool.query('DROP SCHEMA IF EXISTS pgboss CASCADE');
  await pool.end();
  const env = process.env;
  // supervise/schedule off: no maintenance or cron timers inside a cell
  const boss = new PgBoss({ host: env.PGHOST, port: env.PGPORT, user: env.PGUSER,
    password: env.PGPASSWORD, database: env.PGDATABASE, max: C + 2,
    supervise: false, schedule: false });
  boss.on('error', e => { console.error(e); });
  await boss.start();
  await boss.createQueue(Q);
  await boss.insert(Array.from({ length: 1000 }, () => ({ name: Q, data: payload })));
  await boss.getDb().executeSql('VACUUM ANALYZE pgboss.job');
  await boss.getDb().executeSql('CHECKPOINT');

  let completed = 0, empty = 0;
  const t0 = process.hrtime.bigint();
  const end = Date.now() + S * 1000;
  const loop = async () => {
    while (Date.now() < end) {
      if (B === 1) await boss.send(Q, payload);
      else await boss.insert(Array.from({ length: B }, () => ({ name: Q, data: payload })));
      const jobs = await boss.fetch(Q, { batchSize: B });
      if (!jobs.length) { empty++; continue; }
      const r = await boss.complete(Q, jobs.map(j => j.id));
      completed += r.affected;
    }
  };
  await Promise.all(Array.from({ length: C }, loop));
  const ms = Number(process.hrtime.bigint() - t0) / 1e6;
  await boss.stop({ graceful: false, wait: true });
  console.log(JSON.stringify({ system: 'pg-boss', mode, concurrency: C, batch: B,
    completed, empty_fetches: empty,
    jobs_per_s: +(completed / ms * 1000).toFixed(1), seconds: +(ms / 1000).toFixed(2) }));
})().catch(e => { console.error(e); process.exit(1); });
