// bench/notify_latency.js — commit-to-notification latency of the run
// notifications that the engine worker relays (docs/notifications.md).  A
// measurement, never a test.
//
// A producer starts runs of definition "lat" one at a time (one commit
// each, PAUSE_MS apart); a listener on the session tenant's run channel
// (and on wf_overflow) notes when each run's "started" arrives.  The
// latency of a run is the arrival minus the moment the producer's commit
// was acknowledged, both on this process's clock, so it is what a client
// that waits for the notification after its own commit sees.  Prints the
// runs heard, the overflow notices, and p50/p90/p99/max in milliseconds.
//
// Usage (needs node-postgres: `npm install` in clients/node):
//   psql -c "SELECT wf.publish_definition('lat', '{\"steps\": [{\"name\": \"only\", \"queue\": \"lat_q\"}]}')"
//   NODE_PATH=clients/node/node_modules node bench/notify_latency.js [RUNS=500] [PAUSE_MS=2]
// with the usual PGHOST/PGPORT/PGUSER/PGDATABASE.  To see it under load, run
// a pgbench cell (bench/peers/wf/eager20.sql) in another database meanwhile.
const { Client } = require('pg');

const RUNS = parseInt(process.argv[2] || '500', 10);
const PAUSE_MS = parseFloat(process.argv[3] || '2');

async function main() {
  const listener = new Client();
  const producer = new Client();
  await listener.connect();
  await producer.connect();
  const channel = (await listener.query("SELECT wf.channel('runs') AS c")).rows[0].c;
  const acked = new Map();
  const arrived = new Map();
  let heard = 0;
  let overflow = 0;

  listener.on('notification', (m) => {
    const t = process.hrtime.bigint();
    if (m.channel === 'wf_overflow') {
      overflow++;
      return;
    }
    const note = JSON.parse(m.payload);
    if (note.kind !== 'started') return;
    heard++;
    arrived.set(note.run_id, t);
  });
  await listener.query(`LISTEN "${channel}"`);
  await listener.query('LISTEN wf_overflow');

  for (let i = 0; i < RUNS; i++) {
    const r = await producer.query("SELECT wf.start_run('lat') AS id");
    acked.set(r.rows[0].id, process.hrtime.bigint());
    if (PAUSE_MS > 0) await new Promise((res) => setTimeout(res, PAUSE_MS));
  }
  await new Promise((res) => setTimeout(res, 500));

  const ms = [];
  for (const [id, a] of acked) {
    const t = arrived.get(id);
    if (t !== undefined) ms.push(Number(t - a) / 1e6);
  }
  ms.sort((x, y) => x - y);
  const q = (f) => (ms.length ? ms[Math.min(ms.length - 1, Math.floor(f * ms.length))].toFixed(2) : '-');
  console.log(`runs ${RUNS} heard ${heard} overflow ${overflow} p50 ${q(0.5)} ms p90 ${q(0.9)} ms ` +
    `p99 ${q(0.99)} ms max ${ms.length ? ms[ms.length - 1].toFixed(2) : '-'} ms`);
  await listener.end();
  await producer.end();
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
