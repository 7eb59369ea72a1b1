#!/usr/bin/env bash
# Installs the Debian packages the build needs, only those that are missing (no network use otherwise).
set -euo pipefail
PKGS=(cmake g++ make pkg-config libgtest-dev libgmock-dev nlohmann-json3-dev libpcre2-dev libicu-dev liburing-dev libopenmpi-dev openmpi-bin clang libclang-rt-14-dev libcpp-httplib-dev chromium libxxhash-dev)
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then exit 0; fi
echo "[setup] installing Debian packages: ${missing[*]}"
if [ "$(id -u)" -ne 0 ]; then
  echo "[setup] error: missing packages (${missing[*]}) and not root; run as root or install them" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}"
