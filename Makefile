# SPDX-License-Identifier: GPL-2.0
#
# netoops: build the patched 6.1 kernel, the out-of-tree modules and the
# guest initramfs, and run the tests.  `make help` lists the targets.

# The cache lives outside the work tree by default so that every clone on a
# machine (and CI's fresh clone) shares one kernel build.
CACHE   ?= $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/netoops
override CACHE := $(shell d='$(CACHE)'; [ -L "$$d" ] && [ ! -e "$$d" ] && rm -f "$$d"; \
	mkdir -p "$$d" && cd "$$d" && pwd -P)
FLAVOUR ?= debug
KDIR    ?= $(CACHE)/out/$(FLAVOUR)
MODDIR  ?= $(CACHE)/mod/$(FLAVOUR)
PYTHON  ?= /usr/bin/python3
KSRC    := $(CACHE)/linux
CHECKPATCH := perl $(KSRC)/scripts/checkpatch.pl --no-tree --strict --terse --show-types
KMAKE   := $(MAKE) -C $(KDIR) M=$(MODDIR) W=1 KCFLAGS=-Werror

export CACHE FLAVOUR PYTHON

.PHONY: all help deps kernel kernels modules initramfs stock deb debvm style \
	sparse check test demo bench clean distclean collector

all: modules initramfs stock debvm collector

help:
	@echo "make deps       install the Debian packages the project needs"
	@echo "make kernel     unpack, patch, configure and build the $(FLAVOUR) kernel"
	@echo "make kernels    build both flavours (debug and plain)"
	@echo "make modules    build modules/*.ko against the patched tree (W=1, -Werror)"
	@echo "make initramfs  build the guest initramfs for FLAVOUR"
	@echo "make stock      Debian's own 6.1 kernel: headers, image, modules, initramfs"
	@echo "make deb        the Debian packages netoops-dkms and netoops-collector (dist/)"
	@echo "make collector  the collector's C receive thread, in place"
	@echo "make debvm      a Debian 12 machine image with the packages installed"
	@echo "make style      checkpatch --strict over modules/ and core-hooks/*.patch"
	@echo "make sparse     sparse (C=2) over the modules"
	@echo "make check      the whole test suite (host, style, sparse, guests)"
	@echo "make demo       the main job: a guest crashes, the dump arrives on the host"
	@echo "make bench      benchmarks (plain kernel)"
	@echo "Variables: FLAVOUR=debug|plain CACHE=$(CACHE)"

deps:
	@bash qemu/deps.sh

kernel: deps
	@bash qemu/kernel.sh $(CACHE) $(FLAVOUR)

kernels: deps
	@bash qemu/kernel.sh $(CACHE) debug
	@bash qemu/kernel.sh $(CACHE) plain

# kbuild writes its objects next to the sources, so the modules are built in a
# per-flavour copy under the cache (rsync keeps the timestamps, so the build
# stays incremental) and the work tree stays clean.
modules: kernel
	@bash qemu/copy-modules.sh $(CURDIR) $(MODDIR)
	@$(KMAKE) modules

initramfs: modules
	@bash qemu/mkinitramfs.sh $(CACHE) $(FLAVOUR)

# Debian's unpatched kernel: the modules built against its linux-headers
# (as DKMS builds them), its vmlinuz and its own modules for the guests.
stock: initramfs
	@bash qemu/stock.sh $(CACHE)

deb: deps
	@bash qemu/deb.sh $(CACHE) $(CURDIR)/dist

# The collector's C receive thread, built in place (serve uses it when built)
collector: collector/netoops_collector/_netoops_rx.so
collector/netoops_collector/_netoops_rx.so: collector/netoops_collector/_rx.c
	gcc -O2 -Wall -Wextra -Werror -shared -fPIC -pthread -o $@ $<

# mmdebstrap, then apt install of the .debs in a chroot: nothing is loaded
# or installed on this machine
debvm: deb
	@bash qemu/debian-vm.sh $(CACHE) $(CURDIR)/dist

style: kernel
	@$(CHECKPATCH) -f modules/*.[ch]
	@# The test module crashes the kernel on purpose and prints addresses.
	@$(CHECKPATCH) --ignore AVOID_BUG,VSPRINTF_SPECIFIER_PX -f tests/kmod/*.[ch]
	@# Absolute paths: checkpatch checks a path that git tracks as a source
	@# file (as with -f), not as a patch.
	@set -e; for p in $$(grep -v '^\s*\(#\|$$\)' core-hooks/series); do \
		$(CHECKPATCH) $(CURDIR)/core-hooks/$$p; done
	@echo "style: checkpatch --strict clean"

sparse: modules
	@$(KMAKE) C=2 modules 2>&1 | tee $(MODDIR)/sparse.log
	@if grep -E 'warning:|error:' $(MODDIR)/sparse.log; then \
		echo "sparse: not clean"; exit 1; fi
	@echo "sparse: clean"

check: deps
	@$(PYTHON) tests/run.py

test: check

demo: deps
	@$(PYTHON) qemu/demo.py

bench: deps
	@$(PYTHON) tests/bench.py

clean:
	rm -rf $(CACHE)/mod $(CACHE)/initramfs-* collector/netoops_collector/_netoops_rx*.so

distclean:
	rm -rf $(CACHE)
