# SPDX-License-Identifier: GPL-2.0
# Crash the kernel with the nto_crash test module: nto.mode=null|timer|...
. /tests/lib.sh
mode=$(arg mode null)
result crashing "$mode"
insmod /lib/modules/nto/nto_crash.ko "mode=$mode"
result survived "$?"
