# Makefile for wfengine (PGXS)
#
#   make / make install       build and install the extension
#   make installcheck         pg_regress + isolation against a running server
#   make prove_installcheck   TAP crash/restart tests (PostgreSQL::Test::Cluster)
#   make pgtap                pgTAP invariants against a running server
#   make demo                 set everything up and run the demo workflow
#   make test                 set everything up and run every suite
#   make bench                pgbench: engine vs. hand-written SQL
#   make bench-peers          the engine beside graphile-worker, pg-boss (and
#                             pgmq, Absurd) and a hand-written floor
#   make fuzz-api             the model-based API fuzzer for FUZZ_API_SECONDS
#                             (default an hour; make test runs a short one)
#   make dist                 wfengine-$(EXTVERSION).tar.gz of the commit
#                             checked out (git archive; docs/upgrading.md)

EXTENSION = wfengine
EXTVERSION = $(shell grep -m1 default_version $(EXTENSION).control | sed -e "s/default_version[[:space:]]*=[[:space:]]*'\([^']*\)'/\1/")

PG_CONFIG ?= pg_config
PG_MAJOR := $(shell $(PG_CONFIG) --version | sed -e 's/^PostgreSQL \([0-9]*\).*/\1/')
ifeq ($(shell test "$(PG_MAJOR)" -ge 15 2>/dev/null && echo ok),)
$(error wfengine requires PostgreSQL 15 or later (found "$(PG_MAJOR)"))
endif

MODULE_big = wfengine
OBJS = \
	src/wfengine.o \
	src/tenant.o \
	src/shard.o \
	src/version.o \
	src/guc.o \
	src/spi_util.o \
	src/rowwrite.o \
	src/crypto.o \
	src/definition.o \
	src/defcompile.o \
	src/defmodel.o \
	src/duration.o \
	src/publish.o \
	src/jsonutil.o \
	src/argcheck.o \
	src/api.o \
	src/state.o \
	src/stepkind.o \
	src/runstore.o \
	src/transition.o \
	src/quota.o \
	src/step_task.o \
	src/step_sleep.o \
	src/step_choice.o \
	src/step_wait.o \
	src/step_approval.o \
	src/step_children.o \
	src/step_compensate.o \
	src/correlate.o \
	src/command.o \
	src/run.o \
	src/claim.o \
	src/result.o \
	src/batch.o \
	src/operator.o \
	src/migrate.o \
	src/retention.o \
	src/sensitive.o \
	src/replay.o \
	src/approval_api.o \
	src/shmem.o \
	src/claimfloor.o \
	src/metrics.o \
	src/notify.o \
	src/schedule.o \
	src/timer.o \
	src/launcher.o \
	src/worker.o \
	src/ddlguard.o \
	src/sqlcheck.o \
	src/events.o \
	src/rowcheck.o \
	src/waits.o \
	src/explain.o

PG_CPPFLAGS += -I$(srcdir)/src -DWFENGINE_VERSION=\"$(EXTVERSION)\"
SHLIB_LINK += -lsodium

DATA = sql/wfengine--0.1.0.sql $(wildcard sql/wfengine--*--*.sql)
DOCS := $(wildcard docs/*.md)

# pg_regress: explicit and ordered (never a wildcard over sql/).
REGRESS = \
	001_install \
	010_definitions \
	020_runs \
	030_claim_complete \
	040_retries \
	050_results \
	060_history \
	100_timers \
	120_claim_wait \
	130_notify \
	140_schedules \
	145_cron_agreement \
	146_duration_agreement \
	150_approvals \
	160_choice \
	170_explain \
	180_terminate \
	200_operator \
	210_cancel \
	220_graph \
	230_batch \
	240_events \
	250_migrate \
	260_children \
	270_tenancy \
	280_policies \
	290_priority \
	300_sensitive \
	310_hostile \
	320_sealed_inputs \
	330_limits \
	340_fences \
	341_pause_attempts \
	342_retry_run_timeout \
	343_failed_attempt \
	350_waits \
	360_saga \
	370_buffered_events \
	371_event_ids \
	380_anchors \
	390_batches \
	390_metrics \
	395_claim_any \
	396_id_block \
	397_row_writer \
	398_list_runs \
	399_start_and_claim \
	401_lookup_plans \
	402_fresh_tables \
	403_large_outputs \
	190_signals \
	090_errors
REGRESS_OPTS = --inputdir=.

ISOLATION = $(basename $(notdir $(wildcard test/isolation/specs/*.spec)))
ISOLATION_OPTS = --inputdir=test/isolation --outputdir=output_iso

EXTRA_CLEAN = results output_iso tmp_check tmp_check_iso regression.diffs regression.out \
	src/*.gcno src/*.gcda

# No LLVM bitcode.  PGXS compiles every file a second time with clang into
# .bc files when the server was built with LLVM, for JIT to inline the
# module's functions into expressions; the engine's work is done inside its
# C functions (SPI plans and the table AM), which JIT does not compile, so
# the second compile (16 of the build's 37 s of CPU on the 2-core machine)
# bought nothing.  An install removes the bitcode an earlier build put in
# place, so that JIT can never inline a function of an older version.
override with_llvm = no

PGXS := $(shell $(PG_CONFIG) --pgxs)
include $(PGXS)

# The library's version comes from wfengine.control (-DWFENGINE_VERSION):
# the objects that use it are rebuilt when the control file changes.
src/version.o src/worker.o: $(EXTENSION).control

# PGXS tracks no header dependencies: rebuild every object when a header changes.
$(OBJS): $(wildcard src/*.h)

# The router extension (router/: wfengine_router, SQL only) installs with
# wfengine, so `make install` (and so `make test`) puts both in place.
.PHONY: install-router
install: install-router
install-router:
	$(MAKE) -C $(srcdir)/router PG_CONFIG='$(PG_CONFIG)' install
	rm -rf '$(DESTDIR)$(pkglibdir)/bitcode/$(MODULE_big)' '$(DESTDIR)$(pkglibdir)/bitcode/$(MODULE_big).index.bc'

PROVE ?= prove
PG_PROVE ?= pg_prove

.PHONY: prove_installcheck pgtap check-all demo test bench bench-peers dist

# dist: the release tarball of the commit checked out, what `git archive`
# holds (so nothing uncommitted and no build output); refuses a tree with
# uncommitted changes to tracked files, whose tarball would not be the
# commit's.  docs/upgrading.md ("Releases") builds earlier releases the
# same way from their commits.
dist:
	@cd $(srcdir) && git diff --quiet HEAD -- || \
		{ echo "make dist: uncommitted changes (git status); commit them first" >&2; exit 1; }
	cd $(srcdir) && git archive --format=tar.gz --prefix=wfengine-$(EXTVERSION)/ \
		-o $(CURDIR)/wfengine-$(EXTVERSION).tar.gz HEAD
	@echo "wrote wfengine-$(EXTVERSION).tar.gz ($$(cd $(srcdir) && git rev-parse --short HEAD))"

prove_installcheck:
	rm -rf $(CURDIR)/tmp_check
	cd $(srcdir) && TESTDIR='$(CURDIR)' PATH="$(bindir):$$PATH" PGPORT='6$(DEF_PGPORT)' \
		PG_REGRESS='$(top_builddir)/src/test/regress/pg_regress' \
		$(PROVE) -I $(pgxsdir)/src/test/perl $(PROVE_FLAGS) $(or $(PROVE_TESTS),test/t/*.pl)

pgtap:
	$(PG_PROVE) --ext .sql test/pgtap/

check-all: installcheck prove_installcheck pgtap

demo:
	@bash test/scripts/demo.sh

test:
	@bash test/scripts/test.sh

bench:
	@bash bench/run.sh

# bench-peers: builds and installs wfengine (PG_CONFIG), npm-installs the
# peers into a throw-away directory, runs the interleaved cells of
# bench/peers/cells in a throw-away cluster (bench/peers/run.sh has the knobs;
# BENCH_PEERS_SMOKE=1 for one round of 2 s cells).
bench-peers:
	@PG_CONFIG='$(PG_CONFIG)' bash bench/peers/run.sh

# fuzz: each libFuzzer target for FUZZ_SECONDS (test/scripts/fuzz.sh, which
# `make test` runs too); fuzz-long: 10 minutes each.  Nothing is installed.
.PHONY: fuzz fuzz-long
FUZZ_SECONDS ?= 10

fuzz:
	@FUZZ_SECONDS=$(FUZZ_SECONDS) bash test/scripts/fuzz.sh

fuzz-long:
	@FUZZ_SECONDS=600 bash test/scripts/fuzz.sh

# fuzz-api: the model-based fuzzer of the SQL API (test/apifuzz/apifuzz.py,
# run by test/scripts/apifuzz.sh) for FUZZ_API_SECONDS (default 3600), half
# with wf.tick() driving time and half with the engine worker on
# (FUZZ_API_WORKER=off|on|both); FUZZ_API_SEED, FUZZ_API_STEPS and
# FUZZ_API_SEQUENCES are the other knobs.  Sets up like `make test`.
.PHONY: fuzz-api
FUZZ_API_SECONDS ?= 3600

fuzz-api:
	@FUZZ_API_SECONDS=$(FUZZ_API_SECONDS) bash test/scripts/apifuzz.sh

# soak: the crash loop of test/t/100_crash_loop.pl with SOAK_KILLS kills of
# the postmaster (1000 unless told); `make test` runs it with 20.  Sets up
# like `make test` (test/scripts/soak.sh), as root too.
.PHONY: soak
SOAK_KILLS ?= 1000

soak:
	@SOAK_KILLS=$(SOAK_KILLS) bash test/scripts/soak.sh
