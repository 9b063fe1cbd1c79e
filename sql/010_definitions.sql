-- scenario: publishing definitions, immutable versions, and every kind of invalid spec
SET client_min_messages = warning;
DROP EXTENSION IF EXISTS wfengine CASCADE;
CREATE EXTENSION wfengine;
RESET client_min_messages;

-- a valid definition gets version 1
SELECT wf.publish_definition('order', '{
  "description": "take an order",
  "steps": [
    {"name": "charge", "queue": "payments", "activity": "charge_card",
     "input": {"amount": "$.input.amount", "currency": "EUR"},
     "retry": {"max_attempts": 5, "initial_interval": "1s", "backoff_coefficient": 2,
               "max_interval": "1m", "non_retryable_errors": ["card_declined"]},
     "timeout": {"start_to_close": "30s", "heartbeat": "10s"}},
    {"name": "ship", "queue": "warehouse", "input": {"charge": "$.steps.charge.output.id"}},
    {"name": "notify", "queue": "email", "end": true}
  ]}');
-- the same spec, formatted differently, is the same version
SELECT wf.publish_definition('order', '{"steps": [
    {"queue": "payments", "name": "charge", "activity": "charge_card",
     "input": {"currency": "EUR", "amount": "$.input.amount"},
     "retry": {"non_retryable_errors": ["card_declined"], "max_interval": "1m",
               "backoff_coefficient": 2, "initial_interval": "1s", "max_attempts": 5},
     "timeout": {"heartbeat": "10s", "start_to_close": "30s"}},
    {"name": "ship", "queue": "warehouse", "input": {"charge": "$.steps.charge.output.id"}},
    {"name": "notify", "queue": "email", "end": true}],
  "description": "take an order"}');
-- a changed spec gets the next version
SELECT wf.publish_definition('order', '{"steps": [{"name": "charge", "queue": "payments"}]}');
-- republishing an older spec returns its version, not a new one
SELECT wf.publish_definition('order', '{"steps": [{"name": "charge", "queue": "payments"}]}');
SELECT name, version, length(digest) AS digest_bytes, created_by = current_user AS by_me
FROM wf.definitions WHERE name = 'order' ORDER BY version;
-- versions are per name
SELECT wf.publish_definition('order.v2-test', '{"steps": [{"name": "charge", "queue": "payments"}]}');
-- next and end shape the path; durations as numbers of seconds
SELECT wf.publish_definition('jumps', '{"steps": [
    {"name": "a", "queue": "q", "next": "c", "timeout": {"total": 3600}},
    {"name": "b", "queue": "q", "end": true},
    {"name": "c", "queue": "q", "next": "b", "retry": {"initial_interval": 0.5}}]}');

-- scenario: invalid definitions, each error names the step and field
SELECT wf.publish_definition('bad', '[]');
SELECT wf.publish_definition('bad', '"steps"');
SELECT wf.publish_definition('bad', '{"steps": [{"name": "a", "queue": "q"}], "stepz": []}');
SELECT wf.publish_definition('bad', '{}');
SELECT wf.publish_definition('bad', '{"steps": []}');
SELECT wf.publish_definition('bad', '{"steps": {"name": "a"}}');
SELECT wf.publish_definition('bad', '{"steps": ["a"]}');
SELECT wf.publish_definition('bad', '{"steps": [{"queue": "q"}]}');
SELECT wf.publish_definition('bad', '{"steps": [{"name": 7, "queue": "q"}]}');
SELECT wf.publish_definition('bad', '{"steps": [{"name": "two words", "queue": "q"}]}');
SELECT wf.publish_definition('bad', '{"steps": [{"name": "a", "queue": "q"}, {"name": "a", "queue": "q"}]}');
SELECT wf.publish_definition('bad', '{"steps": [{"name": "a", "queu": "q"}]}');
SELECT wf.publish_definition('bad', '{"steps": [{"name": "a", "type": "map"}]}');
SELECT wf.publish_definition('bad', '{"steps": [{"name": "a"}]}');
SELECT wf.publish_definition('bad', '{"steps": [{"name": "a", "queue": "no spaces"}]}');
SELECT wf.publish_definition('bad', '{"steps": [{"name": "a", "queue": "q", "activity": 1}]}');
SELECT wf.publish_definition('bad', '{"steps": [{"name": "a", "queue": "q", "input": "$.input"}]}');
SELECT wf.publish_definition('bad', '{"steps": [{"name": "a", "queue": "q", "input": {"x": "$.input.("}}]}');
SELECT wf.publish_definition('bad', '{"steps": [{"name": "a", "queue": "q", "input": {"x": "$.input.items ? (@.price > $min)"}}]}');
SELECT wf.publish_definition('bad', '{"steps": [{"name": "a", "queue": "q", "retry": 3}]}');
SELECT wf.publish_definition('bad', '{"steps": [{"name": "a", "queue": "q", "retry": {"attempts": 3}}]}');
SELECT wf.publish_definition('bad', '{"steps": [{"name": "a", "queue": "q", "retry": {"max_attempts": 0}}]}');
SELECT wf.publish_definition('bad', '{"steps": [{"name": "a", "queue": "q", "retry": {"max_attempts": 2.5}}]}');
SELECT wf.publish_definition('bad', '{"steps": [{"name": "a", "queue": "q", "retry": {"backoff_coefficient": 0.5}}]}');
SELECT wf.publish_definition('bad', '{"steps": [{"name": "a", "queue": "q", "retry": {"initial_interval": "10s", "max_interval": "1s"}}]}');
SELECT wf.publish_definition('bad', '{"steps": [{"name": "a", "queue": "q", "retry": {"jitter": 2}}]}');
SELECT wf.publish_definition('bad', '{"steps": [{"name": "a", "queue": "q", "retry": {"non_retryable_errors": "x"}}]}');
SELECT wf.publish_definition('bad', '{"steps": [{"name": "a", "queue": "q", "retry": {"non_retryable_errors": [""]}}]}');
SELECT wf.publish_definition('bad', '{"steps": [{"name": "a", "queue": "q", "timeout": {"start_to_close": "soon"}}]}');
SELECT wf.publish_definition('bad', '{"steps": [{"name": "a", "queue": "q", "timeout": {"start_to_close": -5}}]}');
SELECT wf.publish_definition('bad', '{"steps": [{"name": "a", "queue": "q", "timeout": {"start_to_close": "0s"}}]}');
SELECT wf.publish_definition('bad', '{"steps": [{"name": "a", "queue": "q", "timeout": {"start_to_close": "400d"}}]}');
SELECT wf.publish_definition('bad', '{"steps": [{"name": "a", "queue": "q", "timeout": {"start_to_close": "10s", "heartbeat": "1m"}}]}');
SELECT wf.publish_definition('bad', '{"steps": [{"name": "a", "queue": "q", "timeout": {"deadline": "1m"}}]}');
SELECT wf.publish_definition('bad', '{"steps": [{"name": "a", "queue": "q"}], "timeout": "forever"}');
SELECT wf.publish_definition('bad', '{"steps": [{"name": "a", "queue": "q", "next": "nowhere"}]}');
SELECT wf.publish_definition('bad', '{"steps": [{"name": "a", "queue": "q", "next": "a", "end": true}]}');
SELECT wf.publish_definition('bad', '{"steps": [{"name": "a", "queue": "q", "end": "yes"}]}');
SELECT wf.publish_definition('bad', '{"steps": [{"name": "a", "queue": "q"}, {"name": "b", "queue": "q", "next": "a"}]}');
SELECT wf.publish_definition('bad', '{"steps": [{"name": "a", "queue": "q", "next": "a"}]}');
SELECT wf.publish_definition('bad', '{"steps": [{"name": "a", "queue": "q", "end": true}, {"name": "b", "queue": "q"}]}');
SELECT wf.publish_definition('bad', '{"steps": [{"name": "a", "queue": "q"}], "output": ["x"]}');
SELECT wf.publish_definition('bad name', '{"steps": [{"name": "a", "queue": "q"}]}');
SELECT wf.publish_definition('', '{"steps": [{"name": "a", "queue": "q"}]}');
-- limits
SET wfengine.max_steps = 3;
SELECT wf.publish_definition('bad', '{"steps": [{"name": "a", "queue": "q"}, {"name": "b", "queue": "q"},
  {"name": "c", "queue": "q"}, {"name": "d", "queue": "q"}]}');
RESET wfengine.max_steps;
SET wfengine.max_definition_size = '1kB';
SELECT wf.publish_definition('bad', jsonb_build_object('description', repeat('x', 2000),
  'steps', '[{"name": "a", "queue": "q"}]'::jsonb));
RESET wfengine.max_definition_size;
-- a published version never changes
UPDATE wf.definitions SET spec = '{}' WHERE name = 'order';
DELETE FROM wf.definitions WHERE name = 'order';
-- STRICT: NULL in, NULL out, nothing written
SELECT wf.publish_definition(NULL, '{}') IS NULL AS is_null;
-- nothing of the above was written
SELECT count(*) FROM wf.definitions WHERE name IN ('bad', 'bad name', '');
-- the default limit is 20 steps: 20 pass, 21 do not
SELECT wf.publish_definition('twenty', jsonb_build_object('steps',
  (SELECT jsonb_agg(jsonb_build_object('name', 's' || i, 'queue', 'q')) FROM generate_series(1, 20) i)));
SELECT wf.publish_definition('twentyone', jsonb_build_object('steps',
  (SELECT jsonb_agg(jsonb_build_object('name', 's' || i, 'queue', 'q')) FROM generate_series(1, 21) i)));
