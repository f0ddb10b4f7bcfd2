# dlk — build, test, demo, install.
#   make                 build ./dlk (and build/libdlk-cuda.so when nvcc is present)
#   make test            install missing packages, build, run every test
#   make test SANITIZE=1 the same under ASan + UBSan (+ LeakSanitizer), in build-san/
#   make test-long       the long tests (*long*): workers on Fashion-MNIST, the example GPT to its
#                        stated validation loss (hours; not in make test nor CI)
#   make demo            install missing packages, build, train on Fashion-MNIST locally
#   make install PREFIX=/usr/local [DESTDIR=...]
VERSION := 0.1.0
PREFIX ?= /usr/local
DESTDIR ?=
CC ?= cc

# The CUDA toolchain: CUDA_HOME given on make's command line; else the wheels `.ci/deps` installs
# into .deps/cuda-*/; else CUDA_HOME from the environment; else /usr/local/cuda; else the nvcc on
# PATH. NCCL's header comes from the wheels' nccl/ beside it, NCCL_HOME, CUDA_HOME or /usr.
CUDA_DEPS := $(lastword $(sort $(wildcard .deps/cuda-*/nvidia/cu13/bin/nvcc)))
ifneq ($(origin CUDA_HOME),command line)
ifneq ($(CUDA_DEPS),)
CUDA_HOME := $(CURDIR)/$(patsubst %/bin/nvcc,%,$(CUDA_DEPS))
else ifeq ($(CUDA_HOME),)
CUDA_HOME := $(or $(wildcard /usr/local/cuda),$(patsubst %/bin/nvcc,%,$(shell command -v nvcc 2>/dev/null)))
endif
endif
NVCC ?= $(wildcard $(CUDA_HOME)/bin/nvcc)
CUDA_CUBLAS := $(firstword $(wildcard $(foreach d,lib64 lib,$(CUDA_HOME)/$(d)/libcublas.so $(CUDA_HOME)/$(d)/libcublas.so.[0-9]*)))
CUDA_CUBLASLT := $(firstword $(wildcard $(foreach d,lib64 lib,$(CUDA_HOME)/$(d)/libcublasLt.so $(CUDA_HOME)/$(d)/libcublasLt.so.[0-9]*)))
CUDA_LIBDIR := $(patsubst %/,%,$(dir $(CUDA_CUBLAS)))
NCCL_H := $(firstword $(wildcard $(NCCL_HOME)/include/nccl.h $(CUDA_HOME)/../nccl/include/nccl.h $(CUDA_HOME)/include/nccl.h /usr/include/nccl.h))
NCCL_INC := $(patsubst %/,%,$(dir $(NCCL_H)))
NCCL_LIBDIR := $(abspath $(dir $(firstword $(wildcard $(NCCL_INC)/../lib/libnccl.so.2 $(NCCL_INC)/../lib64/libnccl.so.2))))
# SASS for Ampere (sm_80, and by binary compatibility sm_86/sm_89) and Hopper (sm_90), so a driver
# older than the toolkit runs it; PTX of the newest as well, for GPUs newer than both to JIT.
GPU_ARCHS ?= 80 90
GPU_GENCODE := $(foreach a,$(GPU_ARCHS),-gencode arch=compute_$(a),code=sm_$(a)) \
	-gencode arch=compute_$(lastword $(GPU_ARCHS)),code=compute_$(lastword $(GPU_ARCHS))
GPU_ARCHS_STR := $(foreach a,$(GPU_ARCHS),sm_$(a)) + PTX compute_$(lastword $(GPU_ARCHS))

PKGS := yaml-0.1 libcurl libcjson libarchive openblas libmicrohttpd libcrypto rdkafka libxml-2.0 zlib libpng libjpeg
PKG_CFLAGS := $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
PKG_LIBS := $(shell pkg-config --libs $(PKGS) 2>/dev/null)

ifeq ($(SANITIZE),1)
BUILD ?= build-san
SAN := -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
# -O2 as the normal build: the sanitizers check the code that ships, and the suite's training
# tests run about 40% faster under them than at -O1
OPT ?= -O2 -g
else
BUILD ?= build
SAN :=
OPT ?= -O2 -g
endif

CFLAGS ?= $(OPT)
CFLAGS += $(SAN)
ALL_CFLAGS := -std=c11 -D_GNU_SOURCE -fno-math-errno -Wall -Wextra -Werror -I. -I$(BUILD) $(PKG_CFLAGS) \
	-DDLK_VERSION='"$(VERSION)"' -MMD -MP $(CFLAGS)
LDLIBS := $(PKG_LIBS) -ldl -lpthread -lm
LDFLAGS += $(SAN)

LIB_SRC := $(sort $(wildcard lib/*/*.c))
CMD_SRC := $(sort $(wildcard commands/*.c))
TEMPLATES := $(sort $(wildcard templates/*.yaml))
UNIT_SRC := $(sort $(wildcard tests/unit/test_*.c))
TOOL_SRC := $(sort $(wildcard tests/tools/*.c))
GPU_CU := $(sort $(wildcard gpu/*.cu))
GPU_C := $(sort $(wildcard gpu/*.c))
GPU_OBJ := $(GPU_CU:gpu/%.cu=$(BUILD)/cuda/%.o) $(GPU_C:gpu/%.c=$(BUILD)/cuda/%.o)

LIB_OBJ := $(LIB_SRC:%.c=$(BUILD)/%.o) $(BUILD)/templates.o
CMD_OBJ := $(CMD_SRC:%.c=$(BUILD)/%.o) $(BUILD)/main.o
UNIT_BIN := $(UNIT_SRC:%.c=$(BUILD)/%)
TOOL_BIN := $(TOOL_SRC:%.c=$(BUILD)/%)
MAN_IN := $(sort $(wildcard man/*.in))
MAN_OUT := $(MAN_IN:man/%.in=$(BUILD)/man/%)
COMMANDS = $(shell $(DLK_BIN) __commands 2>/dev/null)
# The binary is built in the build directory; the normal build also puts it at ./dlk.
DLK_BIN := $(BUILD)/dlk

.PHONY: all deps test test-unit test-long test-gpu demo bench install clean gpu man fuzz fuzz-build image gpu-kit
ifeq ($(SANITIZE),1)
all: $(DLK_BIN) man gpu
else
all: dlk man gpu
dlk: $(DLK_BIN)
	@ln -f $(DLK_BIN) dlk
endif

deps:
	@.ci/deps build

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	@echo "  CC      $<"
	@$(CC) $(ALL_CFLAGS) -c -o $@ $<

# Files embedded into the binary, one byte array each: the built-in templates (overridable by a
# project's templates/), the project files `dlk init` writes, the completion scripts, and the man
# pages' prose (`dlk help PAGE` fills and shows them).
EMBED_FILES := $(sort $(wildcard examples/*/dlk.yaml examples/*/dlk-pipeline.yaml examples/*/*.py examples/*/*.sh)) completions/dlk.bash completions/_dlk $(MAN_IN)
define embed_table
  i=0; for f in $(2); do \
    echo "static const unsigned char $(1)$$i[] = {"; od -An -v -tx1 $$f | sed 's/ \([0-9a-f][0-9a-f]\)/0x\1,/g'; echo '0x00};'; \
    i=$$((i+1)); done; \
  echo 'const struct dlk_embedded dlk_builtin_$(1)[] = {'; \
  i=0; for f in $(2); do \
    echo "{\"$(3)\", (const char *)$(1)$$i, sizeof($(1)$$i) - 1},"; i=$$((i+1)); done; \
  echo '{NULL, NULL, 0}};'
endef
$(BUILD)/templates.c: $(TEMPLATES) $(EMBED_FILES) Makefile
	@mkdir -p $(BUILD)
	@{ echo '#include <stddef.h>'; echo '#include "lib/render/embedded.h"'; \
	  $(call embed_table,templates,$(TEMPLATES),$$(basename $$f)); \
	  $(call embed_table,files,$(EMBED_FILES),$$f); } > $@.tmp && mv $@.tmp $@

$(BUILD)/templates.o: $(BUILD)/templates.c
	@echo "  CC      $<"
	@$(CC) $(ALL_CFLAGS) -c -o $@ $<

$(BUILD)/libdlk.a: $(LIB_OBJ)
	@rm -f $@
	@ar rcs $@ $^

$(DLK_BIN): $(CMD_OBJ) $(BUILD)/libdlk.a
	@echo "  LD      $@"
	@$(CC) $(LDFLAGS) -o $@ $(CMD_OBJ) $(BUILD)/libdlk.a $(LDLIBS)

$(BUILD)/tests/unit/%: tests/unit/%.c $(BUILD)/libdlk.a
	@mkdir -p $(dir $@)
	@echo "  LD      $@"
	@$(CC) $(ALL_CFLAGS) $(LDFLAGS) -o $@ $< $(filter %.o,$^) $(BUILD)/libdlk.a $(LDLIBS)
# the CUDA backend's host-side code that needs no CUDA, tested on the CPU
$(BUILD)/tests/unit/test_gpu_pool: $(BUILD)/gpu/pool.o

# helper programs the shell tests run (tests/tools/NAME.c -> $(BUILD)/tests/tools/NAME)
$(BUILD)/tests/tools/%: tests/tools/%.c $(BUILD)/libdlk.a
	@mkdir -p $(dir $@)
	@echo "  LD      $@"
	@$(CC) $(ALL_CFLAGS) $(LDFLAGS) -o $@ $< $(BUILD)/libdlk.a $(LDLIBS)

# Man pages: the prose is in man/*.in, SYNOPSIS and OPTIONS come from the command tables.
$(BUILD)/man/%: man/%.in $(DLK_BIN)
	@mkdir -p $(BUILD)/man
	@$(DLK_BIN) __man-fill $< > $@.tmp && mv $@.tmp $@
man: $(MAN_OUT)

# The CUDA backend is a separate shared object that dlk dlopen()s when a GPU is present. It links
# cudart statically and cuBLAS dynamically, and dlopen()s NCCL itself; its RUNPATH is its own
# directory (an install or an image puts the CUDA libraries beside it), then the toolkit's.
ifneq ($(and $(NVCC),$(CUDA_CUBLAS),$(NCCL_H)),)
GPU_INC := -I. -I$(CUDA_HOME)/include -I$(NCCL_INC)
GPU_DEFS := -DDLK_CUDA_ARCHS='"$(GPU_ARCHS_STR)"' $(if $(NCCL_LIBDIR),-DDLK_NCCL_LIBDIR='"$(NCCL_LIBDIR)"')
GPU_RPATH := '$$ORIGIN':$(CUDA_LIBDIR)
gpu: $(BUILD)/libdlk-cuda.so $(BUILD)/kit-cuda/libdlk-cuda.so
$(BUILD)/cuda/%.o: gpu/%.cu $(wildcard gpu/*.h gpu/*.cuh) lib/nn/backend.h lib/nn/kernels.h lib/nn/kernels_attn.h
	@mkdir -p $(dir $@)
	@echo "  NVCC    $<"
	@$(NVCC) -O2 -std=c++17 $(GPU_GENCODE) -Werror all-warnings -Xcompiler -fPIC,-fvisibility=hidden,-Wall,-Wextra,-Werror \
		$(GPU_INC) $(GPU_DEFS) -c -o $@ $<
$(BUILD)/cuda/%.o: gpu/%.c $(wildcard gpu/*.h) lib/nn/backend.h
	@mkdir -p $(dir $@)
	@echo "  CC      $< (CUDA)"
	@$(CC) -std=c11 -D_GNU_SOURCE -O2 -g -fPIC -fvisibility=hidden -Wall -Wextra -Werror $(GPU_INC) $(GPU_DEFS) -c -o $@ $<
$(BUILD)/libdlk-cuda.so: $(GPU_OBJ)
	@echo "  LD      $@"
	@$(NVCC) -shared $(GPU_GENCODE) -o $@ $(GPU_OBJ) -L$(CUDA_LIBDIR) -Xlinker $(CUDA_CUBLAS),$(CUDA_CUBLASLT) -ldl -lpthread \
		-Xlinker -rpath,$(GPU_RPATH) -Xlinker --enable-new-dtags
# the GPU kit's copy: the same objects, with no path of this machine to look for cuBLAS in
$(BUILD)/kit-cuda/libdlk-cuda.so: $(GPU_OBJ)
	@mkdir -p $(dir $@)
	@echo "  LD      $@"
	@$(NVCC) -shared $(GPU_GENCODE) -o $@ $(GPU_OBJ) -L$(CUDA_LIBDIR) -Xlinker $(CUDA_CUBLAS),$(CUDA_CUBLASLT) -ldl -lpthread \
		-Xlinker -rpath,'$$ORIGIN' -Xlinker --enable-new-dtags
KIT_CUDA := $(BUILD)/kit-cuda/libdlk-cuda.so
else
gpu:
	@echo "no CUDA toolchain (nvcc, cuBLAS and nccl.h; '.ci/deps build' installs them): the CUDA backend is not built"
endif

# bench/gpu's programs (the benchmark and the GPU kit run them; they need no GPU to build)
BENCH_GPU_BIN := $(BUILD)/bench/gpu/dlk_gpu_bench $(BUILD)/bench/gpu/dlk_allreduce_bench
$(BUILD)/bench/gpu/%: bench/gpu/%.c $(BUILD)/libdlk.a
	@mkdir -p $(dir $@)
	@echo "  LD      $@"
	@$(CC) $(ALL_CFLAGS) $(LDFLAGS) -o $@ $< $(BUILD)/libdlk.a $(LDLIBS)

# bench/data's programs (lib/data's speed: BPE training and encoding)
BENCH_DATA_BIN := $(BUILD)/bench/data/dlk_bpe_bench
$(BUILD)/bench/data/%: bench/data/%.c $(BUILD)/libdlk.a
	@mkdir -p $(dir $@)
	@echo "  LD      $@"
	@$(CC) $(ALL_CFLAGS) $(LDFLAGS) -o $@ $< $(BUILD)/libdlk.a $(LDLIBS)

# bench/models' programs (the text classifier's token ids, made by dlk's tokenizer, for the PyTorch
# peer) and bench/train's (dlk's side of the MLP and CNN benchmark)
BENCH_MODELS_BIN := $(BUILD)/bench/models/dlk_text_ids $(BUILD)/bench/train/dlk_bench
$(BUILD)/bench/train/%: bench/train/%.c bench/train/fmnist.h $(BUILD)/libdlk.a
	@mkdir -p $(dir $@)
	@echo "  LD      $@"
	@$(CC) $(ALL_CFLAGS) $(LDFLAGS) -o $@ $< $(BUILD)/libdlk.a $(LDLIBS)
$(BUILD)/bench/models/%: bench/models/%.c $(BUILD)/libdlk.a
	@mkdir -p $(dir $@)
	@echo "  LD      $@"
	@$(CC) $(ALL_CFLAGS) $(LDFLAGS) -o $@ $< $(BUILD)/libdlk.a $(LDLIBS)

test-unit: $(UNIT_BIN) $(TOOL_BIN) $(BENCH_GPU_BIN) $(BENCH_DATA_BIN) $(BENCH_MODELS_BIN)

# The GPU kit (docs/gpu-kit.md): $(BUILD)/kit, one folder of at most 60 MiB that a machine with
# a GPU runs as `kit/run --out DIR` without building or installing anything. kit/build.sh copies
# the GPU programs, the CUDA backend, the Debian libraries they link with the dynamic loader, jq
# and Fashion-MNIST into it, checks that every program resolves its libraries inside it, and
# prints its size.
KIT_MAX_MIB ?= 60
gpu-kit: all test-unit $(KIT_CUDA)
	@test "$(SANITIZE)" != 1 || { echo "error: the GPU kit holds a normal build, not SANITIZE=1" >&2; exit 1; }
	@test -n "$(KIT_CUDA)" || { echo "error: no CUDA toolchain (nvcc, cuBLAS and nccl.h; '.ci/deps build' installs them): the GPU kit needs the CUDA backend" >&2; exit 1; }
	@sh kit/build.sh --max-mib $(KIT_MAX_MIB) $(BUILD) $(BUILD)/kit

# Fuzzing (libFuzzer, clang): one target per parser of outside bytes, tests/fuzz/fuzz_NAME.c, with
# its seed corpus in tests/fuzz/NAME/. `make fuzz` runs each for FUZZ_SECONDS on a copy of the
# corpus; `make test` replays every corpus and fuzzes each target briefly (tests/shell/t0900).
FUZZ_CC ?= clang
FUZZ_BUILD := build-fuzz
FUZZ_SECONDS ?= 60
FUZZ_SAN := -fsanitize=address,undefined -fno-sanitize-recover=undefined
FUZZ_SRC := $(sort $(wildcard tests/fuzz/fuzz_*.c))
FUZZ_BIN := $(FUZZ_SRC:tests/fuzz/%.c=$(FUZZ_BUILD)/%)
FUZZ_LIB_OBJ := $(LIB_SRC:%.c=$(FUZZ_BUILD)/%.o) $(FUZZ_BUILD)/templates.o
FUZZ_CFLAGS := -std=c11 -D_GNU_SOURCE -g -O1 -I. $(PKG_CFLAGS) -DDLK_VERSION='"$(VERSION)"' \
	-MMD -MP -fsanitize=fuzzer-no-link $(FUZZ_SAN)
$(FUZZ_BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	@echo "  FUZZCC  $<"
	@$(FUZZ_CC) $(FUZZ_CFLAGS) -c -o $@ $<
$(FUZZ_BUILD)/templates.o: $(BUILD)/templates.c
	@mkdir -p $(FUZZ_BUILD)
	@$(FUZZ_CC) $(FUZZ_CFLAGS) -c -o $@ $<
$(FUZZ_BUILD)/fuzz_%: tests/fuzz/fuzz_%.c $(FUZZ_LIB_OBJ)
	@echo "  FUZZLD  $@"
	@$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer -o $@ $(filter %.c %.o,$^) $(LDLIBS)
.SECONDARY: $(FUZZ_LIB_OBJ)
fuzz-build: $(FUZZ_BIN)
# `make fuzz FUZZ_RUNS=N` stops each target after N executions instead; `make -j2 fuzz` runs two
# targets at once; `make fuzz-NAME` runs one. FUZZ_MAX_LEN bounds the inputs the fuzzer makes.
FUZZ_RUNS ?=
FUZZ_MAX_LEN ?= 65536
FUZZ_LIMIT = $(if $(FUZZ_RUNS),-runs=$(FUZZ_RUNS),-max_total_time=$(FUZZ_SECONDS))
fuzz: $(FUZZ_SRC:tests/fuzz/fuzz_%.c=fuzz-%)
fuzz-%: $(FUZZ_BUILD)/fuzz_%
	@mkdir -p $(FUZZ_BUILD)/corpus/$* $(FUZZ_BUILD)/crashes
	@echo "== $* ($(if $(FUZZ_RUNS),$(FUZZ_RUNS) runs,$(FUZZ_SECONDS)s))"
	@$< $(FUZZ_LIMIT) -max_len=$(FUZZ_MAX_LEN) -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
	    -artifact_prefix=$(FUZZ_BUILD)/crashes/$*- $(FUZZ_BUILD)/corpus/$* tests/fuzz/$* >$(FUZZ_BUILD)/$*.log 2>&1; \
	  rc=$$?; grep -E "^stat::(number_of_executed_units|average_exec_per_sec)|ERROR|SUMMARY" $(FUZZ_BUILD)/$*.log | sed 's/^/$*: /'; \
	  if [ $$rc != 0 ]; then echo "fuzz_$* failed: the input is in $(FUZZ_BUILD)/crashes/ (add it to tests/fuzz/$*/)"; exit 1; fi

# `make test` builds on every core unless a -j was given (one file at a time, a clean build took
# a sixth of a CI pass); TEST_JOBS=N sets the count. MAKEFLAGS holds -j only in a recipe.
TEST_JOBS ?= $(shell nproc 2>/dev/null || echo 1)
TEST_J = $(if $(filter -j%,$(MAKEFLAGS)),,-j$(TEST_JOBS))
# and runs as many tests at once (TEST_PAR=N sets it; 1 runs them one after another): most of the
# suite's time is waiting (control planes, controllers, pods, servers), and each test has its own
# scratch directory, ports and control plane. The cluster tests took 161 s at two at once against
# 301 s one after another, on a loaded 2-core machine.
TEST_PAR ?= $(TEST_JOBS)
test:
	@.ci/deps test
	@$(MAKE) --no-print-directory $(TEST_J) all test-unit
	@if command -v $(FUZZ_CC) >/dev/null 2>&1; then $(MAKE) --no-print-directory $(TEST_J) fuzz-build; fi
	@BUILD=$(BUILD) DLK=$(CURDIR)/$(DLK_BIN) TEST_PAR=$(TEST_PAR) tests/run

test-long: all
	@BUILD=$(BUILD) DLK=$(CURDIR)/$(DLK_BIN) DLK_TEST_LONG=1 tests/run long

# The GPU suite: every test named *gpu*. Each skips, saying why, where no CUDA device is usable
# (this line says it first), so the target succeeds on a machine without one.
test-gpu:
	@.ci/deps test
	@$(MAKE) --no-print-directory all test-unit
	@$(DLK_BIN) version | sed -n 's/^\(cuda\|nccl\): */# \1: /p'
	@BUILD=$(BUILD) DLK=$(CURDIR)/$(DLK_BIN) tests/run gpu

demo:
	@.ci/deps demo
	@$(MAKE) --no-print-directory dlk
	@sh examples/demo.sh

bench:
	@.ci/deps bench
	@$(MAKE) --no-print-directory all $(BENCH_MODELS_BIN)
	@sh bench/run.sh

# The container images, as an OCI layout in $(BUILD)/image (no daemon): dlk:$(VERSION) and
# dlk:$(VERSION)-cuda, the defaults of the templates' image. IMAGE_BASE=host skips the Debian base.
IMAGE_BASE ?= debian
image:
	@.ci/deps image
	@$(MAKE) --no-print-directory all
	@test "$(SANITIZE)" != 1 || { echo "error: images hold a normal build, not SANITIZE=1" >&2; exit 1; }
	@sh image/build.sh --base $(IMAGE_BASE) $(BUILD) $(BUILD)/image
	@echo "push: skopeo copy oci:$(BUILD)/image:$(VERSION) docker://REGISTRY/dlk:$(VERSION) (and :$(VERSION)-cuda)"

install: all
	@test "$(SANITIZE)" != 1 || { echo "error: install a normal build, not SANITIZE=1" >&2; exit 1; }
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/share/man/man1 $(DESTDIR)$(PREFIX)/share/man/man5 \
		$(DESTDIR)$(PREFIX)/share/bash-completion/completions $(DESTDIR)$(PREFIX)/share/zsh/site-functions \
		$(DESTDIR)$(PREFIX)/lib/dlk
	install -m 755 dlk $(DESTDIR)$(PREFIX)/bin/dlk
	for c in $(COMMANDS); do ln -sf dlk $(DESTDIR)$(PREFIX)/bin/dlk-$$c; done
	for m in $(MAN_OUT); do case $$m in *.5) d=man5 ;; *) d=man1 ;; esac; \
		install -m 644 $$m $(DESTDIR)$(PREFIX)/share/man/$$d/; done
	install -m 644 completions/dlk.bash $(DESTDIR)$(PREFIX)/share/bash-completion/completions/dlk
	install -m 644 completions/_dlk $(DESTDIR)$(PREFIX)/share/zsh/site-functions/_dlk
	if [ -f $(BUILD)/libdlk-cuda.so ]; then install -m 755 $(BUILD)/libdlk-cuda.so $(DESTDIR)$(PREFIX)/lib/dlk/; fi

clean:
	rm -rf build build-san build-fuzz dlk

-include $(shell find $(BUILD) $(FUZZ_BUILD) -name '*.d' 2>/dev/null)
