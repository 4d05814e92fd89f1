#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# Install the Debian packages the project needs, only those that are missing.
set -euo pipefail

pkgs=(linux-source-6.1 build-essential bc bison flex libelf-dev libssl-dev
      dwarves xz-utils rsync qemu-system-x86 busybox-static kmod sparse
      iproute2 util-linux procps python3 python3-pytest python3-hypothesis
      python3-setuptools python3-prometheus-client dkms debhelper dh-dkms dh-python
      pybuild-plugin-pyproject lintian mmdebstrap tshark tcpdump
      python3-jinja2 python3-waitress python3-selenium chromium chromium-driver
      postgresql python3-psycopg)
missing=()
for p in "${pkgs[@]}"; do
	s=$(dpkg-query -W -f '${db:Status-Status}' "$p" 2>/dev/null || true)
	[ "$s" = installed ] || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" != 0 ]; then
	echo "deps.sh: missing packages: ${missing[*]} (run as root)" >&2
	exit 1
fi
echo "deps.sh: installing ${missing[*]}"
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
