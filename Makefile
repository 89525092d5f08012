# kvlineage: one Makefile, no generator. `make help` lists every target.
# Everything built goes under $(BUILD); sources are collected by wildcard, so a new file needs no edit here.

BUILD    ?= build
CC       ?= cc
NVCC     ?= nvcc
SAN      ?=
APT_PKGS := libopenblas-dev libcjson-dev check pkg-config
# python3-nbformat: the notebook schema test needs it; python3-nbclient and python3-ipykernel: the test
# that runs the notebooks through their Jupyter kernel. Each skips (saying so) without them. The site
# packages build `make site`; the browser ones run its browser test, which skips (saying so) without them.
SITE_PKGS    := katex libjs-katex python3-venv
BROWSER_PKGS := chromium chromium-driver python3-selenium
APT_OPTIONAL := python3-nbformat python3-nbclient python3-ipykernel $(SITE_PKGS) $(BROWSER_PKGS)
PC_PKGS  := openblas libcjson check
BREW_PKGS := openblas cjson check libomp pkg-config
INSTALL_LINE = $(if $(filter Darwin,$(shell uname -s)),brew install $(BREW_PKGS),sudo apt-get install $(APT_PKGS))

.DEFAULT_GOAL := all
SETUP_FREE_GOALS := help clean deps cuda cuda-check test-arm64
ifeq ($(MAKECMDGOALS),)
NEEDS_DEPS := yes
else ifneq ($(filter-out $(SETUP_FREE_GOALS),$(MAKECMDGOALS)),)
NEEDS_DEPS := yes
endif

# ---- dependencies: installed by a rule, never while this file is read -----------------------------
# $(DEPS_MK) holds the flags pkg-config gives for them. Its rule installs the packages first where they
# are missing, when run as root; otherwise it stops before anything compiles, naming the apt-get line.
# Every compile waits for it (order-only: rewriting it rebuilds nothing), and reads its flags when its
# recipe runs, after the rule: so a fresh clone's first `make test` installs and then builds, while
# reading the Makefile (make help, make -n) installs and runs nothing. It is read, not included: make
# would remake an included file before any goal, under -n too.
DEPS_MK := $(BUILD)/deps.mk
# $(call dep,VAR): VAR as $(DEPS_MK) sets it (make syntax: gpu-bundle's refer to $(CURDIR)), empty without it
dep = $(eval dep_value := $(shell sed -n 's/^$(1) := //p' $(DEPS_MK) 2>/dev/null))$(dep_value)
DEP_CFLAGS = $(call dep,DEP_CFLAGS)
DEP_LIBS   = $(call dep,DEP_LIBS)
# the line a build starts with: $(1), $(2), $(3) the OpenBLAS, cJSON and Check versions
deps_line = kvlineage: OpenBLAS $(1), OpenMP (-fopenmp), cJSON $(2), Check $(3), nvcc $(or $(shell command -v $(NVCC) 2>/dev/null),absent)
DEPS_FOUND = command -v pkg-config >/dev/null 2>&1 && pkg-config --exists $(PC_PKGS)

$(DEPS_MK): Makefile
	@mkdir -p $(@D)
	@if ! { $(DEPS_FOUND); } && [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	  echo "kvlineage: installing build dependencies: $(APT_PKGS)"; \
	  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $(APT_PKGS) $(APT_OPTIONAL); } \
	    >$(@D)/apt.log 2>&1 || { echo "kvlineage: apt-get failed, see $(@D)/apt.log" >&2; exit 1; }; \
	fi; \
	$(DEPS_FOUND) || { echo "kvlineage: missing build dependencies; run:  $(INSTALL_LINE)" >&2; exit 1; }
	@{ echo "DEP_CFLAGS := $$(pkg-config --cflags $(PC_PKGS))"; \
	   echo "DEP_LIBS := $$(pkg-config --libs $(PC_PKGS))"; \
	   echo "DEP_OPENBLAS := $$(pkg-config --modversion openblas)"; \
	   echo "DEP_CJSON := $$(pkg-config --modversion libcjson)"; \
	   echo "DEP_CHECK := $$(pkg-config --modversion check)"; } > $@.new && mv $@.new $@
	@echo "$(call deps_line,$$(pkg-config --modversion openblas),$$(pkg-config --modversion libcjson),$$(pkg-config --modversion check))"

# Where the flags are already recorded, the line comes first; on a fresh clone the rule above prints it.
ifeq ($(MAKELEVEL)$(NEEDS_DEPS),0yes)
ifneq ($(wildcard $(DEPS_MK)),)
$(info $(call deps_line,$(call dep,DEP_OPENBLAS),$(call dep,DEP_CJSON),$(call dep,DEP_CHECK)))
endif
endif

# ---- flags ---------------------------------------------------------------------------------------
WERROR   := -Werror
WARN      = -Wall -Wextra $(WERROR) -Wshadow -Wvla -Wstrict-prototypes
# -fno-trapping-math: nothing here reads the floating-point exception flags, so the compiler may evaluate
# both sides of a float select; without it no loop with one vectorises (kvl_softmax_exp_f32's e^x).
# Values are unchanged: it permits no reassociation and no contraction.
OPT      := -O2 -g -fno-trapping-math
INCLUDES := -Iformats -Iref -Iref/core -Icpu -Ichapters/common -Itests
# OpenMP: gcc's and clang's -fopenmp on Linux. Apple's clang takes it as a preprocessor flag only and links
# Homebrew's libomp (brew install libomp), which is keg-only: its prefix is asked of brew.
ifeq ($(shell uname -s),Darwin)
BREW_OMP := $(shell brew --prefix libomp 2>/dev/null)
OPENMP_CFLAGS := -Xpreprocessor -fopenmp -I$(BREW_OMP)/include
OPENMP_LIBS   := -L$(BREW_OMP)/lib -lomp
export PKG_CONFIG_PATH := $(shell for f in openblas cjson check; do printf '%s/lib/pkgconfig:' "$$(brew --prefix $$f 2>/dev/null)"; done)$(PKG_CONFIG_PATH)
else
OPENMP_CFLAGS := -fopenmp
OPENMP_LIBS   := -fopenmp
endif
CFLAGS    = -std=gnu11 $(OPT) $(WARN) $(OPENMP_CFLAGS) $(INCLUDES) $(DEP_CFLAGS) -DKVL_SOURCE_DIR=\"$(CURDIR)\" $(EXTRA_CFLAGS)
LDLIBS    = $(DEP_LIBS) -lm $(OPENMP_LIBS)
ifeq ($(SAN),1)
CFLAGS   += -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
LDLIBS   += -fsanitize=address,undefined
endif
DEPFLAGS  = -MMD -MP

# Quiet by default: one line per step; `make V=1` prints the full commands.
ifeq ($(V),1)
Q :=
say = @true
else
Q := @
say = @printf '  %-6s %s\n' $(1) $(2)
endif

# ---- sources -------------------------------------------------------------------------------------
FORMATS_SRC := $(wildcard formats/*.c)
REF_SRC     := $(wildcard ref/core/*.c) $(wildcard ref/*.c)
CPU_SRC     := $(wildcard cpu/*.c)
CHAPLIB_SRC := $(wildcard chapters/common/*.c)
PROG_SRC    := $(filter-out $(CHAPLIB_SRC),$(wildcard chapters/*/*.c))
TEST_SRC    := $(wildcard tests/test_*.c)
TESTLIB_SRC := $(filter-out $(TEST_SRC),$(wildcard tests/*.c))
BENCH_SRC   := $(wildcard tests/bench/*.c)
NB_SRC      := $(wildcard notebooks_c/[0-9][0-9]_*.c)
NBTOOL_SRC  := notebooks_c/nb_ipynb.c
NBLIB_SRC   := $(filter-out $(NB_SRC) $(NBTOOL_SRC),$(wildcard notebooks_c/*.c))

obj = $(patsubst %.c,$(BUILD)/obj/%.o,$(1))

# The sources with hot loops (formats/isa.h): each also compiled with AVX2 and FMA into X.avx2.o and with
# AVX-512 (F, BW, VL, DQ) into X.avx512.o, which name their dispatched functions _avx2 and _avx512 where
# X.o names them _baseline; the run time picks one. All without contraction: gnu11's default
# -ffp-contract=fast would fuse a·b + c into an FMA in the vector builds only, and they would round
# differently. The AVX-512 build prefers 512-bit vectors (GCC's default tuning stops at 256). On other
# machines than x86-64 only the baseline.
ISA_SRC     := formats/element.c formats/block.c cpu/softmax_cpu.c cpu/index_scan_cpu.c
ISA_FLAGS   := -ffp-contract=off
AVX2_FLAGS  := -mavx2 -mfma
AVX512_FLAGS := $(AVX2_FLAGS) -mavx512f -mavx512bw -mavx512vl -mavx512dq -mprefer-vector-width=512
ifneq ($(findstring x86_64,$(shell $(CC) -dumpmachine)),)
isa_obj    = $(foreach v,avx2 avx512,$(patsubst %.c,$(BUILD)/obj/%.$(v).o,$(filter $(ISA_SRC),$(1))))
CFLAGS    += -DKVF_ISA_HAVE_X86
endif
# Debian 12's aarch64 gcc (12.2) stops with an internal error in its vectoriser on some fmax reductions
# (the tests' and programs' largest-error loops); called as a library function, fmax is not vectorised.
# Nothing hot calls it.
ifneq ($(findstring aarch64,$(shell $(CC) -dumpmachine)),)
CFLAGS    += -fno-builtin-fmax
endif
LIB_FORMATS := $(BUILD)/lib/libkvformats.a
LIB_REF     := $(BUILD)/lib/libkvref.a
LIB_CPU     := $(BUILD)/lib/libkvcpu.a
LIB_CHAPTERS := $(BUILD)/lib/libkvchapters.a
LIBS        := $(LIB_CHAPTERS) $(LIB_CPU) $(LIB_REF) $(LIB_FORMATS)
PROGS       := $(addprefix $(BUILD)/bin/,$(notdir $(PROG_SRC:.c=)))
TESTS       := $(addprefix $(BUILD)/tests/,$(notdir $(TEST_SRC:.c=)))
nb_prog      = $(BUILD)/bin/nb_$(firstword $(subst _, ,$(notdir $(1:.c=))))
NBS         := $(foreach s,$(NB_SRC),$(call nb_prog,$(s))) $(BUILD)/bin/nb_ipynb

.SECONDARY:
.PHONY: all test sanitize test-core test-arm64 arm64-suites run bench bench-peers bench-ggml cuda deps help clean notebooks renders site notebook-flags jupyter
all: $(LIBS) $(PROGS) $(NBS) $(TESTS) $(if $(BENCH_SRC),$(BUILD)/bin/kvbench)  ## build every library, program and test binary (the default)

$(BUILD)/obj/%.o: %.c | $(DEPS_MK)
	@mkdir -p $(@D)
	$(call say,CC,$<)
	$(Q)$(CC) $(CFLAGS) $(DEPFLAGS) -c $< -o $@

$(call obj,$(ISA_SRC)): CFLAGS += $(ISA_FLAGS)
$(BUILD)/obj/%.avx2.o: %.c | $(DEPS_MK)
	@mkdir -p $(@D)
	$(call say,CCAVX2,$<)
	$(Q)$(CC) $(CFLAGS) $(ISA_FLAGS) $(AVX2_FLAGS) -DKVF_ISA_BUILD_AVX2 $(DEPFLAGS) -c $< -o $@
$(BUILD)/obj/%.avx512.o: %.c | $(DEPS_MK)
	@mkdir -p $(@D)
	$(call say,CCAVX512,$<)
	$(Q)$(CC) $(CFLAGS) $(ISA_FLAGS) $(AVX512_FLAGS) -DKVF_ISA_BUILD_AVX512 $(DEPFLAGS) -c $< -o $@

$(LIB_FORMATS): $(call obj,$(FORMATS_SRC)) $(call isa_obj,$(FORMATS_SRC))
	@mkdir -p $(@D)
	$(call say,AR,$@)
	$(Q)$(AR) rcs $@ $^
$(LIB_REF): $(call obj,$(REF_SRC)) $(call isa_obj,$(REF_SRC))
	@mkdir -p $(@D)
	$(call say,AR,$@)
	$(Q)$(AR) rcs $@ $^
$(LIB_CPU): $(call obj,$(CPU_SRC)) $(call isa_obj,$(CPU_SRC))
	@mkdir -p $(@D)
	$(call say,AR,$@)
	$(Q)$(AR) rcs $@ $^
$(LIB_CHAPTERS): $(call obj,$(CHAPLIB_SRC))
	@mkdir -p $(@D)
	$(call say,AR,$@)
	$(Q)$(AR) rcs $@ $^

define program_rule
$(BUILD)/bin/$(notdir $(1:.c=)): $(call obj,$(1)) $(LIBS)
	@mkdir -p $$(@D)
	$$(call say,LINK,$$@)
	$$(Q)$$(CC) $$(CFLAGS) $$< $(LIBS) $$(LDLIBS) -o $$@
endef
$(foreach p,$(PROG_SRC),$(eval $(call program_rule,$(p))))

# notebooks_c/NN_name.c → nb_NN, linked with the notebook runtime (nb, nb_source, pager, draw_*); nb_ipynb converts
define notebook_rule
$(2): $(call obj,$(1)) $(call obj,$(NBLIB_SRC)) $(LIBS)
	@mkdir -p $$(@D)
	$$(call say,LINK,$$@)
	$$(Q)$$(CC) $$(CFLAGS) $$< $(call obj,$(NBLIB_SRC)) $(LIBS) $$(LDLIBS) -o $$@
endef
$(foreach s,$(NB_SRC) $(NBTOOL_SRC),$(eval $(call notebook_rule,$(s),$(if $(filter $(NBTOOL_SRC),$(s)),$(BUILD)/bin/nb_ipynb,$(call nb_prog,$(s))))))

$(BUILD)/tests/%: $(BUILD)/obj/tests/%.o $(call obj,$(TESTLIB_SRC)) $(LIBS)
	@mkdir -p $(@D)
	$(call say,LINK,$@)
	$(Q)$(CC) $(CFLAGS) $< $(call obj,$(TESTLIB_SRC)) $(LIBS) $(LDLIBS) -o $@

# The walker's suite also calls the notebook runtime it proves: the TeX translator, the source reader
# and the pager.
WALKER_OBJ := $(call obj,notebooks_c/tex_text.c notebooks_c/nb_source.c notebooks_c/pager.c)
$(BUILD)/obj/tests/test_course_walker.o: CFLAGS += -Inotebooks_c
$(BUILD)/tests/test_course_walker: $(BUILD)/obj/tests/test_course_walker.o $(WALKER_OBJ) $(call obj,$(TESTLIB_SRC)) $(LIBS)
	@mkdir -p $(@D)
	$(call say,LINK,$@)
	$(Q)$(CC) $(CFLAGS) $< $(WALKER_OBJ) $(call obj,$(TESTLIB_SRC)) $(LIBS) $(LDLIBS) -o $@

# The bench's suite also proves its arithmetic, which has no measurement in it (tests/bench/stats.c).
$(BUILD)/tests/test_bench_kvbench: $(BUILD)/obj/tests/test_bench_kvbench.o $(call obj,tests/bench/stats.c $(TESTLIB_SRC)) $(LIBS)
	@mkdir -p $(@D)
	$(call say,LINK,$@)
	$(Q)$(CC) $(CFLAGS) $< $(call obj,tests/bench/stats.c $(TESTLIB_SRC)) $(LIBS) $(LDLIBS) -o $@

# ---- targets -------------------------------------------------------------------------------------
# The site's browser test runs last, where Chromium is: it builds the site, then loads every page.
test: all  ## build and run every Check suite, then the site's browser test where Chromium is; non-zero exit on any failure
	@failed=0; for t in $(TESTS); do \
	  echo "== $$(basename $$t)"; \
	  KVL_ROOT=$(CURDIR) KVL_BIN=$(abspath $(BUILD))/bin $$t || failed=$$((failed+1)); \
	done; \
	echo "== site (browser)"; \
	if $(SITE_BROWSER_FOUND); then \
	  { $(MAKE) --no-print-directory site && $(SITE_CHECK); } || failed=$$((failed+1)); \
	else echo "site: browser test skipped: no chromium, chromedriver or python3-selenium (apt-get install $(BROWSER_PKGS))"; fi; \
	echo "== $(words $(TESTS) site) suites, $$failed failed"; [ $$failed -eq 0 ]

# ASan and UBSan run the suites, and the programs they start, several times slower: Check's per-test
# limit (tests/common.h) is stretched to match.
sanitize:  ## run the whole test suite built with -fsanitize=address,undefined
	@CK_TIMEOUT_MULTIPLIER=4 $(MAKE) --no-print-directory BUILD=$(BUILD)/san SAN=1 test

# ---- arm64: Debian's cross compiler and arm64 packages, the suites under qemu-user ------------------
# `make test-arm64` builds everything for aarch64 in $(BUILD)/arm64 with $(ARM64_CC) against Debian's arm64
# packages (multiarch), then runs the suites of the formats, ref/core and the CPU backend under
# qemu-aarch64, each program they start through a wrapper that runs it under qemu too. It installs what
# it lacks when run as root, else names the lines to run. qemu translates every instruction: the run
# takes several minutes, so it is not part of .ci/run.
ARM64_CC     ?= aarch64-linux-gnu-gcc
ARM64_PKGS   := gcc-aarch64-linux-gnu qemu-user libgomp1:arm64 libopenblas-dev:arm64 libcjson-dev:arm64 check:arm64
ARM64_PC     := /usr/lib/aarch64-linux-gnu/pkgconfig:/usr/share/pkgconfig
ARM64_FOUND   = command -v $(ARM64_CC) >/dev/null 2>&1 && command -v qemu-aarch64 >/dev/null 2>&1 && \
                PKG_CONFIG_LIBDIR=$(ARM64_PC) pkg-config --exists $(PC_PKGS)
CORE_SUITES   = $(filter $(addprefix $(BUILD)/tests/,test_core_% test_cpu_% test_ch05_formats_%),$(TESTS))

test-core: $(CORE_SUITES) $(PROGS)  ## build and run only the formats, core and CPU-backend suites (what macOS's CI job runs)
	@failed=0; for t in $(CORE_SUITES); do echo "== $$(basename $$t)"; \
	  KVL_ROOT=$(CURDIR) KVL_BIN=$(abspath $(BUILD))/bin $$t || failed=$$((failed+1)); done; \
	echo "== $(words $(CORE_SUITES)) suites, $$failed failed"; [ $$failed -eq 0 ]

test-arm64:  ## cross-build for arm64 and run the formats, core and CPU-backend suites under qemu-user (minutes)
	@if ! { $(ARM64_FOUND); } && [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	  echo "kvlineage: installing the arm64 cross compiler, qemu-user and arm64 packages"; mkdir -p $(BUILD); \
	  { dpkg --add-architecture arm64 && apt-get update -qq && \
	    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq pkg-config $(ARM64_PKGS); } >$(BUILD)/apt-arm64.log 2>&1 || \
	    { echo "kvlineage: apt-get failed, see $(BUILD)/apt-arm64.log" >&2; exit 1; }; \
	fi; \
	$(ARM64_FOUND) || { echo "kvlineage: make test-arm64 needs:  sudo dpkg --add-architecture arm64 && sudo apt-get update && sudo apt-get install $(ARM64_PKGS)" >&2; exit 1; }
	@PKG_CONFIG_LIBDIR=$(ARM64_PC) $(MAKE) --no-print-directory BUILD=$(BUILD)/arm64 CC=$(ARM64_CC) arm64-suites

# Run inside test-arm64's build: every program wrapped to run under qemu, then the suites.
arm64-suites: $(CORE_SUITES) $(PROGS)
	@rm -rf $(BUILD)/qemu-bin && mkdir -p $(BUILD)/qemu-bin; \
	for p in $(PROGS); do w=$(BUILD)/qemu-bin/$$(basename $$p); \
	  printf '#!/bin/sh\nexec qemu-aarch64 "%s" "$$@"\n' "$(abspath $(BUILD))/bin/$$(basename $$p)" > $$w; chmod +x $$w; \
	done; \
	failed=0; for t in $(CORE_SUITES); do echo "== $$(basename $$t) (arm64, qemu-aarch64)"; \
	  KVL_ROOT=$(CURDIR) KVL_BIN=$(abspath $(BUILD))/qemu-bin CK_TIMEOUT_MULTIPLIER=10 qemu-aarch64 $$t || \
	    failed=$$((failed+1)); \
	done; \
	echo "== $(words $(CORE_SUITES)) suites on arm64, $$failed failed"; [ $$failed -eq 0 ]

$(BUILD)/bin/kvbench: $(call obj,$(BENCH_SRC)) $(LIBS)
	@mkdir -p $(@D)
	$(call say,LINK,$@)
	$(Q)$(CC) $(CFLAGS) $(call obj,$(BENCH_SRC)) $(LIBS) $(LDLIBS) -o $@

bench: $(BUILD)/bin/kvbench  ## measure this machine's ceilings and every kernel against them; also build/bench/results.md and decode.svg (minutes)
	@mkdir -p $(BUILD)/bench
	@$(BUILD)/bin/kvbench --out $(BUILD)/bench

# The bench's peers (tests/bench/peers.py) with pip, the versions its runs were taken with or newer; PyPI's
# torch for Linux brings its CUDA libraries along, some GB.
bench-peers:  ## install the bench's peers with pip: numpy, torch and ml_dtypes (torch brings some GB of CUDA libraries)
	python3 -m pip install 'numpy>=2.4' 'torch>=2.15' 'ml_dtypes>=0.7'

# ggml, llama.cpp's tensor library, as a peer of the decode steps (tests/bench/ggml/ggml_peer.c, which
# `kvbench peer` runs where it is built): the llama.cpp tree inside llama-cpp-python's source distribution,
# ggml alone built by cmake into $(BUILD)/peers for this CPU. The distribution leaves out the ggml.pc.in
# that ggml's own CMakeLists configures when built alone; an empty one stands in. The peer program links
# the bench's objects, kvbench.c's with its main renamed.
GGML_VERSION := 0.3.16
GGML_SDIST   := $(BUILD)/peers/llama_cpp_python-$(GGML_VERSION).tar.gz
GGML_TREE    := $(BUILD)/peers/llama_cpp_python-$(GGML_VERSION)/vendor/llama.cpp/ggml
GGML_BUILD   := $(BUILD)/peers/ggml-build
GGML_LIBS    := $(addprefix $(GGML_BUILD)/src/,libggml.a libggml-cpu.a libggml-base.a)

$(GGML_SDIST):
	@mkdir -p $(@D)
	python3 -m pip download --no-deps --no-binary :all: llama-cpp-python==$(GGML_VERSION) -d $(@D)

$(GGML_BUILD)/built: $(GGML_SDIST)
	tar xzf $< -C $(BUILD)/peers llama_cpp_python-$(GGML_VERSION)/vendor/llama.cpp/ggml
	touch $(GGML_TREE)/ggml.pc.in
	cmake -S $(GGML_TREE) -B $(GGML_BUILD) -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF -DGGML_NATIVE=ON \
	  -DGGML_OPENMP=ON -DGGML_CCACHE=OFF -DGGML_BUILD_TESTS=OFF -DGGML_BUILD_EXAMPLES=OFF
	cmake --build $(GGML_BUILD) -j2
	touch $@

$(BUILD)/obj/tests/bench/kvbench.nomain.o: tests/bench/kvbench.c | $(DEPS_MK)
	@mkdir -p $(@D)
	$(call say,CC,$<)
	$(Q)$(CC) $(CFLAGS) -Dmain=kvbench_main -c $< -o $@

$(BUILD)/peers/ggml_peer: tests/bench/ggml/ggml_peer.c $(GGML_BUILD)/built $(BUILD)/obj/tests/bench/kvbench.nomain.o \
                          $(call obj,$(filter-out tests/bench/kvbench.c,$(BENCH_SRC))) $(LIBS)
	$(call say,LINK,$@)
	$(Q)$(CC) $(CFLAGS) -Itests/bench -I$(GGML_TREE)/include $< $(BUILD)/obj/tests/bench/kvbench.nomain.o \
	  $(call obj,$(filter-out tests/bench/kvbench.c,$(BENCH_SRC))) $(GGML_LIBS) $(LIBS) $(LDLIBS) -lstdc++ -o $@

bench-ggml: $(BUILD)/peers/ggml_peer  ## build ggml from llama-cpp-python's source distribution (pip download, cmake) and its peer program, which kvbench peer then runs

# Each notebook prints its cells' outputs between markers (nb --cells); nb_ipynb pairs them with the
# source's cells. A failing cell stops the target.
notebooks: $(NBS)  ## run every notebook into build/notebooks/NN_name.ipynb (nbformat 4.5) and NN_name.md
	@mkdir -p $(BUILD)/notebooks
	@set -e; for s in $(NB_SRC); do n=$$(basename $$s .c); echo "  NB     $(BUILD)/notebooks/$$n.ipynb"; \
	  KVL_ROOT=$(CURDIR) $(BUILD)/bin/nb_$${n%%_*} --cells > $(BUILD)/notebooks/$$n.cells; \
	  $(BUILD)/bin/nb_ipynb $$s $(BUILD)/notebooks/$$n.cells $(BUILD)/notebooks/$$n; done

# Each chapter's notebook.md is its notebook rendered with the outputs and figures, committed so that a
# repository browser shows it; its figures are linked from the chapter's figures/, which --figures rewrites
# in the same run. tests/test_course_notebooks holds both equal to a fresh run.
renders: $(NBS)  ## rewrite each chapter's notebook.md and figures/ from a fresh run of its notebook (then commit them)
	@mkdir -p $(BUILD)/renders
	@set -e; for s in $(NB_SRC); do NN=$$(basename $$s .c); echo "  RENDER chapters/$$NN/notebook.md"; \
	  KVL_ROOT=$(CURDIR) $(BUILD)/bin/nb_$${NN%%_*} --cells --figures chapters/$$NN/figures > $(BUILD)/renders/$$NN.cells; \
	  $(BUILD)/bin/nb_ipynb $$s $(BUILD)/renders/$$NN.cells $(BUILD)/renders/$$NN --figures-at figures; \
	  cp $(BUILD)/renders/$$NN.md chapters/$$NN/notebook.md; done

# The Jupyter kernel (notebooks_c/kernel/) builds each cell's program as the rule above builds nb_NN: it
# reads the compile line and the link inputs from here, after the libraries they name are built.
notebook-flags: $(call obj,$(NBLIB_SRC)) $(LIBS)  ## build what a notebook links, then print its compile line (cc:) and link inputs (link:)
	@echo 'cc: $(CC) $(CFLAGS) -Icuda'
	@echo 'link: $(call obj,$(NBLIB_SRC)) $(LIBS) $(LDLIBS) $(EMU_FOR_C)'

# A virtual environment with JupyterLab (from PyPI) and the kernel installed into it, run by its python;
# the kernel builds with this $(BUILD). Not part of make test, which uses Debian's nbclient and ipykernel.
JUPYTER_VENV := .venv
jupyter: notebooks  ## make .venv/ with JupyterLab (pip) and the notebooks' C kernel; then .venv/bin/jupyter lab build/notebooks/
	python3 -m venv $(JUPYTER_VENV)
	$(JUPYTER_VENV)/bin/python -m pip install -q jupyterlab ipykernel
	$(JUPYTER_VENV)/bin/python notebooks_c/kernel/kvl_kernel.py install $(abspath $(JUPYTER_VENV)) 'BUILD=$(BUILD)$(if $(SAN), SAN=$(SAN))'
	@echo "jupyter: start it with  $(JUPYTER_VENV)/bin/jupyter lab $(BUILD)/notebooks/  (in VS Code, open a .ipynb there and pick the kernel C (kvlineage))"

# make nb-02: rebuild notebooks_c/02_mla.c and walk it cell by cell, the loop of changing a notebook and
# rerunning it (at the end of input --step runs on, so it also runs unattended)
nb-%: $(BUILD)/bin/nb_%  ## rebuild notebook NN and walk it cell by cell (make nb-02)
	@KVL_ROOT=$(CURDIR) $< --step

run: $(BUILD)/bin/kvtable  ## print the bytes-per-token table for every config in ref/configs/
	@$(BUILD)/bin/kvtable

# ---- labs: the student's C, graded ----------------------------------------------------------------
# labs/NN_name/<lab>.c are the student's files (stubs until written), labs/NN_name/solutions/<lab>.c the
# worked ones, labs/NN_name/grade.c the chapter's grader, linked with labs/grade.c and the project's
# libraries. `make lab-NN` grades the student's files, `make lab-NN SOLUTION=1` the solutions, `make
# labs` every chapter's solutions (their graders are built with `make all`). The student's files compile
# without -Werror, so that a warning does not stop a lab half written. $(BUILD)/labs/cc.sh compiles a
# grader from any set of sources as these rules do: tests/test_course_labs.c grades the stubs and the
# solutions' mutants with it.
LAB_DIRS    := $(wildcard labs/[0-9][0-9]_*)
LABLIB_SRC  := labs/grade.c
LAB_TOOL    := $(BUILD)/labs/answers
lab_student  = $(filter-out $(1)/grade.c,$(wildcard $(1)/*.c))
lab_solution = $(wildcard $(1)/solutions/*.c)
LAB_GRADERS := $(foreach d,$(LAB_DIRS),$(BUILD)/labs/$(notdir $(d))/grade_solution)
all: $(LAB_GRADERS) $(LAB_TOOL) $(BUILD)/labs/cc.sh
$(BUILD)/obj/labs/%.o: CFLAGS += -Ilabs

# $(1): labs/NN_name, $(2): NN
define lab_rule
$(BUILD)/obj/$(1)/%.o: CFLAGS += -I$(1)
$(call obj,$(call lab_student,$(1))): WERROR :=
$(BUILD)/labs/$(notdir $(1))/grade: $(call obj,$(1)/grade.c $(call lab_student,$(1)) $(LABLIB_SRC)) $(LIBS)
	@mkdir -p $$(@D)
	$$(call say,LINK,$$@)
	$$(Q)$$(CC) $$(CFLAGS) $$(filter %.o,$$^) $(LIBS) $$(LDLIBS) -o $$@
$(BUILD)/labs/$(notdir $(1))/grade_solution: $(call obj,$(1)/grade.c $(call lab_solution,$(1)) $(LABLIB_SRC)) $(LIBS)
	@mkdir -p $$(@D)
	$$(call say,LINK,$$@)
	$$(Q)$$(CC) $$(CFLAGS) $$(filter %.o,$$^) $(LIBS) $$(LDLIBS) -o $$@
endef
$(foreach d,$(LAB_DIRS),$(eval $(call lab_rule,$(d),$(firstword $(subst _, ,$(notdir $(d)))))))

.PHONY: labs
# lab-02 and answers-02 find their folder, labs/02_*, when they run
lab_dir = $(or $(firstword $(wildcard labs/$(1)_*)),$(error no folder labs/$(1)_*: the chapters with labs are $(notdir $(LAB_DIRS))))
lab-%: $(LIBS)  ## grade your labs of chapter NN, labs/NN_name/*.c (make lab-02; SOLUTION=1 grades the worked solutions)
	@$(MAKE) --no-print-directory $(BUILD)/$(call lab_dir,$*)/grade$(if $(SOLUTION),_solution)
	@echo "== $(call lab_dir,$*)$(if $(SOLUTION), (worked solutions))"
	@KVL_ROOT=$(CURDIR) $(BUILD)/$(call lab_dir,$*)/grade$(if $(SOLUTION),_solution)
answers-%: $(LAB_TOOL) $(PROGS)  ## check your predictions of chapter NN, labs/NN_name/answers.txt (make answers-02)
	@KVL_ROOT=$(CURDIR) KVL_BIN=$(abspath $(BUILD))/bin $(LAB_TOOL) $(call lab_dir,$*)
labs: $(LAB_GRADERS)  ## grade every chapter's worked solutions (make lab-NN grades yours, SOLUTION=1 the solutions)
	@failed=0; for g in $(LAB_GRADERS); do echo "== $$(basename $$(dirname $$g)) (solutions)"; \
	  KVL_ROOT=$(CURDIR) $$g || failed=$$((failed+1)); done; \
	echo "== $(words $(LAB_GRADERS)) chapters' labs, $$failed failed"; [ $$failed -eq 0 ]

$(LAB_TOOL): $(call obj,labs/answers.c) $(LIBS)
	@mkdir -p $(@D)
	$(call say,LINK,$@)
	$(Q)$(CC) $(CFLAGS) $< $(LIBS) $(LDLIBS) -o $@

# cc.sh OUT SOURCE...: compile and link a grader as the rules above do (absolute paths: it runs anywhere)
$(BUILD)/labs/cc.sh: Makefile | $(DEPS_MK)
	@mkdir -p $(@D)
	@{ echo '#!/bin/sh'; echo '# written by make: compile and link a lab grader, as make lab-NN does'; \
	   echo 'out=$$1; shift'; \
	   echo 'cd $(CURDIR) && exec $(CC) $(CFLAGS) -Ilabs -Icuda "$$@" $(abspath $(LIBS)) $(LDLIBS) $(EMU_FOR_C) -o "$$out"'; } > $@
	@chmod +x $@

# ---- the course as a website ---------------------------------------------------------------------
# Sphinx with the Jupyter Book theme (sphinx-book-theme, myst-nb), pinned in site/requirements.txt and
# installed from PyPI into $(SITE_VENV). site/stage.py stages README.md's table of chapters, each
# chapter's text, notebook (build/notebooks/NN_name.ipynb, outputs stored) and exercises with their
# solutions folded, the glossary, sources and bench pages into $(SITE_STAGE); Sphinx builds them with
# site/conf.py, formulas typeset by Debian's katex under node and code coloured by Pygments at build
# time, so that the pages load nothing from the network. The site is built in site.new/ and takes
# site/'s place only when complete. Links to the project's other files go to $(REPO_URL).
REPO_URL   ?= https://github.com/kvlineage/kvlineage
# the virtual environment is one for every build folder (the sanitizer's and clang's builds use it too)
SITE_VENV  := build/site-venv
SITE_STAGE := $(BUILD)/site-src
SITE_OUT   := $(BUILD)/site
SITE_SHOTS := $(BUILD)/site-shots

# the first python3 that imports selenium (Debian's is /usr/bin/python3, perhaps not the first on PATH)
SITE_PYTHON = $$(for p in python3 /usr/bin/python3; do $$p -c 'import selenium' 2>/dev/null && { echo $$p; break; }; done)
SITE_BROWSER_FOUND = command -v chromium >/dev/null 2>&1 && command -v chromedriver >/dev/null 2>&1 && [ -n "$(SITE_PYTHON)" ]
SITE_CHECK = KVL_ROOT=$(CURDIR) $(SITE_PYTHON) tests/site/check_site.py --site $(SITE_OUT) --shots $(SITE_SHOTS) \
	--stage "$(SITE_VENV)/bin/python site/stage.py"

# Debian's katex (node) and KaTeX's fonts: installed when run as root, otherwise make stops naming the
# apt-get line. Then the virtual environment with the pinned Sphinx stack.
$(BUILD)/site-deps.ok:
	@mkdir -p $(@D)
	@found() { command -v katex >/dev/null 2>&1 && [ -f /usr/share/javascript/katex/katex.min.css ] && \
	  python3 -c 'import ensurepip' 2>/dev/null; }; \
	if ! found && [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	  echo "kvlineage: installing what the site is built with: $(SITE_PKGS)"; \
	  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $(SITE_PKGS); } \
	    >$(@D)/apt.log 2>&1 || { echo "kvlineage: apt-get failed, see $(@D)/apt.log" >&2; exit 1; }; \
	fi; \
	found || { echo "make site needs node's katex, KaTeX's fonts and python3's venv; run:  sudo apt-get install $(SITE_PKGS)"; exit 1; }; \
	touch $@

$(SITE_VENV)/ok: site/requirements.txt | $(BUILD)/site-deps.ok
	@rm -rf $(SITE_VENV) && python3 -m venv $(SITE_VENV)
	@echo "  PIP    $(SITE_VENV) (site/requirements.txt)"
	@$(SITE_VENV)/bin/pip install --no-cache-dir -q --disable-pip-version-check -r site/requirements.txt
	@touch $@

site: $(SITE_VENV)/ok notebooks  ## the course as a static website in build/site/ (open build/site/index.html; works offline)
	@rm -rf $(SITE_OUT).new
	@KVL_ROOT=$(CURDIR) $(SITE_VENV)/bin/python site/stage.py --notebooks $(BUILD)/notebooks --out $(SITE_STAGE) \
	  --repo $(REPO_URL) --programs "$(notdir $(PROG_SRC:.c=) $(NBS))"
	@KVL_REPO_URL=$(REPO_URL) $(SITE_VENV)/bin/sphinx-build -q -W --keep-going -b html -c site -d $(BUILD)/site-doctrees \
	  $(SITE_STAGE) $(SITE_OUT).new
	@rm -rf $(SITE_OUT).new/.buildinfo $(SITE_OUT).new/.doctrees
	@rm -rf $(SITE_OUT) && mv $(SITE_OUT).new $(SITE_OUT)
	@echo "  SITE   $(SITE_OUT)/index.html ($$(find $(SITE_OUT) -name '*.html' -not -path '*/_static/*' | wc -l) pages)"

# ---- CUDA ----------------------------------------------------------------------------------------
# Kernels live in cuda/*.cuh, and every cuda/*.cu is built twice: by the host C++ compiler against the
# CPU emulator (cuda/emu/), which `make test` runs on every machine, and by nvcc for the GPU (`make
# cuda`, `make cuda-check`). tests/cuda/test_*.c compare the twins with ref/ and link with either;
# tests/cuda/test_*.cu are the emulator's own suites.
CXXFLAGS       = -std=c++17 $(OPT) -Wall -Wextra -Werror -Wshadow -Wvla $(INCLUDES) -Icuda $(DEP_CFLAGS) \
                 $(EXTRA_CXXFLAGS)
ifeq ($(SAN),1)
CXXFLAGS      += -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
endif
EMU_SRC       := $(wildcard cuda/emu/*.cc)
CUDA_SRC      := $(wildcard cuda/*.cu)
CUDA_TEST_SRC := $(wildcard tests/cuda/test_*.c)
EMU_TEST_SRC  := $(wildcard tests/cuda/test_*.cu)
CUDA_BENCH    := tests/cuda/bench_cuda.c
LIB_EMU       := $(BUILD)/lib/libkvemu.a
LIB_CUDA_EMU  := $(BUILD)/lib/libkvcuda_emu.a
CUDA_TESTS    := $(addprefix $(BUILD)/tests/,$(notdir $(CUDA_TEST_SRC:.c=) $(EMU_TEST_SRC:.cu=)))
TESTS         += $(CUDA_TESTS)
all: $(CUDA_TESTS) $(if $(wildcard $(CUDA_BENCH)),$(BUILD)/bin/bench_cuda_emu)

$(BUILD)/obj/cuda/emu/%.o: cuda/emu/%.cc | $(DEPS_MK)
	@mkdir -p $(@D)
	$(call say,CXX,$<)
	$(Q)$(CXX) $(CXXFLAGS) $(DEPFLAGS) -c $< -o $@
$(BUILD)/obj/%.emu.o: %.cu | $(DEPS_MK)
	@mkdir -p $(@D)
	$(call say,CXX,$<)
	$(Q)$(CXX) -x c++ $(CXXFLAGS) $(DEPFLAGS) -c $< -o $@
$(BUILD)/obj/tests/cuda/%.o: CFLAGS += -Icuda
$(LIB_EMU): $(patsubst %.cc,$(BUILD)/obj/%.o,$(EMU_SRC))
	@mkdir -p $(@D)
	$(call say,AR,$@)
	$(Q)$(AR) rcs $@ $^
$(LIB_CUDA_EMU): $(patsubst %.cu,$(BUILD)/obj/%.emu.o,$(CUDA_SRC))
	@mkdir -p $(@D)
	$(call say,AR,$@)
	$(Q)$(AR) rcs $@ $^

# Chapter 10's notebook and labs run kernels in the emulator through their C interfaces (cuda/*.h): they
# compile with -Icuda and link the CUDA libraries, the libraries those call, and the C++ runtime. The
# notebook runtime (notebooks_c/draw_gpu.c among it) is linked into every notebook, so every notebook
# links them, as the Jupyter kernel's programs (notebook-flags) and the graders cc.sh builds do.
EMU_FOR_C      = $(abspath $(LIB_CUDA_EMU) $(LIB_EMU) $(LIBS)) $(DEP_LIBS) -lm -lstdc++
EMU_C_BINS    := $(NBS) $(BUILD)/labs/10_gpu/grade $(BUILD)/labs/10_gpu/grade_solution
$(EMU_C_BINS) notebook-flags: $(LIB_CUDA_EMU) $(LIB_EMU)
$(EMU_C_BINS): LDLIBS += $(EMU_FOR_C)
$(call obj,$(NB_SRC) $(NBLIB_SRC)) $(BUILD)/obj/labs/10_gpu/%.o: CFLAGS += -Icuda

# $(1): the binary, $(2): its objects, $(3): the CUDA libraries and their link flags
define cuda_link_rule
$(1): $(2) $(filter %.a,$(3)) $(LIBS)
	@mkdir -p $$(@D)
	$$(call say,LINK,$$@)
	$$(Q)$$(CXX) $$(CXXFLAGS) $(2) $(3) $(LIBS) $$(LDLIBS) -o $$@
endef
CUDA_TESTLIB  := $(call obj,$(TESTLIB_SRC))
$(foreach t,$(CUDA_TEST_SRC),$(eval $(call cuda_link_rule,$(BUILD)/tests/$(notdir $(t:.c=)),$(call obj,$(t)) $(CUDA_TESTLIB),$(LIB_CUDA_EMU) $(LIB_EMU))))
$(foreach t,$(EMU_TEST_SRC),$(eval $(call cuda_link_rule,$(BUILD)/tests/$(notdir $(t:.cu=)),$(patsubst %.cu,$(BUILD)/obj/%.emu.o,$(t)) $(CUDA_TESTLIB),$(LIB_CUDA_EMU) $(LIB_EMU))))
$(eval $(call cuda_link_rule,$(BUILD)/bin/bench_cuda_emu,$(call obj,$(CUDA_BENCH)),$(LIB_CUDA_EMU) $(LIB_EMU)))

# nvcc: sm_80 and sm_90 SASS plus compute_90 PTX, warnings as errors, no fast math. Each object keeps
# ptxas's resource report (.ptxas) and its PTX (gpu-keep/), which cuda/check_kernels.py checks against
# the budgets in cuda/budgets.txt.
NVCC_PATH     := $(shell command -v $(NVCC) 2>/dev/null)
CUDA_HOME     ?= $(patsubst %/bin/,%,$(dir $(NVCC_PATH)))
NVFLAGS       := -std=c++17 -O2 -Xcompiler -Wall,-Wextra,-Werror,-Wshadow -Werror all-warnings \
                 -gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=sm_90 \
                 -gencode arch=compute_90,code=compute_90 $(INCLUDES) -Icuda
GPU_OBJS      := $(patsubst cuda/%.cu,$(BUILD)/obj/gpu/%.o,$(CUDA_SRC))
LIB_CUDA_GPU  := $(BUILD)/lib/libkvcuda_gpu.a
# test_cuda_bench checks bench_cuda_emu's table: on a GPU, cuda-check runs bench_cuda itself
GPU_TESTS     := $(addprefix $(BUILD)/gpu-tests/,$(notdir $(filter-out tests/cuda/test_cuda_bench,$(CUDA_TEST_SRC:.c=))))
GPU_LDLIBS    := -L$(CUDA_HOME)/lib64 -Wl,-rpath,$(CUDA_HOME)/lib64 -lcublas -lcudart

$(BUILD)/obj/gpu/%.o: cuda/%.cu
	@mkdir -p $(@D) $(BUILD)/gpu-keep/$*
	$(call say,NVCC,$<)
	$(Q)$(NVCC) $(NVFLAGS) -MMD -MP -Xptxas -v --keep --keep-dir $(BUILD)/gpu-keep/$* -c $< -o $@ \
	  2> $(@:.o=.ptxas) || { cat $(@:.o=.ptxas) >&2; exit 1; }
$(LIB_CUDA_GPU): $(GPU_OBJS)
	@mkdir -p $(@D)
	$(call say,AR,$@)
	$(Q)$(AR) rcs $@ $^
$(foreach t,$(CUDA_TEST_SRC),$(eval $(call cuda_link_rule,$(BUILD)/gpu-tests/$(notdir $(t:.c=)),$(call obj,$(t)) $(CUDA_TESTLIB),$(LIB_CUDA_GPU) $(GPU_LDLIBS))))
$(eval $(call cuda_link_rule,$(BUILD)/bin/bench_cuda,$(call obj,$(CUDA_BENCH)),$(LIB_CUDA_GPU) $(GPU_LDLIBS)))

.PHONY: cuda-check cuda-check-bins cuda-rehearse-bins gpu-bundle
cuda: $(if $(NVCC_PATH),$(GPU_OBJS))  ## nvcc every cuda/*.cu (sm_80, sm_90, PTX; -Werror) and check each kernel's registers, shared memory, spills and PTX (cuda/budgets.txt)
	@$(if $(NVCC_PATH),python3 cuda/check_kernels.py cuda/budgets.txt $(GPU_OBJS:.o=.ptxas) $(BUILD)/gpu-keep,echo "cuda: nvcc not found, nothing compiled")

# cuda/check_gpu.sh builds these (one or the other) with every core, then runs them; cuda-check itself needs
# no dependencies found, so that on a machine without them it can use build-gpu-deps/ (make gpu-bundle).
cuda-check-bins: $(GPU_OBJS) $(GPU_TESTS) $(BUILD)/bin/bench_cuda
cuda-rehearse-bins: $(CUDA_TESTS) $(BUILD)/bin/bench_cuda_emu
cuda-check:  ## on a GPU machine: build, one table of GB/s and TFLOP/s against the GPU's ceilings first, then every CUDA suite on the GPU and under memcheck, in 8 minutes (KVL_CUDA_REHEARSE=1: the same on the emulator)
	@BUILD=$(BUILD) NVCC=$(NVCC) CUDA_HOME=$(CUDA_HOME) sh cuda/check_gpu.sh

# OpenBLAS (with the Fortran runtime it needs), cJSON and Check as this machine's Debian packages have them:
# headers, the shared libraries xz-compressed (cuda/check_gpu.sh unpacks them), Check and subunit static,
# and the deps.mk that links them, about 6 MB for the device machine to carry.
GPU_DEPS      := build-gpu-deps
GPU_DEP_HDRS  := cblas.h openblas_config.h cjson/cJSON.h check.h check_stdint.h
gpu-bundle:  ## copy OpenBLAS, cJSON and Check from this machine's packages into build-gpu-deps/ (about 6 MB), for make cuda-check on a GPU machine without them
	@rm -rf $(GPU_DEPS) && mkdir -p $(GPU_DEPS)/include/cjson $(GPU_DEPS)/lib
	@for h in $(GPU_DEP_HDRS); do found=; \
	  for d in $$(pkg-config --cflags-only-I $(PC_PKGS) | sed 's/-I//g') /usr/include; do \
	    [ -f $$d/$$h ] && { cp $$d/$$h $(GPU_DEPS)/include/$$h; found=1; break; }; done; \
	  [ -n "$$found" ] || { echo "gpu-bundle: $$h not found"; exit 1; }; done
	@blas=$$(pkg-config --variable=libdir openblas)/libopenblas.so.0; lib=$$(pkg-config --variable=libdir check); \
	  for so in $$blas $$(ldd $$blas | awk '/gfortran|quadmath/ {print $$3}') $$lib/libcjson.so.1; do \
	    xz -9 -c $$(readlink -f $$so) > $(GPU_DEPS)/lib/$$(basename $$so).xz || exit 1; done; \
	  cp $$lib/libcheck_pic.a $$lib/libsubunit.a $(GPU_DEPS)/lib/
	@L='$$(CURDIR)/$(GPU_DEPS)/lib'; { \
	  echo "# make gpu-bundle: the build's dependencies from $(GPU_DEPS)/ (cuda/check_gpu.sh installs this)"; \
	  echo "DEP_CFLAGS := -pthread -I\$$(CURDIR)/$(GPU_DEPS)/include"; \
	  echo "DEP_LIBS := -pthread -Wl,--disable-new-dtags,-rpath,$$L $$L/libopenblas.so.0 $$L/libcjson.so.1 $$L/libcheck_pic.a $$L/libsubunit.a -lrt -lm"; \
	  echo "DEP_OPENBLAS := $$(pkg-config --modversion openblas) ($(GPU_DEPS))"; \
	  echo "DEP_CJSON := $$(pkg-config --modversion libcjson) ($(GPU_DEPS))"; \
	  echo "DEP_CHECK := $$(pkg-config --modversion check) ($(GPU_DEPS))"; } > $(GPU_DEPS)/deps.mk
	@du -sh $(GPU_DEPS) | sed 's/^/gpu-bundle: /'

# ---- fuzzing and memcheck ------------------------------------------------------------------------
# Each libFuzzer target tests/fuzz/fuzz_<t>.c is compiled by clang together with the sources it
# exercises (kvfmt's with its main renamed, so that the target can call it), under
# -fsanitize=fuzzer,address,undefined, and with -fopenmp as the library is (clang's libomp). `make fuzz`
# runs each for FUZZ_SECONDS on its seeds (tests/fuzz/corpus/<t>/) and its regressions; what it finds
# lands in $(BUILD)/fuzz/<t>/. A crash, once fixed, is kept in tests/fuzz/regressions/<t>/, which
# tests/test_reliability_fuzz.c replays.
FUZZ_CC      ?= clang
FUZZ_SECONDS ?= 60
FUZZ_PKGS    := clang libclang-rt-14-dev libomp-14-dev
FUZZ_TARGETS := config kvfmt rows safetensors prefix npy json_text args gguf
# -Wno-pass-failed: at -O1 under the sanitizers clang leaves some `omp simd` loops scalar, and says so.
FUZZ_CFLAGS   = -std=gnu11 -O1 -g $(WARN) -Wno-pass-failed $(INCLUDES) $(DEP_CFLAGS) -fopenmp -fno-sanitize-recover=all
FUZZ_HEADERS := $(wildcard formats/*.h ref/core/*.h ref/*.h tests/*.h tests/fuzz/*.h)
FUZZ_SRC_io     := ref/core/file_io.c ref/core/json_text.c ref/core/status.c
FUZZ_SRC_config := ref/core/config.c ref/core/config_fields.c ref/core/gguf.c ref/core/gguf_model.c ref/core/rope.c $(FUZZ_SRC_io)
FUZZ_SRC_kvfmt  := $(BUILD)/fuzz/kvfmt_main.o $(FORMATS_SRC) chapters/common/grouped.c ref/core/rng.c ref/core/environment.c \
                   ref/core/status.c
FUZZ_SRC_rows   := $(FORMATS_SRC)
FUZZ_SRC_safetensors := ref/core/safetensors.c $(FUZZ_SRC_io) $(FORMATS_SRC)
FUZZ_SRC_prefix := $(REF_SRC) $(FORMATS_SRC)
FUZZ_SRC_npy    := ref/core/npy.c $(FUZZ_SRC_io)
FUZZ_SRC_json_text := $(FUZZ_SRC_io)
FUZZ_SRC_gguf   := $(FUZZ_SRC_config)
FUZZ_SRC_args   := chapters/common/program.c chapters/common/contexts.c $(CPU_SRC) $(REF_SRC) $(FORMATS_SRC)

# clang with libFuzzer: installed when run as root, otherwise make stops naming the apt-get line.
$(BUILD)/fuzz/toolchain.ok:
	@mkdir -p $(@D)
	@probe() { printf 'int LLVMFuzzerTestOneInput(const char *d, unsigned long n) { return d && n; }\n' | \
	  $(FUZZ_CC) -x c -fopenmp -fsanitize=fuzzer,address,undefined - -o $(@D)/probe >/dev/null 2>&1; }; \
	if ! probe && [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	  echo "kvlineage: installing the fuzzing toolchain: $(FUZZ_PKGS)"; \
	  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $(FUZZ_PKGS); } \
	    >$(@D)/apt.log 2>&1 || { echo "kvlineage: apt-get failed, see $(@D)/apt.log" >&2; exit 1; }; \
	fi; \
	probe || { echo "make fuzz needs clang with libFuzzer; run:  sudo apt-get install $(FUZZ_PKGS)"; exit 1; }; \
	rm -f $(@D)/probe; touch $@

$(BUILD)/fuzz/kvfmt_main.o: chapters/05_formats/kvfmt.c $(FUZZ_HEADERS) | $(BUILD)/fuzz/toolchain.ok $(DEPS_MK)
	$(call say,FUZZCC,$<)
	$(Q)$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer-no-link,address,undefined -Dmain=kvfmt_main -c $< -o $@

define fuzz_rule
$(BUILD)/fuzz/fuzz_$(1): tests/fuzz/fuzz_$(1).c $(FUZZ_SRC_$(1)) $(FUZZ_HEADERS) | $(BUILD)/fuzz/toolchain.ok $(DEPS_MK)
	$$(call say,FUZZCC,$$@)
	$$(Q)$$(FUZZ_CC) $$(FUZZ_CFLAGS) -fsanitize=fuzzer,address,undefined $$< $(FUZZ_SRC_$(1)) $$(DEP_LIBS) -lm -o $$@
endef
$(foreach t,$(FUZZ_TARGETS),$(eval $(call fuzz_rule,$(t))))

.PHONY: fuzz memcheck
fuzz: $(addprefix $(BUILD)/fuzz/fuzz_,$(FUZZ_TARGETS))  ## build the libFuzzer targets (clang) and run each for FUZZ_SECONDS (default 60) on its seeds
	@for t in $(FUZZ_TARGETS); do \
	  echo "== fuzz_$$t, $(FUZZ_SECONDS) s"; mkdir -p $(BUILD)/fuzz/$$t; \
	  $(BUILD)/fuzz/fuzz_$$t -max_total_time=$(FUZZ_SECONDS) -timeout=30 -rss_limit_mb=4096 -close_fd_mask=3 \
	    -print_final_stats=1 -artifact_prefix=$(BUILD)/fuzz/$$t/ $(BUILD)/fuzz/$$t tests/fuzz/corpus/$$t \
	    $$(test -d tests/fuzz/regressions/$$t && echo tests/fuzz/regressions/$$t) >$(BUILD)/fuzz/$$t.log 2>&1 \
	  || { grep -v '^    #' $(BUILD)/fuzz/$$t.log | tail -20; echo "fuzz_$$t failed: input in $(BUILD)/fuzz/$$t/"; exit 1; }; \
	  grep -E '^stat::number_of_executed_units|^stat::new_units_added' $(BUILD)/fuzz/$$t.log | sed 's/^/  /'; \
	done

# The CPU suites (tests/test_*.c) under valgrind, each test in this process (CK_FORK=no) so that
# valgrind sees it. Not traced: the programs the suites run, and the emulated CUDA suites, whose fibers
# switch stacks where memcheck cannot follow; the sanitizer build covers both. One OpenMP and BLAS
# thread: valgrind runs one thread at a time anyway, and a live thread pool's stacks would read as
# possibly lost. OpenBLAS on its SSE3 kernels, which valgrind runs on every x86-64 (it runs no AVX-512),
# named so that no suite restarts itself for wider ones (ref/core/blas_core.h): valgrind would not
# follow the restart. Logs: $(BUILD)/memcheck/.
VALGRIND := valgrind --tool=memcheck --error-exitcode=1 --leak-check=full
MEMCHECK_TESTS := $(addprefix $(BUILD)/tests/,$(notdir $(TEST_SRC:.c=)))
memcheck: all  ## run the CPU Check suites under valgrind memcheck (leak check full; non-zero exit on any error; minutes)
	@if ! command -v valgrind >/dev/null 2>&1 && [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	  echo "kvlineage: installing valgrind"; mkdir -p $(BUILD); \
	  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq valgrind; } >$(BUILD)/apt.log 2>&1; \
	fi; command -v valgrind >/dev/null 2>&1 || { echo "make memcheck needs valgrind; run:  sudo apt-get install valgrind"; exit 1; }
	@mkdir -p $(BUILD)/memcheck; failed=0; for t in $(MEMCHECK_TESTS); do n=$$(basename $$t); echo "== $$n"; \
	  CK_FORK=no OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 OPENBLAS_CORETYPE=Prescott KVL_ROOT=$(CURDIR) KVL_BIN=$(abspath $(BUILD))/bin \
	    $(VALGRIND) --log-file=$(BUILD)/memcheck/$$n.log $$t \
	    >$(BUILD)/memcheck/$$n.out 2>&1 || { failed=$$((failed+1)); tail -3 $(BUILD)/memcheck/$$n.out; \
	    grep -A12 -m3 -E 'Invalid|uninitialised|lost in loss record' $(BUILD)/memcheck/$$n.log; }; \
	done; echo "== $(words $(MEMCHECK_TESTS)) suites under memcheck, $$failed failed"; [ $$failed -eq 0 ]

# Every package, the optional ones too, whatever is there already; a build installs only where its own are
# missing (the rule for $(DEPS_MK)).
deps:  ## install the Debian packages the build needs (as root), else print the apt-get line
	@if [ "$$(id -u)" = 0 ]; then apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y $(APT_PKGS) $(APT_OPTIONAL); \
	else echo "sudo apt-get install $(APT_PKGS) $(APT_OPTIONAL)"; fi

help:  ## list the targets
	@grep -hE '^[a-z0-9%-]+:.*## ' $(MAKEFILE_LIST) | sed -E 's/^([a-z0-9%-]+):.*## (.*)/  make \1\t\2/; s/%/NN/' | expand -t 22

clean:  ## remove build/
	rm -rf $(BUILD)

-include $(shell find $(BUILD)/obj -name '*.d' 2>/dev/null)
