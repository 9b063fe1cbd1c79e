'use strict';
// This library's driver of the shared conformance scenario
// (test/conformance/README.md): the scenario's handlers, written with the
// public API, and a worker that runs until every run has ended.  Run by
// test/conformance/run.sh, which publishes the definition, starts the runs
// and compares their history with test/conformance/expected.txt.  Exit
// status 0 when the runs ended within 60 s.
const pg = require('pg');
const { TaskFailure, Worker } = require('..');

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const out = (handler, t) => ({ handler, attempt: t.attempt });

async function main() {
  const worker = new Worker({
    queues: ['conf_main', 'conf_plain'], name: 'conformance-node', lease: '30s', wait: '1s',
    log: { info() {}, warn: console.warn, error() {} },
    handlers: {
      conf_echo: async (t) => out('echo', t),
      conf_plain: async (t) => out('plain', t), // by queue: a step without activity
      conf_flaky: async (t) => {
        if (t.attempt === 1) throw new TaskFailure('flaky', 'the first attempt fails'); // retryable: the default
        return out('flaky', t);
      },
      conf_throw: async (t) => {
        if (t.attempt === 1) throw new Error('the first attempt throws');
        return out('throw', t);
      },
      conf_permanent: async () => {
        throw new TaskFailure('permanent', 'retrying cannot help', { retryable: false });
      },
      conf_undo: async (t) => out('undo', t),
    },
  });
  const running = worker.run();
  // wf_conformance_poll(): one tick, and whether every run has ended
  const admin = new pg.Client();
  await admin.connect();
  let ended = false;
  for (const deadline = Date.now() + 60000; !ended && Date.now() < deadline; await sleep(100)) {
    ended = (await admin.query('SELECT wf_conformance_poll() AS e')).rows[0].e;
  }
  await admin.end();
  await worker.stop();
  await running;
  if (!ended) console.error('conformance: the runs did not end within 60 s');
  process.exit(ended ? 0 : 1);
}

main().catch((e) => { console.error(e); process.exit(2); });
