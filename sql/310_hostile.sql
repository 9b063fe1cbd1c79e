-- scenario: a hostile tenant gets nothing (issue 10).  A tenant login that is
-- a member of every job role, owns a schema and may create temporary objects
-- installs shadows of every type, operator, function and relation name the
-- engine uses, then drives every API function through its happy and error
-- paths with those shadows first on its search_path.  No shadow may ever run
-- inside the engine: not as the extension's owner (a privilege escalation),
-- and not as the caller either (the engine's functions pin their
-- search_path, so they never see the caller's objects).  The views and the
-- set-returning functions a job role may read are probed with a cheap leaky
-- function, which must never see another tenant's values.
--
-- How the shadows are counted.  The recorder evil.rec() takes a number of
-- the sequence evil.shadow_runs (which survives the rollback of an API call
-- that fails), counts a run as another role than the hostile login in
-- evil.shadow_escalations, logs it (evil.shadow_log, lost on rollback) and
-- raises a WARNING naming the shadow and the role it ran as (once per
-- statement, shadow and role): on an engine that runs a shadow, the WARNING
-- lines in the diff show which call ran which shadow, and the counts at the
-- end are not 0.  The recorder does NOT
-- ignore runs as the hostile login: a shadow run as the caller inside an
-- engine function (a PL/pgSQL function of the extension reading with the
-- caller's rights) breaks the same rule, only with less damage.  Instead,
-- every statement of this file itself is schema-qualified down to its
-- operators (OPERATOR(pg_catalog.=), pg_catalog.count(), casts to
-- pg_catalog types), so that every shadow run counted is the engine's.
-- The shadows are installed in a fresh session (\c) before any engine
-- function runs in it, so that no PL/pgSQL function of the extension was
-- compiled before they existed.  The control at the end proves that every
-- shadow wins the name lookup when a statement does use the bare name: the
-- test cannot pass because the shadows are inert.
--
-- The victim tenant's values all contain "victim" (or are its run ids,
-- listed in evil.victim by the superuser); the leaky function evil.leak()
-- records every value it is shown in evil.seen and raises a NOTICE only for
-- a value of the victim, counted in the sequence evil.leaked.
\set SHOW_CONTEXT never
SET client_min_messages = warning;
DROP SCHEMA IF EXISTS evil CASCADE;
DROP EXTENSION IF EXISTS wfengine CASCADE;
CREATE EXTENSION wfengine;
DROP ROLE IF EXISTS regress_hostile, regress_victim;
DROP ROLE IF EXISTS wf_tenant_hostile, wf_tenant_victim, wf_tenant_hostile_two;
RESET client_min_messages;
SET wfengine.master_keys = 'k1:000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f';
SET timezone = 'UTC';

-- the tenants and their logins: each is a member of every job role
SELECT wf.create_tenant('hostile'), wf.create_tenant('victim');
CREATE ROLE regress_hostile LOGIN IN ROLE wfengine_app, wfengine_worker, wfengine_approver,
    wfengine_operator, wfengine_admin, wfengine_sensitive, wf_tenant_hostile;
CREATE ROLE regress_victim LOGIN IN ROLE wfengine_app, wfengine_worker, wfengine_approver,
    wfengine_operator, wfengine_admin, wfengine_sensitive, wf_tenant_victim;
-- the hostile login's own schema (it may CREATE in it) and TEMP (every role may)
CREATE SCHEMA evil AUTHORIZATION regress_hostile;
SELECT pg_catalog.has_schema_privilege('regress_hostile', 'evil', 'CREATE') AS own_schema,
       pg_catalog.has_database_privilege('regress_hostile', pg_catalog.current_database(), 'TEMP') AS temp;

-- the victim's data: runs at a task (leased and ready, on a queue name the
-- hostile tenant uses too), an approval with tokens, a stored signal, a
-- correlation key, a sealed value, child runs, timers, a schedule
SET SESSION AUTHORIZATION regress_victim;
SELECT wf.publish_definition('victim_order', '{"correlation": {"victim_corr": "$.input.corr"},
  "sensitive": {"input": ["victim_card"]},
  "steps": [{"name": "victim_step", "queue": "shared_q"}, {"name": "victim_step2", "queue": "shared_q"}]}');
SELECT wf.publish_definition('victim_vote', '{"steps": [{"name": "victim_vote", "type": "approval",
  "approvers": ["victim_approver", "victim_boss"], "notify_queue": "victim_mail", "expires": "1d"}]}');
SELECT wf.publish_definition('victim_wait', '{"steps": [{"name": "victim_wait", "type": "wait_event", "event": "victim_event"}]}');
SELECT wf.publish_definition('victim_nap', '{"steps": [{"name": "victim_nap", "type": "sleep", "duration": "1ms"},
  {"name": "victim_after", "queue": "victim_after_q"}]}');
SELECT wf.publish_definition('victim_par', '{"steps": [{"name": "victim_par", "type": "parallel", "branches": [
  {"steps": [{"name": "victim_b1", "queue": "victim_b1_q"}]}, {"steps": [{"name": "victim_b2", "queue": "victim_b2_q"}]}]}]}');
SELECT wf.publish_definition('victim_fail', '{"steps": [{"name": "victim_try", "queue": "victim_fail_q",
  "retry": {"max_attempts": 1}}]}');
SELECT wf.start_run('victim_order', '{"corr": "victim-corr-1", "secret": "victim-secret", "victim_card": "4111-victim-card"}',
                    'key-1') AS victim_run \gset
SELECT wf.start_run('victim_order', '{"corr": "victim-corr-2", "secret": "victim-secret-2"}') AS victim_run2 \gset
SELECT pg_catalog.count(*) AS victim_leased FROM wf.claim_tasks('shared_q', 'victim_worker', 1, '1 hour');
SELECT wf.start_run('victim_vote', '{"what": "victim-expense"}') AS victim_vote_run \gset
CREATE TEMP TABLE victim_tokens AS
SELECT i.* FROM wf.claim_tasks('victim_mail', 'victim_mailer') c, wf.issue_approval_tokens(c.task_id, c.fence) i;
SELECT t.token AS victim_token FROM victim_tokens t
WHERE t.approver OPERATOR(pg_catalog.=) 'victim_approver' AND t.decision OPERATOR(pg_catalog.=) 'approve' \gset
SELECT wf.start_run('victim_wait', '{"corr": "victim-corr-3"}') AS victim_wait_run \gset
SELECT wf.signal(:'victim_wait_run', 'victim_early', '{"victim": "signal-payload"}', 'victim-event-1');
SELECT e.outcome FROM wf.send_event('victim_corr:victim-corr-9', 'victim_event', '{"victim": "buffered-payload"}',
                                    'victim-buffered-1') e;
SELECT wf.start_run('victim_nap', '{"victim": "nap"}') AS victim_nap_run \gset
SELECT wf.start_run('victim_par', '{"victim": "parallel"}') AS victim_par_run \gset
SELECT wf.start_run('victim_fail', '{"victim": "failed"}') AS victim_failed_run \gset
SELECT wf.fail_task(c.task_id, c.fence, '{"code": "victim-error"}', false) FROM wf.claim_tasks('victim_fail_q', 'victim_worker') c;
SELECT wf.start_run('victim_fail', '{"victim": "paused"}') AS victim_paused_run \gset
SELECT wf.pause_run(:'victim_paused_run', 'victim-pause');
SELECT wf.channel() AS victim_channel \gset
RESET SESSION AUTHORIZATION;
INSERT INTO wf.schedules (tenant_id, name, cron, definition, input, created_by)
VALUES ('victim', 'victim_sched', '0 0 1 1 *', 'victim_order', '{"victim": "schedule-input"}', 'regress_victim')
RETURNING schedule_id AS victim_sched \gset
SELECT r.input->>'victim_card' LIKE 'wfenc:v1:%' AS victim_card_sealed FROM wf.runs r WHERE r.run_id = :'victim_run';
SELECT r.input->'victim_card' AS victim_sealed FROM wf.runs r WHERE r.run_id = :'victim_run' \gset
SELECT t.task_id AS victim_task, t.fence AS victim_fence FROM wf.tasks t
WHERE t.run_id = :'victim_run' AND t.status = 'leased' \gset
SELECT tenant_id, pg_catalog.count(*) AS runs FROM wf.runs GROUP BY 1 ORDER BY 1;
-- what the test knows of the victim (not the attacker: the leak probe uses it
-- to tell the victim's values apart from the hostile tenant's own)
CREATE TABLE evil.victim (kind text, v text);
INSERT INTO evil.victim SELECT 'run', r.run_id::text FROM wf.runs r WHERE r.tenant_id = 'victim';
INSERT INTO evil.victim VALUES ('token', :'victim_token'), ('sealed', :'victim_sealed'), ('channel', :'victim_channel');
GRANT SELECT ON evil.victim TO regress_hostile;

-- scenario: the hostile login installs its shadows in a new session, before
-- the engine runs anything in it
SELECT pg_catalog.pg_stat_force_next_flush();
\c
-- count the calls of every function from here on (checked at the end)
SET track_functions = 'all';
CREATE TABLE public.h_calls_before AS
SELECT s.funcid, s.calls FROM pg_catalog.pg_stat_user_functions s;
SET wfengine.master_keys = 'k1:000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f';
SET timezone = 'UTC';
SET SESSION AUTHORIZATION regress_hostile;
SET search_path = pg_catalog, pg_temp;
CREATE SEQUENCE evil.shadow_runs;
CREATE SEQUENCE evil.shadow_escalations;
CREATE TABLE evil.shadows (kind text, name text, probe text);
CREATE TABLE evil.shadow_log (name text, ran_as name);
CREATE FUNCTION evil.rec(what text) RETURNS boolean LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    seen text := current_setting('hostile.warned', true);
    key text := format('|%s as %s|', what, current_user);
BEGIN
    PERFORM nextval('evil.shadow_runs');
    IF current_user <> 'regress_hostile' THEN
        PERFORM nextval('evil.shadow_escalations');
    END IF;
    INSERT INTO evil.shadow_log VALUES (what, current_user);
    -- one WARNING per shadow, role and statement
    IF seen IS NULL OR split_part(seen, '|', 1) <> statement_timestamp()::text THEN
        seen := statement_timestamp()::text;
    END IF;
    IF current_setting('hostile.quiet', true) IS DISTINCT FROM 'on' AND strpos(seen, key) = 0 THEN
        PERFORM set_config('hostile.warned', seen || key, false);
        RAISE WARNING 'shadow % ran as %', what, current_user;
    END IF;
    RETURN true;
END
$$;
-- every shadow, with a probe: a statement that uses its bare name, run by
-- the control at the end under the search_path given first ('hostile' is
-- evil, pg_catalog, pg_temp; 'engine' is pg_catalog alone, as the engine's
-- PL/pgSQL functions had it, which searches pg_temp first for types and
-- relations)
DO $$
DECLARE
    t text;
    s text;
    o record;
    f record;
    n integer := 0;
    args text;
    call text;
    probe text;
    body text;
    -- a concrete type for a polymorphic one, in the probes
    poly CONSTANT text[] := ARRAY['anyarray', 'anycompatiblearray', 'anyelement', 'anynonarray',
                                  'anycompatible', 'anycompatiblenonarray'];
    conc CONSTANT text[] := ARRAY['pg_catalog._text', 'pg_catalog._text', 'pg_catalog.text',
                                  'pg_catalog.text', 'pg_catalog.text', 'pg_catalog.text'];
BEGIN
    -- domains over the engine's types, in pg_temp and in evil
    FOREACH t IN ARRAY ARRAY['jsonb', 'json', 'jsonpath', 'uuid', 'text', 'varchar', 'name', 'bigint',
                             'int8', 'integer', 'int4', 'smallint', 'int2', 'numeric', 'float8',
                             'timestamptz', 'interval', 'boolean', 'bool', 'bytea', 'oid', 'regrole',
                             'regclass'] LOOP
        FOREACH s IN ARRAY ARRAY['pg_temp', 'evil'] LOOP
            EXECUTE format('CREATE DOMAIN %I.%I AS %s CHECK (evil.rec(%L))', s, t,
                           format_type(to_regtype(t), NULL), format('domain %s.%s', s, t));
            INSERT INTO evil.shadows
            VALUES ('domain', format('%s.%s', s, t),
                    format('%s:SELECT NULL::%I', CASE s WHEN 'pg_temp' THEN 'engine' ELSE 'hostile' END, t));
        END LOOP;
    END LOOP;
    -- relations: views of the names of the engine's tables and of the catalogs it reads
    FOREACH t IN ARRAY ARRAY['runs', 'tasks', 'events', 'timers', 'approvals', 'approval_attempts',
                             'signals', 'definitions', 'correlations', 'schedules', 'schedule_list',
                             'pending_approvals', 'tenant_policies', 'secrets', 'tenant_keys', 'job',
                             'buffered_events', 'event_ids',
                             'pg_roles', 'pg_authid', 'pg_auth_members', 'pg_extension', 'pg_class',
                             'pg_namespace', 'pg_proc', 'pg_settings', 'pg_database'] LOOP
        FOREACH s IN ARRAY ARRAY['pg_temp', 'evil'] LOOP
            EXECUTE format('CREATE VIEW %I.%I AS SELECT evil.rec(%L) AS shadow', s, t,
                           format('view %s.%s', s, t));
            INSERT INTO evil.shadows
            VALUES ('view', format('%s.%s', s, t),
                    format('%s:SELECT * FROM %I', CASE s WHEN 'pg_temp' THEN 'engine' ELSE 'hostile' END, t));
        END LOOP;
    END LOOP;
    -- operators: every operator of pg_catalog of these names on these types
    FOR o IN
        SELECT p.oprname, p.oprleft::regtype AS l, p.oprright::regtype AS r,
               p.oprresult::regtype AS res, p.oprcode::regproc AS fn,
               format('%I.%I', ln.nspname, lt.typname) AS lq, format('%I.%I', rn.nspname, rt.typname) AS rq
        FROM pg_operator p
        JOIN pg_type lt ON lt.oid OPERATOR(pg_catalog.=) p.oprleft
        JOIN pg_namespace ln ON ln.oid OPERATOR(pg_catalog.=) lt.typnamespace
        JOIN pg_type rt ON rt.oid OPERATOR(pg_catalog.=) p.oprright
        JOIN pg_namespace rn ON rn.oid OPERATOR(pg_catalog.=) rt.typnamespace
        WHERE p.oprnamespace OPERATOR(pg_catalog.=) 'pg_catalog'::regnamespace
          AND p.oprname OPERATOR(pg_catalog.=) ANY (ARRAY['=', '<>', '<', '>', '<=', '>=', '+', '-', '*', '/',
                  '||', '->', '->>', '#>', '#>>', '@>', '<@', '?', '?|', '?&', '~~', '!~~', '~~*', '~', '!~', '@@'])
          AND p.oprleft OPERATOR(pg_catalog.=) ANY (ARRAY['text', 'uuid', 'int8', 'int4', 'int2', 'numeric',
                  'float8', 'timestamptz', 'interval', 'jsonb', 'jsonpath', 'bool', 'bytea', 'name', 'oid',
                  'text[]', 'anyarray', 'anycompatiblearray', 'anynonarray', 'anyelement']::regtype[]::oid[])
          AND p.oprright OPERATOR(pg_catalog.=) ANY (ARRAY['text', 'uuid', 'int8', 'int4', 'int2', 'numeric',
                  'float8', 'timestamptz', 'interval', 'jsonb', 'jsonpath', 'bool', 'bytea', 'name', 'oid',
                  'text[]', 'anyarray', 'anycompatiblearray', 'anynonarray', 'anyelement']::regtype[]::oid[])
        ORDER BY 1, 2::text, 3::text
    LOOP
        n := n OPERATOR(pg_catalog.+) 1;
        EXECUTE format('CREATE FUNCTION evil.shadow_op_%s(a %s, b %s) RETURNS %s LANGUAGE plpgsql AS '
                       '$f$ BEGIN PERFORM evil.rec(%L); RETURN pg_catalog.%s(a, b); END $f$',
                       n, o.l, o.r, o.res, format('operator %s(%s, %s)', o.oprname, o.l, o.r), o.fn);
        EXECUTE format('CREATE OPERATOR evil.%s (leftarg = %s, rightarg = %s, function = evil.shadow_op_%s)',
                       o.oprname, o.l, o.r, n);
        INSERT INTO evil.shadows
        VALUES ('operator', format('%s(%s, %s)', o.oprname, o.l, o.r),
                format('hostile:SELECT NULL::%s %s NULL::%s',
                       coalesce(conc[array_position(poly, o.l::text)], o.lq), o.oprname,
                       coalesce(conc[array_position(poly, o.r::text)], o.rq)));
    END LOOP;
    -- functions: every function of pg_catalog of the names the engine calls
    -- (those of VARIADIC "any", such as format and jsonb_build_object, by hand below)
    FOR f IN
        SELECT p.proname, p.proretset, p.prorettype::regtype AS res, p.provariadic, p.pronargs,
               pg_get_function_identity_arguments(p.oid) AS idargs,
               ARRAY(SELECT a.t::regtype::text FROM unnest(p.proargtypes::oid[]) WITH ORDINALITY a(t, i)
                     ORDER BY a.i) AS argt,
               ARRAY(SELECT format('%I.%I', tn.nspname, ty.typname)
                     FROM unnest(p.proargtypes::oid[]) WITH ORDINALITY a(t, i)
                     JOIN pg_type ty ON ty.oid OPERATOR(pg_catalog.=) a.t
                     JOIN pg_namespace tn ON tn.oid OPERATOR(pg_catalog.=) ty.typnamespace
                     ORDER BY a.i) AS argq
        FROM pg_proc p
        WHERE p.pronamespace OPERATOR(pg_catalog.=) 'pg_catalog'::regnamespace
          AND p.prokind OPERATOR(pg_catalog.=) 'f'
          AND p.proallargtypes IS NULL
          AND p.proname OPERATOR(pg_catalog.=) ANY (ARRAY['now', 'clock_timestamp', 'statement_timestamp',
                'transaction_timestamp', 'unnest', 'cardinality', 'array_position', 'array_to_string',
                'array_length', 'array_fill', 'array_append', 'replace', 'regexp_replace', 'regexp_matches',
                'substr', 'strpos', 'left', 'lower', 'length', 'to_char', 'to_jsonb', 'row_to_json',
                'jsonb_typeof', 'jsonb_object_keys', 'jsonb_array_elements', 'jsonb_array_elements_text',
                'jsonb_array_length', 'jsonb_set', 'jsonb_strip_nulls', 'jsonb_extract_path',
                'jsonb_extract_path_text', 'jsonb_path_query', 'jsonb_path_exists', 'jsonb_path_match',
                'current_setting', 'set_config', 'current_database', 'pg_has_role', 'has_function_privilege',
                'generate_series', 'trunc', 'encode', 'decode', 'md5', 'sha256', 'gen_random_uuid', 'random',
                'date_trunc', 'timezone', 'nextval', 'pg_notify', 'pg_advisory_xact_lock', 'quote_ident',
                'quote_literal', 'string_to_array', 'pg_sleep', 'pg_extension_config_dump', 'texteq', 'uuid_eq'])
          AND NOT EXISTS (SELECT 1 FROM unnest(p.proargtypes::oid[] OPERATOR(pg_catalog.||) p.prorettype) a(t)
                          WHERE a.t OPERATOR(pg_catalog.=) ANY (ARRAY['"any"', 'internal', 'cstring', 'anyenum',
                                'anyrange', 'anymultirange', 'anycompatiblerange', 'trigger',
                                'record']::regtype[]::oid[]))
        ORDER BY 1, 6
    LOOP
        SELECT string_agg(format('%s%s', CASE WHEN i OPERATOR(pg_catalog.=) f.pronargs
                                               AND f.provariadic OPERATOR(pg_catalog.<>) 0
                                          THEN 'VARIADIC ' ELSE '' END, f.argt[i]), ', ' ORDER BY i),
               string_agg(format('%s$%s', CASE WHEN i OPERATOR(pg_catalog.=) f.pronargs
                                                AND f.provariadic OPERATOR(pg_catalog.<>) 0
                                           THEN 'VARIADIC ' ELSE '' END, i), ', ' ORDER BY i),
               string_agg(format('%sNULL::%s', CASE WHEN i OPERATOR(pg_catalog.=) f.pronargs
                                                     AND f.provariadic OPERATOR(pg_catalog.<>) 0
                                                THEN 'VARIADIC ' ELSE '' END,
                                 coalesce(conc[array_position(poly, f.argt[i])], f.argq[i])), ', ' ORDER BY i)
        INTO args, call, probe FROM generate_series(1, f.pronargs) i;
        body := CASE WHEN f.proretset THEN 'BEGIN PERFORM evil.rec(%L); RETURN QUERY SELECT * FROM pg_catalog.%I(%s); END'
                     WHEN f.res OPERATOR(pg_catalog.=) 'void'::regtype THEN 'BEGIN PERFORM evil.rec(%L); PERFORM pg_catalog.%I(%s); END'
                     ELSE 'BEGIN PERFORM evil.rec(%L); RETURN pg_catalog.%I(%s); END' END;
        body := format(body, format('function %s(%s)', f.proname, f.idargs), f.proname, coalesce(call, ''));
        EXECUTE format('CREATE FUNCTION evil.%I(%s) RETURNS %s%s LANGUAGE plpgsql AS %L', f.proname,
                       coalesce(args, ''), CASE WHEN f.proretset THEN 'SETOF ' ELSE '' END, f.res, body);
        INSERT INTO evil.shadows
        VALUES ('function', format('%s(%s)', f.proname, f.idargs),
                format('hostile:SELECT %I(%s)', f.proname, coalesce(probe, '')));
    END LOOP;
END
$$;
-- functions of VARIADIC "any", by arity
CREATE FUNCTION evil.format(f text) RETURNS text LANGUAGE plpgsql AS
$$ BEGIN PERFORM evil.rec('function format(text)'); RETURN pg_catalog.format(f); END $$;
CREATE FUNCTION evil.format(f text, a text) RETURNS text LANGUAGE plpgsql AS
$$ BEGIN PERFORM evil.rec('function format(text, text)'); RETURN pg_catalog.format(f, a); END $$;
CREATE FUNCTION evil.format(f text, a text, b text) RETURNS text LANGUAGE plpgsql AS
$$ BEGIN PERFORM evil.rec('function format(text, text, text)'); RETURN pg_catalog.format(f, a, b); END $$;
CREATE FUNCTION evil.jsonb_build_object(k text, v text) RETURNS jsonb LANGUAGE plpgsql AS
$$ BEGIN PERFORM evil.rec('function jsonb_build_object(text, text)'); RETURN pg_catalog.jsonb_build_object(k, v); END $$;
CREATE FUNCTION evil.jsonb_build_object(k text, v jsonb) RETURNS jsonb LANGUAGE plpgsql AS
$$ BEGIN PERFORM evil.rec('function jsonb_build_object(text, jsonb)'); RETURN pg_catalog.jsonb_build_object(k, v); END $$;
CREATE FUNCTION evil.jsonb_build_array(v text) RETURNS jsonb LANGUAGE plpgsql AS
$$ BEGIN PERFORM evil.rec('function jsonb_build_array(text)'); RETURN pg_catalog.jsonb_build_array(v); END $$;
CREATE FUNCTION evil.jsonb_build_array(v jsonb) RETURNS jsonb LANGUAGE plpgsql AS
$$ BEGIN PERFORM evil.rec('function jsonb_build_array(jsonb)'); RETURN pg_catalog.jsonb_build_array(v); END $$;
INSERT INTO evil.shadows VALUES
    ('function', 'format(text)', 'hostile:SELECT format(NULL::pg_catalog.text)'),
    ('function', 'format(text, text)', 'hostile:SELECT format(NULL::pg_catalog.text, NULL::pg_catalog.text)'),
    ('function', 'format(text, text, text)', 'hostile:SELECT format(NULL::pg_catalog.text, NULL::pg_catalog.text, NULL::pg_catalog.text)'),
    ('function', 'jsonb_build_object(text, text)', 'hostile:SELECT jsonb_build_object(NULL::pg_catalog.text, NULL::pg_catalog.text)'),
    ('function', 'jsonb_build_object(text, jsonb)', 'hostile:SELECT jsonb_build_object(NULL::pg_catalog.text, NULL::pg_catalog.jsonb)'),
    ('function', 'jsonb_build_array(text)', 'hostile:SELECT jsonb_build_array(NULL::pg_catalog.text)'),
    ('function', 'jsonb_build_array(jsonb)', 'hostile:SELECT jsonb_build_array(NULL::pg_catalog.jsonb)');
-- aggregates
CREATE FUNCTION evil.count_sf(bigint) RETURNS bigint LANGUAGE plpgsql AS
$$ BEGIN PERFORM evil.rec('aggregate count(*)'); RETURN $1 OPERATOR(pg_catalog.+) 1; END $$;
CREATE AGGREGATE evil.count(*) (sfunc = evil.count_sf, stype = bigint, initcond = '0');
DO $$
DECLARE
    t text;
    m text;
BEGIN
    FOREACH t IN ARRAY ARRAY['integer', 'bigint', 'timestamptz', 'text'] LOOP
        FOREACH m IN ARRAY ARRAY['max', 'min'] LOOP
            EXECUTE format('CREATE FUNCTION evil.%s_sf(%s, %s) RETURNS %s LANGUAGE plpgsql AS '
                           '$f$ BEGIN PERFORM evil.rec(%L); RETURN CASE WHEN $1 IS NULL OR $2 OPERATOR(pg_catalog.%s) $1 '
                           'THEN $2 ELSE $1 END; END $f$', m, t, t, t, format('aggregate %s(%s)', m, t),
                           CASE m WHEN 'max' THEN '>' ELSE '<' END);
            EXECUTE format('CREATE AGGREGATE evil.%s(%s) (sfunc = evil.%s_sf, stype = %s)', m, t, m, t);
            INSERT INTO evil.shadows VALUES ('aggregate', format('%s(%s)', m, t),
                format('hostile:SELECT %s(v.x) FROM (VALUES (NULL::pg_catalog.%s)) v(x)', m,
                       CASE t WHEN 'integer' THEN 'int4' WHEN 'bigint' THEN 'int8' ELSE t END));
        END LOOP;
    END LOOP;
END
$$;
CREATE FUNCTION evil.jsonb_agg_sf(jsonb, anyelement) RETURNS jsonb LANGUAGE plpgsql AS
$$ BEGIN PERFORM evil.rec('aggregate jsonb_agg(anyelement)');
   RETURN coalesce($1, '[]'::pg_catalog.jsonb) OPERATOR(pg_catalog.||) pg_catalog.jsonb_build_array($2); END $$;
CREATE AGGREGATE evil.jsonb_agg(anyelement) (sfunc = evil.jsonb_agg_sf, stype = jsonb);
CREATE FUNCTION evil.array_agg_sf(anyarray, anynonarray) RETURNS anyarray LANGUAGE plpgsql AS
$$ BEGIN PERFORM evil.rec('aggregate array_agg(anynonarray)'); RETURN pg_catalog.array_append($1, $2); END $$;
CREATE AGGREGATE evil.array_agg(anynonarray) (sfunc = evil.array_agg_sf, stype = anyarray);
CREATE FUNCTION evil.string_agg_sf(text, text, text) RETURNS text LANGUAGE plpgsql AS
$$ BEGIN PERFORM evil.rec('aggregate string_agg(text, text)');
   RETURN CASE WHEN $1 IS NULL THEN $2 ELSE $1 OPERATOR(pg_catalog.||) $3 OPERATOR(pg_catalog.||) $2 END; END $$;
CREATE AGGREGATE evil.string_agg(text, text) (sfunc = evil.string_agg_sf, stype = text);
CREATE FUNCTION evil.bool_sf(boolean, boolean) RETURNS boolean LANGUAGE plpgsql AS
$$ BEGIN PERFORM evil.rec('aggregate bool_or/bool_and(boolean)'); RETURN $1 OR $2; END $$;
CREATE AGGREGATE evil.bool_or(boolean) (sfunc = evil.bool_sf, stype = boolean);
CREATE AGGREGATE evil.bool_and(boolean) (sfunc = evil.bool_sf, stype = boolean);
INSERT INTO evil.shadows VALUES
    ('aggregate', 'count(*)', 'hostile:SELECT count(*) FROM (VALUES (1)) v(x)'),
    ('aggregate', 'jsonb_agg(anyelement)', 'hostile:SELECT jsonb_agg(v.x) FROM (VALUES (1)) v(x)'),
    ('aggregate', 'array_agg(anynonarray)', 'hostile:SELECT array_agg(v.x) FROM (VALUES (1)) v(x)'),
    ('aggregate', 'string_agg(text, text)', 'hostile:SELECT string_agg(v.x, v.x) FROM (VALUES (''a''::pg_catalog.text)) v(x)'),
    ('aggregate', 'bool_or(boolean)', 'hostile:SELECT bool_or(v.x) FROM (VALUES (true)) v(x)'),
    ('aggregate', 'bool_and(boolean)', 'hostile:SELECT bool_and(v.x) FROM (VALUES (true)) v(x)');
SELECT s.kind, pg_catalog.count(*) OPERATOR(pg_catalog.>) 0 AS installed FROM evil.shadows s GROUP BY 1 ORDER BY 1;

-- the leak probe: cheap enough to run before any filter it is allowed to pass
CREATE TABLE evil.seen (v text);
CREATE SEQUENCE evil.leaked;
CREATE FUNCTION evil.leak(anyelement) RETURNS boolean LANGUAGE plpgsql COST 0.0000001
SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    val text := $1::text;
BEGIN
    INSERT INTO evil.seen VALUES (val);
    IF val ~ 'victim' OR EXISTS (SELECT 1 FROM evil.victim x WHERE strpos(val, x.v) > 0) THEN
        PERFORM nextval('evil.leaked');
        RAISE NOTICE 'leak: %', val;
    END IF;
    RETURN true;
END
$$;
-- errors of the calls below, with run ids masked (every name qualified)
CREATE FUNCTION pg_temp.err(q pg_catalog.text) RETURNS pg_catalog.text LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE q;
    RETURN 'no error';
EXCEPTION WHEN OTHERS THEN
    RETURN SQLSTATE OPERATOR(pg_catalog.||) ': ' OPERATOR(pg_catalog.||)
           pg_catalog.regexp_replace(SQLERRM, '[0-9a-f]{8}-[0-9a-f-]{27}', '<run>', 'g');
END
$$;
-- the SQLSTATE only, where the message is not the point
CREATE FUNCTION pg_temp.code(q pg_catalog.text) RETURNS pg_catalog.text LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE q;
    RETURN 'no error';
EXCEPTION WHEN OTHERS THEN
    RETURN SQLSTATE;
END
$$;
SELECT CASE WHEN s.is_called THEN s.last_value ELSE 0 END AS shadow_runs_while_installing FROM evil.shadow_runs s;

-- scenario: the engine phase.  From here on the hostile search_path holds
-- until the final count: its own schema first, pg_catalog after it.
SET search_path = evil, pg_catalog, pg_temp;

-- definitions (wfengine_admin)
SELECT wf.current_tenant(), wf.preloaded() IS NOT NULL AS preloaded;
SELECT wf.publish_definition('h_task', '{"correlation": {"h_corr": "$.input.corr"}, "steps": [
  {"name": "a", "queue": "shared_q", "retry": {"max_attempts": 3, "initial_interval": "1ms", "jitter": 0}},
  {"name": "b", "queue": "h_b", "input": {"x": "$.input.x"}}]}') AS v;
SELECT wf.publish_definition('h_task', '{"correlation": {"h_corr": "$.input.corr"}, "steps": [
  {"name": "a", "queue": "shared_q", "retry": {"max_attempts": 3, "initial_interval": "1ms", "jitter": 0}},
  {"name": "b", "queue": "h_b", "input": {"x": "$.input.x"}}]}') AS same_v;
SELECT wf.publish_definition('h_mig', '{"steps": [{"name": "a", "queue": "h_ma"}, {"name": "b", "queue": "h_mb"}]}') AS v;
SELECT wf.publish_definition('h_mig', '{"steps": [{"name": "a", "queue": "h_ma"},
  {"name": "b", "queue": "h_mb2", "input": {"from_a": "$.steps.a.output"}}, {"name": "c", "queue": "h_mc"}]}') AS v;
SELECT wf.publish_definition('h_mig', '{"steps": [{"name": "a", "queue": "h_ma"}, {"name": "z", "queue": "h_mz"}]}') AS v;
SELECT wf.publish_definition('h_appr', '{"steps": [
  {"name": "vote", "type": "approval", "approvers": ["h_ann", "h_bob"], "notify_queue": "h_mail", "expires": "1d"},
  {"name": "after", "queue": "h_after"}]}') AS v;
SELECT wf.publish_definition('h_exp', '{"steps": [
  {"name": "vote", "type": "approval", "approvers": ["h_ann"], "notify_queue": "h_mail2", "expires": "1ms"}]}') AS v;
SELECT wf.publish_definition('h_wait', '{"correlation": {"h_corr": "$.input.corr"}, "steps": [
  {"name": "w", "type": "wait_event", "event": "h_go"}, {"name": "after", "queue": "h_after"}]}') AS v;
SELECT wf.publish_definition('h_wait_short', '{"steps": [
  {"name": "w", "type": "wait_event", "event": "h_go", "timeout": {"total": "1ms"}}]}') AS v;
SELECT wf.publish_definition('h_nap', '{"steps": [{"name": "nap", "type": "sleep", "duration": "1ms"},
  {"name": "after", "queue": "h_after"}]}') AS v;
SELECT wf.publish_definition('h_s2s', '{"steps": [{"name": "call", "queue": "h_s2s",
  "timeout": {"schedule_to_start": "1ms"}, "retry": {"max_attempts": 1}}]}') AS v;
SELECT wf.publish_definition('h_runtimeout', '{"timeout": "1ms", "steps": [{"name": "a", "queue": "h_rt"}]}') AS v;
SELECT wf.publish_definition('h_hb', '{"steps": [{"name": "a", "queue": "h_hbq",
  "timeout": {"heartbeat": "1ms"}, "retry": {"max_attempts": 1}}]}') AS v;
SELECT wf.publish_definition('h_op', '{"steps": [{"name": "charge", "queue": "h_opq", "retry": {"max_attempts": 1}},
  {"name": "ship", "queue": "h_opq2", "input": {"charged": "$.steps.charge.output"}}]}') AS v;
SELECT wf.publish_definition('h_comp', '{"steps": [{"name": "book", "queue": "h_book", "compensate": {"queue": "h_undo"}},
  {"name": "pay", "queue": "h_pay"}]}') AS v;
SELECT wf.publish_definition('h_par', '{"steps": [{"name": "p", "type": "parallel", "branches": [
  {"steps": [{"name": "x", "queue": "h_px"}]}, {"steps": [{"name": "y", "queue": "h_py"}]}]}]}') AS v;
SELECT wf.publish_definition('h_race', '{"steps": [{"name": "p", "type": "parallel", "join": {"first": 1}, "branches": [
  {"steps": [{"name": "fast", "queue": "h_fast"}]}, {"steps": [{"name": "slow", "queue": "h_slow"}]}]}]}') AS v;
SELECT wf.publish_definition('h_sub', '{"steps": [{"name": "s", "type": "subworkflow", "definition": "h_mig",
  "version": 1}]}') AS v;
SELECT wf.publish_definition('h_sens', '{"sensitive": {"input": ["card"]},
  "steps": [{"name": "charge", "queue": "h_charge", "input": {"card": "$.input.card"}}]}') AS v;
SELECT wf.publish_definition('h_choice', '{"steps": [
  {"name": "pick", "type": "choice", "choices": [{"when": "$.input.n > 1", "next": "big"}], "default": "small"},
  {"name": "big", "queue": "h_big", "end": true}, {"name": "small", "queue": "h_small"}]}') AS v;
SELECT wf.publish_definition('h_bad', '{"steps": []}');
SELECT wf.publish_definition('h_bad', '{"steps": [{"name": "a", "queue": "q", "next": "nowhere"}]}');

-- scenario: start, claim, heartbeat, fail, retry, complete; another tenant's
-- task on a queue of the same name is never claimed
SELECT wf.start_run('h_task', '{"x": 1, "corr": "h-1"}') AS r1 \gset
SELECT wf.run_status(:'r1');
SELECT wf.run_traceparent(:'r1') IS NULL AS no_traceparent;
SELECT c.task_id AS t, c.fence AS f, c.step AS step, c.attempt AS attempt
FROM wf.claim_tasks('shared_q', 'h_worker', 10) c \gset
\echo :step :attempt
SELECT pg_catalog.count(*) AS more FROM wf.claim_tasks('shared_q', 'h_worker', 10);
SELECT pg_catalog.count(*) AS more_any FROM wf.claim_tasks_any(ARRAY['shared_q', 'victim_mail', 'victim_fail_q'], 'h_worker', 10);
SELECT wf.heartbeat(:t, :f, '{"progress": 1}');
SELECT wf.fail_task(:t, :f, '{"code": "busy"}', true);
SELECT wf.fail_task(:t, :f, '{"code": "busy"}', true);
SELECT wf.complete_task(:t, :f, '{}');
SELECT wf.heartbeat(:t, :f);
SELECT wf.explain(:'r1') OPERATOR(pg_catalog.->>) 'waiting_for' AS waiting_for;
RESET SESSION AUTHORIZATION;
SELECT pg_catalog.pg_sleep(0.02);
SELECT wf.tick() OPERATOR(pg_catalog.>) 0 AS fired;
SET SESSION AUTHORIZATION regress_hostile;
SELECT c.task_id AS t, c.fence AS f, c.attempt AS attempt FROM wf.claim_tasks('shared_q', 'h_worker', 10) c \gset
\echo :attempt
SELECT wf.complete_task(:t, :f, '{"a": "done"}');
SELECT wf.complete_task(:t, :f, '{"a": "done"}');
SELECT pg_temp.code(pg_catalog.format('SELECT wf.complete_task(%s, %s, %L)', :t, :f OPERATOR(pg_catalog.+) 1, '{"a": "unissued"}')) AS unissued_fence;
SELECT wf.complete_task(:t, :f, '{"a": "different"}');
SELECT c.task_id AS t, c.fence AS f, c.input AS input FROM wf.claim_tasks('h_b', 'h_worker') c \gset
\echo :input
-- an output large enough to be kept in the history only (read back by
-- wf.run_context, with the shadows in place)
SELECT wf.complete_task(:t, :f, pg_catalog.jsonb_build_object('b', 'done', 'pad', pg_catalog.repeat('p', 300)));
SELECT wf.run_status(:'r1'), wf.verify_run(:'r1');
SELECT wf.run_context(:'r1') OPERATOR(pg_catalog.->) 'steps' OPERATOR(pg_catalog.->) 'b'
       OPERATOR(pg_catalog.->) 'output' OPERATOR(pg_catalog.->>) 'b' AS b_output,
       (SELECT r.context OPERATOR(pg_catalog.->) 'steps' OPERATOR(pg_catalog.->) 'b' OPERATOR(pg_catalog.?) 'output_seq'
        FROM wf.runs r WHERE r.run_id OPERATOR(pg_catalog.=) :'r1') AS kept_in_history;
SELECT wf.verify_run(:'r1', pg_catalog.to_jsonb(h)) AS extends_head
FROM wf.chain_heads() h WHERE h.run_id OPERATOR(pg_catalog.=) :'r1';
SELECT h.seq, h.type, h.step, h.attempt, h.actor FROM wf.history(:'r1') h ORDER BY h.seq;
SELECT wf.explain(:'r1') OPERATOR(pg_catalog.->>) 'status' AS status;
-- a waiting claim that finds nothing
SELECT pg_catalog.count(*) AS claimed FROM wf.claim_tasks('h_empty', 'h_worker', 1, '30 seconds', '10 ms');
-- errors
SELECT wf.claim_tasks('shared_q', 'h_worker', 0);
SELECT wf.complete_task(123456789, 1, '{}');
SELECT wf.fail_task(123456789, 1, '{"code": "x"}');
SELECT wf.heartbeat(123456789, 1);

-- scenario: idempotent starts; keys are per tenant
SELECT wf.start_run('h_task', '{"x": 2, "corr": "h-2"}', 'h-key') AS r2 \gset
SELECT wf.start_run('h_task', '{"x": 2, "corr": "h-2"}', 'h-key') OPERATOR(pg_catalog.=) :'r2' AS same_run;
SELECT pg_temp.code($$SELECT wf.start_run('h_task', '{"x": 3}', 'h-key')$$) AS other_input;
SELECT wf.start_run('h_task', '{"x": 4}', 'key-1') OPERATOR(pg_catalog.<>) :'victim_run' AS own_run;
SELECT wf.start_run('h_task', '{"x": 5}', NULL, 1) IS NOT NULL AS pinned_version;
SELECT wf.start_run('nope');
SELECT wf.start_run('h_task', '{}', NULL, 9);
SELECT wf.start_run('victim_order', '{}');
SELECT pg_catalog.count(*) AS claimed FROM wf.claim_tasks('shared_q', 'h_worker', 10);

-- scenario: batches and eager dispatch (issue 13): the victim's task on a
-- queue of the same name is never claimed or reported, its keys never found
SELECT pg_catalog.count(*) AS started FROM wf.start_runs('h_task',
  ARRAY['{"x": 6, "corr": "h-6"}', '{"x": 7, "corr": "h-7"}']::pg_catalog.jsonb[], ARRAY['h-b6', NULL]);
SELECT s.run_id OPERATOR(pg_catalog.<>) :'victim_run' AS own_run
FROM wf.start_runs('h_task', ARRAY['{"x": 4}']::pg_catalog.jsonb[], ARRAY['key-1']) s;
SELECT c.task_id AS t, c.fence AS f FROM wf.claim_tasks('shared_q', 'h_worker', 1) c \gset
SELECT a.answer, a.step, a.input FROM wf.complete_and_claim(:t, :f, '{}', 'shared_q', 'h_worker', 10) a;
SELECT c.task_id AS t, c.fence AS f FROM wf.tasks c
WHERE c.queue OPERATOR(pg_catalog.=) 'shared_q' AND c.status OPERATOR(pg_catalog.=) 'leased'
  AND c.worker OPERATOR(pg_catalog.=) 'h_worker' AND c.run_id OPERATOR(pg_catalog.=) ANY (SELECT r.run_id FROM wf.runs r
    WHERE r.input OPERATOR(pg_catalog.=) '{"x": 7, "corr": "h-7"}') \gset
SELECT a.answer, a.task_id IS NULL AS nothing
FROM wf.fail_and_claim(:t, :f, '{"code": "h"}', false, 'shared_q', 'h_worker', 10) a;
SELECT b.answer FROM wf.complete_tasks(ARRAY[:victim_task, :t], ARRAY[:victim_fence, :f]) b;
SELECT b.answer FROM wf.fail_tasks(ARRAY[:victim_task], ARRAY[:victim_fence], ARRAY['{"code": "h"}']::pg_catalog.jsonb[]) b;
SELECT b.answers, b.task_id IS NULL AS nothing
FROM wf.complete_tasks_and_claim(ARRAY[:victim_task], ARRAY[:victim_fence], NULL, 'shared_q', 'h_worker') b;
SELECT b.answers, b.task_id IS NULL AS nothing
FROM wf.fail_tasks_and_claim(ARRAY[:victim_task], ARRAY[:victim_fence], ARRAY['{"code": "h"}']::pg_catalog.jsonb[],
                             NULL, 'shared_q', 'h_worker') b;
SELECT pg_temp.code(pg_catalog.format('SELECT * FROM wf.complete_and_claim(%s, %s, %L, %L, %L)',
                    :victim_task, :victim_fence, '{}', 'shared_q', 'h_worker')) AS victim_eager;

-- scenario: signals and correlated events
SELECT wf.start_run('h_wait', '{"corr": "h-w1"}') AS w1 \gset
SELECT wf.signal(:'w1', 'other', '{"n": 1}', 'e-1');
SELECT wf.signal(:'w1', 'other', '{"n": 1}', 'e-1');
SELECT wf.explain(:'w1') OPERATOR(pg_catalog.->>) 'waiting_for' AS waiting_for;
SELECT e.run_id OPERATOR(pg_catalog.=) :'w1' AS mine, e.outcome FROM wf.send_event('h_corr:h-w1', 'h_go', '{"ok": true}') e;
-- the victim's key reaches no run of the victim: kept in the hostile tenant's own buffer
SELECT pg_catalog.count(e.run_id) AS victim_runs_reached, pg_catalog.string_agg(e.outcome, ',') AS outcome
FROM wf.send_event('victim_corr:victim-corr-3', 'victim_event', '{}') e;
SELECT pg_catalog.count(*) AS victim_events_seen FROM wf.buffered_events b
WHERE b.tenant_id OPERATOR(pg_catalog.<>) wf.current_tenant();
SELECT wf.send_event('', 'x');
SELECT pg_temp.err(pg_catalog.format('SELECT wf.signal(%L, %L)', :'w1', ''));
SELECT pg_temp.err(pg_catalog.format('SELECT wf.signal(%L, %L)', :'victim_wait_run', 'victim_event'));
SELECT wf.complete_task(c.task_id, c.fence, '{}') FROM wf.claim_tasks('h_after', 'h_worker') c;
SELECT wf.run_status(:'w1');
SELECT wf.start_run('h_wait_short') AS w2 \gset

-- scenario: approvals: tokens, decisions good and bad, the operator's commands
SELECT wf.start_run('h_appr', '{"n": 1}') AS a1 \gset
SELECT c.task_id AS t, c.fence AS f FROM wf.claim_tasks('h_mail', 'h_mailer') c \gset
CREATE TEMP TABLE h_tokens AS SELECT * FROM wf.issue_approval_tokens(:t, :f);
SELECT i.approver, i.decision, i.expires_at IS NOT NULL AS expires FROM h_tokens i ORDER BY 1, 2;
SELECT pg_temp.code(pg_catalog.format('SELECT wf.issue_approval_tokens(%s, %s)', :t, :f OPERATOR(pg_catalog.+) 1)) AS wrong_fence;
SELECT wf.complete_task(:t, :f, '{"sent": 2}');
SELECT i.token AS ann FROM h_tokens i
WHERE i.approver OPERATOR(pg_catalog.=) 'h_ann' AND i.decision OPERATOR(pg_catalog.=) 'approve' \gset
SELECT wf.decide(:'ann', 'approve', 'h_bob');
SELECT wf.decide('wfa_not_a_token', 'approve', 'h_ann');
-- (rolled back: the audit row of this attempt would name the victim's approver)
BEGIN;
SELECT wf.decide(:'victim_token', 'approve', 'victim_approver');
ROLLBACK;
SELECT wf.decide(:'ann', 'maybe', 'h_ann');
SELECT wf.decide(:'ann', 'approve', 'h_ann', 'fine', '{"limit": 1}');
SELECT wf.decide(:'ann', 'approve', 'h_ann');
SELECT wf.run_status(:'a1'), wf.explain(:'a1') OPERATOR(pg_catalog.->>) 'step' AS step;
SELECT wf.start_run('h_appr', '{"n": 2}') AS a2 \gset
SELECT c.task_id AS t, c.fence AS f FROM wf.claim_tasks('h_mail', 'h_mailer') c \gset
SELECT pg_catalog.count(*) AS tokens FROM wf.issue_approval_tokens(:t, :f);
SELECT wf.explain(:'a2') OPERATOR(pg_catalog.->>) 'waiting_for' AS waiting_for;
SELECT wf.revoke_approval_tokens(:'a2', 'vote', 'the links leaked');
SELECT wf.reissue_approval_tokens(:'a2', 'vote', 'send again') IS NOT NULL AS new_task;
SELECT wf.set_approvers(:'a2', 'vote', ARRAY['h_ann', 'h_cat'], 'bob left');
SELECT p.approver, p.token_issued FROM wf.pending_approvals p WHERE p.run_id OPERATOR(pg_catalog.=) :'a2' ORDER BY 1;
SELECT pg_temp.err(pg_catalog.format('SELECT wf.revoke_approval_tokens(%L, %L, %L)', :'victim_vote_run', 'victim_vote', 'mine now'));
SELECT pg_temp.err(pg_catalog.format('SELECT wf.reissue_approval_tokens(%L, %L, %L)', :'victim_vote_run', 'victim_vote', 'mine now'));
SELECT pg_temp.err(pg_catalog.format('SELECT wf.set_approvers(%L, %L, ARRAY[%L], %L)', :'victim_vote_run', 'victim_vote', 'h_ann', 'mine now'));
SELECT wf.revoke_approval_tokens(:'a2', 'vote', '');
SELECT wf.start_run('h_exp') AS a3 \gset

-- scenario: operator commands: pause and resume with a result held, withdraw,
-- update_context, retry_step, skip_step, terminate, legal hold
SELECT wf.start_run('h_op', '{"n": 1}') AS o1 \gset
SELECT c.task_id AS t, c.fence AS f FROM wf.claim_tasks('h_opq', 'h_worker') c \gset
SELECT wf.pause_run(:'o1', 'fraud check');
SELECT wf.explain(:'o1') OPERATOR(pg_catalog.->>) 'waiting_for' AS waiting_for;
SELECT wf.heartbeat(:t, :f);
SELECT wf.complete_task(:t, :f, '{"charged": 10}');
SELECT wf.resume_run(:'o1', 'fraud check passed');
SELECT c.input FROM wf.claim_tasks('h_opq2', 'h_worker') c;
SELECT wf.start_run('h_op', '{"n": 2}') AS o2 \gset
SELECT wf.pause_run(:'o2', 'hold everything');
SELECT pg_catalog.count(*) AS claimable FROM wf.claim_tasks('h_opq', 'h_worker');
SELECT wf.update_context(:'o2', '{"n": 20, "note": "fixed"}', 'typo');
SELECT wf.resume_run(:'o2', 'go');
SELECT c.task_id AS t, c.fence AS f FROM wf.claim_tasks('h_opq', 'h_worker') c \gset
SELECT wf.fail_task(:t, :f, '{"code": "declined"}', false);
SELECT wf.run_status(:'o2'), wf.explain(:'o2') OPERATOR(pg_catalog.->) 'commands' AS commands;
SELECT wf.retry_step(:'o2', 'card replaced');
SELECT wf.skip_step(:'o2', '{"charged": 0}', 'charged by phone', 'charge');
SELECT wf.terminate_run(:'o2', 'enough');
SELECT wf.run_status(:'o2');
SELECT pg_temp.err(pg_catalog.format('SELECT wf.pause_run(%L, %L)', :'o2', 'ended'));
SELECT pg_temp.err(pg_catalog.format('SELECT wf.resume_run(%L, %L)', :'o1', 'not paused'));
SELECT pg_temp.err(pg_catalog.format('SELECT wf.retry_step(%L, %L)', :'o1', 'running'));
SELECT wf.pause_run(:'o1', '');
SELECT wf.pause_run('00000000-0000-0000-0000-000000000000', 'no such run');
SELECT wf.set_legal_hold(:'r1', true, 'litigation');
SELECT wf.set_legal_hold(:'r1', true, 'still');
-- another tenant's run is not there for any operator command
SELECT pg_temp.err(pg_catalog.format('SELECT wf.%s(%L, %L)', c, :'victim_run', 'mine now')) AS refused
FROM pg_catalog.unnest(ARRAY['pause_run', 'resume_run', 'cancel_run', 'terminate_run', 'retry_step']) c;
SELECT pg_temp.err(pg_catalog.format('SELECT wf.update_context(%L, %L, %L)', :'victim_run', '{"x": 1}', 'mine now'));
SELECT pg_temp.err(pg_catalog.format('SELECT wf.skip_step(%L, %L, %L)', :'victim_run', '{}', 'mine now'));
SELECT pg_temp.err(pg_catalog.format('SELECT wf.migrate_run(%L, 1, %L)', :'victim_run', 'mine now'));
SELECT pg_temp.err(pg_catalog.format('SELECT wf.set_legal_hold(%L, true, %L)', :'victim_run', 'mine now'));

-- scenario: migrate_run, refused and done
SELECT wf.start_run('h_mig', '{}', NULL, 1) AS m1 \gset
SELECT wf.complete_task(c.task_id, c.fence, '{"a": 1}') FROM wf.claim_tasks('h_ma', 'h_worker') c;
SELECT c.task_id AS t, c.fence AS f FROM wf.claim_tasks('h_mb', 'h_old_worker') c \gset
SELECT pg_temp.err(pg_catalog.format('SELECT wf.migrate_run(%L, 3, %L)', :'m1', 'no b there'));
SELECT pg_temp.err(pg_catalog.format('SELECT wf.migrate_run(%L, 9, %L)', :'m1', 'no such version'));
SELECT wf.migrate_run(:'m1', 2, 'b reads a now');
SELECT wf.heartbeat(:t, :f);
SELECT c.input FROM wf.claim_tasks('h_mb2', 'h_worker') c;

-- scenario: cancel with compensation
SELECT wf.start_run('h_comp', '{}') AS c1 \gset
SELECT wf.complete_task(c.task_id, c.fence, '{"booked": 1}') FROM wf.claim_tasks('h_book', 'h_worker') c;
SELECT wf.cancel_run(:'c1', 'customer changed their mind');
SELECT c.step, c.input FROM wf.claim_tasks('h_undo', 'h_worker') c \gset
\echo :step :input
SELECT wf.complete_task(t.task_id, t.fence, '{"undone": true}') FROM wf.tasks t
WHERE t.run_id OPERATOR(pg_catalog.=) :'c1' AND t.status OPERATOR(pg_catalog.=) 'leased';
SELECT wf.run_status(:'c1');

-- scenario: runs with live child runs: cancel and terminate stop the children
SELECT wf.start_run('h_par') AS p1 \gset
SELECT wf.start_run('h_par') AS p2 \gset
SELECT wf.start_run('h_sub') AS s1 \gset
SELECT pg_catalog.count(*) AS live_children FROM wf.runs r
WHERE r.parent_run_id OPERATOR(pg_catalog.=) ANY (ARRAY[:'p1', :'p2', :'s1']::pg_catalog.uuid[])
  AND r.status OPERATOR(pg_catalog.=) 'running';
SELECT wf.explain(:'p1') OPERATOR(pg_catalog.->>) 'waiting_for' AS waiting_for;
SELECT wf.cancel_run(:'p1', 'not needed');
SELECT wf.terminate_run(:'p2', 'stop it');
SELECT wf.terminate_run(:'s1', 'stop it');
SELECT r.status, pg_catalog.count(*) FROM wf.runs r
WHERE r.parent_run_id OPERATOR(pg_catalog.=) ANY (ARRAY[:'p1', :'p2', :'s1']::pg_catalog.uuid[])
GROUP BY 1 ORDER BY 1;
SELECT wf.start_run('h_race') AS race \gset
SELECT wf.complete_task(c.task_id, c.fence, '{"first": true}') FROM wf.claim_tasks('h_fast', 'h_worker') c;

-- scenario: batch commands
SELECT wf.start_run('h_op', '{"n": 3}') AS o3 \gset
SELECT wf.start_run('h_op', '{"n": 4}') AS o4 \gset
SELECT wf.pause_run(:'o4', 'hold');
SELECT wf.fail_task(c.task_id, c.fence, '{"code": "x"}', false) FROM wf.claim_tasks('h_opq', 'h_worker') c;
SELECT b.outcome, b.detail FROM wf.resume_runs('batch resume', '{"definition": "h_op"}') b;
SELECT b.outcome, b.detail FROM wf.retry_runs('batch retry', '{"definition": "h_op", "failure_code": "x"}') b;
SELECT b.outcome, pg_catalog.count(*) FROM wf.cancel_runs('batch cancel', '{"definition": "h_op", "status": "running"}') b
GROUP BY 1 ORDER BY 1;
-- the batch commands' body is not the hostile login's to call (issue 29)
SELECT pg_temp.err($q$SELECT pg_catalog.count(*) FROM wf._batch('cancel_runs', 'cancel_run',
                          ARRAY['running', 'paused', 'failed'], 'direct', '{}', 10, NULL)$q$) AS refused;
SELECT pg_catalog.count(*) AS victim_runs FROM wf.cancel_runs('take over', '{"definition": "victim_order"}');
SELECT pg_catalog.count(*) AS listed FROM wf.list_runs('{"definition": "h_op"}');
SELECT pg_catalog.count(*) AS victim_listed FROM wf.list_runs('{"definition": "victim_order"}');
-- eager start: only the login's own definitions, and a lease of its own run
SELECT s.step, s.deliveries, s.run_id AS eager_run FROM wf.start_and_claim('h_op', '{"n": 5}', 'h_worker') s \gset
\echo :step :deliveries
SELECT pg_catalog.count(*) AS own_runs FROM wf.list_runs('{"definition": "h_op"}') l
WHERE l.run_id OPERATOR(pg_catalog.=) :'eager_run'::pg_catalog.uuid;
SELECT pg_temp.err($q$SELECT * FROM wf.start_and_claim('victim_order', '{}', 'h_worker')$q$) AS refused;
SELECT * FROM wf.cancel_runs('', '{}');
SELECT * FROM wf.cancel_runs('x', '{"bogus": 1}');
SELECT * FROM wf.retry_runs('x', '{"status": "running"}');
SELECT * FROM wf.resume_runs('x', '{}', 0);

-- scenario: sealed values: opened for the own tenant only
SELECT wf.start_run('h_sens', '{"card": "4111-hostile-card"}') AS sens \gset
SELECT r.input OPERATOR(pg_catalog.->>) 'card' OPERATOR(pg_catalog.~~) 'wfenc:v1:%' AS sealed
FROM wf.runs r WHERE r.run_id OPERATOR(pg_catalog.=) :'sens';
SELECT c.input OPERATOR(pg_catalog.->>) 'card' AS card FROM wf.claim_tasks('h_charge', 'h_worker') c;
SELECT wf.decrypt(r.input) OPERATOR(pg_catalog.->>) 'card' AS card FROM wf.runs r WHERE r.run_id OPERATOR(pg_catalog.=) :'sens';
SELECT pg_catalog.strpos(pg_temp.err(pg_catalog.format('SELECT wf.decrypt(%L)', pg_catalog.jsonb_build_object('x', :'victim_sealed'::pg_catalog.jsonb))),
                         '4111') OPERATOR(pg_catalog.=) 0 AS victim_card_not_opened;

-- scenario: explain, history, graphs, verify; another tenant's run is not there
SELECT wf.start_run('h_choice', '{"n": 2}') AS ch \gset
SELECT wf.explain(:'ch') OPERATOR(pg_catalog.->>) 'step' AS step;
SELECT pg_catalog.count(*) AS events FROM wf.history(:'ch');
SELECT pg_catalog.length(wf.definition_graph('h_choice')) OPERATOR(pg_catalog.>) 0 AS mermaid,
       pg_catalog.length(wf.definition_graph('h_appr', 1, 'dot')) OPERATOR(pg_catalog.>) 0 AS dot,
       pg_catalog.length(wf.run_graph(:'ch')) OPERATOR(pg_catalog.>) 0 AS run_mermaid,
       pg_catalog.length(wf.run_graph(:'c1', 'dot')) OPERATOR(pg_catalog.>) 0 AS run_dot;
SELECT pg_temp.err($q$SELECT wf._graph_render('t', '{"steps": [{"name": "a", "queue": "q"}]}', 'mermaid')$q$) AS refused;
SELECT wf.definition_graph('h_choice', NULL, 'svg');
SELECT wf.definition_graph('victim_order');
SELECT pg_temp.err(pg_catalog.format('SELECT wf.%s(%L)', c, :'victim_run')) AS refused
FROM pg_catalog.unnest(ARRAY['run_status', 'explain', 'history', 'verify_run', 'run_graph']) c;
SELECT pg_temp.err(pg_catalog.format('SELECT wf.verify_run(%L, %L)', :'victim_run',
       pg_catalog.jsonb_build_object('seq', 1, 'head_hash', pg_catalog.repeat('0', 64)))) AS refused;
SELECT wf.channel() OPERATOR(pg_catalog.<>) :'victim_channel' AS own_channel,
       wf.channel('queue', 'shared_q') IS NOT NULL AS queue_channel;
SELECT wf.channel('bogus');

-- scenario: schedules (pg_cron is not in this database: wf.schedule stops there)
SELECT wf.cron_next('0 0 1 1 *', '2026-06-01Z');
SELECT wf.cron_next('61 * * * *', '2026-06-01Z');
-- the helpers of schedules are not the hostile login's to call (issue 29)
SELECT pg_temp.err(pg_catalog.format('SELECT wf.%s', c)) AS refused
FROM pg_catalog.unnest(ARRAY['_cron_check(''0 3 * * *'')', '_cron_next(''0 0 1 1 *'', ''2026-06-01Z'')',
                             '_cron_prev(''0 0 1 1 *'', ''2026-06-01Z'', ''UTC'')', '_cron_timezone()']) c;
SELECT pg_temp.code($$SELECT wf.schedule('h_sched', '0 0 1 1 *', 'h_task', '{"x": 9}')$$)
       OPERATOR(pg_catalog.<>) 'no error' AS no_pg_cron;
SELECT wf.schedule('bad name!', '0 0 1 1 *', 'h_task');
SELECT wf.schedule('h_sched', 'never', 'h_task');
SELECT wf.schedule('h_sched', '0 0 1 1 *', 'nope');
INSERT INTO wf.schedules (tenant_id, name, cron, definition, input)
VALUES ('hostile', 'h_sched', '0 0 1 1 *', 'h_task', '{"x": 9, "corr": "h-sched"}')
RETURNING schedule_id AS h_sched \gset
SELECT wf.fire_schedule(:h_sched) AS fired_run \gset
SELECT wf.fire_schedule(:h_sched) OPERATOR(pg_catalog.=) :'fired_run' AS same_run;
SELECT wf.fire_schedule(:victim_sched) IS NULL AS victim_schedule_not_fired;
SELECT pg_temp.err(pg_catalog.format('SELECT wf._fire_schedule(%s)', :h_sched)) AS refused;
SELECT s.name, s.definition, s.last_run_id OPERATOR(pg_catalog.=) :'fired_run' AS last_run FROM wf.schedule_list s;
SELECT wf.unschedule('victim_sched');
SELECT wf.unschedule('h_sched');
-- no table of the engine can be locked against the other tenants (issue
-- 29): LOCK TABLE in a mode that blocks writers needs UPDATE, DELETE or
-- TRUNCATE on the whole table, which no job role has (wf.schedules: only
-- some columns)
SELECT pg_temp.err('LOCK TABLE wf.schedules IN ACCESS EXCLUSIVE MODE') AS schedules_lock;
SELECT pg_catalog.count(*) AS tables,
       pg_catalog.count(*) FILTER (WHERE pg_temp.code(pg_catalog.format('LOCK TABLE %I.%I IN SHARE MODE',
           n.nspname, c.relname)) OPERATOR(pg_catalog.<>) '42501') AS lockable
FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) c.relnamespace
WHERE n.nspname OPERATOR(pg_catalog.=) ANY (ARRAY['wf', 'wfshard']) AND c.relkind OPERATOR(pg_catalog.=) 'r';

-- scenario: what only superusers may call is refused to the hostile login
SELECT wf.tick();
SELECT wf.purge_runs(1);
SELECT wf.set_tenant_policy('hostile', '{"max_live_runs": 1}');
SELECT wf._migration_problem(:'victim_run', 1);
SELECT wf.create_tenant('hostile2');
SELECT wf.rotate_tenant_key('victim');

-- scenario: a superuser calls the engine with the hostile session's
-- search_path and temporary objects: timers (retry, sleep, step and run
-- timeouts, approval expiry, a wait's timeout, a parallel join that stops
-- the losing branch), deadlines, quotas, purge, keys
SELECT wf.start_run('h_runtimeout') AS rt \gset
SELECT wf.start_run('h_s2s') AS s2s \gset
SELECT wf.start_run('h_nap') AS nap \gset
SELECT wf.start_run('h_hb') AS hb \gset
SELECT pg_catalog.count(*) AS claimed FROM wf.claim_tasks('h_hbq', 'h_worker', 1, '1 hour');
RESET SESSION AUTHORIZATION;
SHOW search_path;
SELECT pg_catalog.pg_sleep(0.02);
SELECT wf.tick() OPERATOR(pg_catalog.>) 0 AS fired;
SELECT wf.tick() OPERATOR(pg_catalog.>=) 0 AS fired_again;
SELECT r.definition_name, r.status FROM wf.runs r
WHERE r.run_id OPERATOR(pg_catalog.=) ANY (ARRAY[:'rt', :'s2s', :'nap', :'hb', :'w2', :'a3', :'race', :'victim_nap_run']::pg_catalog.uuid[])
ORDER BY 1;
SELECT r.status, pg_catalog.count(*) FROM wf.runs r WHERE r.parent_run_id OPERATOR(pg_catalog.=) :'race' GROUP BY 1 ORDER BY 1;
SELECT p.max_live_runs FROM wf.set_tenant_policy('hostile', '{"max_live_runs": 1000, "max_tasks_in_flight": 100}') p;
SET SESSION AUTHORIZATION regress_hostile;
SELECT wf.start_run('h_op', '{"n": 5}') IS NOT NULL AS started_under_quota;
SELECT pg_catalog.count(*) AS claimed_under_quota FROM wf.claim_tasks('h_opq', 'h_worker');
RESET SESSION AUTHORIZATION;
SELECT p.retention FROM wf.set_tenant_policy('hostile', '{"retention": "1 millisecond", "max_live_runs": null, "max_tasks_in_flight": null}') p;
SELECT pg_catalog.pg_sleep(0.01);
SELECT wf.purge_runs(1000) OPERATOR(pg_catalog.>) 0 AS purged;
SELECT r.tenant_id, r.legal_hold, pg_catalog.count(*) FROM wf.runs r
WHERE r.finished_at IS NOT NULL GROUP BY 1, 2 ORDER BY 1, 2;
SELECT wf.rotate_tenant_key('hostile') AS key_id;
SELECT wf.rewrap_tenant_keys() OPERATOR(pg_catalog.>) 0 AS rewrapped;
SELECT wf.create_tenant('hostile_two');
SELECT wf.add_tenant_member('nobody', 'regress_hostile');
SELECT wf.remove_tenant_member('victim', 'regress_hostile');
SELECT pg_temp.code($$SELECT wf.schedule_purge('0 3 * * *', 100)$$) AS no_pg_cron;
SET SESSION AUTHORIZATION regress_hostile;
SELECT wf.set_legal_hold(:'r1', false, 'case closed');
SELECT pg_catalog.bool_and(wf.verify_run(r.run_id)) AS all_verify, pg_catalog.count(*) AS runs FROM wf.runs r;

-- scenario: leaks.  The probe is shown every column of the views and of every
-- set-returning function a job role may call, and every row of every table:
-- it must never see a value of the victim.  The attacker turns index scans
-- off, so that no index condition on the tenant hides a leak.
SET enable_indexscan = off;
SET enable_bitmapscan = off;
SET enable_indexonlyscan = off;
SELECT wf.start_run('h_appr', '{"n": 3}') AS a4 \gset
SELECT wf.start_run('h_task', '{"x": 11}') IS NOT NULL AS started;
SELECT wf.start_run('h_op', '{"n": 6}') AS o6 \gset
SELECT wf.pause_run(:'o6', 'hold');
SELECT wf.start_run('h_op', '{"n": 7}') AS o7 \gset
SELECT wf.fail_task(c.task_id, c.fence, '{"code": "x"}', false) FROM wf.claim_tasks('h_opq', 'h_worker') c;
SELECT pg_catalog.count(*) AS own_pending FROM wf.pending_approvals p
WHERE evil.leak(p.tenant_id) AND evil.leak(p.run_id) AND evil.leak(p.definition_name) AND evil.leak(p.step)
  AND evil.leak(p.visit) AND evil.leak(p.approver) AND evil.leak(p.requested_at) AND evil.leak(p.age)
  AND evil.leak(p.expires_at) AND evil.leak(p.token_issued);
INSERT INTO wf.schedules (tenant_id, name, cron, definition, input)
VALUES ('hostile', 'h_sched2', '0 0 1 1 *', 'h_task', '{"x": 10}');
SELECT pg_catalog.count(*) AS own_schedules FROM wf.schedule_list s
WHERE evil.leak(s.name) AND evil.leak(s.cron) AND evil.leak(s.definition) AND evil.leak(s.version)
  AND evil.leak(s.input) AND evil.leak(s.jobid) AND evil.leak(s.next_fire_at) AND evil.leak(s.last_instant)
  AND evil.leak(s.last_run_id) AND evil.leak(s.created_by) AND evil.leak(s.created_at) AND evil.leak(s.updated_at);
SELECT pg_catalog.count(*) AS rows FROM wf.history(:'a4') h
WHERE evil.leak(h.seq) AND evil.leak(h.type) AND evil.leak(h.step) AND evil.leak(h.attempt)
  AND evil.leak(h.payload) AND evil.leak(h.actor) AND evil.leak(h.created_at) AND evil.leak(h.hash);
SELECT pg_catalog.count(*) AS rows FROM wf.claim_tasks('shared_q', 'h_worker', 10) c
WHERE evil.leak(c.task_id) AND evil.leak(c.run_id) AND evil.leak(c.step) AND evil.leak(c.attempt)
  AND evil.leak(c.fence) AND evil.leak(c.idempotency_key) AND evil.leak(c.input)
  AND evil.leak(c.lease_expires_at) AND evil.leak(c.queue) AND evil.leak(c.activity) AND evil.leak(c.deliveries);
SELECT pg_catalog.count(*) AS rows FROM wf.claim_tasks('h_mail', 'h_mailer') c,
       wf.issue_approval_tokens(c.task_id, c.fence) i
WHERE evil.leak(i.approver) AND evil.leak(i.decision) AND evil.leak(i.token) AND evil.leak(i.expires_at);
SELECT pg_catalog.count(*) AS rows FROM wf.send_event('victim_corr:victim-corr-3', 'victim_event') e
WHERE evil.leak(e.run_id) AND evil.leak(e.outcome);
SELECT pg_catalog.count(*) AS rows FROM wf.chain_heads() h
WHERE evil.leak(h.tenant_id) AND evil.leak(h.run_id) AND evil.leak(h.seq) AND evil.leak(h.head_hash)
  AND evil.leak(h.signature IS NULL)
  AND h.run_id OPERATOR(pg_catalog.=) ANY (SELECT r.run_id FROM wf.runs r);
SELECT pg_catalog.count(*) AS rows FROM wf.cancel_runs('probe', '{"definition": "victim_order"}') b
WHERE evil.leak(b.run_id) AND evil.leak(b.outcome) AND evil.leak(b.detail);
SELECT pg_catalog.count(*) AS rows FROM wf.retry_runs('probe', '{}') b
WHERE evil.leak(b.run_id) AND evil.leak(b.outcome) AND evil.leak(b.detail);
SELECT pg_catalog.count(*) AS rows FROM wf.resume_runs('probe', '{}') b
WHERE evil.leak(b.run_id) AND evil.leak(b.outcome) AND evil.leak(b.detail);
SELECT pg_catalog.count(*) OPERATOR(pg_catalog.>=) 0 AS ok FROM wf.worker_status() w
WHERE evil.leak(w.role) AND evil.leak(w.database) AND evil.leak(w.pid) AND evil.leak(w.started_at)
  AND evil.leak(w.next_due) AND evil.leak(w.ticks) AND evil.leak(w.fired);
SELECT evil.leak(wf.explain(:'a4')) AND evil.leak(wf.run_graph(:'a4')) AND evil.leak(wf.channel())
       AND evil.leak(wf.channel('queue', 'shared_q')) AND evil.leak(wf.current_tenant()) AS probed;
-- the hostile tenant's own buffered copies of the victim's key and event name
-- (sent above, they match the probe's pattern): the superuser removes them
RESET SESSION AUTHORIZATION;
DELETE FROM wf.buffered_events b WHERE b.tenant_id OPERATOR(pg_catalog.=) 'hostile';
SET SESSION AUTHORIZATION regress_hostile;
SELECT pg_catalog.count(*) OPERATOR(pg_catalog.>) 0 AS own_rows FROM (
    SELECT 1 FROM wf.runs x WHERE evil.leak(x.*)
    UNION ALL SELECT 1 FROM wf.tasks x WHERE evil.leak(x.*)
    UNION ALL SELECT 1 FROM wf.events x WHERE evil.leak(x.*)
    UNION ALL SELECT 1 FROM wf.event_log x WHERE evil.leak(x.payload) AND evil.leak(x.*)
    UNION ALL SELECT 1 FROM wf.timers x WHERE evil.leak(x.*)
    UNION ALL SELECT 1 FROM wf.approvals x WHERE evil.leak(x.*)
    UNION ALL SELECT 1 FROM wf.approval_attempts x WHERE evil.leak(x.*)
    UNION ALL SELECT 1 FROM wf.signals x WHERE evil.leak(x.*)
    UNION ALL SELECT 1 FROM wf.definitions x WHERE evil.leak(x.*)
    UNION ALL SELECT 1 FROM wf.correlations x WHERE evil.leak(x.*)
    UNION ALL SELECT 1 FROM wf.schedules x WHERE evil.leak(x.*)
    UNION ALL SELECT 1 FROM wf.tenant_policies x WHERE evil.leak(x.*)
    UNION ALL SELECT 1 FROM wf.buffered_events x WHERE evil.leak(x.*)) t;

RESET enable_indexscan;
RESET enable_bitmapscan;
RESET enable_indexonlyscan;

-- scenario: the count.  Not one shadow ran during the engine phase, as the
-- owner or as anyone else, and the probe saw nothing of the victim
SELECT CASE WHEN s.is_called THEN s.last_value ELSE 0 END AS shadow_runs FROM evil.shadow_runs s;
SELECT CASE WHEN s.is_called THEN s.last_value ELSE 0 END AS shadow_runs_as_another_role FROM evil.shadow_escalations s;
SELECT l.name, l.ran_as OPERATOR(pg_catalog.=) 'regress_hostile' AS as_caller, pg_catalog.count(*) AS runs
FROM evil.shadow_log l GROUP BY 1, 2 ORDER BY 1, 2;
SELECT CASE WHEN s.is_called THEN s.last_value ELSE 0 END AS victim_values_leaked FROM evil.leaked s;
SELECT pg_catalog.count(*) OPERATOR(pg_catalog.>) 0 AS probe_saw_own_values,
       pg_catalog.count(*) FILTER (WHERE s.v OPERATOR(pg_catalog.~) 'victim') AS probe_saw_victim_values
FROM evil.seen s;

-- scenario: the control.  Every shadow wins the name lookup when a statement
-- uses its bare name, and then runs (quietly: one WARNING each is shown below)
SET search_path = pg_catalog, pg_temp;
SET hostile.quiet = on;
CREATE TABLE evil.control (kind text, name text, fired boolean);
DO $$
DECLARE
    s record;
    before bigint;
    after bigint;
BEGIN
    FOR s IN SELECT * FROM evil.shadows ORDER BY kind, name LOOP
        PERFORM pg_catalog.set_config('search_path',
            CASE pg_catalog.split_part(s.probe, ':', 1) WHEN 'engine' THEN 'pg_catalog'
                 ELSE 'evil, pg_catalog, pg_temp' END, true);
        SELECT CASE WHEN q.is_called THEN q.last_value ELSE 0 END INTO before FROM evil.shadow_runs q;
        BEGIN
            EXECUTE pg_catalog.substr(s.probe, pg_catalog.strpos(s.probe, ':') OPERATOR(pg_catalog.+) 1);
        EXCEPTION WHEN OTHERS THEN
            NULL;   -- the real function may refuse NULL arguments: the shadow ran first
        END;
        SELECT CASE WHEN q.is_called THEN q.last_value ELSE 0 END INTO after FROM evil.shadow_runs q;
        PERFORM pg_catalog.set_config('search_path', 'pg_catalog, pg_temp', true);
        INSERT INTO evil.control VALUES (s.kind, s.name, after OPERATOR(pg_catalog.>) before);
    END LOOP;
END
$$;
RESET hostile.quiet;
SELECT c.kind, pg_catalog.bool_and(c.fired) AS every_one_fired,
       pg_catalog.count(*) OPERATOR(pg_catalog.>) 0 AS some
FROM evil.control c GROUP BY 1 ORDER BY 1;
SELECT c.kind, c.name FROM evil.control c WHERE NOT c.fired ORDER BY 1, 2;
-- one of each, out loud
SET search_path = evil, pg_catalog, pg_temp;
SELECT 'a'::pg_catalog.text = 'a' AS operator_shadow;
SELECT now() IS NOT NULL AS function_shadow;
SELECT NULL::jsonb IS NULL AS evil_domain_shadow;
SET search_path = pg_catalog;
SELECT NULL::uuid IS NULL AS temp_domain_shadow;
DO $$ DECLARE r uuid := '00000000-0000-0000-0000-000000000000'; BEGIN END $$;
SET search_path = pg_catalog, pg_temp;
SELECT CASE WHEN s.is_called THEN s.last_value ELSE 0 END OPERATOR(pg_catalog.>) 0 AS shadows_counted FROM evil.shadow_runs s;

-- every function a job role may execute was driven above, directly or by the
-- engine (calls that returned, counted since this session began): a new API
-- function shows up here until the test drives it with the shadows in place.
-- wf.schedule needs pg_cron in this database, which the regression database
-- has not: only its refusals are driven (they return no call count).
RESET SESSION AUTHORIZATION;
SET search_path = pg_catalog, pg_temp;
SELECT pg_catalog.pg_stat_force_next_flush();
SELECT p.oid::pg_catalog.regprocedure AS never_driven
FROM pg_catalog.pg_proc p JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) p.pronamespace
WHERE n.nspname OPERATOR(pg_catalog.=) 'wf'
  AND EXISTS (SELECT 1 FROM pg_catalog.unnest(ARRAY['wfengine_app', 'wfengine_worker', 'wfengine_approver',
                  'wfengine_operator', 'wfengine_admin', 'wfengine_sensitive']) r(role)
              WHERE pg_catalog.has_function_privilege(r.role, p.oid, 'EXECUTE'))
  AND COALESCE((SELECT s.calls FROM pg_catalog.pg_stat_user_functions s
                WHERE s.funcid OPERATOR(pg_catalog.=) p.oid), 0)
      OPERATOR(pg_catalog.=)
      COALESCE((SELECT b.calls FROM public.h_calls_before b
                WHERE b.funcid OPERATOR(pg_catalog.=) p.oid), 0)
ORDER BY 1;
DROP TABLE public.h_calls_before;

-- the mechanism behind it, in the engine's own statements: every name in the
-- kept statements of the plan table is schema-qualified (the pin of
-- search_path is the first wall, this the second); the check itself finds
-- what it is meant to find
RESET SESSION AUTHORIZATION;
SET search_path = pg_catalog, pg_temp;
SELECT u.statement, u.kind, u.name FROM wf._unqualified_names() u;
SELECT u.kind, u.name FROM wf._unqualified_names($q$WITH c AS (SELECT 1 AS x)
    SELECT now(), $1::jsonb, c.x FROM runs r JOIN c USING (x)
    WHERE r.a = r.b AND r.s IN ('a') AND r.t IS DISTINCT FROM NULL AND r.u BETWEEN 1 AND 2
      AND r.v LIKE 'x%' AND r.w OPERATOR(pg_catalog.=) ANY (SELECT 1) AND r.y = ANY (SELECT 1)
      AND CASE r.z WHEN 1 THEN true END AND NULLIF(1, 2) IS NULL
    ORDER BY r.q USING < FOR UPDATE OF r$q$) u;

-- clean up
RESET SESSION AUTHORIZATION;
RESET search_path;
SET client_min_messages = warning;
DROP SCHEMA evil CASCADE;
DROP OWNED BY regress_hostile, regress_victim;
DROP ROLE regress_hostile, regress_victim;
DROP ROLE wf_tenant_hostile, wf_tenant_victim, wf_tenant_hostile_two;
RESET client_min_messages;
