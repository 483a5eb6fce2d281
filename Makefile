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

.PHONY: all deps configure build stress test test-asan test-tsan gpu-bundle clean help

all: build

help:
	@echo "make stress      run dv-stress for 20 s (GPU if present, else the sim)"
	@echo "make test        build and run every test (ctest)"
	@echo "make test-asan   the tests under AddressSanitizer + UndefinedBehaviorSanitizer"
	@echo "make test-tsan   the tests under ThreadSanitizer"
	@echo "make gpu-bundle  build for the GPU machine into build-gpu/ (see tools/gpu-check.sh)"

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

clean:
	rm -rf build build-asan build-tsan build-gpu
