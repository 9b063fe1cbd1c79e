'use strict';
// exit_probe.js — a worker of queue "exitprobe" for test/scripts/client_exit.sh
// (issue 32: does the process stop on SIGTERM?).  Its handler holds each task
// WF_PROBE_HOLD seconds, giving up (failing the attempt) when the library
// marks the task cancelled; the drain timeout is WF_PROBE_DRAIN seconds.
// Connects with the libpq environment; no process.exit: after SIGTERM the
// process ends when nothing is left pending.
const { TaskFailure, Worker } = require('..');

const hold = Number(process.env.WF_PROBE_HOLD || 2);
new Worker({
  queues: ['exitprobe'], name: 'exitprobe', concurrency: 2, lease: 30, wait: 10,
  drainTimeout: Number(process.env.WF_PROBE_DRAIN || 5),
  handler: async (t) => {
    for (let ms = 0; ms < hold * 1000; ms += 50) {
      if (t.cancelled) throw new TaskFailure('cancelled', 'given up at shutdown');
      await new Promise((r) => setTimeout(r, 50));
    }
    return { held: hold };
  },
}).run().catch((e) => { console.error(e); process.exitCode = 1; });
