#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# Copy the module sources (Kbuild, modules/, tests/kmod/) from the work tree
# TOP to the build directory DEST, where kbuild writes its objects, so the
# work tree stays clean.  rsync keeps the timestamps, so builds stay
# incremental.
#   qemu/copy-modules.sh TOP DEST
set -euo pipefail
mkdir -p "$2"
rsync -a --delete --exclude '*.o' --exclude '*.ko' --exclude '.*.cmd' \
	--exclude '*.mod*' --exclude '*.order' --exclude '*.symvers' \
	--include 'Kbuild' --include 'modules/***' --include 'tests/' \
	--include 'tests/kmod/***' --exclude '*' "$1/" "$2/"
