-- wf_cycle_eager: a 1-step run (the peers' 200-byte job payload as input)
-- started with its task leased to this client (wf.start_and_claim, Temporal's
-- eager start), then wf.complete_task: two transactions, against pgmq's
-- three (send + read + delete).
SELECT coalesce(task_id, 0) AS tid, coalesce(fence, 0) AS f FROM wf.start_and_claim('bench1', '{"step":"charge_card","attempt":1,"worker":"worker-07","output":{"status":"ok","amount_cents":12999,"currency":"EUR","provider_ref":"ch_3NfA9e2eZvKYlo2C1x8QxYzA","captured":true},"duration_ms":42}'::jsonb, :client_id::text, '60 seconds')
\gset
\if :tid > 0
SELECT wf.complete_task(:tid, :f, '{"ok": true}');
\endif
