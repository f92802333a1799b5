# CPU ops (llmc/cpu_ops.h) and the SGEMM (llmc/cpu_matmul.h): unit tests and a benchmark.
#   make test-cpu-ops   each op vs naive double references and finite differences, every sgemm path
#   make bench-cpu      measured FP32 peak and GFLOP/s of the d12 matmul shapes (not part of `make test`)
CPU_OPS_HEADERS := llmc/cpu_ops.h llmc/cpu_matmul.h llmc/fileio.h

build/test_cpu_ops: dev/test_cpu_ops.c $(CPU_OPS_HEADERS)
	@mkdir -p build
	$(CC) $(CFLAGS) $< -o $@ $(LDLIBS)

build/bench_cpu: dev/bench_cpu.c $(CPU_OPS_HEADERS)
	@mkdir -p build
	$(CC) $(CFLAGS) $< -o $@ $(LDLIBS)

ALL_TARGETS += build/test_cpu_ops build/bench_cpu
TEST_TARGETS += test-cpu-ops

test-cpu-ops: build/test_cpu_ops
	./build/test_cpu_ops

bench-cpu: build/bench_cpu
	./build/bench_cpu

.PHONY: test-cpu-ops bench-cpu
