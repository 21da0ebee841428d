# Thin wrapper over Meson: installs missing Debian packages, builds, runs. See README.md.
BUILD ?= build
ASAN_BUILD ?= build-asan
MESON_FLAGS ?=
# .ci/run sets CI=1: both builds then treat every warning as an error (STYLE.md: werror in CI).
ifeq ($(CI),1)
MESON_FLAGS += -Dwerror=true
endif

.PHONY: all deps build build-asan demo test test-plain test-asan test-valgrind check-style bench fuzz clean

all: build

deps:
	@scripts/deps.sh

$(BUILD)/build.ninja:
	@scripts/deps.sh
	meson setup $(BUILD) $(MESON_FLAGS)

$(ASAN_BUILD)/build.ninja:
	@scripts/deps.sh
	meson setup $(ASAN_BUILD) -Db_sanitize=address,undefined -Db_lundef=false $(MESON_FLAGS)

# An existing build directory takes MESON_FLAGS too (meson configure), so CI=1 reaches it.
build: deps $(BUILD)/build.ninja
	@if [ -n "$(strip $(MESON_FLAGS))" ]; then meson configure $(BUILD) $(MESON_FLAGS); fi
	meson compile -C $(BUILD)

build-asan: deps $(ASAN_BUILD)/build.ninja
	@if [ -n "$(strip $(MESON_FLAGS))" ]; then meson configure $(ASAN_BUILD) $(MESON_FLAGS); fi
	meson compile -C $(ASAN_BUILD)

demo: build
	@scripts/demo.sh $(BUILD)/servetune

test-plain: build
	meson test -C $(BUILD) --print-errorlogs

test-asan: build-asan
	UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 ASAN_OPTIONS=detect_leaks=1 \
	    meson test -C $(ASAN_BUILD) --print-errorlogs

# The unit suite under valgrind's memcheck (meson.build: add_test_setup 'valgrind').
test-valgrind: build
	meson test -C $(BUILD) --setup valgrind --suite unit --print-errorlogs

# Both builds run every test even when the first fails, then the unit suite under valgrind; the
# target fails if any did.
test: build build-asan
	@rc=0; $(MAKE) --no-print-directory test-plain || rc=1; \
	    $(MAKE) --no-print-directory test-asan || rc=1; \
	    $(MAKE) --no-print-directory test-valgrind || rc=1; exit $$rc

check-style:
	@scripts/check-style.sh

fuzz:
	@scripts/deps.sh
	CC=clang meson setup build-fuzz -Dfuzzing=true -Db_sanitize=address,undefined -Db_lundef=false
	meson compile -C build-fuzz

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) build-fuzz
