# The two commands of the README, and the builds CI runs.
#
#   make stress   build, then run the stress harness on the GPU when one
#                 answers, else on the simulated device (it says which)
#   make test     build, then run every TAP test through ctest
#
# Both install missing Debian packages when run as root, and otherwise
# print the command that would.

BUILD      ?= build
BUILD_TYPE ?= Release
JOBS       ?= $(shell nproc 2>/dev/null || echo 2)
CMAKE_ARGS ?=

.PHONY: all deps configure build stress test test-asan test-tsan gpu-bundle gpu-pack fuzz clean help

all: build

help:
	@echo "make stress      run dv-stress for 20 s (GPU if present, else the sim)"
	@echo "make test        build and run every test (ctest)"
	@echo "make test-asan   the tests under AddressSanitizer + UndefinedBehaviorSanitizer"
	@echo "make test-tsan   the tests under ThreadSanitizer"
	@echo "make gpu-bundle  build for the GPU machine into build-gpu/ (see tools/gpu-check.sh)"
	@echo "make gpu-pack    gpu-bundle, packed as build-gpu.tar.xz for the copy (tools/gpu-pack.sh)"
	@echo "make fuzz        a bounded libFuzzer run of dv-fuzz in build-fuzz/ (clang; docs/FUZZING.md)"

deps:
	@sh tools/ensure-deps.sh

$(BUILD)/build.ninja: | deps
	cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) $(CMAKE_ARGS)

configure: $(BUILD)/build.ninja

build: configure
	cmake --build $(BUILD) -j $(JOBS)

stress: build
	$(BUILD)/tools/dv-stress --seconds 20

test: build
	ctest --test-dir $(BUILD) --output-on-failure -j $(JOBS)

test-asan:
	$(MAKE) test BUILD=build-asan BUILD_TYPE=Debug CMAKE_ARGS="-DDV_ASAN=ON $(CMAKE_ARGS)"

test-tsan:
	$(MAKE) test BUILD=build-tsan BUILD_TYPE=Debug CMAKE_ARGS="-DDV_TSAN=ON $(CMAKE_ARGS)"

gpu-bundle:
	$(MAKE) build BUILD=build-gpu BUILD_TYPE=Release CMAKE_ARGS="-DDV_CUDA=ON $(CMAKE_ARGS)"

# build-gpu/ as one build-gpu.tar.xz (binaries stripped, no object files):
# what a copy to a GPU machine needs (tools/gpu-pack.sh).
gpu-pack: gpu-bundle
	sh tools/gpu-pack.sh build-gpu build-gpu.tar.xz

# A bounded run of the libFuzzer harness (tests/fuzz, docs/FUZZING.md):
# FUZZ_RUNS executions (about three minutes at ~160/s on two cores), with
# FUZZ_TIME seconds as a cap.  New inputs go to $(FUZZ_BUILD)/corpus, the
# committed seeds are only read; a crash leaves its input in
# $(FUZZ_BUILD)/artifacts/ and fails the target.
FUZZ_BUILD ?= build-fuzz
FUZZ_RUNS  ?= 30000
FUZZ_TIME  ?= 300
FUZZ_ARGS  ?=

fuzz:
	@sh tools/ensure-deps.sh fuzz
	@command -v clang >/dev/null 2>&1 || { \
	    echo "make fuzz needs clang with libFuzzer: apt-get install -y clang (Debian: libclang-rt-dev too)" >&2; \
	    exit 1; }
	cmake -S . -B $(FUZZ_BUILD) -G Ninja -DCMAKE_C_COMPILER=clang -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	    -DDV_FUZZ=ON -DDV_CUDA=OFF $(CMAKE_ARGS)
	cmake --build $(FUZZ_BUILD) --target dv-fuzz -j $(JOBS)
	mkdir -p $(FUZZ_BUILD)/corpus $(FUZZ_BUILD)/artifacts
	$(FUZZ_BUILD)/tests/fuzz/dv-fuzz -runs=$(FUZZ_RUNS) -max_total_time=$(FUZZ_TIME) -timeout=30 \
	    -print_final_stats=1 -artifact_prefix=$(FUZZ_BUILD)/artifacts/ $(FUZZ_ARGS) \
	    $(FUZZ_BUILD)/corpus tests/fuzz/corpus

clean:
	rm -rf build build-asan build-tsan build-gpu build-fuzz build-gpu.tar.xz
