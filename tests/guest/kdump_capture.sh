# SPDX-License-Identifier: GPL-2.0
# Run by the capture kernel that netoops_kdump.sh loads: say that it booted,
# with the ELF core header the crashed kernel handed it.
. /tests/lib.sh
result captured "$(grep -o 'elfcorehdr=[^ ]*' /proc/cmdline)"
