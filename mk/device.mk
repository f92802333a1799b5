# A GPU machine lent for a short session (one command, a few minutes; nothing has run on a GPU before it):
#   make device-check    scripts/device_check.sh: probe, one parallel nvcc build for the GPU present, test_gpt on
#                        every reference state (bf16, fp32, d12), d12 B=64 T=1024 training with --profile, flash
#                        attention and kernel benchmarks, sample_gpt, the 1-rank NCCL overhead; every step under
#                        a timeout (DEVICE_CHECK_BUDGET, default 480 s in all); logs and summary in $$OUT
#                        (default build/device_check); the summary table and "N passed, M failed" come last.
#   Passes NVCC, PYTHON and MPICXX through; PYTHON: gpucheck.sh's choice (a torch that sees the GPU first).
device-check:
	@NVCC="$(NVCC)" PYTHON="$(PYTHON)" MPICXX="$(MPICXX)" bash scripts/device_check.sh

.PHONY: device-check
