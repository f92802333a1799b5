# Top-level build. Each subsystem adds its rules in mk/<name>.mk and appends
#   ALL_TARGETS  += binaries that `make` builds
#   TEST_TARGETS += phony targets, each running one test program whose last line is
#                   "N passed, M failed" (exit status non-zero on any failure)
# `make test` builds everything, runs every test target and prints the total.

CC := gcc
CXX := g++
NVCC ?= nvcc
PYTHON ?= /usr/bin/python3
CFLAGS ?= -O3 -g -std=c11 -Wall -Wextra -Wno-unused-parameter -D_GNU_SOURCE -fopenmp -I.
CXXFLAGS ?= -O2 -g -std=c++17 -Wall -Wextra -Wno-unused-parameter -I.
LDLIBS ?= -lm -lpthread

ALL_TARGETS :=
TEST_TARGETS :=
# every header a GPU build (nvcc or simulated) may include: defined before the fragments, whose rules use it
GPU_HEADERS := $(wildcard llmc/*.cuh) $(wildcard llmc/*.h) $(wildcard dev/cudasim/*.h)

.DEFAULT_GOAL := all

include $(sort $(wildcard mk/*.mk))

all: $(ALL_TARGETS)

test: all
	@bash dev/run_tests.sh $(TEST_TARGETS)

clean:
	rm -rf $(ALL_TARGETS) build

.PHONY: all test clean $(TEST_TARGETS)
