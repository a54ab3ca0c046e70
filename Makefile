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
# No -ffast-math, ever: it folds isnan/isinf away and blinds the divergence
# checks (see docs/references.md section 3).

CC      ?= cc
BLAS    ?= 1
OMP     ?= 1
DEBUG   ?= 0
SANITIZE ?=
ARCH    ?= native

# Debian's OpenMP build of OpenBLAS shares libgomp's thread pool with our
# kernels; the default pthreads build spins against it and halves throughput
# on 2 cores. Link it by path and rpath so the alternatives system cannot swap
# it under us.
OPENBLAS_INC ?= /usr/include/x86_64-linux-gnu/openblas-openmp
OPENBLAS_LIB ?= /usr/lib/x86_64-linux-gnu/openblas-openmp

BUILD   := build$(if $(SANITIZE),-$(SANITIZE))$(if $(filter-out native,$(ARCH)),-$(ARCH))
WARN    := -Wall -Wextra -Wshadow -Wstrict-prototypes -Wno-unused-parameter
# -fno-trapping-math is not fast-math: every result keeps its IEEE value. It
# lets gcc assume no one reads the FP exception flags (hpt never does), so a
# comparison that could raise one may run for every lane: without it gcc 12
# leaves hpt_expf's clamps, and with them every exp/tanh loop, scalar on AVX2
# (AVX-512's mask registers hid it). It also vectorises the `omp simd
# reduction` loops with an exp in them (the softmax sums) on AVX2: their lane
# order is the vector width's (README, "Performance notes").
OPT     := $(if $(filter 1,$(DEBUG)),-O0,-O3 -march=$(ARCH)) -g -fno-math-errno -fno-trapping-math
CFLAGS  += -std=c11 -D_GNU_SOURCE $(WARN) $(OPT) -Iinclude -MMD -MP
LDLIBS  += -lm -lz

# cJSON for every JSON file hpt reads or writes; cairo draws the plots (PNG
# and SVG from one drawing). Both from Debian (scripts/install-deps.sh).
CFLAGS  += $(shell pkg-config --cflags libcjson cairo)
LDLIBS  += $(shell pkg-config --libs libcjson cairo)

# OpenMPI for data-parallel training under mpirun (src/base/comm.c, the only
# file that includes mpi.h). One binary: without mpirun MPI is never started.
CFLAGS  += $(shell pkg-config --cflags ompi-c)
LDLIBS  += $(shell pkg-config --libs ompi-c)

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

HYBRID_SRC := $(wildcard src/hybrid/*.c)
LIB_SRC := $(wildcard src/base/*.c src/kernels/*.c src/device/*.c src/model/*.c src/train/*.c src/report/*.c) $(HYBRID_SRC)
LIB_OBJ := $(LIB_SRC:%.c=$(BUILD)/%.o)
TEST_SRC := $(wildcard tests/test_*.c)
TESTS   := $(TEST_SRC:tests/%.c=$(BUILD)/%)
BENCH_SRC := $(wildcard bench/bench_*.c)
BENCHES := $(BENCH_SRC:bench/%.c=$(BUILD)/%)

.PHONY: all lib test check bench demo clean help
# The python package's library and ./hpt come from the plain native build; a
# sanitizer or ARCH build keeps its own binary in its build directory.
VARIANT := $(SANITIZE)$(filter-out native,$(ARCH))
all: hpt $(if $(VARIANT),,$(BUILD)/libhpt.so python/hpt/libhpt.so)

help:
	@echo "make            build ./hpt (and $(BUILD)/libhpt.a, $(BUILD)/libhpt.so for python/hpt)"
	@echo "make test       build and run every test (non-zero exit on any failure)"
	@echo "make demo       hpt compare on the fortunes corpus: baseline, hybrid, controls"
	@echo "make bench      build the bench/ programs"
	@echo "make clean      remove build outputs"

$(BUILD)/libhpt.a: $(LIB_OBJ)
	@mkdir -p $(dir $@)
	$(AR) rcs $@ $^

lib: $(BUILD)/libhpt.a

# The shared library for python/hpt (ctypes): the same sources compiled again
# position-independent in $(BUILD)/pic/, so libhpt.a and ./hpt keep their
# objects. OpenBLAS by rpath as above; OpenMPI is linked but MPI only starts
# under mpirun (src/base/comm.c), so a plain python3 loads it. A copy beside
# the package makes `pip install ./python` self-contained.
PIC_OBJ := $(LIB_SRC:%.c=$(BUILD)/pic/%.o)
$(BUILD)/pic/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -fPIC -c $< -o $@

$(BUILD)/libhpt.so: $(PIC_OBJ)
	$(CC) $(LDFLAGS) -shared -o $@ $^ $(LDLIBS)

python/hpt/libhpt.so: $(BUILD)/libhpt.so
	cp $< $@.tmp && mv $@.tmp $@

# The program: ./hpt for the normal build; a sanitizer or ARCH build keeps its
# own binary in its build directory, so it never replaces ./hpt.
HPT_BIN := $(if $(VARIANT),$(BUILD)/hpt,hpt)
ifneq ($(HPT_BIN),hpt)
.PHONY: hpt
hpt: $(HPT_BIN)
endif
CLI_OBJ := $(BUILD)/cli/main.o $(BUILD)/cli/compare.o $(BUILD)/cli/compare_md.o $(BUILD)/cli/compare_run.o $(BUILD)/cli/compare_results.o $(BUILD)/cli/compare_budget.o $(BUILD)/cli/compare_sweep.o $(BUILD)/cli/runlog.o
CLI_OBJ += $(BUILD)/cli/hf.o $(BUILD)/cli/tokenize.o
$(HPT_BIN): $(CLI_OBJ) $(BUILD)/libhpt.a
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c $< -o $@

$(BUILD)/test_%: $(BUILD)/tests/test_%.o $(BUILD)/libhpt.a
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

# compare's budget arithmetic and its sweep extension are the cli's, pure:
# each test links its one file
$(BUILD)/test_compare_budget: $(BUILD)/tests/test_compare_budget.o $(BUILD)/cli/compare_budget.o $(BUILD)/libhpt.a
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)
$(BUILD)/test_compare_sweep: $(BUILD)/tests/test_compare_sweep.o $(BUILD)/cli/compare_sweep.o $(BUILD)/libhpt.a
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

$(BUILD)/bench_%: $(BUILD)/bench/bench_%.o $(BUILD)/libhpt.a
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

# Tests run single- and multi-threaded where it matters; see tests/run.sh.
# check_vec.sh compiles the kernels for AVX2 and AVX-512 with these flags.
test check: $(HPT_BIN) $(TESTS) $(if $(VARIANT),,python/hpt/libhpt.so)
	@HPT=./$(HPT_BIN) BUILD=$(BUILD) SANITIZED=$(SANITIZE) VARIANT_BUILD=$(VARIANT) \
	    VEC_CC="$(CC)" VEC_CFLAGS="$(filter-out -march=% -MMD -MP -g -fsanitize=%,$(CFLAGS))" sh tests/run.sh $(TESTS)

bench: $(BENCHES)

DEMO_DATA := data/fortunes.txt
$(DEMO_DATA):
	@mkdir -p data
	sh scripts/fortunes-corpus.sh > $@.tmp && mv $@.tmp $@

# The main job: a short `hpt compare` on 2 cores: the table on stdout, plots in
# runs/demo/. 14 runs of 300 steps of a 2-layer GPT (the baseline and the
# hybrid at 3 rates, every arm on 2 seeds), plus one run per rate the sweep
# adds when an arm's best lies at its edge (--extend-sweep 2: at most 4 more).
# Estimated from step counts (24 ms/step and 23 s of wall per 800-step run on
# a 2-core AMD EPYC with AVX2, issue 25), not yet timed on an idle machine:
# about 2.2 min, 2.8 min with every extension. At 300 steps both sweeping
# arms' best was 4e-3, inside (seed 1337, final val 2.626 / 2.610 / 2.783 for
# the baseline at 2e-3 / 4e-3 / 8e-3, issue 25's run on a loaded EPYC).
demo: hpt $(DEMO_DATA)
	./hpt compare --data $(DEMO_DATA) --n-layer 2 --n-head 2 --n-embd 64 --block-size 64 \
	    --batch-size 12 --max-iters 300 --warmup-iters 30 --eval-iters 10 \
	    --lrs 2e-3,4e-3,8e-3 --extend-sweep 2 --seeds 2 --out runs/demo
	@echo "plots: runs/demo/val_vs_time.png, runs/demo/val_vs_step.png (and .svg); sample a model with"
	@echo "  ./hpt sample --run runs/demo/runs/<arm-lr-seed> --tokens 300 --temperature 0.8 --top-k 20"

clean:
	rm -rf build build-* hpt python/hpt/libhpt.so

-include $(LIB_OBJ:.o=.d) $(PIC_OBJ:.o=.d) $(CLI_OBJ:.o=.d) $(TESTS:%=%.d)
