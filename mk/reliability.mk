# Reliability (doc/reliability.md): health-guard unit test, stop signals / corrupted checkpoints /
# out-of-space / divergence end to end, the SIGKILL test, and the fuzz harnesses of dev/fuzz/.

RELIABILITY_HEADERS := llmc/fileio.h llmc/checkpoint.h llmc/health.h llmc/signals.h llmc/cli.h llmc/flags.h

build/test_health: dev/test_health.c dev/testlib.h $(RELIABILITY_HEADERS) llmc/rng.h
	@mkdir -p build
	$(CC) $(CFLAGS) -o $@ $< $(LDLIBS)

# llmc/health.h and llmc/signals.h on their own, as C11 and as C++17, warnings as errors
build/reliability_headers.ok: llmc/health.h llmc/signals.h
	@mkdir -p build
	@for h in $^; do \
	  printf '#include "%s"\nint main(void) { return 0; }\n' $$h > build/reliability_header_check.c; \
	  $(CC) $(CFLAGS) -Werror -fsyntax-only build/reliability_header_check.c || exit 1; \
	  $(CXX) $(CXXFLAGS) -Werror -fsyntax-only -x c++ build/reliability_header_check.c || exit 1; \
	done
	@touch $@

ALL_TARGETS += build/test_health build/reliability_headers.ok

test-health: build/test_health build/reliability_headers.ok
	./build/test_health

test-reliability: train_gpt_cpu
	@PYTHON=$(PYTHON) bash dev/test_reliability.sh ./train_gpt_cpu

# the SIGKILL test, one line per trainer (the simulated GPU trainer joins here when it exists)
test-kill-cpu: train_gpt_cpu
	@PYTHON=$(PYTHON) bash dev/test_kill.sh ./train_gpt_cpu

TEST_TARGETS += test-health test-reliability test-kill-cpu

# ---- fuzz harnesses (libFuzzer: clang -fsanitize=fuzzer, from Debian's libclang-rt-14-dev)
FUZZ_CC ?= clang
FUZZ_CFLAGS ?= -g -O1 -std=c11 -D_GNU_SOURCE -I. -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all
FUZZ_HARNESSES := model state shard tokenizer flags corpus
FUZZ_RUNS ?= 50000

build/fuzz/fuzz_%: dev/fuzz/fuzz_%.c dev/fuzz/fuzz_common.h $(RELIABILITY_HEADERS) llmc/dataloader.h llmc/tokenizer.h
	@mkdir -p build/fuzz
	$(FUZZ_CC) $(FUZZ_CFLAGS) -o $@ $< -lm -lpthread

build/fuzz/fuzz_corpus: dev/fuzz/fuzz_corpus.c dev/fuzz/fuzz_common.h prepare_data.c llmc/cli.h llmc/tokenizer.h
	@mkdir -p build/fuzz
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fopenmp -o $@ $< -lm -lpthread

FUZZ_BINARIES := $(addprefix build/fuzz/fuzz_,$(FUZZ_HARNESSES))
ALL_TARGETS += $(FUZZ_BINARIES)

# every harness FUZZ_RUNS inputs from its seed corpus with a fixed seed (the same inputs each run, 5-20 s each, side by side);
# `make fuzz` runs each 10 minutes with a random seed
test-fuzz: $(FUZZ_BINARIES)
	@bash dev/fuzz/run_fuzz.sh runs:$(FUZZ_RUNS) $(FUZZ_HARNESSES)

fuzz: $(FUZZ_BINARIES)
	@bash dev/fuzz/run_fuzz.sh seconds:600 $(FUZZ_HARNESSES)

# regenerates the committed seed corpora dev/fuzz/corpus/<harness>/
fuzz-seeds: train_gpt_cpu
	@PYTHON=$(PYTHON) bash dev/fuzz/make_seeds.sh

TEST_TARGETS += test-fuzz
.PHONY: fuzz fuzz-seeds
