#!/usr/bin/env python3
"""bench/flat_history_copy.py -- bulk history for bench/flat_history.sh.

Copies the finished runs of one definition that the engine itself ran to
completion (the template: their wf.runs, wf.events and wf.tasks rows) into
COPIES new finished runs, each with what the engine would have written for
it: a fresh UUIDv7 run id made from its (shifted) start time, fresh task
ids and fences from blocks the caller reserved in wf.task_id_seq and
wf.fence_seq, every timestamp moved back by one offset per copy (copy k
starts GAP_US after copy k-1, the last one before the template), the
run id, task ids, fences and times inside the event payloads and the
tasks' idempotency keys rewritten, and the hash chain of its history
computed again exactly as src/crypto.c WfHashEvent does (unkeyed
BLAKE2b-256 of the previous hash, the run id, tenant, seq, type, step,
attempt, actor, created_at and the payload's canonical jsonb text), so
that wf.verify_run holds on every copy.  Before writing anything it
recomputes the template's own chains and stops if one differs from what
the engine stored.

The rows go to the server through three COPY ... FROM STDIN (one psql
each, so the three tables load in parallel), in the tables' own column
order, with every index in place: the indexes grow by inserts as they do
under the engine, not by a bulk build.

FLAT_COPY_JOBS (default 2) processes write a slice of the copies each.

Usage: flat_history_copy.py DB DEFINITION COPIES TASK_BASE TASK_STRIDE
                            FENCE_BASE FENCE_STRIDE GAP_US
A measurement tool, never a test; the server is the one PGHOST/PGPORT name.
"""

import calendar
import hashlib
import os
import re
import struct
import subprocess
import sys
import time
import uuid

PG_EPOCH_UNIX_US = 946684800 * 1000000  # 2000-01-01 in Unix microseconds

RUN_COLS = ("run_id tenant_id definition_id definition_name definition_version status "
            "current_step current_attempt current_task step_generation wait_generation seq "
            "context output idempotency_key last_hash created_at updated_at finished_at "
            "parent_run_id legal_hold input_digest input").split()
RUN_TS = {"created_at", "updated_at", "finished_at"}
EVENT_COLS = "run_id seq tenant_id type step attempt payload actor created_at hash".split()
EVENT_TS = {"created_at"}
TASK_COLS = ("task_id tenant_id run_id step visit attempt queue activity status available_at "
             "lease_expires_at fence deliveries idempotency_key worker output error created_at "
             "claimed_at finished_at schedule_to_start start_to_close heartbeat_timeout lease "
             "timeout_at last_heartbeat_at heartbeat_details lease_expirations deadline_at "
             "priority input").split()
TASK_TS = {"available_at", "lease_expires_at", "created_at", "claimed_at", "finished_at",
           "timeout_at", "last_heartbeat_at", "deadline_at"}
NULL = "\\N"


def psql_args(db):
    return ["psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", "-d", db]


def export(db, table, cols, ts_cols, where):
    """Returns the rows of table (COPY text, split), timestamps as
    microseconds since 2000-01-01 (PostgreSQL's TimestampTz)."""
    sel = []
    for c in cols:
        if c in ts_cols:
            sel.append("((extract(epoch FROM %s) * 1000000)::bigint - %d)" % (c, PG_EPOCH_UNIX_US))
        else:
            sel.append(c)
    q = "COPY (SELECT %s FROM %s WHERE %s) TO STDOUT" % (", ".join(sel), table, where)
    out = subprocess.run(psql_args(db) + ["-c", q], check=True, capture_output=True, text=True).stdout
    rows = [line.split("\t") for line in out.split("\n") if line]
    for r in rows:
        if len(r) != len(cols):
            sys.exit("flat_history_copy: %s: a row of %d fields, %d expected" % (table, len(r), len(cols)))
    return rows


def pack64(v):
    return struct.pack(">q", v)


def hcstr(s):
    """hash_cstring of src/crypto.c: presence byte, then length and bytes."""
    if s is None:
        return b"\x00"
    b = s.encode()
    return b"\x01" + pack64(len(b)) + b


def unnull(v):
    return None if v == NULL else v


_sec_cache = {}


def _secs(s):
    v = _sec_cache.get(s)
    if v is None:
        t = time.gmtime(s + 946684800)
        v = (time.strftime("%Y-%m-%d %H:%M:%S", t), time.strftime("%Y-%m-%dT%H:%M:%S", t))
        _sec_cache[s] = v
    return v


def ts_copy(us):
    """A TimestampTz as COPY input (UTC)."""
    s, f = divmod(us, 1000000)
    return "%s.%06d+00" % (_secs(s)[0], f)


def ts_json(us):
    """A timestamptz as to_jsonb writes it with TimeZone UTC: ISO 8601 with
    'T', the fraction without trailing zeros, '+00:00'."""
    s, f = divmod(us, 1000000)
    base = _secs(s)[1]
    if f:
        base += ("." + "%06d" % f).rstrip("0")
    return base + "+00:00"


def parse_ts_json(text):
    """The inverse of ts_json, for the template's payload times."""
    m = re.fullmatch(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d{1,6}))?\+00:00", text)
    if not m:
        sys.exit("flat_history_copy: unexpected time in a payload: %r (TimeZone must be UTC)" % text)
    t = time.strptime(m.group(1), "%Y-%m-%dT%H:%M:%S")
    us = (calendar.timegm(t) - 946684800) * 1000000
    if m.group(2):
        us += int(m.group(2).ljust(6, "0"))
    if ts_json(us) != text:
        sys.exit("flat_history_copy: payload time %r does not round-trip" % text)
    return us


class Template:
    """One finished run of the template, prepared for copying."""

    def __init__(self, run, events, tasks):
        self.run = run
        self.rid = run[0]
        self.created = int(run[RUN_COLS.index("created_at")])
        self.finished = int(run[RUN_COLS.index("finished_at")])
        # task ids and fences: of the attempts' rows and of the events (a
        # completed attempt has no row since 0.3.0; its history names it)
        tids = {int(t[0]) for t in tasks}
        fences = {int(t[TASK_COLS.index("fence")]) for t in tasks if t[TASK_COLS.index("fence")] != NULL}
        for e in events:
            p = dict(zip(EVENT_COLS, e))["payload"]
            tids.update(int(x) for x in re.findall(r'"task_id": (\d+)', p))
            fences.update(int(x) for x in re.findall(r'"fence": (\d+)', p))
        self.task_rank = {t: i for i, t in enumerate(sorted(tids))}
        self.fence_rank = {f: i for i, f in enumerate(sorted(fences))}
        self.tasks = tasks
        self.events = events
        # each event: (static part of the hash input, line pieces, payload parts)
        self.ev = []
        for e in events:
            d = dict(zip(EVENT_COLS, e))
            step, attempt = unnull(d["step"]), unnull(d["attempt"])
            static = (hcstr(d["tenant_id"]) + pack64(int(d["seq"])) + hcstr(d["type"]) + hcstr(step)
                      + pack64(int(attempt) if attempt is not None else 0) + hcstr(d["actor"]))
            self.ev.append((static, d, self.payload_parts(d["payload"])))

    def payload_parts(self, p):
        """Splits a payload's canonical text into literal pieces and
        placeholders: ('R',) the run id, ('T', rank) a task id, ('F', rank)
        a fence, ('A', us) a time."""
        if "\\" in p:
            sys.exit("flat_history_copy: a payload with an escape, not handled: %s" % p)
        parts = []
        pos = 0
        pat = re.compile(r'(%s)|"task_id": (\d+)|"fence": (\d+)|"available_at": "([^"]*)"' % re.escape(self.rid))
        for m in pat.finditer(p):
            parts.append(p[pos:m.start()])
            if m.group(1):
                parts.append(("R",))
            elif m.group(2):
                parts.append('"task_id": ')
                parts.append(("T", self.task_rank[int(m.group(2))]))
            elif m.group(3):
                parts.append('"fence": ')
                parts.append(("F", self.fence_rank[int(m.group(3))]))
            else:
                parts.append('"available_at": "')
                parts.append(("A", parse_ts_json(m.group(4))))
                parts.append('"')
            pos = m.end()
        parts.append(p[pos:])
        return parts


def render(parts, rid, tbase, fbase, delta):
    out = []
    for x in parts:
        if isinstance(x, str):
            out.append(x)
        elif x[0] == "R":
            out.append(rid)
        elif x[0] == "T":
            out.append(str(tbase + x[1]))
        elif x[0] == "F":
            out.append(str(fbase + x[1]))
        else:
            out.append(ts_json(x[1] + delta))
    return "".join(out)


def chain(tpl, rid_str, rid_bytes, tbase, fbase, delta):
    """Returns the event lines of one copy and its last hash; with the
    template's own ids and no shift it recomputes the template's chain."""
    prev = b"\x00" * 32
    lines = []
    for static, d, parts in tpl.ev:
        payload = render(parts, rid_str, tbase, fbase, delta)
        created = int(d["created_at"]) + delta
        pb = payload.encode()
        h = hashlib.blake2b(prev + rid_bytes + static + pack64(created) + pack64(len(pb)) + pb,
                            digest_size=32).digest()
        lines.append("\t".join((rid_str, d["seq"], d["tenant_id"], d["type"], d["step"], d["attempt"],
                                payload, d["actor"], ts_copy(created), "\\\\x" + h.hex())))
        prev = h
    return lines, prev


def new_run_id(created_us):
    """A UUID version 7 as src/crypto.c WfNewRunId makes it."""
    ms = (created_us + PG_EPOCH_UNIX_US) // 1000
    b = bytearray(ms.to_bytes(6, "big") + os.urandom(10))
    b[6] = (b[6] & 0x0F) | 0x70
    b[8] = (b[8] & 0x3F) | 0x80
    return uuid.UUID(bytes=bytes(b))


def main():
    if len(sys.argv) != 9:
        sys.exit(__doc__)
    db, definition = sys.argv[1], sys.argv[2]
    copies, tbase0, tstride, fbase0, fstride, gap = map(int, sys.argv[3:])
    where = "run_id IN (SELECT run_id FROM wf.runs WHERE definition_name = '%s' AND status = 'completed')" % definition
    runs = export(db, "wf.runs", RUN_COLS, RUN_TS, where)
    events = export(db, "wf.events", EVENT_COLS, EVENT_TS, where + " ORDER BY run_id, seq")
    tasks = export(db, "wf.tasks", TASK_COLS, TASK_TS, where + " ORDER BY task_id")
    if not runs:
        sys.exit("flat_history_copy: no finished run of %s to copy" % definition)
    ev_by, tk_by = {}, {}
    for e in events:
        ev_by.setdefault(e[0], []).append(e)
    for t in tasks:
        tk_by.setdefault(t[2], []).append(t)
    tpls = []
    for r in sorted(runs, key=lambda r: r[0]):
        d = dict(zip(RUN_COLS, r))
        if d["idempotency_key"] != NULL or d["parent_run_id"] != NULL or d["input_digest"] != NULL:
            sys.exit("flat_history_copy: template run %s has a key, parent or digest: not handled" % d["run_id"])
        if "\\" in d["context"] or "\\" in d["input"]:
            sys.exit("flat_history_copy: template run %s has an escape in its context: not handled" % d["run_id"])
        tpl = Template(r, ev_by[d["run_id"]], tk_by.get(d["run_id"], []))
        if len(tpl.task_rank) > tstride or len(tpl.fence_rank) > fstride:
            sys.exit("flat_history_copy: template run %s has more tasks or fences than the stride" % d["run_id"])
        # the template's own chain, recomputed, must be what the engine stored
        lines, last = chain_identity(tpl)
        stored = [e[9].replace("\\\\x", "") for e in tpl.events]
        got = [ln.rsplit("\t", 1)[1].replace("\\\\x", "") for ln in lines]
        if stored != got or d["last_hash"].replace("\\\\x", "") != last.hex():
            sys.exit("flat_history_copy: recomputing the hash chain of template run %s gave other hashes; "
                     "the copy would not verify" % d["run_id"])
        tpls.append(tpl)
    tmpl_start = min(t.created for t in tpls)

    jobs = max(1, int(os.environ.get("FLAT_COPY_JOBS", "2")))
    t0 = time.time()
    children = []
    for j in range(jobs):
        lo, hi = copies * j // jobs, copies * (j + 1) // jobs
        pid = os.fork()
        if pid == 0:
            try:
                write_slice(db, tpls, lo, hi, copies, tmpl_start, tbase0, tstride, fbase0, fstride, gap, t0)
            except BaseException as e:  # noqa: B036 -- the child must not return into main()
                print("flat_history_copy: slice %d..%d: %s" % (lo, hi, e), file=sys.stderr, flush=True)
                os._exit(1)
            os._exit(0)
        children.append(pid)
    rc = 0
    for pid in children:
        rc |= os.waitpid(pid, 0)[1]
    if rc:
        sys.exit("flat_history_copy: a COPY failed")


def write_slice(db, tpls, lo, hi, copies, tmpl_start, tbase0, tstride, fbase0, fstride, gap, t0):
    """Writes copies lo .. hi-1 through three COPY streams of its own."""
    procs = {}
    for name, cols in (("runs", RUN_COLS), ("events", EVENT_COLS), ("tasks", TASK_COLS)):
        cmd = psql_args(db) + ["-c", "COPY wf.%s (%s) FROM STDIN" % (name, ", ".join(cols))]
        if os.environ.get("FLAT_COPY_TO"):  # rows to files instead, to time the COPY apart
            cmd = ["sh", "-c", 'cat > "$0"', os.path.join(os.environ["FLAT_COPY_TO"], "%s.%d.copy" % (name, lo))]
        procs[name] = subprocess.Popen(cmd, stdin=subprocess.PIPE, text=True, bufsize=1 << 20)
    ci = {c: i for i, c in enumerate(TASK_COLS)}
    ri = {c: i for i, c in enumerate(RUN_COLS)}
    ts_idx = [ci[c] for c in TASK_COLS if c in TASK_TS]
    buf = {"runs": [], "events": [], "tasks": []}

    def flush():
        for name, lines in buf.items():
            if lines:
                procs[name].stdin.write("\n".join(lines) + "\n")
                lines.clear()

    for k in range(lo, hi):
        tpl = tpls[k % len(tpls)]
        # copy k finishes (copies - k) * gap before the template's first start
        delta = tmpl_start - 1000000 - (copies - k) * gap - tpl.finished
        start = tpl.created + delta
        rid = new_run_id(start)
        rid_s, rid_b = str(rid), rid.bytes
        tbase = tbase0 + k * tstride
        fbase = fbase0 + k * fstride
        lines, last = chain(tpl, rid_s, rid_b, tbase, fbase, delta)
        buf["events"].extend(lines)
        for t in tpl.tasks:
            row = list(t)
            row[0] = str(tbase + tpl.task_rank[int(t[0])])
            row[2] = rid_s
            row[ci["fence"]] = str(fbase + tpl.fence_rank[int(t[ci["fence"]])])
            row[ci["idempotency_key"]] = t[ci["idempotency_key"]].replace(tpl.rid, rid_s)
            for i in ts_idx:
                v = t[i]
                if v != NULL:
                    row[i] = ts_copy(int(v) + delta)
            buf["tasks"].append("\t".join(row))
        row = list(tpl.run)
        row[0] = rid_s
        if row[ri["current_task"]] != NULL:
            row[ri["current_task"]] = str(tbase + tpl.task_rank[int(row[ri["current_task"]])])
        row[ri["last_hash"]] = "\\\\x" + last.hex()
        for c in RUN_TS:
            v = tpl.run[ri[c]]
            if v != NULL:
                row[ri[c]] = ts_copy(int(v) + delta)
        buf["runs"].append("\t".join(row))
        if (k + 1 - lo) % 500 == 0:
            flush()
        if (k + 1 - lo) % 50000 == 0:
            print("   flat_history_copy: %d of copies %d..%d written (%.0f s)" % (k + 1 - lo, lo, hi, time.time() - t0),
                  flush=True)
    flush()
    rc = 0
    for name, p in procs.items():
        p.stdin.close()
        rc |= p.wait()
    if rc:
        raise RuntimeError("a COPY failed")


def chain_identity(tpl):
    """The template's chain with its own run id, ids and times."""
    tasks_by_rank = {r: t for t, r in tpl.task_rank.items()}
    fences_by_rank = {r: f for f, r in tpl.fence_rank.items()}
    prev = b"\x00" * 32
    lines = []
    rid_b = uuid.UUID(tpl.rid).bytes
    for static, d, parts in tpl.ev:
        out = []
        for x in parts:
            if isinstance(x, str):
                out.append(x)
            elif x[0] == "R":
                out.append(tpl.rid)
            elif x[0] == "T":
                out.append(str(tasks_by_rank[x[1]]))
            elif x[0] == "F":
                out.append(str(fences_by_rank[x[1]]))
            else:
                out.append(ts_json(x[1]))
        payload = "".join(out)
        pb = payload.encode()
        h = hashlib.blake2b(prev + rid_b + static + pack64(int(d["created_at"])) + pack64(len(pb)) + pb,
                            digest_size=32).digest()
        lines.append(d["run_id"] + "\t" + "\\\\x" + h.hex())
        prev = h
    return lines, prev


if __name__ == "__main__":
    main()
