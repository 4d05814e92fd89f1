# SPDX-License-Identifier: GPL-2.0
# A guest that never finishes: the harness must call it a hang.
. /tests/lib.sh
result hanging
while :; do sleep 60; done
