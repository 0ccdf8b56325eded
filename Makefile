# minidoc -- one Makefile, configuration at the top.
#
#   make            build the library, the CLI and the tests (asserts on)
#   make demo       build and run the scripted demo (tools/demo.sh)
#   make test       install missing Debian packages, build, run every test
#                   (the CLI checks, the server's driver, auth and TLS
#                   tests, a staged make install and the README's
#                   example built against it, build/test_faults,
#                   build/test_minidoc)
#   make check      alias of test
#   make crash      the long crash-recovery run (tests/crash)
#   make test-tsan  the threaded stress programs (tests/*/tsan_*.c) under
#                   ThreadSanitizer, then the server (a ThreadSanitizer build
#                   of the minidoc program) under tests/server/test_drivers.sh
#                   and test_auth.sh:
#                   a race makes the server exit and the script fail
#   make bench      build the benchmark programs (build/bench/*); the only
#                   target that needs liblmdb-dev, libwiredtiger-dev,
#                   libmongoc-dev, python3-pymongo and gnuplot-nox (make
#                   patterns wants gnuplot-nox for plots)
#   make bench-wire run bench/wire and bench/wire.py: the peers workloads
#                   through libmongoc and pymongo against `minidoc serve`
#                   beside the embedded API (docs/wire.md)
#   make patterns   the book-scale scenario run (build/patterns), which
#                   regenerates docs/patterns.md
#   make install    libminidoc.a, libminidoc.so (soname libminidoc.so.0),
#                   minidoc.h, the minidoc program and minidoc.pc under
#                   $(DESTDIR)$(PREFIX) (PREFIX=/usr/local by default)
#   make uninstall  removes what make install put there
#   make fuzz       the libFuzzer harnesses (tests/fuzz/: wire, command, json,
#                   match, update, open_mmapv1, open_btree, import), FUZZ_S
#                   seconds each (default 60) under ASan and UBSan;
#                   FUZZ_ONLY=NAME runs one (see the fuzz target below)
#   make clean
#
# Build modes:
#   MODE=debug      -O0, asserts on            (default: -O2, asserts on)
#   MODE=release    -O2 -DNDEBUG
#   SANITIZER=address|undefined|thread
#   CI=true         adds -Werror

CC        ?= cc
MODE      ?= default
SANITIZER ?=
BUILD     ?= build

PREFIX    ?= /usr/local
DESTDIR   ?=
BINDIR    ?= $(PREFIX)/bin
LIBDIR    ?= $(PREFIX)/lib
INCLUDEDIR?= $(PREFIX)/include
PCDIR     ?= $(LIBDIR)/pkgconfig

# lmdb is only for bench/peers (below): a machine without liblmdb-dev must
# still get libbson's include path from this line.
PKGS      := libbson-1.0 libzstd snappy libpcre2-8 duktape
CPPFLAGS  += -D_GNU_SOURCE -Iinclude -Iengine -Immapv1 -Ibtree -Iquery -Ijs -Ipatterns -Iserver
CPPFLAGS  += $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
CFLAGS    += -std=c11 -Wall -Wextra -Wshadow -Wno-unused-parameter -g -pthread
LDLIBS    += $(shell pkg-config --libs libbson-1.0 libzstd snappy libpcre2-8 duktape 2>/dev/null) -lstemmer -lm -lpthread

ifeq ($(MODE),debug)
  CFLAGS += -O0
else ifeq ($(MODE),release)
  CFLAGS += -O2 -DNDEBUG
else
  CFLAGS += -O2
endif
ifneq ($(SANITIZER),)
  CFLAGS  += -fsanitize=$(SANITIZER) -fno-omit-frame-pointer -fno-sanitize-recover=all
  LDFLAGS += -fsanitize=$(SANITIZER)
  BUILD   := $(BUILD)-$(SANITIZER)
endif
ifeq ($(CI),true)
  CFLAGS += -Werror
endif

LIB_SRCS  := $(wildcard engine/*.c mmapv1/*.c btree/*.c query/*.c js/*.c)
LIB_OBJS  := $(LIB_SRCS:%.c=$(BUILD)/%.o)
LIB       := $(BUILD)/libminidoc.a
CLI       := $(BUILD)/minidoc
# tools/ code the CLI and the tests share (json_out.c: the CLI's JSON writer)
TOOL_OBJS := $(BUILD)/tools/json_out.o
# the CLI's subcommands, one file each (files.c: GridFS, as mongofiles;
# dump, restore, import, export, inspect, shell: tools/tool.h)
CLI_OBJS  := $(patsubst %.c,$(BUILD)/%.o,$(filter-out tools/minidoc.c tools/json_out.c,$(wildcard tools/*.c)))
# server/: `minidoc serve`, the wire-protocol server, linked into the CLI
# (and into the tests, which drive it in-process); zlib is one of its
# compressors, OpenSSL (libssl-dev) gives it SCRAM-SHA-256's hashes and TLS.
SRV_SRCS  := $(wildcard server/*.c)
SRV_OBJS  := $(SRV_SRCS:%.c=$(BUILD)/%.o)
SRV_LIBS  := $(shell pkg-config --libs zlib 2>/dev/null || echo -lz) \
             $(shell pkg-config --libs openssl 2>/dev/null || echo -lssl -lcrypto)
# tests/server/mongoc_example: libmongoc against the server, built when
# libmongoc-dev is installed (make deps installs it); the Node.js driver and
# mongosh go to $(NPM_DIR) (make deps, when npm is there).
MONGOC_EX := $(if $(shell pkg-config --exists libmongoc-1.0 2>/dev/null && echo y),$(BUILD)/tests/server/mongoc_example)
NPM_DIR   ?= $(BUILD)/npm
TEST_SRCS := $(wildcard tests/*/test_*.c)
TEST_OBJS := $(TEST_SRCS:%.c=$(BUILD)/%.o)
TEST_BIN  := $(BUILD)/test_minidoc
# steady-state finds and $inc by _id allocate nothing (it replaces malloc,
# so it is a program of its own)
ALLOC_BIN := $(BUILD)/alloc_steady
# patterns/: the book's patterns as a library (linked into the tests too)
# and the scenario runner build/patterns (patterns/runner*.c).
PAT_MAIN  := $(wildcard patterns/runner*.c)
PAT_SRCS  := $(filter-out $(PAT_MAIN),$(wildcard patterns/*.c))
# Their objects go to $(BUILD)/pat/, since $(BUILD)/patterns is the program.
PAT_OBJS  := $(PAT_SRCS:patterns/%.c=$(BUILD)/pat/%.o)
PAT_MAIN_OBJS := $(PAT_MAIN:patterns/%.c=$(BUILD)/pat/%.o)
PATTERNS  := $(BUILD)/patterns
BENCH_SRCS:= $(wildcard bench/*.c)
BENCH_BINS:= $(BENCH_SRCS:%.c=$(BUILD)/%)

# The fault-injection tests (tests/faults): a second Criterion binary whose
# I/O calls go through tests/faults/fault_io.c (ld --wrap), which can fail
# them with ENOSPC or EIO and keep a "what the disk holds" shadow of every
# file for simulated power losses.  The library is the same libminidoc.a.
FAULT_SRCS  := $(wildcard tests/faults/*.c)
FAULT_OBJS  := $(FAULT_SRCS:%.c=$(BUILD)/%.o)
FAULT_BIN   := $(BUILD)/test_faults
FAULT_WRAPS := pwrite write fsync fdatasync msync ftruncate posix_fallocate open close rename unlink mmap munmap mremap
FAULT_LDFLAGS := $(foreach f,$(FAULT_WRAPS),-Wl,--wrap=$(f))

# The shared library: the same sources compiled -fPIC into $(BUILD)/pic/,
# linked with a soname and exporting only the public md_* symbols
# (tools/libminidoc.map).  minidoc.pc and minidoc-static.pc come from
# minidoc.pc.in with the install prefix filled in.
SO_MAJOR  := 0
SO_VER    := 0.1.0
SHLIB     := $(BUILD)/libminidoc.so.$(SO_VER)
PIC_OBJS  := $(LIB_SRCS:%.c=$(BUILD)/pic/%.o)
PC_FILES  := $(BUILD)/minidoc.pc $(BUILD)/minidoc-static.pc

.PHONY: all deps demo test check bench bench-wire crash test-tsan clean patterns install uninstall shared fuzz

all: $(LIB) $(CLI) $(TEST_BIN) $(FAULT_BIN) $(ALLOC_BIN) $(MONGOC_EX) $(if $(PAT_MAIN),$(PATTERNS))

$(ALLOC_BIN): $(BUILD)/tests/query/alloc_steady.o $(LIB)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

# The Debian packages (tools/deps.sh): the library's set for everything but
# the benchmarks, which check for their extras themselves; then the driver
# tests' clients, which are optional (deps.sh drivers only reports them to a
# user who cannot install), and the npm ones (tools/npm_deps.sh).
deps:
	@tools/deps.sh lib
	@tools/deps.sh drivers
	@NPM_DIR=$(NPM_DIR) tools/npm_deps.sh

$(BUILD)/tests/server/mongoc_example: tests/server/mongoc_example.c
	@mkdir -p $(dir $@)
	$(CC) -D_GNU_SOURCE $(CFLAGS) $(shell pkg-config --cflags libmongoc-1.0) -o $@ $< $(LDFLAGS) \
	    $(shell pkg-config --libs libmongoc-1.0)

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) -MMD -MP -c $< -o $@

$(BUILD)/pat/%.o: patterns/%.c
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) -MMD -MP -c $< -o $@

$(LIB): $(LIB_OBJS)
	@rm -f $@
	ar rcs $@ $^

$(BUILD)/pic/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) -fPIC -MMD -MP -c $< -o $@

$(SHLIB): $(PIC_OBJS) tools/libminidoc.map
	$(CC) $(LDFLAGS) -shared -Wl,-soname,libminidoc.so.$(SO_MAJOR) -Wl,--no-undefined \
	    -Wl,--version-script=tools/libminidoc.map -o $@ $(PIC_OBJS) $(LDLIBS)

shared: $(SHLIB)

# minidoc.pc: libbson is a public dependency (minidoc.h hands out bson_t and
# callers use libbson themselves); zstd, snappy, pcre2 and duktape (the
# JavaScript engine, js/) are private.
# Rewritten on every make install, since PREFIX may differ from last time.
.PHONY: $(PC_FILES)
$(BUILD)/minidoc.pc $(BUILD)/minidoc-static.pc: minidoc.pc.in
	@mkdir -p $(dir $@)
	sed -e 's|@PREFIX@|$(PREFIX)|g' \
	    -e 's|@LIBDIR@|$(patsubst $(PREFIX)/%,$${prefix}/%,$(LIBDIR))|g' \
	    -e 's|@INCLUDEDIR@|$(patsubst $(PREFIX)/%,$${prefix}/%,$(INCLUDEDIR))|g' \
	    -e 's|@VERSION@|$(SO_VER)|g' \
	    -e '/^#/d' minidoc.pc.in > $@.tmp
	if [ $(notdir $@) = minidoc-static.pc ]; then \
	    sed -i -e 's|^Name: minidoc|Name: minidoc-static|' \
	        -e 's|^Libs: .*|Libs: $${libdir}/libminidoc.a -pthread -lstemmer -lm|' \
	        -e 's|^Requires: .*|Requires: libbson-1.0 libzstd snappy libpcre2-8 duktape|' \
	        -e '/^Requires.private:/d' -e '/^Libs.private:/d' $@.tmp; fi
	mv $@.tmp $@

install: $(LIB) $(SHLIB) $(CLI) $(PC_FILES)
	install -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(LIBDIR) $(DESTDIR)$(INCLUDEDIR) $(DESTDIR)$(PCDIR)
	install -m 644 $(LIB) $(DESTDIR)$(LIBDIR)/libminidoc.a
	install -m 755 $(SHLIB) $(DESTDIR)$(LIBDIR)/libminidoc.so.$(SO_VER)
	ln -sf libminidoc.so.$(SO_VER) $(DESTDIR)$(LIBDIR)/libminidoc.so.$(SO_MAJOR)
	ln -sf libminidoc.so.$(SO_MAJOR) $(DESTDIR)$(LIBDIR)/libminidoc.so
	install -m 644 include/minidoc.h $(DESTDIR)$(INCLUDEDIR)/minidoc.h
	install -m 755 $(CLI) $(DESTDIR)$(BINDIR)/minidoc
	install -m 644 $(PC_FILES) $(DESTDIR)$(PCDIR)/
	@if [ -z "$(DESTDIR)" ] && [ "$$(id -u)" = 0 ]; then ldconfig || true; fi

uninstall:
	rm -f $(DESTDIR)$(LIBDIR)/libminidoc.a $(DESTDIR)$(LIBDIR)/libminidoc.so \
	    $(DESTDIR)$(LIBDIR)/libminidoc.so.$(SO_MAJOR) $(DESTDIR)$(LIBDIR)/libminidoc.so.$(SO_VER) \
	    $(DESTDIR)$(INCLUDEDIR)/minidoc.h $(DESTDIR)$(BINDIR)/minidoc \
	    $(DESTDIR)$(PCDIR)/minidoc.pc $(DESTDIR)$(PCDIR)/minidoc-static.pc

$(CLI): $(BUILD)/tools/minidoc.o $(CLI_OBJS) $(TOOL_OBJS) $(SRV_OBJS) $(LIB)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS) $(SRV_LIBS) $(SHELL_LIBS)

# `minidoc shell` (tools/shell*.c): GNU readline, and its JavaScript prelude
# (tools/shell_print.js, then tools/shell_api.js) as a C string literal.
SHELL_LIBS := -lreadline
SHELL_JS   := tools/shell_print.js tools/shell_api.js
$(BUILD)/tools/shell_prelude.inc: $(SHELL_JS)
	@mkdir -p $(dir $@)
	sed -e 's/\\/\\\\/g' -e 's/"/\\"/g' -e 's/^/"/' -e 's/$$/\\n"/' $(SHELL_JS) > $@.tmp
	mv $@.tmp $@
$(BUILD)/tools/shell_js.o: $(BUILD)/tools/shell_prelude.inc
$(BUILD)/tools/shell_js.o: CPPFLAGS += -I$(BUILD)/tools

$(TEST_BIN): $(TEST_OBJS) $(TOOL_OBJS) $(SRV_OBJS) $(PAT_OBJS) $(LIB)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS) $(SRV_LIBS) -lcriterion

# (An older layout kept the pattern objects in a directory of this name.)
$(PATTERNS): $(PAT_MAIN_OBJS) $(PAT_OBJS) $(LIB)
	@if [ -d $@ ]; then rm -rf $@; fi
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

demo: deps
	@$(MAKE) --no-print-directory $(CLI) $(if $(PAT_MAIN),$(PATTERNS))
	@MINIDOC=$(CLI) PATTERNS=$(PATTERNS) tools/demo.sh

test: deps
	@$(MAKE) --no-print-directory all
	MINIDOC=$(CLI) tests/tools/test_cli.sh
	MINIDOC=$(CLI) tests/tools/test_files.sh
	MINIDOC=$(CLI) BUILD=$(BUILD) NPM_DIR=$(NPM_DIR) tests/server/test_drivers.sh
	MINIDOC=$(CLI) BUILD=$(BUILD) NPM_DIR=$(NPM_DIR) tests/server/test_auth.sh
	MINIDOC=$(CLI) tests/tools/test_dump.sh
	MINIDOC=$(CLI) tests/tools/test_import.sh
	MINIDOC=$(CLI) tests/tools/test_inspect.sh
	MINIDOC=$(CLI) tests/tools/test_shell.sh
	BUILD=$(BUILD) tests/tools/test_deps.sh
	MAKE="$(MAKE)" BUILD=$(BUILD) SANFLAGS="$(if $(SANITIZER),-fsanitize=$(SANITIZER))" \
	    tests/install/test_install.sh
	$(FAULT_BIN) -j2 --short-filename
	$(TEST_BIN) -j2 --short-filename
	$(ALLOC_BIN)
	$(if $(PAT_MAIN),$(PATTERNS) --quick --out $(BUILD)/patterns-out)

check: test

# The book-scale scenario run: every registered pattern on mmapv1 and btree
# (docs/patterns.md, docs/patterns.csv, docs/patterns/*.png), timed.
patterns:
	@tools/deps.sh lib plots
	@$(MAKE) --no-print-directory $(PATTERNS)
	@start=$$(date +%s); $(PATTERNS) --out docs; rc=$$?; \
	    echo "make patterns: $$(( $$(date +%s) - start )) s"; exit $$rc

# The long crash run: 500 SIGKILLed writers on mmapv1 and on btree (journal
# and log on), each reopened and checked (MINIDOC_CRASH_SEED and
# MINIDOC_CRASH_ROUNDS_NOJOURNAL, for the runs without, also work); then
# build/test_faults with 500 simulated power losses per engine (100 without
# the journal/log) and 3000 flipped-byte rounds per engine.
crash: deps
	@$(MAKE) --no-print-directory all
	MINIDOC_CRASH_ROUNDS=$${MINIDOC_CRASH_ROUNDS:-500} $(TEST_BIN) --filter 'crash/*'
	MINIDOC_POWERLOSS_ROUNDS=$${MINIDOC_POWERLOSS_ROUNDS:-500} \
	MINIDOC_POWERLOSS_ROUNDS_NOJOURNAL=$${MINIDOC_POWERLOSS_ROUNDS_NOJOURNAL:-100} \
	MINIDOC_CORRUPT_ROUNDS=$${MINIDOC_CORRUPT_ROUNDS:-3000} $(BUILD)/test_faults -j2 --short-filename

bench:
	@tools/deps.sh lib bench
	@$(MAKE) --no-print-directory $(BENCH_BINS)

$(BUILD)/bench/%: $(BUILD)/bench/%.o $(LIB)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

# bench/peers runs the real WiredTiger and LMDB beside minidoc's engines.
$(BUILD)/bench/peers: LDLIBS += -lwiredtiger $(shell pkg-config --libs lmdb 2>/dev/null)
# bench/wire drives `minidoc serve` through libmongoc (the only bench program
# linked with it).
$(BUILD)/bench/wire.o: CPPFLAGS += $(shell pkg-config --cflags libmongoc-1.0 2>/dev/null)
$(BUILD)/bench/wire: LDLIBS += $(shell pkg-config --libs libmongoc-1.0 2>/dev/null)

# The wire-protocol benchmark: bench/wire (libmongoc threads) and
# bench/wire.py (pymongo processes), each against `minidoc serve` on both
# engines beside the embedded C API (docs/wire.md).
bench-wire: bench
	@$(MAKE) --no-print-directory $(CLI)
	$(BUILD)/bench/wire --minidoc $(CLI)
	@py=; for p in python3 /usr/bin/python3; do \
	    if $$p -c 'import pymongo' 2>/dev/null; then py=$$p; break; fi; done; \
	    if [ -z "$$py" ]; then echo "bench-wire: no python3 with pymongo (tools/deps.sh bench)"; exit 1; fi; \
	    echo "$$py bench/wire.py --minidoc $(CLI) --embedded $(BUILD)/bench/wire"; \
	    $$py bench/wire.py --minidoc $(CLI) --embedded $(BUILD)/bench/wire

$(FAULT_BIN): $(FAULT_OBJS) $(LIB)
	$(CC) $(LDFLAGS) $(FAULT_LDFLAGS) -o $@ $^ $(LDLIBS) -lcriterion

# Criterion cannot start under TSan, so the threaded parts have standalone
# stress programs, built against a SANITIZER=thread library (and the
# patterns/ library, for the patterns' protocol stress programs).
TSAN_SRCS := $(wildcard tests/*/tsan_*.c)
test-tsan: deps
	@$(MAKE) --no-print-directory SANITIZER=thread build-thread/libminidoc.a
	@for src in $(TSAN_SRCS); do \
	    bin=build-thread/$$(basename $$src .c); \
	    echo "$(CC) ... $$src -> $$bin"; \
	    $(CC) $(CPPFLAGS) $(CFLAGS) -fsanitize=thread $$src $(PAT_SRCS) build-thread/libminidoc.a \
	        -fsanitize=thread $(LDLIBS) -o $$bin || exit 1; \
	    TSAN_OPTIONS=halt_on_error=1 $$bin || exit 1; \
	done
	@$(MAKE) --no-print-directory SANITIZER=thread build-thread/minidoc
	TSAN_OPTIONS=halt_on_error=1 MINIDOC=build-thread/minidoc BUILD=build-thread \
	    NPM_DIR=$(NPM_DIR) MONGOC_EXAMPLE=$(BUILD)/tests/server/mongoc_example \
	    tests/server/test_drivers.sh
	TSAN_OPTIONS=halt_on_error=1 MINIDOC=build-thread/minidoc BUILD=build-thread \
	    NPM_DIR=$(NPM_DIR) MONGOC_EXAMPLE=$(BUILD)/tests/server/mongoc_example \
	    tests/server/test_auth.sh

# libFuzzer harnesses (clang): tests/fuzz/fuzz_NAME.c, its committed seeds in
# tests/fuzz/corpus/NAME/ and the sources it needs in FUZZ_SRCS_NAME, built
# under ASan and UBSan into build-fuzz/ and run FUZZ_S seconds each (new
# inputs go to build-fuzz/corpus-NAME/, the committed seeds stay as they are;
# a crash is saved under build-fuzz/crash-NAME- and stops the run).  The
# library is compiled once for all of them (build-fuzz/libminidoc.a, with
# the fuzzer's coverage instrumentation):
#   wire             the wire-message parser and compressors (server/)
#   command          md_db_command with arbitrary documents, both engines
#   json             md_json_parse, with a canonical-JSON round trip
#   match, update    the matcher; the update applier (checked against its
#                    damages and the in-place shortcut)
#   open_mmapv1, open_btree  opening a damaged data directory, then a find
#                    and a validate
#   import           the import tool's JSON, JSON array, CSV and TSV readers
# FUZZ_ONLY=NAME runs one of them.  FUZZ_ARGS_NAME: libFuzzer options of one
# (command and import keep a database across inputs, so the leak check after
# every input is off for them; LeakSanitizer still runs at exit, after the
# database is closed).
FUZZ_S         ?= 60
FUZZ_CC        ?= clang
FUZZ_FLAGS     := -g -O1 -fsanitize=address,undefined -fno-sanitize-recover=all
FUZZ_NAMES     := $(patsubst tests/fuzz/fuzz_%.c,%,$(wildcard tests/fuzz/fuzz_*.c))
FUZZ_RUN       := $(or $(FUZZ_ONLY),$(FUZZ_NAMES))
FUZZ_LIB       := build-fuzz/libminidoc.a
FUZZ_SRCS_wire := server/srv_wire.c server/srv_compress.c
FUZZ_SRCS_scram := server/srv_scram.c
FUZZ_SRCS_command := $(FUZZ_LIB)
FUZZ_SRCS_json := $(FUZZ_LIB)
FUZZ_SRCS_match := $(FUZZ_LIB)
FUZZ_SRCS_update := $(FUZZ_LIB)
FUZZ_SRCS_open_mmapv1 := $(FUZZ_LIB)
FUZZ_SRCS_open_btree := $(FUZZ_LIB)
FUZZ_ARGS_command := -detect_leaks=0
FUZZ_ARGS_import := -detect_leaks=0
# (tool.c's subcommand table links the whole of tools/, the shell's server
# database code and its generated JavaScript prelude included)
FUZZ_SRCS_import := $(filter-out tools/minidoc.c,$(wildcard tools/*.c)) \
	$(wildcard server/*.c) $(BUILD)/tools/shell_prelude.inc $(FUZZ_LIB)
build-fuzz/obj/%.o: %.c
	@mkdir -p $(@D)
	$(FUZZ_CC) $(FUZZ_FLAGS) -fsanitize=fuzzer-no-link $(CPPFLAGS) -std=c11 -pthread -MMD -MP \
	    -c $< -o $@
$(FUZZ_LIB): $(LIB_SRCS:%.c=build-fuzz/obj/%.o)
	rm -f $@
	ar rcs $@ $^
define FUZZ_RULE
build-fuzz/fuzz_$(1): tests/fuzz/fuzz_$(1).c $$(FUZZ_SRCS_$(1)) $$(wildcard tests/fuzz/*.h)
	@mkdir -p build-fuzz
	$$(FUZZ_CC) $$(FUZZ_FLAGS) -fsanitize=fuzzer \
	    $$(CPPFLAGS) -Itools -I$(BUILD)/tools -std=c11 -pthread $$(filter %.c %.a,$$^) -o $$@ \
	    $$(LDLIBS) $$(SRV_LIBS) $$(if $$(filter tools/shell.c,$$^),$$(SHELL_LIBS))
endef
$(foreach n,$(FUZZ_NAMES),$(eval $(call FUZZ_RULE,$(n))))
-include $(wildcard build-fuzz/obj/*/*.d)

# one harness's run, one shell line
FUZZ_RUN_ONE = mkdir -p build-fuzz/corpus-$(1) && echo "fuzz $(1): $(FUZZ_S) s" && \
	{ build-fuzz/fuzz_$(1) -max_total_time=$(FUZZ_S) -print_final_stats=1 $(FUZZ_ARGS_$(1)) \
	      -artifact_prefix=build-fuzz/crash-$(1)- build-fuzz/corpus-$(1) tests/fuzz/corpus/$(1) \
	      2>build-fuzz/fuzz_$(1).log || { tail -40 build-fuzz/fuzz_$(1).log; exit 1; }; } && \
	grep -E '^\#[0-9]+.*DONE|stat::number_of_executed_units' build-fuzz/fuzz_$(1).log | tail -2

fuzz:
	@tools/deps.sh lib fuzz
	@$(MAKE) --no-print-directory $(FUZZ_RUN:%=build-fuzz/fuzz_%)
	@$(foreach n,$(FUZZ_RUN),$(call FUZZ_RUN_ONE,$(n)) && ) true

clean:
	rm -rf build build-*

-include $(BENCH_SRCS:%.c=$(BUILD)/%.d) $(LIB_OBJS:.o=.d) $(PIC_OBJS:.o=.d) $(TEST_OBJS:.o=.d) $(PAT_OBJS:.o=.d) $(PAT_MAIN_OBJS:.o=.d) $(FAULT_OBJS:.o=.d) $(BUILD)/tools/minidoc.d $(CLI_OBJS:.o=.d) $(TOOL_OBJS:.o=.d) $(SRV_OBJS:.o=.d)
