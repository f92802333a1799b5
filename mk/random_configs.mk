# Randomized-configuration differential test (dev/test_random_configs.py): RANDOM_CONFIGS model and
# optimizer configurations drawn from a seed (printed first), each a
# float64 train_gpt.py reference state checked by test_gpt_cpu, test_gpt_sim_fp32 and test_gpt_sim (bf16),
# then the trainers' documented limits at their boundaries (refused with a one-line error / accepted).
#   make test-random-configs [SEED=s] [RANDOM_CONFIGS=k]    (about 1 min for the default 20 on 2 idle cores)
# make test (CI) draws from a fixed seed, so that it checks the same configurations every run; `SEED=` (empty)
# draws from a fresh one, to explore (a bound near its limit can then fail on a degenerate draw, e.g. V=2 T=1).
RANDOM_CONFIGS ?= 20
SEED ?= 1303777270

test-random-configs: test_gpt_cpu test_gpt_sim test_gpt_sim_fp32 train_gpt_cpu train_gpt_sim
	@SEED=$(SEED) RANDOM_CONFIGS=$(RANDOM_CONFIGS) PYTHON=$(PYTHON) $(PYTHON) dev/test_random_configs.py

TEST_TARGETS += test-random-configs
