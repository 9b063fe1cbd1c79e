-- bench/peers: floor/step_fn.sql for pgbench -M prepared (the ceil_step_fn_prep
-- cell): the same call and payload, a space after each colon of the JSON so
-- that pgbench does not take ":true" for a variable when it prepares it
\set run random(1, 100000)
SELECT wf_step(:run, '{"step": "charge_card", "attempt": 1, "worker": "worker-07", "output": {"status": "ok", "amount_cents": 12999, "currency": "EUR", "provider_ref": "ch_3NfA9e2eZvKYlo2C1x8QxYzA", "captured": true}, "duration_ms": 42}'::jsonb);
