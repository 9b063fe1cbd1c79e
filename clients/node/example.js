'use strict';
// A worker for the demo's order workflow (test/demo/order.json).
//   PGDATABASE=shop node example.js        (stop with Ctrl-C or SIGTERM)
const { Worker, TaskFailure } = require('.');

new Worker({
  queues: ['payments', 'warehouse', 'email'],
  concurrency: 4, lease: '30s', wait: '10s',
  handlers: {
    charge_card: async (t) => {
      if (!(t.input.amount > 0)) throw new TaskFailure('bad_amount', 'nothing to charge', { retryable: false });
      return { charge_id: `ch_${t.idempotencyKey}`, status: 'captured' };
    },
    reserve_stock: async (t) => ({ reservation_id: `rsv_${t.idempotencyKey}`, sku: t.input.sku }),
    send_receipt: async (t) => ({ message_id: `msg_${t.taskId}@demo.invalid`, to: t.input.customer }),
  },
}).run().catch((e) => { console.error(e); process.exit(1); });
