"""corpus.py -- boundary definitions made from the server's own rules.

check.py publishes each case (in a rolled-back subtransaction) and runs it
through docs/definition.schema.json; both must give the verdict the case
wants.  The limits are read from the C sources (src/duration.c's table of
units, the #defines of the validator) and, for wfengine.max_steps, from
the server, so that a changed limit changes the corpus with it:

  * every duration field, in every unit src/duration.c accepts, at the
    366-day limit and one past it, as a number of seconds too, and the
    forms the parser does and does not take;
  * step counts around wfengine.max_steps, at the top and in a branch;
  * approvers: repeated, at their count and length limits;
  * every name and bounded field at its limit and one past it.

A case the schema cannot decide as the server does carries the reason
(EXCEPT, below), as publish_only/REASONS.txt does for files; check.py then
asserts that the difference is still there, in the direction given, so
that a fixed one is taken off the list.

duration_pattern() is the "pattern" of a duration string in the schema,
made from the same table; check.py asserts that the schema holds it.
"""
import json
import os
import re

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SRC = os.path.join(ROOT, "src")

# PostgreSQL's constants the sources use (datatype/timestamp.h)
PG_CONSTANTS = {
    "USECS_PER_SEC": 1000000,
    "USECS_PER_MINUTE": 60000000,
    "USECS_PER_HOUR": 3600000000,
    "USECS_PER_DAY": 86400000000,
}

# the definition names the corpus's subworkflow steps start (check.py
# publishes them first, so that their absence is not the verdict)
SUBDEFINITIONS = []


def c_define(name):
    """The integer value of #define name in src/*.c or src/*.h."""
    for f in sorted(os.listdir(SRC)):
        if not f.endswith((".c", ".h")):
            continue
        m = re.search(r"^#define\s+%s\s+(.+?)\s*(/\*.*)?$" % name,
                      open(os.path.join(SRC, f)).read(), re.M)
        if m:
            expr = re.sub(r"\(int64\)", "", m.group(1))
            for k, v in PG_CONSTANTS.items():
                expr = expr.replace(k, str(v))
            if not re.fullmatch(r"[0-9 ()*+-]+", expr):
                raise ValueError("cannot evaluate #define %s %s" % (name, m.group(1)))
            return int(eval(expr))
    raise KeyError("no #define %s in src/" % name)


def duration_units():
    """[(suffix, microseconds)] of src/duration.c's table, in its order."""
    text = open(os.path.join(SRC, "duration.c")).read()
    table = re.search(r"units\[\]\s*=\s*\{(.*?)\};", text, re.S).group(1)
    units = []
    for suffix, usecs in re.findall(r'\{\s*"([a-z]+)"\s*,\s*([A-Z_0-9]+)\s*\}', table):
        units.append((suffix, int(usecs) if usecs.isdigit() else PG_CONSTANTS[usecs]))
    if not units:
        raise ValueError("no units found in src/duration.c")
    return units


MAX_DURATION = c_define("WF_MAX_DURATION")      # microseconds
STEP_NAME_LEN = c_define("WF_MAX_STEP_NAME_LEN")
NAME_LEN = c_define("WF_MAX_NAME_LEN")
ACTIVITY_LEN = c_define("WF_ARG_MAX_NAME")
APPROVER_LEN = c_define("WF_ARG_MAX_KEY")
MAX_APPROVERS = c_define("WF_MAX_APPROVERS")
MAX_CHOICES = c_define("WF_MAX_SUCCESSORS") - 2
MAX_CORRELATION = c_define("WF_MAX_CORRELATION_KEYS")
MAX_PRIORITY = c_define("WF_MAX_PRIORITY")
MAX_ATTEMPTS = c_define("WF_MAX_ATTEMPTS_LIMIT")


def below(n):
    """A regex of the decimal integers 0 .. n-1 (n >= 1), no leading zeros."""
    s = str(n - 1)
    alts = []
    # fewer digits than n-1
    if len(s) > 1:
        alts.append("[0-9]")
        if len(s) > 2:
            alts.append("[1-9][0-9]{1,%d}" % (len(s) - 2) if len(s) > 3 else
                        "[1-9][0-9]")
    # as many digits: the same prefix, a smaller digit (or at the last
    # place, one not larger), anything after
    for i, d in enumerate(s):
        last = i == len(s) - 1
        lo = 1 if i == 0 and len(s) > 1 else 0
        top = int(d) if last else int(d) - 1
        if top < lo:
            continue
        digit = "[%d-%d]" % (lo, top) if top > lo else str(lo)
        rest = len(s) - i - 1
        alts.append(s[:i] + digit + ("[0-9]{%d}" % rest if rest > 1 else
                                     "[0-9]" if rest == 1 else ""))
    return "(?:%s)" % "|".join(alts)


def duration_pattern():
    """The pattern of a duration string: parts <number><unit> as
    src/duration.c reads them, each at most the limit in its unit, not all
    zero."""
    parts = []
    for suffix, usecs in duration_units():
        limit = MAX_DURATION // usecs
        assert limit * usecs == MAX_DURATION, "the limit is not whole %s" % suffix
        parts.append("(?:0*%s(?:\\.[0-9]*)?|0*%d(?:\\.0*)?|\\.[0-9]+)%s"
                     % (below(limit), limit, suffix))
    return "^(?=.*[1-9])(?:%s)+$" % "|".join(parts)


# --------------------------------------------------------------------------
# the corpus

# Why the schema cannot decide a case as the server does.  A case that
# names one of these must still differ, in the direction its "want" says:
# the server's verdict is "want", the schema's the other one.
EXCEPT = {
    "sum": "a duration of several parts is limited by its sum; the pattern limits each part "
           "(a sum is not a regular language)",
    "submicro": "the server rounds each part to the microsecond, as PostgreSQL's interval "
                "input does; the pattern does not round",
    "bytes": "the server counts bytes (UTF-8); JSON Schema's maxLength counts characters",
    "branches": "wfengine.max_steps counts the steps of a definition and of all its "
                "branches together; the schema bounds each list of steps",
    "size": "wfengine.max_definition_size bounds the definition's size in bytes, "
            "which JSON Schema cannot measure",
    "newline": "python-jsonschema matches patterns with Python's re, whose $ matches "
               "before a final newline too; ECMA-262, which JSON Schema names, does not",
}


class Case:
    def __init__(self, name, spec, want, exc=None):
        self.name = name
        self.spec = spec
        self.want = want            # the server accepts it
        self.exc = exc              # key of EXCEPT, or None: the schema agrees

    @property
    def text(self):
        return json.dumps(self.spec)


def task(name="a", **kw):
    return dict({"name": name, "queue": "q"}, **kw)


def one(step, **top):
    return dict({"steps": [step]}, **top)


def approval(**kw):
    return dict({"name": "a", "type": "approval", "notify_queue": "q",
                 "approvers": ["ann"]}, **kw)


def duration_fields():
    """(field, function of a duration giving a definition) of every
    duration a definition has."""
    f = []
    f.append(("timeout (run)", lambda d: one(task(), timeout=d)))
    f.append(("sleep.duration", lambda d: one({"name": "a", "type": "sleep", "duration": d})))
    for t in ("schedule_to_start", "start_to_close", "heartbeat", "total"):
        f.append(("task timeout.%s" % t, lambda d, t=t: one(task(timeout={t: d}))))
    f.append(("task retry.initial_interval",
              lambda d: one(task(retry={"initial_interval": d, "max_interval": d}))))
    f.append(("task retry.max_interval", lambda d: one(task(retry={"max_interval": d}))))
    for t in ("schedule_to_start", "start_to_close", "heartbeat"):
        f.append(("compensate timeout.%s" % t,
                  lambda d, t=t: one(task(compensate={"activity": "undo", "timeout": {t: d}}))))
    f.append(("compensate retry.max_interval",
              lambda d: one(task(compensate={"activity": "undo", "retry": {"max_interval": d}}))))
    f.append(("approval expires", lambda d: one(approval(expires=d))))
    f.append(("approval timeout.start_to_close",
              lambda d: one(approval(timeout={"start_to_close": d}))))
    f.append(("approval retry.initial_interval",
              lambda d: one(approval(retry={"initial_interval": d, "max_interval": d}))))
    f.append(("wait_event timeout.total",
              lambda d: one({"name": "a", "type": "wait_event", "event": "e",
                             "timeout": {"total": d}})))
    return f


def duration_cases():
    cases = []
    units = duration_units()
    # every field, every unit: at the limit, and one past it
    for field, make in duration_fields():
        for suffix, usecs in units:
            limit = MAX_DURATION // usecs
            cases.append(Case("%s %d%s (the limit)" % (field, limit, suffix),
                              make("%d%s" % (limit, suffix)), True))
            cases.append(Case("%s %d%s (one past)" % (field, limit + 1, suffix),
                              make("%d%s" % (limit + 1, suffix)), False))
        secs = MAX_DURATION // 1000000
        cases.append(Case("%s %d (seconds, the limit)" % (field, secs), make(secs), True))
        cases.append(Case("%s %d (seconds, one past)" % (field, secs + 1), make(secs + 1), False))

    def sleep(d):
        return one({"name": "a", "type": "sleep", "duration": d})
    days = MAX_DURATION // 86400000000
    forms = [
        # what the parser takes
        ("1h30m", True), ("250ms", True), (".5s", True), ("5.s", True), ("0001s", True),
        ("1.5h", True), ("1h1h", True), ("0.5ms", True), ("%dd0s" % days, True),
        ("%d.000d" % days, True), ("%d.5d" % (days - 1), True), ("000%dd" % days, True),
        ("1d1h1m1s1ms", True),
        # at the limit in a sum of parts
        ("%dd%dh" % (days - 1, 24), True),
        # what it does not take
        ("0s", False), ("0.0s", False), ("0ms0s", False), ("", False), (".", False),
        (".s", False), ("1", False), ("s", False), ("1.5.5s", False), ("+1s", False),
        ("-1s", False), ("1e3s", False), ("1H", False), ("1S", False), ("1 s", False),
        (" 1s", False), ("1s ", False), ("1h 30m", False), ("1h,30m", False),
        ("1us", False), ("1w", False), ("52w", False), ("1y", False), ("1mo", False),
        ("%d days" % days, False), ("%d days" % (days + 1), False), ("1 day", False),
        ("PT1H", False), ("01:00:00", False), ("1hour", False), ("1sec", False),
        ("1min", False), ("%d.5d" % days, False), ("%d.0000001d" % days, False),
        ("99999999999999999999999s", False),
        (0, False), (-1, False), (0.000001, True), (0.0000005, False), (0.5, True),
        (True, False), (None, False), (["1s"], False), ({"s": 1}, False),
    ]
    for d, want in forms:
        cases.append(Case("sleep.duration %s" % json.dumps(d), sleep(d), want))
    # what the schema cannot decide
    cases += [
        Case("sleep.duration \"%dd1s\" (sum past the limit)" % days, sleep("%dd1s" % days), False, "sum"),
        Case("sleep.duration \"%dh1m\" (sum past the limit)" % (days * 24),
             sleep("%dh1m" % (days * 24)), False, "sum"),
        Case("sleep.duration \"200d200d\" (sum past the limit)", sleep("200d200d"), False, "sum"),
        Case("sleep.duration \"0.0000001s\" (rounds to 0)", sleep("0.0000001s"), False, "submicro"),
        Case("sleep.duration \"0.0000004ms\" (rounds to 0)", sleep("0.0000004ms"), False, "submicro"),
        Case("sleep.duration \"%d.0000000000001d\" (rounds to the limit)" % days,
             sleep("%d.0000000000001d" % days), True, "submicro"),
        Case("sleep.duration \"1s\\n\"", sleep("1s\n"), False, "newline"),
    ]
    return cases


def steps(n, prefix="s"):
    return [task("%s%d" % (prefix, i)) for i in range(n)]


def step_count_cases(max_steps):
    m = max_steps
    cases = [
        Case("%d steps (max_steps - 1)" % (m - 1), {"steps": steps(m - 1)}, True),
        Case("%d steps (max_steps)" % m, {"steps": steps(m)}, True),
        Case("%d steps (max_steps + 1)" % (m + 1), {"steps": steps(m + 1)}, False),
    ]

    def par(n):
        return {"steps": [{"name": "p", "type": "parallel",
                           "branches": [{"steps": steps(n, "b")}, {"steps": steps(1, "c")}]}]}
    # with the parallel step itself and the other branch's one step
    cases += [
        Case("a branch of %d steps, %d in all (max_steps)" % (m - 2, m), par(m - 2), True),
        Case("a branch of %d steps, %d in all (max_steps + 1)" % (m - 1, m + 1), par(m - 1),
             False, "branches"),
        Case("a branch of %d steps (max_steps + 1)" % (m + 1), par(m + 1), False),
    ]
    return cases


def approver_cases():
    c = []
    c.append(Case("approvers [\"ann\", \"ann\"]", one(approval(approvers=["ann", "ann"])), False))
    c.append(Case("approvers [\"ann\", \"bob\", \"ann\"] quorum 3",
                  one(approval(approvers=["ann", "bob", "ann"], policy={"quorum": 3})), False))
    c.append(Case("approvers [\"ann\", \"Ann\"]", one(approval(approvers=["ann", "Ann"])), True))
    c.append(Case("approvers [\"ann\", \"bob\"] quorum 2",
                  one(approval(approvers=["ann", "bob"], policy={"quorum": 2})), True))
    names = ["u%d" % i for i in range(MAX_APPROVERS + 1)]
    c.append(Case("%d approvers (the limit)" % MAX_APPROVERS,
                  one(approval(approvers=names[:MAX_APPROVERS])), True))
    c.append(Case("%d approvers (one past)" % (MAX_APPROVERS + 1),
                  one(approval(approvers=names)), False))
    c.append(Case("approvers []", one(approval(approvers=[])), False))
    c.append(Case("approvers [\"\"]", one(approval(approvers=[""])), False))
    c.append(Case("an approver of %d bytes (the limit)" % APPROVER_LEN,
                  one(approval(approvers=["x" * APPROVER_LEN])), True))
    c.append(Case("an approver of %d bytes (one past)" % (APPROVER_LEN + 1),
                  one(approval(approvers=["x" * (APPROVER_LEN + 1)])), False))
    c.append(Case("an approver of %d two-byte characters (past the limit in bytes)"
                  % (APPROVER_LEN // 2 + 1),
                  one(approval(approvers=["\u00e9" * (APPROVER_LEN // 2 + 1)])), False, "bytes"))
    for f in ("quorum", "rejections"):
        for v, want in ((1000, True), (1001, False), (0, False)):
            kw = {"policy": {"quorum": v}} if f == "quorum" else {"rejections": v}
            c.append(Case("%s %d, approvers from a JSONPath" % (f, v),
                          one(approval(approvers="$.input.who", **kw)), want))
    c.append(Case("policy {} (no quorum)", one(approval(policy={})), False))
    c.append(Case("policy {\"quorum\": 1, \"x\": 1}",
                  one(approval(policy={"quorum": 1, "x": 1})), False))
    c.append(Case("approvers \"$$.x\" (a literal, not a JSONPath)",
                  one(approval(approvers="$$.x")), False))
    return c


def name_cases():
    c = []
    S, N, A = STEP_NAME_LEN, NAME_LEN, ACTIVITY_LEN
    for n, want in ((S, True), (S + 1, False)):
        tag = "the limit" if want else "one past"
        x = "x" * n
        c.append(Case("step name of %d (%s)" % (n, tag), one(task(x)), want))
        c.append(Case("queue of %d (%s)" % (n, tag), one({"name": "a", "queue": x}), want))
        c.append(Case("notify_queue of %d (%s)" % (n, tag), one(approval(notify_queue=x)), want))
        c.append(Case("event of %d (%s)" % (n, tag),
                      one({"name": "a", "type": "wait_event", "event": x}), want))
        c.append(Case("compensate.queue of %d (%s)" % (n, tag),
                      one(task(compensate={"activity": "u", "queue": x})), want))
        c.append(Case("correlation key of %d (%s)" % (n, tag),
                      one(task(), correlation={x: "$.input.k"}), want))
        c.append(Case("next of %d (%s)" % (n, tag),
                      {"steps": [task(next=x), task(x)]}, want))
    for n, want in ((N, True), (N + 1, False)):
        tag = "the limit" if want else "one past"
        x = "d" * n
        if want:
            SUBDEFINITIONS.append(x)
        c.append(Case("subworkflow definition of %d (%s)" % (n, tag),
                      one({"name": "a", "type": "subworkflow", "definition": x, "version": 1}),
                      want))
    for n, want in ((A, True), (A + 1, False)):
        tag = "the limit" if want else "one past"
        c.append(Case("activity of %d bytes (%s)" % (n, tag), one(task(activity="x" * n)), want))
        c.append(Case("compensate.activity of %d bytes (%s)" % (n, tag),
                      one(task(compensate={"activity": "x" * n})), want))
    c.append(Case("activity of %d two-byte characters (the limit in bytes)" % (A // 2),
                  one(task(activity="\u00e9" * (A // 2))), True))
    c.append(Case("activity of %d two-byte characters (past the limit in bytes)" % (A // 2 + 1),
                  one(task(activity="\u00e9" * (A // 2 + 1))), False, "bytes"))
    for bad in ("1a", "a-b", "a.b", "\u00e9", "a b", ""):
        c.append(Case("step name %s" % json.dumps(bad), one(task(bad)), False))
    for ok in ("_", "a1", "A_b"):
        c.append(Case("step name %s" % json.dumps(ok), one(task(ok)), True))
    for q, want in (("a-b.c:d", True), ("-a", False), ("a/b", False)):
        c.append(Case("queue %s" % json.dumps(q), one({"name": "a", "queue": q}), want))
    c.append(Case("step name \"a\\n\"", one(task("a\n")), False, "newline"))
    keys = {"k%d" % i: "$.input.k" for i in range(MAX_CORRELATION + 1)}
    c.append(Case("%d correlation keys (the limit)" % MAX_CORRELATION,
                  one(task(), correlation=dict(list(keys.items())[:MAX_CORRELATION])), True))
    c.append(Case("%d correlation keys (one past)" % (MAX_CORRELATION + 1),
                  one(task(), correlation=keys), False))
    c.append(Case("correlation {} (no key)", one(task(), correlation={}), False))
    c.append(Case("correlation value \"$\"", one(task(), correlation={"k": "$"}), True))
    c.append(Case("correlation value \"$$x\" (a literal)", one(task(), correlation={"k": "$$x"}), False))
    c.append(Case("correlation value \"x\"", one(task(), correlation={"k": "x"}), False))
    c.append(Case("description of 60000 bytes", one(task(), description="x" * 60000), True))
    c.append(Case("description of 70000 bytes (past max_definition_size)",
                  one(task(), description="x" * 70000), False, "size"))
    c.append(Case("description \"\"", one(task(), description=""), False))
    return c


def number_cases():
    c = []
    P = MAX_PRIORITY

    def choice(n):
        return {"steps": [{"name": "c", "type": "choice", "default": "b",
                           "choices": [{"when": "$.input.x == %d" % i, "next": "b"}
                                       for i in range(n)]}, task("b")]}
    c.append(Case("%d choices (the limit)" % MAX_CHOICES, choice(MAX_CHOICES), True))
    c.append(Case("%d choices (one past)" % (MAX_CHOICES + 1), choice(MAX_CHOICES + 1), False))
    c.append(Case("choices []", choice(0), False))
    for v, want in ((P, True), (P + 1, False), (-P, True), (-P - 1, False), (1.5, False),
                    ("$.input.p", True), ("$$p", False), ("p", False)):
        c.append(Case("priority %s" % json.dumps(v), one(task(priority=v)), want))
    for field, vals in (("max_attempts", ((MAX_ATTEMPTS, True), (MAX_ATTEMPTS + 1, False),
                                          (1, True), (0, False), (2.5, False))),
                        ("backoff_coefficient", ((100, True), (100.5, False), (1, True),
                                                 (0.5, False))),
                        ("jitter", ((1, True), (1.01, False), (0, True), (-0.1, False)))):
        for v, want in vals:
            c.append(Case("retry.%s %s" % (field, json.dumps(v)),
                          one(task(retry={field: v})), want))
    for v, want in ((1, True), (2147483648, False), (0, False), (1.5, False)):
        c.append(Case("subworkflow version %s" % v,
                      one({"name": "a", "type": "subworkflow", "definition": "child",
                           "version": v}), want))
    return c


def cases(max_steps):
    """Every case of the corpus; max_steps is the server's wfengine.max_steps."""
    del SUBDEFINITIONS[:]
    return (duration_cases() + step_count_cases(max_steps) + approver_cases() +
            name_cases() + number_cases())
