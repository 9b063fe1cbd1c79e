-- scenario: argument errors of the worker API; each changes nothing
SET client_min_messages = warning;
DROP EXTENSION IF EXISTS wfengine CASCADE;
CREATE EXTENSION wfengine;
RESET client_min_messages;
SELECT wf.claim_tasks('', 'w');
SELECT wf.claim_tasks('q', '');
SELECT wf.claim_tasks('q', 'w', 0);
SELECT wf.claim_tasks('q', 'w', 100001);
SELECT wf.claim_tasks('q', 'w', 1, '0 seconds');
SELECT wf.claim_tasks('q', 'w', 1, '-5 seconds');
SELECT wf.claim_tasks('q', 'w', 1, '8 days');
SET wfengine.max_claim_batch = 5;
SELECT wf.claim_tasks('q', 'w', 6);
RESET wfengine.max_claim_batch;
-- STRICT functions answer NULL for NULL arguments
SELECT wf.claim_tasks(NULL, 'w') IS NULL AS no_rows;
SELECT wf.run_status(NULL) IS NULL AS is_null;
-- limits cannot be raised by ordinary roles
CREATE ROLE wf_regress_user;
SET ROLE wf_regress_user;
SET wfengine.max_steps = 100;
SET wfengine.max_payload_size = '64MB';
RESET ROLE;
DROP ROLE wf_regress_user;
-- the wfengine.* prefix is reserved
SET wfengine.no_such_setting = 1;
