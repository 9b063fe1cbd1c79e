-- bench/peers: copied from ../shared/perf/ceiling (the hand-written floor of issue 13)
-- worker API shape: claim() call + complete() call (2 round trips, 2 commits per step)
SELECT o_task_id AS tid FROM wf_claim('w:client_id') \gset
SELECT wf_complete(:tid, '{"step":"charge_card","attempt":1,"worker":"worker-07","output":{"status":"ok","amount_cents":12999,"currency":"EUR","provider_ref":"ch_3NfA9e2eZvKYlo2C1x8QxYzA","captured":true},"duration_ms":42}'::jsonb);
