# Trainer-side progress and metrics (llmc/progress.h, llmc/profile.h, llmc/early_stop.h, llmc/logger.h).
#   make test-progress   dev/test_progress.c: duration format, ETA, JSON escaping, early stopping (and its
#                        resume count), the profile table; each header alone as C11 and C++17, -Werror
#   (end to end, in `make test-ux`: run header, metrics fields, step line, --early-stop, --profile)
PROGRESS_HEADERS := llmc/progress.h llmc/profile.h llmc/early_stop.h llmc/logger.h

build/test_progress: dev/test_progress.c $(PROGRESS_HEADERS) llmc/checkpoint.h llmc/cli.h llmc/flags.h llmc/fileio.h
	@mkdir -p build
	$(CC) $(CFLAGS) -o $@ $< $(LDLIBS)

build/progress_headers.ok: $(PROGRESS_HEADERS)
	@mkdir -p build
	@for h in $(PROGRESS_HEADERS); do \
	  printf '#include "%s"\nint main(void) { return 0; }\n' $$h > build/progress_header_check.c; \
	  $(CC) $(CFLAGS) -Werror -fsyntax-only build/progress_header_check.c || exit 1; \
	  $(CXX) $(CXXFLAGS) -Werror -fsyntax-only -x c++ build/progress_header_check.c || exit 1; \
	done
	@touch $@

ALL_TARGETS += build/test_progress build/progress_headers.ok
TEST_TARGETS += test-progress

test-progress: build/test_progress build/progress_headers.ok
	./build/test_progress

.PHONY: test-progress
