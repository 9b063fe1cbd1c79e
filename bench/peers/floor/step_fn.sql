-- bench/peers: copied from ../shared/perf/ceiling (the hand-written floor of issue 13)
-- step transition as ONE function call (1 round trip, 1 commit)
\set run random(1, 100000)
SELECT wf_step(:run, '{"step":"charge_card","attempt":1,"worker":"worker-07","output":{"status":"ok","amount_cents":12999,"currency":"EUR","provider_ref":"ch_3NfA9e2eZvKYlo2C1x8QxYzA","captured":true},"duration_ms":42}'::jsonb);
