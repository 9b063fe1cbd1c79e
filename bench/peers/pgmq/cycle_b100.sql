-- 100 job cycles per script run: send_batch(100), read(vt, qty 100),
-- delete(array)  (3 transactions); the 100 payloads are the 200-byte job of
-- cycle_b10.sql, repeated
SELECT count(*) FROM pgmq.send_batch('bench', array_fill('{"step":"charge_card","attempt":1,"worker":"worker-07","output":{"status":"ok","amount_cents":12999,"currency":"EUR","provider_ref":"ch_3NfA9e2eZvKYlo2C1x8QxYzA","captured":true},"duration_ms":42}'::jsonb, ARRAY[100]));
SELECT string_agg(msg_id::text, ',') AS ids FROM pgmq.read('bench', 30, 100) \gset
SELECT count(*) FROM pgmq.delete('bench', ARRAY[:ids]::bigint[]);
