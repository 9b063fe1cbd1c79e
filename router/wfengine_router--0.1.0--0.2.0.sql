/* router/wfengine_router--0.1.0--0.2.0.sql -- upgrade wfengine_router from 0.1.0 to 0.2.0 */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION wfengine_router UPDATE TO '0.2.0'" to load this file. \quit

/*
 * 0.1.0 is released (with wfengine 0.2.0): router/wfengine_router--0.1.0.sql
 * never changes again (sql/released.sha256).  Every change of the router
 * from here on is written in this file, in the order it is made.  Update
 * the routers after the shards (docs/scale-out.md, "A rolling upgrade"): a
 * shard still on wfengine 0.2.0 answers a call of a function it does not
 * have (wf.start_and_claim) with 42883.
 */

-- ==== issue 30: a cut-over left waiting on the target by a router session that died ====
-- The target's part of a cut-over (wf.move_in_cutover, one transaction)
-- can wait there for a lock long after the router session that sent it
-- died: PostgreSQL notices a vanished client only when it next writes to
-- it.  If it then commits, the target takes the partition.  A move run
-- again found the partition not yet taken, sent a cut-over of its own,
-- which waited for the first, and failed with "tuple concurrently
-- updated" (ALTER SUBSCRIPTION of a subscription the first had altered);
-- a wfrouter.cancel_move gave the partition back to the source, and then
-- the waiting cut-over committed: two shards owned the partition
-- (test/t/128_move_crash.pl).  wfrouter.move_partition and
-- wfrouter.cancel_move now end such a cut-over (pg_terminate_backend,
-- waiting until the backend is gone, so that its transaction is rolled
-- back or committed) before they look at who owns the partition, and so
-- does a failed cut-over before the source takes the partition back.

-- ends every backend on shard that runs the cut-over of partition p
-- (wf.move_in_cutover, as wfrouter.move_partition sends it), and waits
-- until each is gone; returns how many
CREATE FUNCTION wfrouter._end_cutover(shard text, p integer)
RETURNS integer
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    ended text;
BEGIN
    ended := wfrouter._remote(shard, pg_catalog.format(
        'SELECT pg_catalog.count(*) || '' '' || pg_catalog.count(*) FILTER (WHERE NOT pg_catalog.pg_terminate_backend(a.pid, 10000)) '
        'FROM pg_catalog.pg_stat_activity a '
        'WHERE a.query LIKE %L AND a.pid <> pg_catalog.pg_backend_pid()',
        'SELECT wf.move\_in\_cutover(' OPERATOR(pg_catalog.||) p OPERATOR(pg_catalog.||) ',%'));
    IF pg_catalog.split_part(ended, ' ', 2) OPERATOR(pg_catalog.<>) '0' THEN
        RAISE EXCEPTION 'the cut-over of partition % on shard "%" did not end in 10 s', p, shard
            USING ERRCODE = 'object_in_use',
                  HINT = 'Look at pg_stat_activity on that shard, and run the move again.';
    END IF;
    RETURN pg_catalog.split_part(ended, ' ', 1)::integer;
END
$$;
-- internal, for the superusers who move partitions: no role but the owner
-- executes it (as every function of the router that is not in the table of
-- docs/scale-out.md, "router privileges"; TAP 120_shards checks it)
REVOKE ALL ON FUNCTION wfrouter._end_cutover(text, integer) FROM PUBLIC;

CREATE OR REPLACE FUNCTION wfrouter.move_partition(p integer, to_shard text, wait interval DEFAULT '30 seconds')
RETURNS integer
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    from_shard text;
    mv record;
    id bigint;
    sub text := 'wf_move_' OPERATOR(pg_catalog.||) p;
    st jsonb;
    prog record;
    verified timestamptz;
    t0 timestamptz;
    deadline timestamptz;
    lag bigint;
    version bigint;
    runs integer;
    s text;
    reached text;
BEGIN
    PERFORM wfrouter._superuser('move_partition');
    IF NOT EXISTS (SELECT 1 FROM wfrouter.partitions m WHERE m.partition OPERATOR(pg_catalog.=) p) THEN
        RAISE EXCEPTION 'partition % is not in the router''s map', p
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF NOT EXISTS (SELECT 1 FROM wfrouter.shards x WHERE x.shard OPERATOR(pg_catalog.=) to_shard) THEN
        RAISE EXCEPTION 'shard "%" does not exist', to_shard
            USING ERRCODE = 'undefined_object',
                  HINT = 'Add it first: wfrouter.add_shard(name, connstr).';
    END IF;
    SELECT * INTO mv FROM wfrouter.moves m WHERE m.finished IS NULL ORDER BY m.move_id LIMIT 1;
    IF FOUND AND mv.partition OPERATOR(pg_catalog.<>) p THEN
        RAISE EXCEPTION 'partition % is being moved from shard "%" to shard "%"', mv.partition, mv.from_shard, mv.to_shard
            USING ERRCODE = 'object_in_use',
                  HINT = 'One move at a time: finish it with wfrouter.move_partition, or cancel it with wfrouter.cancel_move.';
    ELSIF FOUND THEN
        IF mv.to_shard OPERATOR(pg_catalog.<>) to_shard THEN
            RAISE EXCEPTION 'partition % is being moved to shard "%"', p, mv.to_shard
                USING ERRCODE = 'object_in_use',
                      HINT = 'Finish that move with wfrouter.move_partition, or cancel it with wfrouter.cancel_move.';
        END IF;
        from_shard := mv.from_shard;
        id := mv.move_id;
    ELSE
        from_shard := (SELECT m.shard FROM wfrouter.partitions m WHERE m.partition OPERATOR(pg_catalog.=) p);
        IF from_shard OPERATOR(pg_catalog.=) to_shard THEN
            RAISE EXCEPTION 'partition % is on shard "%" already', p, to_shard
                USING ERRCODE = 'object_not_in_prerequisite_state';
        END IF;
        id := wfrouter._loopback(pg_catalog.format(
            'INSERT INTO wfrouter.moves (partition, from_shard, to_shard, phase) VALUES (%s, %L, %L, ''copying'') RETURNING move_id',
            p, from_shard, to_shard))::bigint;
    END IF;

    -- a cut-over of a router session that died may still wait on the
    -- target, and commit later: it ends before the owners are looked at
    PERFORM wfrouter._end_cutover(to_shard, p);
    IF wfrouter._remote_owner(to_shard, p) IS DISTINCT FROM to_shard THEN
        IF wfrouter._remote_owner(from_shard, p) OPERATOR(pg_catalog.=) from_shard THEN
            -- 1. the copy, while the partition stays live on the source
            PERFORM wfrouter._remote(from_shard, pg_catalog.format('SELECT wf.move_out_begin(%s)', p));
            IF wfrouter._remote(to_shard, pg_catalog.format(
                   'SELECT pg_catalog.count(*) FROM pg_catalog.pg_subscription WHERE subname = %L', sub)) OPERATOR(pg_catalog.=) '0' THEN
                PERFORM wfrouter._remote(to_shard, pg_catalog.format('SELECT wf.move_in_begin(%s, %L::jsonb)', p,
                    wfrouter._remote(from_shard, pg_catalog.format('SELECT wf.partition_definitions(%s)', p))));
                PERFORM wfrouter._remote_exec(to_shard, pg_catalog.format(
                    'CREATE SUBSCRIPTION %I CONNECTION %L PUBLICATION %I WITH (copy_data = true, synchronous_commit = on)',
                    sub, (SELECT x.connstr FROM wfrouter.shards x WHERE x.shard OPERATOR(pg_catalog.=) from_shard)
                         OPERATOR(pg_catalog.||) ' user=' OPERATOR(pg_catalog.||) pg_catalog.quote_literal(CURRENT_USER::text), sub));
            END IF;
            LOOP
                SELECT * INTO prog FROM public.dblink(wfrouter._connstr(to_shard),
                    pg_catalog.format('SELECT * FROM wf.move_progress(%s)', p))
                    AS x(tables_total integer, tables_copied integer, rows_copying bigint);
                lag := wfrouter._lag(from_shard, sub);
                PERFORM wfrouter._note(id, 'copying', pg_catalog.jsonb_build_object('tables_total', prog.tables_total,
                    'tables_copied', prog.tables_copied, 'rows_copied', prog.rows_copying, 'lag_bytes', lag));
                EXIT WHEN prog.tables_total OPERATOR(pg_catalog.>) 0 AND prog.tables_copied OPERATOR(pg_catalog.=) prog.tables_total;
                PERFORM pg_catalog.pg_sleep(0.1);
            END LOOP;
            -- statistics of what the copy wrote, for the cut-over's statements
            PERFORM wfrouter._remote_exec(to_shard, 'ANALYZE wf.runs, wf.tasks, wfshard.moved_runs');
            -- every copied run verifies, online; then the runs changed
            -- meanwhile, so that the cut-over verifies few; then the
            -- target comes within 64 kB of the source, so that the
            -- cut-over waits for little
            PERFORM wfrouter._note(id, 'catching up', pg_catalog.jsonb_build_object('lag_bytes', lag));
            verified := wfrouter._remote(to_shard, pg_catalog.format('SELECT wf.verify_partition(%s)', p))::timestamptz;
            verified := wfrouter._remote(to_shard, pg_catalog.format('SELECT wf.verify_partition(%s, %L)', p, verified))::timestamptz;
            -- the target reaches the source's WAL position of now, again
            -- until that takes under 100 ms (a source that writes steadily
            -- never shows a small lag: the position moves on meanwhile)
            deadline := pg_catalog.clock_timestamp() OPERATOR(pg_catalog.+) wait;
            FOR round IN 1..5 LOOP
                reached := wfrouter._remote(from_shard, 'SELECT pg_catalog.pg_current_wal_lsn()::text');
                t0 := pg_catalog.clock_timestamp();
                LOOP
                    EXIT WHEN wfrouter._remote(from_shard, pg_catalog.format(
                        'SELECT COALESCE(pg_catalog.bool_or(s.confirmed_flush_lsn >= %L::pg_lsn), false) FROM pg_catalog.pg_replication_slots s WHERE s.slot_name = %L',
                        reached, sub))::boolean
                        OR pg_catalog.clock_timestamp() OPERATOR(pg_catalog.>) deadline;
                    PERFORM pg_catalog.pg_sleep(0.01);
                END LOOP;
                PERFORM wfrouter._note(id, 'catching up', pg_catalog.jsonb_build_object('lag_bytes', wfrouter._lag(from_shard, sub)));
                EXIT WHEN pg_catalog.clock_timestamp() OPERATOR(pg_catalog.<) (t0 OPERATOR(pg_catalog.+) interval '100 milliseconds')
                       OR pg_catalog.clock_timestamp() OPERATOR(pg_catalog.>) deadline;
            END LOOP;
        END IF;
        -- 2. the cut-over: the partition is refused from the source's lock
        -- to the target's commit
        deadline := pg_catalog.clock_timestamp() OPERATOR(pg_catalog.+) wait;
        LOOP
            PERFORM wfrouter._note(id, 'cutting over');
            t0 := pg_catalog.clock_timestamp();
            st := wfrouter._remote(from_shard, pg_catalog.format('SELECT wf.move_out_cutover(%s, %L, 500)', p, to_shard))::jsonb;
            EXIT WHEN st OPERATOR(pg_catalog.?) 'lsn';
            PERFORM wfrouter._note(id, 'cutting over', pg_catalog.jsonb_build_object('note',
                'waiting for ' OPERATOR(pg_catalog.||) (st OPERATOR(pg_catalog.->>) 'waiting_for')));
            IF pg_catalog.clock_timestamp() OPERATOR(pg_catalog.>) deadline THEN
                RAISE EXCEPTION 'cannot cut partition % over to shard "%": transactions of its tenants stay open on shard "%"',
                    p, to_shard, from_shard
                    USING ERRCODE = 'lock_not_available',
                          DETAIL = 'Waiting for ' OPERATOR(pg_catalog.||) (st OPERATOR(pg_catalog.->>) 'waiting_for') OPERATOR(pg_catalog.||) '.',
                          HINT = 'The partition stays live on the source and keeps streaming to the target: end those transactions and run wfrouter.move_partition again, or wfrouter.cancel_move.';
            END IF;
            -- not refused between tries
            PERFORM pg_catalog.pg_sleep(0.5);
        END LOOP;
        IF verified IS NULL THEN
            verified := '-infinity';
        END IF;
        -- the target reaches the source's WAL position
        LOOP
            EXIT WHEN wfrouter._remote(from_shard, pg_catalog.format(
                'SELECT COALESCE(pg_catalog.bool_or(s.confirmed_flush_lsn >= %L::pg_lsn), false) FROM pg_catalog.pg_replication_slots s WHERE s.slot_name = %L',
                st OPERATOR(pg_catalog.->>) 'lsn', sub))::boolean;
            IF pg_catalog.clock_timestamp() OPERATOR(pg_catalog.>) (t0 OPERATOR(pg_catalog.+) interval '10 seconds') THEN
                PERFORM wfrouter._give_back(from_shard, p, (st OPERATOR(pg_catalog.->>) 'map_version')::bigint);
                PERFORM wfrouter._note(id, 'catching up', pg_catalog.jsonb_build_object('note', 'the target did not catch up in 10 s'));
                RAISE EXCEPTION 'cannot cut partition % over to shard "%": it did not reach the source''s WAL position % in 10 s', p, to_shard, st OPERATOR(pg_catalog.->>) 'lsn'
                    USING ERRCODE = 'object_not_in_prerequisite_state',
                          HINT = 'The partition is live on the source again; look at the subscription on the target (pg_stat_subscription) and move again.';
            END IF;
            PERFORM pg_catalog.pg_sleep(0.002);
        END LOOP;
        BEGIN
            PERFORM wfrouter._remote(to_shard, pg_catalog.format('SELECT wf.move_in_cutover(%s, %L::jsonb, %L)', p, st, verified));
        EXCEPTION WHEN OTHERS THEN
            -- the source takes it back: it has every row; unless the
            -- target took it (its cut-over may have gone on after the
            -- error reached this session: it ends first)
            PERFORM wfrouter._end_cutover(to_shard, p);
            IF wfrouter._remote_owner(to_shard, p) IS DISTINCT FROM to_shard THEN
                PERFORM wfrouter._give_back(from_shard, p, (st OPERATOR(pg_catalog.->>) 'map_version')::bigint);
            END IF;
            PERFORM wfrouter._note(id, 'catching up', pg_catalog.jsonb_build_object('note', 'cut-over failed: ' OPERATOR(pg_catalog.||) SQLERRM));
            RAISE;
        END;
        PERFORM wfrouter._note(id, 'cleaning up', pg_catalog.jsonb_build_object('dark_ms',
            EXTRACT(epoch FROM pg_catalog.clock_timestamp() OPERATOR(pg_catalog.-) t0) OPERATOR(pg_catalog.*) 1000));
    END IF;

    -- 3. the router's map, at once for every session; then what is left
    version := wfrouter._remote(to_shard, 'SELECT s.map_version FROM wfshard.self s')::bigint;
    PERFORM wfrouter._loopback(pg_catalog.format('SELECT wfrouter._apply_map(%L, %s)::text', wfrouter._map_with(p, to_shard), version));
    PERFORM wfrouter._note(id, 'cleaning up');
    PERFORM wfrouter._remote_exec(to_shard, pg_catalog.format('DROP SUBSCRIPTION IF EXISTS %I', sub));
    PERFORM wfrouter._remote_exec(from_shard, pg_catalog.format('DROP PUBLICATION IF EXISTS %I', sub));
    PERFORM wfrouter._remote(from_shard, pg_catalog.format('SELECT wf.drop_partition(%s)::text', p));
    runs := wfrouter._remote(to_shard, pg_catalog.format('SELECT pg_catalog.count(*) FROM wf.runs r '
        'WHERE pg_catalog.hashtext(r.tenant_id) & %s = %s', pg_catalog.cardinality(wfrouter._map()) OPERATOR(pg_catalog.-) 1, p))::integer;
    -- the other shards learn the map (they refuse the partition either way)
    FOR s IN SELECT x.shard FROM wfrouter.shards x
             WHERE x.shard OPERATOR(pg_catalog.<>) ALL (ARRAY[from_shard, to_shard]) ORDER BY x.shard LOOP
        BEGIN
            PERFORM wfrouter._remote(s, pg_catalog.format('SELECT wf.configure_shard(%L, %L, NULL, %s)',
                s, wfrouter._map_with(p, to_shard), version));
        EXCEPTION WHEN OTHERS THEN
            RAISE WARNING 'shard "%" did not take map version %: %', s, version, SQLERRM;
        END;
    END LOOP;
    PERFORM wfrouter._note(id, 'done', pg_catalog.jsonb_build_object('runs', runs));
    RETURN runs;
END
$$;
COMMENT ON FUNCTION wfrouter.move_partition(integer, text, interval) IS
'For superusers: moves partition p''s tenants, with all their runs, to shard to_shard on logical replication (the partition stays live while it is copied; it is refused only during the cut-over), and gives it the partition on the router and every shard; returns the number of runs moved. wait bounds the catch-up and how long the cut-over waits for the tenants'' open transactions. Progress in wfrouter.moves; run again after any failure.';

CREATE OR REPLACE FUNCTION wfrouter.cancel_move(p integer)
RETURNS text
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    mv record;
    sub text := 'wf_move_' OPERATOR(pg_catalog.||) p;
BEGIN
    PERFORM wfrouter._superuser('cancel_move');
    SELECT * INTO mv FROM wfrouter.moves m WHERE m.partition OPERATOR(pg_catalog.=) p AND m.finished IS NULL;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'no move of partition % is under way', p
            USING ERRCODE = 'object_not_in_prerequisite_state';
    END IF;
    -- a cut-over still waiting on the target (its router session died)
    -- ends first: it would take the partition after the source took it back
    PERFORM wfrouter._end_cutover(mv.to_shard, p);
    IF wfrouter._remote_owner(mv.to_shard, p) OPERATOR(pg_catalog.=) mv.to_shard THEN
        RAISE EXCEPTION 'partition % has cut over to shard "%" already', p, mv.to_shard
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  HINT = 'Finish the move with wfrouter.move_partition, then move the partition back.';
    END IF;
    IF wfrouter._remote_owner(mv.from_shard, p) OPERATOR(pg_catalog.<>) mv.from_shard THEN
        PERFORM wfrouter._remote(mv.from_shard, pg_catalog.format('SELECT wf.configure_shard(%L, %L)',
            mv.from_shard, wfrouter._map_with(p, mv.from_shard)));
    END IF;
    -- a CREATE SUBSCRIPTION of a router session that died may still run there
    PERFORM wfrouter._remote(mv.to_shard, pg_catalog.format(
        'SELECT pg_catalog.count(pg_catalog.pg_terminate_backend(a.pid, 10000))::text FROM pg_catalog.pg_stat_activity a '
        'WHERE a.query LIKE %L AND a.pid <> pg_catalog.pg_backend_pid()', 'CREATE SUBSCRIPTION ' OPERATOR(pg_catalog.||) sub OPERATOR(pg_catalog.||) ' %'));
    PERFORM wfrouter._remote_exec(mv.to_shard, pg_catalog.format('DROP SUBSCRIPTION IF EXISTS %I', sub));
    PERFORM wfrouter._remote(mv.to_shard, pg_catalog.format('SELECT wf.drop_partition(%s)::text', p));
    PERFORM wfrouter._remote_exec(mv.from_shard, pg_catalog.format('DROP PUBLICATION IF EXISTS %I', sub));
    PERFORM wfrouter._note(mv.move_id, 'cancelled');
    RETURN pg_catalog.format('partition %s stays on shard "%s"', p, mv.from_shard);
END
$$;
COMMENT ON FUNCTION wfrouter.cancel_move(integer) IS
'For superusers: undoes a move of partition p that has not cut over (the partition stays on its source, the target''s copy and the replication objects go).';

-- ==== end issue 30: a cut-over left waiting on the target ====

-- ==== issue 31: routed eager start ====
-- wf.start_and_claim (wfengine 0.3.0, issue 31): routed by tenant, written
-- by router/gen_api.py from the last line of router/api.txt
CREATE FUNCTION wfrouter."p:start_and_claim"(definition text, input jsonb, worker text, lease interval DEFAULT '00:00:30'::interval, idempotency_key text DEFAULT NULL::text)
RETURNS TABLE(task_id bigint, run_id uuid, step text, attempt integer, fence bigint, idempotency_key text, input jsonb, lease_expires_at timestamp with time zone, queue text, activity text, deliveries integer)
LANGUAGE plproxy AS $$
    CLUSTER 'wfengine';
    RUN ON wfrouter.route();
    TARGET wf.start_and_claim;
$$;

CREATE FUNCTION wfrouter."r:start_and_claim"(text, jsonb, text, interval, text)
RETURNS TABLE("o:task_id" bigint, "o:run_id" uuid, "o:step" text, "o:attempt" integer, "o:fence" bigint, "o:idempotency_key" text, "o:input" jsonb, "o:lease_expires_at" timestamp with time zone, "o:queue" text, "o:activity" text, "o:deliveries" integer)
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    tries integer := 0;
    st text;
    msg text;
    det text;
    hnt text;
BEGIN
    LOOP
        BEGIN
            RETURN QUERY SELECT * FROM wfrouter."p:start_and_claim"($1, $2, $3, $4, $5);
            RETURN;
        EXCEPTION WHEN SQLSTATE '55W01' OR SQLSTATE 'XX000' THEN
            GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT,
                det = PG_EXCEPTION_DETAIL, hnt = PG_EXCEPTION_HINT;
            tries := wfrouter._retry(tries, st, msg, det, hnt);
        END;
    END LOOP;
END
$$;

CREATE FUNCTION wf.start_and_claim(definition text, input jsonb, worker text, lease interval DEFAULT '00:00:30'::interval, idempotency_key text DEFAULT NULL::text)
RETURNS TABLE(task_id bigint, run_id uuid, step text, attempt integer, fence bigint, idempotency_key text, input jsonb, lease_expires_at timestamp with time zone, queue text, activity text, deliveries integer)
LANGUAGE sql
AS $$ SELECT * FROM wfrouter."r:start_and_claim"($1, $2, $3, $4, $5) $$;

GRANT EXECUTE ON FUNCTION wfrouter."p:start_and_claim"(text, jsonb, text, interval, text), wfrouter."r:start_and_claim"(text, jsonb, text, interval, text), wf.start_and_claim(text, jsonb, text, interval, text) TO wfengine_app;

REVOKE ALL ON FUNCTION wfrouter."p:start_and_claim"(text, jsonb, text, interval, text),
    wfrouter."r:start_and_claim"(text, jsonb, text, interval, text),
    wf.start_and_claim(text, jsonb, text, interval, text) FROM PUBLIC;
-- ==== end issue 31: routed eager start ====

-- ==== issue 30: moves of one partition through two routers at once ====
-- Router 0.1.0 kept "one move at a time" in its own wfrouter.moves only,
-- but every router has its own copy of that table (docs/scale-out.md, "One
-- map for every router").  Two routers moving the same partition at once
-- both went ahead: the loser failed somewhere in the middle (the
-- publication, subscription or replication slot of the other existed; or
-- its wfrouter._end_cutover ended the other's cut-over, and both cut-overs
-- ran), left a move under way in its table, and its wfrouter.cancel_move
-- then gave the partition back to the source although another shard owned
-- it (it did so whenever the source's map named another owner): two shards
-- served the tenant (test/t/129_move_race.pl).  Now:
--   - a move holds, for all its length, a session advisory lock (keys
--     2003202930, 0) on its source and its target, taken in name order
--     with pg_try_advisory_lock through dblink connections of its own
--     ("wfrouter_move_lock:<shard>", application_name naming the move);
--     a move or cancellation that finds one taken is refused with 55006,
--     naming the holder, before it writes anything.  The locks go with the
--     router session (its connections close), and with a shard's crash;
--   - before locking, a move checks the partition is where the router's
--     map says: if that shard's map gives it to a shard that owns it (a
--     move another router finished), the router learns that shard's map
--     and moves from there; if it gives it to a shard that has not taken
--     it (another router's move, unfinished), the move is refused (55006);
--   - wfrouter.cancel_move gives the partition back to the source only
--     when the source gave it to this move's target.

-- ends this session's move locks (closes their connections); returns how many
CREATE FUNCTION wfrouter._move_unlock()
RETURNS integer
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    c text;
    n integer := 0;
BEGIN
    FOR c IN SELECT x FROM pg_catalog.unnest(public.dblink_get_connections()) x
             WHERE x OPERATOR(pg_catalog.~~) 'wfrouter\_move\_lock:%' LOOP
        BEGIN
            PERFORM public.dblink_disconnect(c);
        EXCEPTION WHEN OTHERS THEN
            NULL;                   -- its shard went away: so did the lock
        END;
        n := n OPERATOR(pg_catalog.+) 1;
    END LOOP;
    RETURN n;
END
$$;

-- takes the move lock of every shard of shards (in name order, none
-- waited for) for a move or cancellation (what) of partition p; refuses
-- with 55006 naming the holder when one is taken
CREATE FUNCTION wfrouter._move_lock(p integer, shards text[], what text)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    s text;
    conn text;
    holder text;
BEGIN
    PERFORM wfrouter._move_unlock();
    FOR s IN SELECT DISTINCT x FROM pg_catalog.unnest(shards) x ORDER BY x LOOP
        conn := 'wfrouter_move_lock:' OPERATOR(pg_catalog.||) s;
        PERFORM public.dblink_connect(conn, wfrouter._connstr(s) OPERATOR(pg_catalog.||) ' application_name='
            OPERATOR(pg_catalog.||) pg_catalog.quote_literal(pg_catalog.format('wfrouter %s, %s pid %s',
                what, pg_catalog.current_database(), pg_catalog.pg_backend_pid())));
        IF NOT (SELECT x.ok FROM public.dblink(conn, 'SELECT pg_catalog.pg_try_advisory_lock(2003202930, 0)') AS x(ok boolean)) THEN
            SELECT x.v INTO holder FROM public.dblink(conn,
                'SELECT pg_catalog.string_agg(pg_catalog.format(''%s (pid %s)'', a.application_name, a.pid), '', '') '
                'FROM pg_catalog.pg_locks l JOIN pg_catalog.pg_stat_activity a ON a.pid OPERATOR(pg_catalog.=) l.pid '
                'WHERE l.locktype OPERATOR(pg_catalog.=) ''advisory'' AND l.granted AND l.classid OPERATOR(pg_catalog.=) 2003202930 '
                'AND l.objid OPERATOR(pg_catalog.=) 0 AND l.objsubid OPERATOR(pg_catalog.=) 2 '
                'AND l.database OPERATOR(pg_catalog.=) (SELECT d.oid FROM pg_catalog.pg_database d WHERE d.datname OPERATOR(pg_catalog.=) pg_catalog.current_database())')
                AS x(v text);
            PERFORM wfrouter._move_unlock();
            RAISE EXCEPTION 'partition % cannot be moved now: shard "%" is in another move', p, s
                USING ERRCODE = 'object_in_use',
                      DETAIL = 'Held by ' OPERATOR(pg_catalog.||) COALESCE(holder, 'a session that has just ended') OPERATOR(pg_catalog.||) '.',
                      HINT = 'One move at a time per shard, whichever router makes it: wait for that move to end (wfrouter.moves on its router), then see where the partition is.';
        END IF;
    END LOOP;
END
$$;

-- the body of a move, as router 0.2.0's first change wrote it; called by
-- wfrouter.move_partition with the move's locks held
ALTER FUNCTION wfrouter.move_partition(integer, text, interval) RENAME TO _move_partition;
COMMENT ON FUNCTION wfrouter._move_partition(integer, text, interval) IS
'Internal: the move of partition p to to_shard (copy, cut-over, clean-up), run by wfrouter.move_partition with the move locks of its source and target held.';

CREATE FUNCTION wfrouter.move_partition(p integer, to_shard text, wait interval DEFAULT '30 seconds')
RETURNS integer
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    from_shard text;
    o text;
    runs integer;
BEGIN
    PERFORM wfrouter._superuser('move_partition');
    -- (a partition or a shard that does not exist: the body refuses it)
    IF EXISTS (SELECT 1 FROM wfrouter.partitions m WHERE m.partition OPERATOR(pg_catalog.=) p)
       AND EXISTS (SELECT 1 FROM wfrouter.shards x WHERE x.shard OPERATOR(pg_catalog.=) to_shard) THEN
        FOR i IN 1..3 LOOP
            from_shard := COALESCE(
                (SELECT m.from_shard FROM wfrouter.moves m
                 WHERE m.partition OPERATOR(pg_catalog.=) p AND m.finished IS NULL),
                (SELECT m.shard FROM wfrouter.partitions m WHERE m.partition OPERATOR(pg_catalog.=) p));
            PERFORM wfrouter._move_lock(p, ARRAY[from_shard, to_shard],
                pg_catalog.format('move %s %s>%s', p, from_shard, to_shard));
            -- a move of this router under way: it goes on from where the shards are
            EXIT WHEN EXISTS (SELECT 1 FROM wfrouter.moves m
                              WHERE m.partition OPERATOR(pg_catalog.=) p AND m.finished IS NULL);
            o := wfrouter._remote_owner(from_shard, p);
            EXIT WHEN o OPERATOR(pg_catalog.=) from_shard;
            PERFORM wfrouter._move_unlock();
            IF o IS NULL OR wfrouter._remote_owner(o, p) IS DISTINCT FROM o THEN
                RAISE EXCEPTION 'partition % cannot be moved now: shard "%" gave it to shard "%", which has not taken it', p, from_shard, o
                    USING ERRCODE = 'object_in_use',
                          DETAIL = 'A move of the partition, made through another router, has not finished.',
                          HINT = 'Finish it with wfrouter.move_partition, or cancel it with wfrouter.cancel_move, on the router that made it (wfrouter.moves there).';
            END IF;
            -- another router moved it: this router learns the map of the
            -- shard that owns it (a map that gives every partition to a
            -- shard that took it), and moves from there
            PERFORM wfrouter._loopback(pg_catalog.format('SELECT wfrouter._learn_map(%L)::text', o));
            IF i OPERATOR(pg_catalog.=) 3 THEN
                RAISE EXCEPTION 'partition % cannot be moved now: it is on shard "%", not on shard "%" as this router''s map says', p, o, from_shard
                    USING ERRCODE = 'object_in_use',
                          HINT = 'Look at wfrouter.shard_map() on this router and wfshard.self on the shards.';
            END IF;
        END LOOP;
    END IF;
    BEGIN
        runs := wfrouter._move_partition(p, to_shard, wait);
    EXCEPTION WHEN OTHERS OR query_canceled THEN
        PERFORM wfrouter._move_unlock();
        RAISE;
    END;
    PERFORM wfrouter._move_unlock();
    RETURN runs;
END
$$;
COMMENT ON FUNCTION wfrouter.move_partition(integer, text, interval) IS
'For superusers: moves partition p''s tenants, with all their runs, to shard to_shard on logical replication (the partition stays live while it is copied; it is refused only during the cut-over), and gives it the partition on the router and every shard; returns the number of runs moved. wait bounds the catch-up and how long the cut-over waits for the tenants'' open transactions. One move at a time per shard, whatever router makes it (a move of the source or target under way: 55006). Progress in wfrouter.moves; run again after any failure.';

CREATE OR REPLACE FUNCTION wfrouter.cancel_move(p integer)
RETURNS text
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    mv record;
    sub text := 'wf_move_' OPERATOR(pg_catalog.||) p;
    o text;
BEGIN
    PERFORM wfrouter._superuser('cancel_move');
    SELECT * INTO mv FROM wfrouter.moves m WHERE m.partition OPERATOR(pg_catalog.=) p AND m.finished IS NULL;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'no move of partition % is under way', p
            USING ERRCODE = 'object_not_in_prerequisite_state';
    END IF;
    -- no move of its source or target runs meanwhile, through any router
    PERFORM wfrouter._move_lock(p, ARRAY[mv.from_shard, mv.to_shard], pg_catalog.format('cancel %s %s>%s', p, mv.from_shard, mv.to_shard));
    BEGIN
        -- a cut-over still waiting on the target (its router session died)
        -- ends first: it would take the partition after the source took it back
        PERFORM wfrouter._end_cutover(mv.to_shard, p);
        IF wfrouter._remote_owner(mv.to_shard, p) OPERATOR(pg_catalog.=) mv.to_shard THEN
            RAISE EXCEPTION 'partition % has cut over to shard "%" already', p, mv.to_shard
                USING ERRCODE = 'object_not_in_prerequisite_state',
                      HINT = 'Finish the move with wfrouter.move_partition, then move the partition back.';
        END IF;
        -- the source takes the partition back only if it gave it to this
        -- move's target (a map that names a third shard is another move's)
        o := wfrouter._remote_owner(mv.from_shard, p);
        IF o OPERATOR(pg_catalog.=) mv.to_shard THEN
            PERFORM wfrouter._remote(mv.from_shard, pg_catalog.format('SELECT wf.configure_shard(%L, %L)',
                mv.from_shard, wfrouter._map_with(p, mv.from_shard)));
        END IF;
        -- a CREATE SUBSCRIPTION of a router session that died may still run there
        PERFORM wfrouter._remote(mv.to_shard, pg_catalog.format(
            'SELECT pg_catalog.count(pg_catalog.pg_terminate_backend(a.pid, 10000))::text FROM pg_catalog.pg_stat_activity a '
            'WHERE a.query LIKE %L AND a.pid <> pg_catalog.pg_backend_pid()', 'CREATE SUBSCRIPTION ' OPERATOR(pg_catalog.||) sub OPERATOR(pg_catalog.||) ' %'));
        PERFORM wfrouter._remote_exec(mv.to_shard, pg_catalog.format('DROP SUBSCRIPTION IF EXISTS %I', sub));
        PERFORM wfrouter._remote(mv.to_shard, pg_catalog.format('SELECT wf.drop_partition(%s)::text', p));
        PERFORM wfrouter._remote_exec(mv.from_shard, pg_catalog.format('DROP PUBLICATION IF EXISTS %I', sub));
        PERFORM wfrouter._note(mv.move_id, 'cancelled');
    EXCEPTION WHEN OTHERS OR query_canceled THEN
        PERFORM wfrouter._move_unlock();
        RAISE;
    END;
    PERFORM wfrouter._move_unlock();
    IF o OPERATOR(pg_catalog.<>) mv.from_shard AND o OPERATOR(pg_catalog.<>) mv.to_shard THEN
        RETURN pg_catalog.format('partition %s is on shard "%s"', p, o);
    END IF;
    RETURN pg_catalog.format('partition %s stays on shard "%s"', p, mv.from_shard);
END
$$;

REVOKE ALL ON FUNCTION wfrouter._move_unlock(), wfrouter._move_lock(integer, text[], text),
    wfrouter.move_partition(integer, text, interval) FROM PUBLIC;
-- ==== end issue 30: moves of one partition through two routers at once ====
