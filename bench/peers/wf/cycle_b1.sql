-- wf_cycle_b1: wf.start_run of a 1-step run (with the peers' 200-byte job
-- payload as input), wf.claim_tasks, wf.complete_task: three transactions, as
-- pgmq send + read + delete.
SELECT wf.start_run('bench1', '{"step":"charge_card","attempt":1,"worker":"worker-07","output":{"status":"ok","amount_cents":12999,"currency":"EUR","provider_ref":"ch_3NfA9e2eZvKYlo2C1x8QxYzA","captured":true},"duration_ms":42}'::jsonb);
\set tid 0
SELECT task_id AS tid, fence AS f FROM wf.claim_tasks('bench1', :client_id::text, 1, '60 seconds')
\aset
\if :tid > 0
SELECT wf.complete_task(:tid, :f, '{"ok": true}');
\endif
