#!/bin/sh
# Installs the Debian packages that building and testing servetune need, and only those that are
# missing. Runs apt-get update at most once per call, and only when something must be installed.
# Usage: scripts/deps.sh [--fuzz]   (--fuzz adds clang and its libFuzzer runtime)
set -eu

pkgs="meson ninja-build pkg-config gcc libc6-dev libevent-dev libcurl4-openssl-dev libcmocka-dev
libfyaml-dev libnghttp2-dev libseccomp-dev python3 clang libclang-rt-14-dev clang-format clang-tidy
libcairo2-dev fonts-dejavu-core
nghttp2-proxy openssl python3-yaml chromium valgrind
docker.io docker-compose busybox-static prometheus"

missing=""
for p in $pkgs; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
        missing="$missing $p"
    fi
done

if [ -z "$missing" ]; then
    exit 0
fi

if [ "$(id -u)" != "0" ]; then
    echo "deps: missing Debian packages:$missing" >&2
    echo "deps: run as root (or: sudo apt-get install$missing)" >&2
    exit 1
fi

echo "deps: installing:$missing"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
# shellcheck disable=SC2086
apt-get install -y -qq --no-install-recommends $missing >/dev/null
echo "deps: done"
