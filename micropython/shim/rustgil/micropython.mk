# MicroPython user C module: the GIL on the rust-gil library (rustgil.c).
# Build the unix port with
#   make -C ports/unix MICROPY_PY_THREAD_GIL=1 USER_C_MODULES=<this dir's parent> \
#        RUSTGIL_PREFIX=<where scripts/install.sh put the library>
# on a tree patched with micropython/patches/ (micropython/build.sh does all of it).
RUSTGIL_MOD_DIR := $(USERMOD_DIR)

ifeq ($(RUSTGIL_PREFIX),)
$(error RUSTGIL_PREFIX is not set: give the prefix of an installed rust-gil library (scripts/install.sh --build DIR))
endif
ifneq ($(MICROPY_PY_THREAD_GIL),1)
$(error the rustgil module replaces the GIL: build with MICROPY_PY_THREAD_GIL=1)
endif

RUSTGIL_PC := PKG_CONFIG_PATH=$(RUSTGIL_PREFIX)/lib/pkgconfig pkg-config
SRC_USERMOD_C += $(RUSTGIL_MOD_DIR)/rustgil.c
CFLAGS_USERMOD += -DMICROPY_PY_THREAD_GIL_EXTERNAL=1 $(shell $(RUSTGIL_PC) --cflags gil-static)
LDFLAGS_USERMOD += $(shell $(RUSTGIL_PC) --libs gil-static)
