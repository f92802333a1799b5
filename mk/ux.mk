# What a user sees (owner: ux): the sampling tool, Hugging Face interchange, plots, sweeps.
#   ./sample_gpt_cpu -e MODEL ...     text from a model file, with a KV cache (sample_gpt.c)
#   scripts/hf.py export|import       model file <-> Hugging Face GPT-2 directory
#   scripts/llmc.py export|import     model file <-> llm.c's model file (fp32 or bf16)
#   scripts/plot.py, scripts/sweep.py training curves; learning-rate sweeps
#   make test-sample   KV cache vs the full forward, same tokens as the CPU and simulated GPU trainers, bad input (~10 s)
#   make test-hf       export/import round trip, safetensors and transformers as readers    (~25 s)
#   make test-llmc     llm.c model files written and read by the test itself: import, export, round trip (~15 s)
#   make test-ux       metrics.jsonl vs step lines, plot.py's PNG, a 3-trial sweep          (~10 s)
#   make test-shellcheck   shellcheck -S warning on scripts/, data/*.sh and .ci/run             (~2 s)
#   make test-launch   the launch scripts with stub trainers/mpirun/srun: command lines, exit statuses,
#                      SIGTERM reaching every rank, bad arguments refused                     (~2 s)
UX_CFLAGS := $(CFLAGS) -Wno-unused-function  # the trainer's training-only functions are unused here

sample_gpt_cpu: sample_gpt.c train_gpt.c $(TRAINER_HEADERS)
	$(CC) $(UX_CFLAGS) -o $@ sample_gpt.c $(LDLIBS)

build/ux/test_sample_gpt: dev/test_sample_gpt.c sample_gpt.c train_gpt.c $(TRAINER_HEADERS)
	@mkdir -p build/ux
	$(CC) $(UX_CFLAGS) -o $@ dev/test_sample_gpt.c $(LDLIBS)

ALL_TARGETS += sample_gpt_cpu build/ux/test_sample_gpt

test-sample: sample_gpt_cpu train_gpt_cpu train_gpt_sim_fp32 tokenize build/ux/test_sample_gpt
	@PYTHON=$(PYTHON) bash dev/test_sample.sh

test-hf: sample_gpt_cpu train_gpt_cpu
	@$(PYTHON) dev/test_hf.py

test-llmc: train_gpt_cpu
	@$(PYTHON) dev/test_llmc.py

test-ux: train_gpt_cpu
	@$(PYTHON) dev/test_ux.py

# the user-facing shell scripts (launchers, data set-up, CI) have no shellcheck warning
SHELL_SCRIPTS := $(wildcard scripts/*.sh scripts/*.sbatch data/*.sh) .ci/run
test-shellcheck:
	@p=0; f=0; for s in $(SHELL_SCRIPTS); do \
	  if out=$$(shellcheck -S warning -x $$s 2>&1); then echo "ok    shellcheck $$s"; p=$$((p+1)); \
	  else echo "$$out" | head -20; echo "FAIL  shellcheck $$s"; f=$$((f+1)); fi; \
	done; echo "$$p passed, $$f failed"; [ $$f -eq 0 ]

test-launch:
	@bash dev/test_launch.sh

TEST_TARGETS += test-sample test-hf test-llmc test-ux test-shellcheck test-launch
