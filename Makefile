# hpt — build, test and benchmark. `make help` lists the targets.
#
# Variants (combine freely):
#   make BLAS=0          naive matmul instead of OpenBLAS (reference path)
#   make OMP=0           no OpenMP (single-threaded kernels)
#   make SANITIZE=address,undefined test   tests under ASan+UBSan, in build-<san>/
#   make DEBUG=1         -O0 -g
#   make ARCH=x86-64-v3  another target than this CPU (-march=ARCH; default
#                        native), in build-ARCH/ with its own build-ARCH/hpt:
#                        e.g. the AVX2 build timed and tested on an AVX-512 machine
#   make PHASED=0        libhpt and hpt without the phased design (src/hybrid/
#                        phased/), in build-nophased/ with its own hpt
#   make CUDA=1          the CUDA backend (src/cuda/*.cu, nvcc, cuBLAS); the
#                        default when nvcc is on PATH (CUDA=0: never; SANITIZE
#                        builds default to 0). CUDA_ARCH=90 (H100/H200) is the
#                        GPU target; `make test-cuda` runs tests/cuda/ on a GPU
#   make CUDA=emu        the same CUDA sources on the CPU's CUDA emulator
#                        (tests/cudaemu: g++, fibers, OpenBLAS for cuBLAS), in
#                        build-cudaemu/: `make CUDA=emu test-cuda` runs tests/cuda/
#                        where there is no GPU (what it checks: tests/cudaemu/README.md)
#   make DEPS_PREFIX=DIR cJSON and cairo from Debian packages unpacked into DIR
#                        (dpkg -x) instead of pkg-config: the GPU machine's build
#                        (bench/gpu_session.sh, scripts/gpu-debs.sh)
# No -ffast-math, ever: it folds isnan/isinf away and blinds the divergence
# checks (see docs/references.md section 3).

CC      ?= cc
BLAS    ?= 1
OMP     ?= 1
DEBUG   ?= 0
SANITIZE ?=
ARCH    ?= native
PHASED  ?= 1

# Debian's OpenMP build of OpenBLAS shares libgomp's thread pool with our
# kernels; the default pthreads build spins against it and halves throughput
# on 2 cores. Link it by path and rpath so the alternatives system cannot swap
# it under us.
OPENBLAS_INC ?= /usr/include/x86_64-linux-gnu/openblas-openmp
OPENBLAS_LIB ?= /usr/lib/x86_64-linux-gnu/openblas-openmp

BUILD   := build$(if $(SANITIZE),-$(SANITIZE))$(if $(filter-out native,$(ARCH)),-$(ARCH))$(if $(filter emu,$(CUDA)),-cudaemu)$(if $(filter 0,$(PHASED)),-nophased)
WARN    := -Wall -Wextra -Wshadow -Wstrict-prototypes -Wno-unused-parameter
# -fno-trapping-math is not fast-math: every result keeps its IEEE value. It
# lets gcc assume no one reads the FP exception flags (hpt never does), so a
# comparison that could raise one may run for every lane: without it gcc 12
# leaves hpt_expf's clamps, and with them every exp/tanh loop, scalar on AVX2
# (AVX-512's mask registers hid it). It also vectorises the `omp simd
# reduction` loops with an exp in them (the softmax sums) on AVX2: their lane
# order is the vector width's (docs/architecture.md, "Performance notes").
OPT     := $(if $(filter 1,$(DEBUG)),-O0,-O3 -march=$(ARCH)) -g -fno-math-errno -fno-trapping-math
CFLAGS  += -std=c11 -D_GNU_SOURCE $(WARN) $(OPT) -Iinclude -MMD -MP
LDLIBS  += -lm -lz -ldl

# cJSON for every JSON file hpt reads or writes; cairo draws the plots (PNG
# and SVG from one drawing: cli/plot.c, so PLOT_LDLIBS links the program and
# test_plot, never libhpt). Both from Debian (scripts/install-deps.sh).
# DEPS_PREFIX=DIR takes them from Debian's packages unpacked there (dpkg -x)
# on a machine that has no registry to install them from (the GPU machine):
# pkg-config cannot resolve cairo.pc's Requires there, so the folders are
# named directly; -rpath-link finds cairo's own dependencies (pixman, ...) in
# DIR at link time, and the programs run with LD_LIBRARY_PATH=DIR/usr/lib/...
# (RUNPATH does not reach a library's dependencies).
DEPS_PREFIX ?=
ifneq ($(DEPS_PREFIX),)
  DEPS_LIB := $(DEPS_PREFIX)/usr/lib/x86_64-linux-gnu
  CFLAGS  += -I$(DEPS_PREFIX)/usr/include -I$(DEPS_PREFIX)/usr/include/cairo -I$(DEPS_PREFIX)/usr/include/cjson
  LDLIBS  += -L$(DEPS_LIB) -Wl,-rpath-link,$(DEPS_LIB) -lcjson
  PLOT_LDLIBS := -lcairo
else
  CFLAGS  += $(shell pkg-config --cflags libcjson cairo)
  LDLIBS  += $(shell pkg-config --libs libcjson)
  PLOT_LDLIBS := $(shell pkg-config --libs cairo)
endif

# OpenMPI for data-parallel training under mpirun: a plugin,
# $(BUILD)/libhpt_mpi.so (src/mpi/comm_mpi.c, the only file that includes
# mpi.h), opened by src/base/comm.c under mpirun alone, so libmpi (and the
# hwloc and OpenMPI runtime it loads) is in no program or libhpt.so.
MPI_CFLAGS := $(shell pkg-config --cflags ompi-c)
MPI_LDLIBS := $(shell pkg-config --libs ompi-c)

ifeq ($(OMP),1)
  CFLAGS += -fopenmp
  LDFLAGS += -fopenmp
endif
ifeq ($(BLAS),1)
  CFLAGS += -I$(OPENBLAS_INC)
  LDLIBS += -L$(OPENBLAS_LIB) -Wl,-rpath,$(OPENBLAS_LIB) -lopenblas
else
  CFLAGS += -DHPT_NO_BLAS
endif
ifneq ($(SANITIZE),)
  CFLAGS += -fsanitize=$(SANITIZE) -fno-omit-frame-pointer -fno-sanitize-recover=all
  LDFLAGS += -fsanitize=$(SANITIZE)
endif

# CUDA: src/cuda/*.cu compiled by nvcc into libhpt (the device table's cuda
# row, src/cuda/device_cuda.cu, replaces src/device/device_nocuda.c), linked
# against the toolkit's cudart, cuBLAS and cuBLASLt by rpath. On by default
# where nvcc is on PATH, so CI (nvcc, no GPU) compiles it; never under a
# sanitizer by default (ASan and the CUDA runtime do not mix). The C sources
# are the same objects either way: no -D, no #ifdef above src/cuda.
NVCC    ?= nvcc
NVCC_PATH := $(shell command -v $(NVCC) 2>/dev/null)
CUDA    ?= $(if $(SANITIZE),0,$(if $(NVCC_PATH),1,0))
CUDA_ARCH ?= 90
ifeq ($(filter 0 1 emu,$(CUDA)),)
  $(error CUDA=$(CUDA): give CUDA=1 (the CUDA backend), CUDA=emu (it on the CPU's emulator) or CUDA=0 (none))
endif
ifeq ($(CUDA),1)
  ifeq ($(NVCC_PATH),)
    $(error CUDA=1 but $(NVCC) is not on PATH (give NVCC=/path/to/nvcc, or CUDA=0))
  endif
  # the toolkit the nvcc found belongs to: /usr/local/cuda/bin/nvcc -> /usr/local/cuda
  CUDA_HOME ?= $(patsubst %/bin/,%,$(dir $(NVCC_PATH)))
  CUDA_LIB  ?= $(CUDA_HOME)/lib64
  # -fmad=false: no FMA contraction, as the C code's -std=c11 (-ffp-contract=off),
  # so an elementwise kernel can give the CPU's bits; division and sqrt stay
  # IEEE-rounded (nvcc's defaults, and no --use_fast_math, ever). -lineinfo
  # costs nothing at run time and gives compute-sanitizer source lines.
  # The host side too: g++ contracts by default even with -std=c++17, and the
  # host computes the per-step factors (bias corrections) the kernels use.
  # code=[sm_XX,compute_XX]: the machine code, and PTX for a newer GPU to JIT.
  NVCCFLAGS += -std=c++17 $(if $(filter 1,$(DEBUG)),-O0 -g,-O3) -lineinfo -fmad=false \
               -gencode arch=compute_$(CUDA_ARCH),code=[sm_$(CUDA_ARCH),compute_$(CUDA_ARCH)] \
               -Xcompiler -Wall -Xcompiler -fPIC -Xcompiler -ffp-contract=off -Iinclude -MMD -MP
  # The CUDA row and kernels are a plugin, $(BUILD)/libhpt_cuda.so, opened
  # on demand (src/device/device_cuda_load.c): linked into the program,
  # cuBLAS would cost every hpt process 225 MB resident at start-up. The
  # program exports its symbols (-rdynamic) for the plugin to resolve.
  CUDA_LDLIBS := -L$(CUDA_LIB) -Wl,-rpath,$(CUDA_LIB) -lcublasLt -lcublas -lcudart -lstdc++
  LDLIBS  += -rdynamic -ldl
  CUDA_SRC := $(wildcard src/cuda/*.cu)
  CUDA_TEST_INC := -I$(CUDA_HOME)/include
else ifeq ($(CUDA),emu)
  # The emulator (tests/cudaemu/README.md): each .cu file translated by
  # translate.sed (launches and dynamic shared memory) and compiled by g++
  # with the emulator's cuda_runtime.h and cublas_v2.h; the plugin is the
  # same row and kernels with emu.o for cudart and OpenBLAS for cuBLAS.
  # No FMA contraction on either side, as nvcc's -fmad=false.
  CXX      ?= g++
  EMU_CXXFLAGS := -std=c++17 $(if $(filter 1,$(DEBUG)),-O0,-O2) -g -fPIC -ffp-contract=off -fno-math-errno \
                  -Wall -Wno-unknown-pragmas -Itests/cudaemu -Iinclude -I$(OPENBLAS_INC) -MMD -MP \
                  $(if $(SANITIZE),-fsanitize=$(SANITIZE) -fno-omit-frame-pointer -fno-sanitize-recover=all)
  CUDA_LDLIBS := -L$(OPENBLAS_LIB) -Wl,-rpath,$(OPENBLAS_LIB) -lopenblas -lstdc++
  LDLIBS  += -rdynamic -ldl
  CUDA_SRC := $(wildcard src/cuda/*.cu)
  CUDA_TEST_INC := -Itests/cudaemu
else
  CUDA_SRC :=
endif
# one object per .cu, position-independent, in both libhpt.a and libhpt.so
CUDA_OBJ := $(CUDA_SRC:%.cu=$(BUILD)/%.o)$(if $(filter emu,$(CUDA)), $(BUILD)/tests/cudaemu/emu.o)

# The library's rooms, bottom to top: a new file in one is just a file, a new
# room is a word here and a line in tests/check_layers.sh (what it may use).
LIB_ROOMS := base kernels device model data io train hybrid hybrid/phased run report
LIB_SRC := $(wildcard $(LIB_ROOMS:%=src/%/*.c))
LIB_SRC := $(filter-out src/device/$(if $(filter 0,$(CUDA)),device_cuda_load.c,device_nocuda.c),$(LIB_SRC))
# PHASED=0: libhpt without the phased design (src/hybrid/phased/, the hybrid
# driver's one extension), its row absent (src/hybrid/phased_none.c)
LIB_SRC := $(filter-out $(if $(filter 0,$(PHASED)),src/hybrid/phased/%,src/hybrid/phased_none.c),$(LIB_SRC))
LIB_OBJ := $(LIB_SRC:%.c=$(BUILD)/%.o)
TEST_SRC := $(wildcard tests/test_*.c)
TESTS   := $(TEST_SRC:tests/%.c=$(BUILD)/%)
BENCH_SRC := $(wildcard bench/bench_*.c)
BENCHES := $(BENCH_SRC:bench/%.c=$(BUILD)/%)
# tests/cuda/: the CUDA rows and kernels against the CPU's, for a GPU machine
# (make test-cuda); where no GPU can be used each program says "skip: <why>"
# (the cuda row's reason, "no CUDA device (...)") and exits 0, so it runs anywhere.
CUDA_TEST_SRC := $(wildcard tests/cuda/test_*.c tests/cuda/test_*.cu)
CUDA_TEST_OBJ := $(addprefix $(BUILD)/,$(addsuffix .o,$(basename $(CUDA_TEST_SRC))))
CUDA_TESTS := $(addprefix $(BUILD)/cuda/,$(notdir $(basename $(CUDA_TEST_SRC))))
# the emulator's own test first: what it checks, shown to fire
ifeq ($(CUDA),emu)
  CUDA_TESTS := $(BUILD)/cuda/test_emu $(CUDA_TESTS)
endif

.PHONY: all lib test check test-cuda bench demo clean help
# The python package's library and ./hpt come from the plain native build; a
# sanitizer or ARCH build keeps its own binary in its build directory.
VARIANT := $(SANITIZE)$(filter-out native,$(ARCH))$(if $(filter emu,$(CUDA)),cudaemu)$(if $(filter 0,$(PHASED)),nophased)
all: hpt $(if $(VARIANT),,$(BUILD)/libhpt.so python/hpt/libhpt.so)

help:
	@echo "make            build ./hpt (and $(BUILD)/libhpt.a, $(BUILD)/libhpt.so for python/hpt)"
	@echo "make test       build and run every test (non-zero exit on any failure)"
	@echo "make test-cuda  build and run tests/cuda/ (on a GPU; elsewhere each says skip)"
	@echo "                CUDA=1|0 forces the CUDA backend on or off (default: on where nvcc"
	@echo "                is on PATH: CUDA=$(CUDA) here), CUDA_ARCH=90 the GPU target"
	@echo "                DEPS_PREFIX=DIR cJSON and cairo from .debs unpacked in DIR"
	@echo "                (scripts/gpu-debs.sh, bench/gpu_session.sh: the GPU machine)"
	@echo "make demo       hpt compare on the fortunes corpus: baseline, hybrid, controls"
	@echo "make bench      build the bench/ programs"
	@echo "make clean      remove build outputs"

# The CUDA setting the libraries were built with, $(BUILD)/cuda.config:
# rewritten (and so newer) only when it changes, so that switching CUDA=1/0
# in one build directory relinks everything. Written as the Makefile is read,
# not by a rule that always runs, so that `make -q` still answers (the bench
# scripts ask it). The archive is made afresh: `ar rcs` keeps members that
# are no longer listed (device_cuda.o beside device_nocuda.o).
CUDA_CONFIG := CUDA=$(CUDA) CUDA_ARCH=$(CUDA_ARCH)
ifneq ($(if $(MAKECMDGOALS),$(filter-out clean help,$(MAKECMDGOALS)),all),)
  $(shell mkdir -p $(BUILD) && { [ "$$(cat $(BUILD)/cuda.config 2>/dev/null)" = "$(CUDA_CONFIG)" ] || \
          echo "$(CUDA_CONFIG)" > $(BUILD)/cuda.config; })
endif

$(BUILD)/libhpt.a: $(LIB_OBJ) $(BUILD)/cuda.config
	@mkdir -p $(dir $@)
	rm -f $@
	$(AR) rcs $@ $(filter %.o,$^)

lib: $(BUILD)/libhpt.a

# The shared library for python/hpt (ctypes): the same sources compiled again
# position-independent in $(BUILD)/pic/, so libhpt.a and ./hpt keep their
# objects. OpenBLAS by rpath as above; no cairo, no MPI. It exports the hpt_
# names alone (src/libhpt.map): the kernels' own names (matmul_forward, ...)
# stay inside it, as llm.c-derived code in the same process has its own. A
# copy beside the package makes `pip install ./python` self-contained.
PIC_OBJ := $(LIB_SRC:%.c=$(BUILD)/pic/%.o)
$(BUILD)/pic/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -fPIC -c $< -o $@

$(BUILD)/libhpt.so: $(PIC_OBJ) $(BUILD)/cuda.config src/libhpt.map
	$(CC) $(LDFLAGS) -shared -Wl,--version-script=src/libhpt.map -o $@ $(filter %.o,$^) $(LDLIBS)

# The MPI plugin: MPI's calls as comm.h's table, needing nothing of hpt's
$(BUILD)/libhpt_mpi.so: $(BUILD)/pic/src/mpi/comm_mpi.o
	$(CC) $(LDFLAGS) -shared -Wl,--no-undefined -o $@ $^ $(MPI_LDLIBS)
$(BUILD)/pic/src/mpi/comm_mpi.o: CFLAGS += $(MPI_CFLAGS)
$(BUILD)/src/base/comm.o $(BUILD)/pic/src/base/comm.o: CFLAGS += -DHPT_MPI_PLUGIN_DIR='"$(abspath $(BUILD))"'

python/hpt/libhpt.so: $(BUILD)/libhpt.so $(if $(CUDA_OBJ),python/hpt/libhpt_cuda.so)
	cp $< $@.tmp && mv $@.tmp $@

# The CUDA plugin (CUDA=1): the row and kernels with cuBLAS, its hpt symbols
# left to the process that opens it; beside the program's build and the
# Python package (device_cuda_load.c looks there)
$(BUILD)/libhpt_cuda.so: $(CUDA_OBJ) $(BUILD)/cuda.config
	$(CC) $(LDFLAGS) -shared -o $@ $(CUDA_OBJ) $(CUDA_LDLIBS)
python/hpt/libhpt_cuda.so: $(BUILD)/libhpt_cuda.so
	cp $< $@.tmp && mv $@.tmp $@
# where the program looks for it (a path, not a feature switch)
$(BUILD)/src/device/device_cuda_load.o $(BUILD)/pic/src/device/device_cuda_load.o: \
    CFLAGS += -DHPT_CUDA_PLUGIN_DIR='"$(abspath $(BUILD))"'

# The program: ./hpt for the normal build; a sanitizer or ARCH build keeps its
# own binary in its build directory, so it never replaces ./hpt.
HPT_BIN := $(if $(VARIANT),$(BUILD)/hpt,hpt)
ifneq ($(HPT_BIN),hpt)
.PHONY: hpt
hpt: $(HPT_BIN)
endif
# every cli/*.c is part of the program: a new command's file is just a file
CLI_OBJ := $(patsubst %.c,$(BUILD)/%.o,$(wildcard cli/*.c))
$(HPT_BIN): $(CLI_OBJ) $(BUILD)/libhpt.a $(if $(CUDA_OBJ),$(BUILD)/libhpt_cuda.so) $(BUILD)/libhpt_mpi.so
	$(CC) $(LDFLAGS) -o $@ $(filter-out %.so,$^) $(LDLIBS) $(PLOT_LDLIBS)

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c $< -o $@

# CUDA sources, compiled once with -fPIC for both libraries (NVCCFLAGS above);
# on the emulator, translated to C++ first (the #line keeps the .cu's lines)
ifeq ($(CUDA),emu)
$(BUILD)/%.cc: %.cu tests/cudaemu/translate.sed $(BUILD)/cuda.config
	@mkdir -p $(dir $@)
	{ echo '#line 1 "$<"'; sed -f tests/cudaemu/translate.sed $<; } > $@.tmp && mv $@.tmp $@
$(BUILD)/src/cuda/%.o: $(BUILD)/src/cuda/%.cc
	$(CXX) $(EMU_CXXFLAGS) -Isrc/cuda -include tests/cudaemu/cuda_runtime.h -c $< -o $@
# kept, so that the next make rebuilds nothing (the .d files name them)
.SECONDARY: $(CUDA_SRC:%.cu=$(BUILD)/%.cc) $(BUILD)/tests/cudaemu/test_emu.cc
$(BUILD)/tests/cudaemu/test_emu.o: $(BUILD)/tests/cudaemu/test_emu.cc
	$(CXX) $(EMU_CXXFLAGS) -include tests/cudaemu/cuda_runtime.h -c $< -o $@
$(BUILD)/cuda/test_emu: $(BUILD)/tests/cudaemu/test_emu.o $(BUILD)/tests/cudaemu/emu.o
	@mkdir -p $(dir $@)
	$(CXX) $(LDFLAGS) -o $@ $^ $(CUDA_LDLIBS)
$(BUILD)/tests/cudaemu/emu.o: tests/cudaemu/emu.cc $(BUILD)/cuda.config
	@mkdir -p $(dir $@)
	$(CXX) $(EMU_CXXFLAGS) -c $< -o $@
else
$(BUILD)/%.o: %.cu $(BUILD)/cuda.config
	@mkdir -p $(dir $@)
	$(NVCC) $(NVCCFLAGS) -MF $(@:.o=.d) -c $< -o $@
endif

# the CUDA tests call the kernels themselves: linked with them (the rows
# still come through the plugin)
$(BUILD)/cuda/test_%: $(BUILD)/tests/cuda/test_%.o $(BUILD)/libhpt.a $(CUDA_OBJ) $(BUILD)/libhpt_cuda.so
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $(filter-out %.so,$^) $(LDLIBS) $(CUDA_LDLIBS)
# kept, so that the next make relinks nothing
.SECONDARY: $(CUDA_TEST_OBJ)
# a C test may call the CUDA runtime or cuBLAS itself (cuda_runtime_api.h and
# cublas_v2.h are C); the library's C sources never include them
$(CUDA_TEST_OBJ): CFLAGS += $(CUDA_TEST_INC)

$(BUILD)/test_%: $(BUILD)/tests/test_%.o $(BUILD)/libhpt.a
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

# compare's budget arithmetic and its sweep extension are the cli's, pure:
# each test links its one file
$(BUILD)/test_compare_budget: $(BUILD)/tests/test_compare_budget.o $(BUILD)/cli/compare_budget.o $(BUILD)/libhpt.a
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)
$(BUILD)/test_compare_sweep: $(BUILD)/tests/test_compare_sweep.o $(BUILD)/cli/compare_sweep.o $(BUILD)/libhpt.a
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)
$(BUILD)/test_plot: $(BUILD)/tests/test_plot.o $(BUILD)/cli/plot.o $(BUILD)/libhpt.a
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS) $(PLOT_LDLIBS)

$(BUILD)/bench_%: $(BUILD)/bench/bench_%.o $(BUILD)/libhpt.a
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

# make test: the fast tier, the tests whose source says "tier: fast" (every
# room: kernels, models against PyTorch, a kill -9 resume, the CLI's errors,
# Python, shards, the guard device); make check: every test. Both run make's
# -jN tests side by side and print each one's time (tests/run.sh).
# check_vec.sh compiles the kernels for AVX2 and AVX-512 with these flags.
# With CUDA on, the CUDA tests are built here too (CI compiles them) but run
# only by test-cuda.
TEST_ENV = HPT=./$(HPT_BIN) BUILD=$(BUILD) SANITIZED=$(SANITIZE) VARIANT_BUILD=$(VARIANT) \
    VEC_CC="$(CC)" VEC_CFLAGS="$(filter-out -march=% -MMD -MP -g -fsanitize=%,$(CFLAGS))"
TEST_DEPS = $(HPT_BIN) $(TESTS) $(if $(VARIANT),,python/hpt/libhpt.so) $(if $(filter 0,$(CUDA)),,$(CUDA_TESTS))
test: $(TEST_DEPS)
	@$(TEST_ENV) TIER=fast sh tests/run.sh $(TESTS)
check: $(TEST_DEPS)
	@$(TEST_ENV) TIER=all sh tests/run.sh $(TESTS)

# On the GPU machine (bench/gpu_session.sh runs it): tests/cuda/'s programs,
# then its CLI scripts, one closing line "N passed, N failed". With CUDA=emu
# the same on the CPU's emulator.
ifneq ($(CUDA),0)
test-cuda: $(HPT_BIN) $(CUDA_TESTS)
	@HPT=./$(HPT_BIN) BUILD=$(BUILD) SANITIZED=$(SANITIZE) VARIANT_BUILD=$(VARIANT) \
	    $(if $(filter emu,$(CUDA)),HPT_CUDA_EMULATED=1) \
	    HPT_TEST_SCRIPTS='tests/cuda/cli_*.sh' sh tests/run.sh $(CUDA_TESTS)
else
test-cuda:
	@echo "make test-cuda: this build has no CUDA (CUDA=$(CUDA); $(NVCC) $(if $(NVCC_PATH),at $(NVCC_PATH),not on PATH))" >&2
	@exit 1
endif

bench: $(BENCHES)

DEMO_DATA := data/fortunes.txt
$(DEMO_DATA):
	@mkdir -p data
	sh scripts/fortunes-corpus.sh > $@.tmp && mv $@.tmp $@

# The main job: a short `hpt compare` on 2 cores: the table on stdout, plots in
# runs/demo/. 14 runs of 300 steps of a 2-layer GPT (the baseline and the
# hybrid at 3 rates, every arm on 2 seeds), plus one run per rate the sweep
# adds when an arm's best lies at its edge (--extend-sweep 2: at most 4 more).
# Timed: 57 s wall on an idle 2-core AMD EPYC with AVX2 only (no extension
# ran: both sweeping arms' best was 4e-3, inside; seed 1337's final val 2.626 /
# 2.610 / 2.783 for the baseline at 2e-3 / 4e-3 / 8e-3).
demo: hpt $(DEMO_DATA)
	./hpt compare --data $(DEMO_DATA) --n-layer 2 --n-head 2 --n-embd 64 --block-size 64 \
	    --batch-size 12 --max-iters 300 --warmup-iters 30 --eval-iters 10 \
	    --lrs 2e-3,4e-3,8e-3 --extend-sweep 2 --seeds 2 --out runs/demo
	@echo "plots: runs/demo/val_vs_time.png, runs/demo/val_vs_step.png (and .svg); sample a model with"
	@echo "  ./hpt sample --run runs/demo/runs/<arm-lr-seed> --tokens 300 --temperature 0.8 --top-k 20"

clean:
	rm -rf build build-* hpt python/hpt/libhpt.so

-include $(LIB_OBJ:.o=.d) $(PIC_OBJ:.o=.d) $(BUILD)/pic/src/mpi/comm_mpi.d $(CLI_OBJ:.o=.d) $(TESTS:%=%.d) $(CUDA_TEST_OBJ:.o=.d) $(CUDA_OBJ:.o=.d)$(if $(filter emu,$(CUDA)), $(BUILD)/tests/cudaemu/test_emu.d)
