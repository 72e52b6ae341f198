# pystrobe build. `make` builds build/pystrobe; `make test` does all set-up
# (Debian packages, the sid root with python3.13-3.15) and runs every test,
# in the normal build and again under AddressSanitizer + UBSan;
# `make demo` dumps the stacks of a bundled example script.

CC      ?= cc
B       ?= build
WERROR  ?= $(if $(CI),-Werror,)
SAN     ?=
PYTHON  ?= /usr/bin/python3

WARN    := -Wall -Wextra -Wshadow -Wstrict-prototypes -Wmissing-prototypes -Wformat=2 \
           -Wpointer-arith -Wcast-align -Wvla -Wundef $(WERROR)
CFLAGS  ?= -O2 -g
ALL_CFLAGS := -std=c11 -D_GNU_SOURCE -fvisibility=hidden -fPIC -Iinclude -Isrc -I$(B)/gen \
              $(WARN) $(CFLAGS) $(SAN)
LDLIBS  := -lelf -lz -lzstd -lpthread
LDFLAGS ?=

LIB_SRC := $(wildcard src/util/*.c src/platform/*.c src/binfmt/*.c src/mem/*.c src/cpython/*.c \
                      src/core/*.c src/output/*.c)
CLI_SRC := $(wildcard src/cli/*.c)
LIB_OBJ := $(LIB_SRC:%.c=$(B)/obj/%.o)
CLI_OBJ := $(CLI_SRC:%.c=$(B)/obj/%.o)
UNIT_SRC := $(wildcard tests/unit/test_*.c)
UNIT_BIN := $(UNIT_SRC:tests/unit/%.c=$(B)/tests/%)
TOOL_SRC := $(wildcard tests/tools/*.c)
TOOL_BIN := $(TOOL_SRC:tests/tools/%.c=$(B)/tests/%)

# --- native stacks (--native): elfutils' libdwfl unwinds and symbolises
# (src/platform/unwind.c; libdw-dev).
LDLIBS  += -ldw
# --- pprof: the C code of src/output/profile.proto, made by protoc-c ----------
# (protobuf-c-compiler) at build time into $(B)/gen, linked with libprotobuf-c;
# -lm for the heatmap's log scale.
PROTO_C := $(B)/gen/profile.pb-c.c
LIB_OBJ += $(B)/obj/$(PROTO_C:.c=.o)
LDLIBS  += -lprotobuf-c -lm
$(B)/gen/profile.pb-c.h: $(PROTO_C)
$(PROTO_C): src/output/profile.proto
	@mkdir -p $(dir $@)
	protoc-c --proto_path=src/output --c_out=$(B)/gen $<
$(B)/obj/src/output/pprof.o: $(B)/gen/profile.pb-c.h

.PHONY: fuzz-recording all deps sidroot test test-unit test-integration test-one demo clean fuzz format module bench bench-austin soak images

all: $(B)/pystrobe $(B)/libpystrobe.so $(UNIT_BIN) $(TOOL_BIN)

$(B)/obj/%.o: %.c $(wildcard include/pystrobe/*.h src/*/*.h)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -c $< -o $@

$(B)/libpystrobe.a: $(LIB_OBJ)
	@mkdir -p $(dir $@)
	rm -f $@ && ar rcs $@ $^

$(B)/libpystrobe.so: $(LIB_OBJ)
	$(CC) -shared $(SAN) $(LDFLAGS) -Wl,-soname,libpystrobe.so.$(SOVERSION) -o $@ $^ $(LDLIBS)

$(B)/pystrobe: $(CLI_OBJ) $(B)/libpystrobe.a
	$(CC) $(SAN) $(LDFLAGS) -o $@ $(CLI_OBJ) $(B)/libpystrobe.a $(LDLIBS)

# --- live view (`--live`): ncurses, for the command only ----------------------
LIVE_CFLAGS := $(shell pkg-config --cflags ncursesw 2>/dev/null)
LIVE_LIBS   := $(or $(shell pkg-config --libs ncursesw 2>/dev/null),-lncursesw -ltinfo)
$(patsubst %.c,$(B)/obj/%.o,$(wildcard src/cli/live*.c)): ALL_CFLAGS += $(LIVE_CFLAGS)
$(B)/pystrobe: LDLIBS += $(LIVE_LIBS) -lpthread

$(B)/tests/%: tests/unit/%.c $(B)/libpystrobe.a
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -fvisibility=default $(LDFLAGS) -o $@ $< $(B)/libpystrobe.a $(LDLIBS) -lcmocka

$(B)/tests/%: tests/tools/%.c $(B)/libpystrobe.a
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) $(LDFLAGS) -o $@ $< $(B)/libpystrobe.a $(LDLIBS)

$(B)/gen/flamegraph_html.h: src/output/flamegraph.html tools/embed_asset.py
	$(PYTHON) tools/embed_asset.py $< $@ out_flamegraph_html

$(B)/obj/src/output/flamegraph.o: $(B)/gen/flamegraph_html.h

# --- Python module ------------------------------------------------------------
# `make module`: the pystrobe package in $(B)/python/pystrobe, importable with
# PYTHONPATH=$(B)/python. One abi3 build (limited API of 3.8) serves every host
# 3.8+. The library layers it uses are compiled again without $(SAN): a
# sanitized extension cannot load into an ordinary interpreter. libpystrobe is
# linked in statically (its symbols hidden), libelf dynamically, and only the
# libraries it uses (--as-needed: the module is loaded in chroots and
# containers that lack the command's libraries, such as protobuf-c).

PY_INCLUDE   = $(shell $(PYTHON) -c 'import sysconfig; print(sysconfig.get_paths()["include"])')
MOD_DIR     := $(B)/python/pystrobe
MOD_CFLAGS  := -std=c11 -D_GNU_SOURCE -fvisibility=hidden -fPIC -Iinclude -Isrc $(WARN) $(CFLAGS)
MOD_LIB_SRC := $(filter-out src/output/% src/cli/%,$(LIB_SRC)) src/output/tach.c
# The module has no native stacks: it needs no libdw (a sid-root Python has none).
MOD_LIB_SRC := $(filter-out src/platform/unwind.c,$(MOD_LIB_SRC))
MOD_CFLAGS  += -DPYS_NO_NATIVE_STACKS
MOD_LIB_OBJ := $(MOD_LIB_SRC:%.c=$(B)/python/obj/%.o)
MOD_PY      := $(patsubst python/pystrobe/%,$(MOD_DIR)/%,$(wildcard python/pystrobe/*.py))

module: $(MOD_DIR)/_pystrobe.abi3.so $(MOD_PY)

$(B)/python/obj/%.o: %.c $(wildcard include/pystrobe/*.h src/*/*.h)
	@mkdir -p $(dir $@)
	$(CC) $(MOD_CFLAGS) -c $< -o $@

$(B)/python/obj/libpystrobe.a: $(MOD_LIB_OBJ)
	rm -f $@ && ar rcs $@ $^

$(MOD_DIR)/_pystrobe.abi3.so: python/pystrobe/_pystrobe.c $(B)/python/obj/libpystrobe.a \
                              $(wildcard include/pystrobe/*.h)
	@mkdir -p $(dir $@)
	$(CC) $(MOD_CFLAGS) -isystem $(PY_INCLUDE) -DPy_LIMITED_API=0x03080000 -shared $(LDFLAGS) \
	    -Wl,--exclude-libs,ALL -o $@ $< $(B)/python/obj/libpystrobe.a -Wl,--as-needed $(LDLIBS)

$(MOD_DIR)/%.py: python/pystrobe/%.py
	@mkdir -p $(dir $@)
	cp $< $@

# --- set-up -----------------------------------------------------------------

deps:
	scripts/install-deps.sh

sidroot: deps
	scripts/sidroot.sh ensure

# --- tests ------------------------------------------------------------------

# Unit tests and the integration suite against one build directory.
UNIT_RUN = @set -e; for t in $(UNIT_BIN); do echo "== $$t"; $$t; done
INTEGRATION_RUN = PYSTROBE_BUILD=$(abspath $(B)) PYSTROBE_SANITIZED=$(if $(SAN),1,) \
    $(PYTHON) -m pytest -q -p no:cacheprovider --durations=20 tests/integration
test-one: all module
	$(UNIT_RUN)
	$(INTEGRATION_RUN)
test-unit: all
	$(UNIT_RUN)
test-integration: all module
	$(INTEGRATION_RUN)

# Builds run JOBS-wide (the tests themselves run one at a time). The steps
# that need no sid root (the builds, the fuzzers, the unit tests) run beside
# its debootstrap, and the fuzzers (one core each, for a fixed time) beside
# the unit tests; only the integration suites run alone, one after the other.
JOBS ?= $(shell nproc)
ASAN_MAKE = $(MAKE) --no-print-directory B=build-asan CC=clang \
    SAN="-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all"
.PHONY: test-root test-build test-build-asan test-fuzz test-units
test:
	$(MAKE) -j$$(($(JOBS) + 2)) -O --no-print-directory test-root test-fuzz test-units
	+$(ASAN_MAKE) -j$(JOBS) test-integration
	$(MAKE) -j$(JOBS) --no-print-directory test-integration
test-root: deps
	scripts/sidroot.sh ensure
# The fuzzers' objects include build/gen, so they are built after the
# normal build, in the same make.
test-build: deps
	$(MAKE) --no-print-directory all module $(FUZZ_BIN)
test-build-asan: deps
	+$(ASAN_MAKE) all module
test-fuzz: test-build
	$(MAKE) --no-print-directory fuzz FUZZ_SECONDS=$(TEST_FUZZ_SECONDS) FUZZ_SEED=$(TEST_FUZZ_SEED)
test-units: test-build test-build-asan
	+$(ASAN_MAKE) test-unit
	$(MAKE) --no-print-directory test-unit

# Each fuzzer for FUZZ_SECONDS (libFuzzer, clang); `make test` runs each briefly.
# The library is compiled once for all fuzzers (coverage-instrumented, ASan +
# UBSan) into FUZZ_B/libfuzz.a; each fuzzer links its harness against it.
# FUZZ_SEED is libFuzzer's -seed (not 0); without it each run picks its own.
# A run with a seed starts from the seeds alone (its new inputs go to a
# scratch directory emptied first, the kept corpus-NAME is left alone), so
# that it repeats: `make test`'s pass always uses TEST_FUZZ_SEED. A failure
# prints the seed, the input that failed (in FUZZ_B/artifacts-NAME/) and
# the commands that replay it.
FUZZ_SECONDS ?= 30
FUZZ_SEED ?=
TEST_FUZZ_SECONDS ?= 5
TEST_FUZZ_SEED ?= 1
FUZZ_B := build-fuzz
FUZZ_SRC := $(wildcard tests/fuzz/fuzz_*.c)
FUZZ_BIN := $(FUZZ_SRC:tests/fuzz/%.c=$(FUZZ_B)/%)
FUZZ_CFLAGS := -std=c11 -D_GNU_SOURCE -Iinclude -Isrc -I$(B)/gen -g -O1 -fsanitize=address,undefined
FUZZ_OBJ := $(patsubst %.c,$(FUZZ_B)/obj/%.o,$(LIB_SRC) $(PROTO_C))
$(FUZZ_B)/obj/%.o: %.c $(B)/gen/flamegraph_html.h $(B)/gen/profile.pb-c.h \
                   $(wildcard include/pystrobe/*.h src/*/*.h)
	@mkdir -p $(dir $@)
	clang $(FUZZ_CFLAGS) -fsanitize=fuzzer-no-link -c $< -o $@
$(FUZZ_B)/libfuzz.a: $(FUZZ_OBJ)
	rm -f $@ && ar rcs $@ $^
$(FUZZ_B)/fuzz_%: tests/fuzz/fuzz_%.c $(FUZZ_B)/libfuzz.a
	clang $(FUZZ_CFLAGS) -fsanitize=fuzzer $< $(FUZZ_B)/libfuzz.a $(LDLIBS) -o $@
fuzz: $(FUZZ_BIN)
	@set -e; for f in $(FUZZ_SRC); do \
	  n=$$(basename $$f .c); a=$(FUZZ_B)/artifacts-$$n/; \
	  c=$(FUZZ_B)/$(if $(FUZZ_SEED),scratch,corpus)-$$n; \
	  $(if $(FUZZ_SEED),rm -rf $$c;) mkdir -p $$c $$a; \
	  echo "== $$n ($(FUZZ_SECONDS) s$(if $(FUZZ_SEED),; seed $(FUZZ_SEED)))"; \
	  if ! $(FUZZ_B)/$$n -max_total_time=$(FUZZ_SECONDS) $(if $(FUZZ_SEED),-seed=$(FUZZ_SEED)) \
	      -artifact_prefix=$$a $$c tests/fuzz/seeds/$$n 2>$(FUZZ_B)/$$n.log; then \
	    tail -40 $(FUZZ_B)/$$n.log; \
	    s=$$(sed -n 's/^INFO: Seed: \([0-9]*\).*/\1/p' $(FUZZ_B)/$$n.log | head -1); \
	    u=$$(sed -n 's/.*Test unit written to \(.*\)$$/\1/p' $(FUZZ_B)/$$n.log | tail -1); \
	    echo "== $$n FAILED with seed $${s:-?}; the failing input: $${u:-none written}"; \
	    echo "   replay the input: $(FUZZ_B)/$$n $${u:-INPUT}"; \
	    echo "   the same run:     make fuzz FUZZ_SRC=$$f FUZZ_SEED=$${s:-?} FUZZ_SECONDS=$(FUZZ_SECONDS)"; \
	    exit 1; \
	  fi; \
	  tail -1 $(FUZZ_B)/$$n.log; \
	done

# --- recorded images ----------------------------------------------------------

# Re-record tests/images (tests/images/aba.py under every version, stopped
# in each of its two chains) for tests/unit/test_images.c; IMAGES_VERSIONS
# picks versions (default all, 3.8 to 3.15). Needs root and the sid root.
IMAGES_VERSIONS ?=
images: sidroot all
	tools/record_images.sh $(B) $(IMAGES_VERSIONS)

# --- benchmark ----------------------------------------------------------------

# pystrobe side by side with CPython 3.15's own profiler (bench/README.md);
# not part of `make test`. `make bench BENCH_ARGS=--quick` is a smoke run.
bench: sidroot all module $(B)/bench/unwind_loop $(B)/bench/pace_floor
	$(PYTHON) bench/run.py --build $(B) $(BENCH_ARGS)

# The CPython 3.12 rows: pystrobe against Austin (Debian's, unpacked into the root).
bench-austin: sidroot all $(B)/bench/unwind_loop
	scripts/sidroot.sh austin
	$(PYTHON) bench/run.py --build $(B) --versus austin \
	    --results bench/RESULTS-3.12-austin.md $(BENCH_ARGS)

$(B)/bench/unwind_loop: bench/unwind_loop.c $(B)/libpystrobe.a
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) $(LDFLAGS) -o $@ $< $(B)/libpystrobe.a $(LDLIBS)

$(B)/bench/pace_floor: bench/pace_floor.c
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) $(LDFLAGS) -o $@ $<

# --- demo -------------------------------------------------------------------

demo: sidroot all
	scripts/demo.sh $(B)/pystrobe

format:
	clang-format -i $(wildcard include/pystrobe/*.h src/*/*.[ch] tests/unit/*.c tests/tools/*.c)

clean:
	rm -rf build build-asan build-fuzz

# --- soak ---------------------------------------------------------------------

# An hour at 10 kHz against tests/soak/workload.py (threads, random recursion,
# exceptions, GC); not part of `make test`. SOAK_ARGS="--minutes 5" for less.
SOAK_ARGS ?=
soak: sidroot all
	$(PYTHON) tests/soak/soak.py --build $(B) --out $(B)/soak $(SOAK_ARGS)

# --- packaging ----------------------------------------------------------------
# `make install` / `make uninstall` (PREFIX, DESTDIR and the directories
# below), `make deb` (Debian packages in $(B)/deb), `make dist` (a tarball that
# records its commit). The man page and the shell completions are generated
# from the built binary's own --help texts (tools/gen_docs.py) plus
# docs/cli.md, so an option added to --help reaches them without an edit.

.PHONY: install uninstall deb dist docs FORCE

VERSION      := $(shell cat VERSION)
SOVERSION    := 0
PREFIX       ?= /usr/local
BINDIR       ?= $(PREFIX)/bin
LIBDIR       ?= $(PREFIX)/lib
INCLUDEDIR   ?= $(PREFIX)/include
MANDIR       ?= $(PREFIX)/share/man
PKGCONFIGDIR ?= $(LIBDIR)/pkgconfig
BASHCOMPDIR  ?= $(PREFIX)/share/bash-completion/completions
ZSHCOMPDIR   ?= $(PREFIX)/share/zsh/site-functions
# One abi3 package serves every Python 3.8+: a directory no single version
# owns (Debian's python3 reads it under /usr; elsewhere set PYTHONPATH).
PYTHONDIR    ?= $(PREFIX)/lib/python3/dist-packages
DOCS         := $(B)/pystrobe.1 $(B)/completion/pystrobe.bash $(B)/completion/_pystrobe

$(B)/gen/version.h: FORCE
	@mkdir -p $(dir $@)
	@tools/gen_version.sh > $@.tmp && { cmp -s $@.tmp $@ && rm -f $@.tmp || mv $@.tmp $@; }

$(B)/obj/src/cli/main.o $(B)/obj/src/cli/record_bin.o: $(B)/gen/version.h

docs: $(DOCS)

$(B)/pystrobe.1: $(B)/pystrobe tools/gen_docs.py docs/cli.md VERSION
	$(PYTHON) tools/gen_docs.py man $(B)/pystrobe docs/cli.md > $@.tmp && mv $@.tmp $@

$(B)/completion/pystrobe.bash: $(B)/pystrobe tools/gen_docs.py
	@mkdir -p $(dir $@)
	$(PYTHON) tools/gen_docs.py bash $(B)/pystrobe > $@.tmp && mv $@.tmp $@

$(B)/completion/_pystrobe: $(B)/pystrobe tools/gen_docs.py
	@mkdir -p $(dir $@)
	$(PYTHON) tools/gen_docs.py zsh $(B)/pystrobe > $@.tmp && mv $@.tmp $@

# Rewritten at each make: its paths follow the command line's PREFIX/LIBDIR.
$(B)/libpystrobe.pc: FORCE
	printf '%s\n' 'prefix=$(PREFIX)' 'includedir=$(INCLUDEDIR)' 'libdir=$(LIBDIR)' '' \
	    'Name: libpystrobe' \
	    'Description: read the Python stacks of running CPython 3.7-3.15 processes' \
	    'Version: $(VERSION)' 'Libs: -L$${libdir} -lpystrobe' 'Cflags: -I$${includedir}' > $@

install: $(B)/pystrobe $(B)/libpystrobe.so $(B)/libpystrobe.pc module $(DOCS)
	install -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(MANDIR)/man1 $(DESTDIR)$(LIBDIR) \
	    $(DESTDIR)$(PKGCONFIGDIR) $(DESTDIR)$(INCLUDEDIR)/pystrobe $(DESTDIR)$(BASHCOMPDIR) \
	    $(DESTDIR)$(ZSHCOMPDIR) $(DESTDIR)$(PYTHONDIR)/pystrobe
	install -m 755 $(B)/pystrobe $(DESTDIR)$(BINDIR)/pystrobe
	install -m 644 $(B)/pystrobe.1 $(DESTDIR)$(MANDIR)/man1/pystrobe.1
	install -m 644 $(B)/libpystrobe.so $(DESTDIR)$(LIBDIR)/libpystrobe.so.$(VERSION)
	ln -sf libpystrobe.so.$(VERSION) $(DESTDIR)$(LIBDIR)/libpystrobe.so.$(SOVERSION)
	ln -sf libpystrobe.so.$(SOVERSION) $(DESTDIR)$(LIBDIR)/libpystrobe.so
	install -m 644 $(B)/libpystrobe.pc $(DESTDIR)$(PKGCONFIGDIR)/libpystrobe.pc
	install -m 644 include/pystrobe/pystrobe.h $(DESTDIR)$(INCLUDEDIR)/pystrobe/pystrobe.h
	install -m 644 $(B)/completion/pystrobe.bash $(DESTDIR)$(BASHCOMPDIR)/pystrobe
	install -m 644 $(B)/completion/_pystrobe $(DESTDIR)$(ZSHCOMPDIR)/_pystrobe
	install -m 644 $(MOD_DIR)/_pystrobe.abi3.so $(MOD_PY) $(DESTDIR)$(PYTHONDIR)/pystrobe/

uninstall:
	rm -f $(DESTDIR)$(BINDIR)/pystrobe $(DESTDIR)$(MANDIR)/man1/pystrobe.1 \
	    $(DESTDIR)$(LIBDIR)/libpystrobe.so.$(VERSION) \
	    $(DESTDIR)$(LIBDIR)/libpystrobe.so.$(SOVERSION) $(DESTDIR)$(LIBDIR)/libpystrobe.so \
	    $(DESTDIR)$(PKGCONFIGDIR)/libpystrobe.pc $(DESTDIR)$(INCLUDEDIR)/pystrobe/pystrobe.h \
	    $(DESTDIR)$(BASHCOMPDIR)/pystrobe $(DESTDIR)$(ZSHCOMPDIR)/_pystrobe
	rm -rf $(DESTDIR)$(PYTHONDIR)/pystrobe
	-rmdir $(DESTDIR)$(INCLUDEDIR)/pystrobe 2>/dev/null

# The tree as tracked by git (with uncommitted changes), plus COMMIT.
dist:
	@mkdir -p $(B)
	rm -rf $(B)/dist/pystrobe-$(VERSION) && mkdir -p $(B)/dist/pystrobe-$(VERSION)
	git ls-files -z --cached --others --exclude-standard | \
	    tar --null --ignore-failed-read -cf - -T - 2>/dev/null | \
	    tar -xf - -C $(B)/dist/pystrobe-$(VERSION)
	sed -n 's/.*PYS_COMMIT "\(.*\)"/\1/p' $(B)/gen/version.h > $(B)/dist/pystrobe-$(VERSION)/COMMIT
	tar -czf $(B)/pystrobe-$(VERSION).tar.gz -C $(B)/dist pystrobe-$(VERSION)

dist: $(B)/gen/version.h

# Debian packages (debian/), built from a copy of the tree made as for
# `make dist`, so that dpkg-buildpackage writes only under $(B)/deb.
deb: dist
	rm -rf $(B)/deb && mkdir -p $(B)/deb
	cp -a $(B)/dist/pystrobe-$(VERSION) $(B)/deb/
	# Variables of this make (B, CC, SAN) must not reach the package's build.
	cd $(B)/deb/pystrobe-$(VERSION) && env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL \
	    dpkg-buildpackage -us -uc -b -j2
	lintian --fail-on error $(B)/deb/*.changes

# --- recordings ---------------------------------------------------------------

# The recording reader's fuzzer alone (`make fuzz` runs it with the others).
fuzz-recording: $(B)/gen/flamegraph_html.h
	$(MAKE) --no-print-directory fuzz FUZZ_SRC=tests/fuzz/fuzz_recording.c
# --- accuracy -----------------------------------------------------------------

# The oracle of issue 33 (bench/accuracy): each CPython 3.8-3.15 running each
# accuracy workload, stopped at random moments for the truth, profiled by
# pystrobe (and on 3.15 by CPython's own profiler); writes bench/ACCURACY.md.
# Not part of `make test` (tests/integration/test_accuracy.py is its quick
# version). ACCURACY_ARGS="--versions 3.12 --workloads chains10 --stops 600".
ACCURACY_ARGS ?=
.PHONY: accuracy
accuracy: sidroot all module
	$(PYTHON) bench/accuracy/run.py --build $(abspath $(B)) $(ACCURACY_ARGS)
