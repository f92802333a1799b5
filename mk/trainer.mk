# The CPU trainer and its test against PyTorch reference states.

TRAINER_HEADERS := $(wildcard llmc/*.h)

train_gpt_cpu: train_gpt.c $(TRAINER_HEADERS)
	$(CC) $(CFLAGS) -o $@ train_gpt.c $(LDLIBS)

test_gpt_cpu: test_gpt.c train_gpt.c $(TRAINER_HEADERS)
	$(CC) $(CFLAGS) -o $@ test_gpt.c $(LDLIBS)

ALL_TARGETS += train_gpt_cpu test_gpt_cpu

# reference states are produced here, by train_gpt.py from the current sources
build/references/.stamp: train_gpt.py dev/gen_references.sh
	rm -rf build/references
	bash dev/gen_references.sh build/references
	touch $@

test-gpt-cpu: test_gpt_cpu build/references/.stamp
	@bash dev/test_gpt_cpu.sh build/references

test-trainer-cpu: train_gpt_cpu test_gpt_cpu
	@bash dev/test_trainer_cpu.sh

TEST_TARGETS += test-gpt-cpu test-trainer-cpu

readme-flags: train_gpt_cpu
	@bash dev/readme_flags.sh update

test-readme-flags: train_gpt_cpu
	@bash dev/readme_flags.sh check

TEST_TARGETS += test-readme-flags

# test_gpt_cpu must fail on deliberately broken copies of the trainer
test-mutations: build/references/.stamp
	@bash dev/test_mutations.sh build/references/b_L2_H3_C96_T37_V300

TEST_TARGETS += test-mutations
