-- scenario: wf.set_id_block gives a shard its own range of engine ids
SET client_min_messages = warning;
DROP EXTENSION IF EXISTS wfengine CASCADE;
CREATE EXTENSION wfengine;
RESET client_min_messages;
SELECT wf.set_id_block(3) AS first_id;
SELECT wf.publish_definition('idb', '{"steps": [{"name": "a", "queue": "idb_q"}]}') AS version;
SELECT wf.start_run('idb') IS NOT NULL AS started;
-- every id drawn from now on is in block 3: 3 * 2^40 + 1 on
SELECT (SELECT pg_catalog.min(task_id) FROM wf.tasks) / 1099511627776 AS task_block,
       (SELECT pg_catalog.min(definition_id) FROM wf.definitions) / 1099511627776 AS definition_block;
-- the same block again changes nothing
SELECT wf.set_id_block(3) AS first_id;
SELECT wf.start_run('idb') IS NOT NULL AS started;
SELECT pg_catalog.count(*) AS tasks, pg_catalog.max(task_id) - pg_catalog.min(task_id) AS spread FROM wf.tasks;
-- a block below the ids already handed out is refused
SELECT wf.set_id_block(1);
SELECT wf.set_id_block(-1);
SELECT wf.set_id_block(8388607);
SELECT wf.set_id_block(NULL);
-- not for tenants
CREATE ROLE regress_idb_login LOGIN IN ROLE wfengine_app;
SET SESSION AUTHORIZATION regress_idb_login;
SELECT wf.set_id_block(4);
RESET SESSION AUTHORIZATION;
DROP ROLE regress_idb_login;
