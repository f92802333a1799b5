# GPT-2 tokenizer and data pipeline: llmc/tokenizer.h, ./tokenize, ./prepare_data.
# Tests need: /usr/bin/python3 with tiktoken and unicodedata2==16.0.0 (pip), Debian's unicode-data
# (PropList.txt), GPT-2's vocab.bpe/encoder.json in ../shared/data/gpt2 (GPT2_DIR), and the fortunes
# corpus (data/setup.sh --fetch-only: apt-get download, or an installed fortunes package).

TOKENIZER_DEPS := llmc/tokenizer.h llmc/unicode_tables.h llmc/fileio.h

tokenize: tokenize.c $(TOKENIZER_DEPS) llmc/cli.h
	$(CC) $(CFLAGS) $< -o $@ $(LDLIBS)

prepare_data: prepare_data.c $(TOKENIZER_DEPS) llmc/cli.h
	$(CC) $(CFLAGS) $< -o $@ $(LDLIBS)

build/test_tokenizer: dev/test_tokenizer.c $(TOKENIZER_DEPS)
	@mkdir -p build
	$(CC) $(CFLAGS) $< -o $@ $(LDLIBS)

build/test_tokenizer_cxx: dev/test_tokenizer_cxx.cpp $(TOKENIZER_DEPS)
	@mkdir -p build
	$(CXX) $(CXXFLAGS) $< -o $@ $(LDLIBS)

build/bench_tokenizer: dev/bench_tokenizer.c $(TOKENIZER_DEPS)
	@mkdir -p build
	$(CC) $(CFLAGS) $< -o $@ $(LDLIBS)

ALL_TARGETS += tokenize prepare_data
TEST_TARGETS += test-tokenizer test-tokenizer-cxx test-tokenizer-exact test-prepare-data

# round-trip fuzz, invariants
test-tokenizer: build/test_tokenizer
	./build/test_tokenizer

# the header compiled as C++ (as the GPU trainer includes it) encodes as in C
test-tokenizer-cxx: build/test_tokenizer_cxx
	./build/test_tokenizer_cxx

# token ids identical to tiktoken's gpt2 on >= 1 MB of prose, multilingual/adversarial text, source code
test-tokenizer-exact: tokenize prepare_data
	$(PYTHON) dev/test_tokenizer_exact.py

# prepare_data: determinism, shards, JSON lines, bad input
# build/prepare_data_small: tiny buffer sizes, AddressSanitizer (its tests cross every boundary often)
build/prepare_data_small: prepare_data.c $(TOKENIZER_DEPS) llmc/cli.h
	@mkdir -p build
	$(CC) $(filter-out -O3,$(CFLAGS)) -O1 -fsanitize=address -fno-omit-frame-pointer -DCHUNK_BYTES=64u -DREAD_BYTES=256u \
	    -DBATCH_BYTES=1024u -DMAX_UNCUT_BYTES='(1u << 20)' $< -o $@ $(LDLIBS)

test-prepare-data: tokenize prepare_data build/prepare_data_small
	$(PYTHON) dev/test_prepare_data.py

# single-core MB/s against tiktoken in the same run; prepare_data MB/s with 1 and 2 threads
bench-tokenizer: build/bench_tokenizer prepare_data
	bash dev/bench_tokenizer.sh

.PHONY: bench-tokenizer
