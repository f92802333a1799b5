# The GPU sampling tool with a KV cache (sample_gpt.cu, llmc/kv_cache.cuh, llmc/sample_cli.h).
#   sample_gpt_sim, sample_gpt_sim_fp32   the CUDA simulator builds (bf16, fp32), part of `make`
#   make sample_gpt [PRECISION=FP32]      nvcc build, explicit only (GPU_ARCH as train_gpt)
#   make test-sample-gpu   the fp32 build's token ids equal sample_gpt_cpu's (3 settings, past max_seq_len),
#                          the bf16 build's text, bad input (~20 s)
#   make test-nvcc-sample  nvcc compiles sample_gpt.cu (bf16) for sm_80 and sm_90, no warnings
SAMPLE_GPU_DEPS := sample_gpt.cu train_gpt.cu llmc/sample_cli.h $(GPU_HEADERS)

sample_gpt_sim: $(SAMPLE_GPU_DEPS)
	$(CXX) $(SIM_FAST_CXXFLAGS) -Wno-unused-function -x c++ $< -x none $(SIM_LDLIBS) -o $@
sample_gpt_sim_fp32: $(SAMPLE_GPU_DEPS)
	$(CXX) $(SIM_FAST_CXXFLAGS) -Wno-unused-function -DPRECISION_FP32 -x c++ $< -x none $(SIM_LDLIBS) -o $@
sample_gpt: $(SAMPLE_GPU_DEPS)
	@bash scripts/gpu_build.sh "$(NVCC)" $< $@ $(NVCC_FLAGS) $(NVCC_PRECISION) $(NVCC_GENCODE) -- $(GPU_LDLIBS)

ALL_TARGETS += sample_gpt_sim sample_gpt_sim_fp32

test-sample-gpu: sample_gpt_sim sample_gpt_sim_fp32 sample_gpt_cpu
	@PYTHON=$(PYTHON) bash dev/cuda/test_sample_gpu.sh
test-nvcc-sample:
	@bash dev/cudasim/tests/nvcc_build.sh "$(NVCC)" "$(NVCC_TEST_FLAGS)" sample_gpt.cu

SIM_TEST_TARGETS += test-sample-gpu
TEST_TARGETS += test-sample-gpu test-nvcc-sample

.PHONY: test-sample-gpu test-nvcc-sample
