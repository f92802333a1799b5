# Shared trainer infrastructure (llmc/rng.h schedule.h dataloader.h checkpoint.h flags.h sampler.h logger.h)
# and its test. The headers are also compiled as C++ (g++) to keep them valid for the CUDA trainer.
INFRA_HEADERS := llmc/fileio.h llmc/rng.h llmc/schedule.h llmc/dataloader.h llmc/checkpoint.h llmc/cli.h llmc/flags.h \
                 llmc/sampler.h llmc/logger.h

build/test_infra: dev/test_infra.c dev/testlib.h $(INFRA_HEADERS)
	@mkdir -p build
	$(CC) $(CFLAGS) -o $@ $< $(LDLIBS)

# every header on its own, as C11 and as C++17, warnings as errors
build/infra_headers.ok: $(INFRA_HEADERS)
	@mkdir -p build
	@for h in $(INFRA_HEADERS); do \
	  printf '#include "%s"\nint main(void) { return 0; }\n' $$h > build/infra_header_check.c; \
	  $(CC) $(CFLAGS) -Werror -fsyntax-only build/infra_header_check.c || exit 1; \
	  $(CXX) $(CXXFLAGS) -Werror -fsyntax-only -x c++ build/infra_header_check.c || exit 1; \
	done
	@touch $@

ALL_TARGETS += build/test_infra build/infra_headers.ok
TEST_TARGETS += test-infra

test-infra: build/test_infra build/infra_headers.ok
	./build/test_infra
