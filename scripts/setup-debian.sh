#!/usr/bin/env bash
# Installs every Debian 12 package zaya.cpp needs to build, test and run.
# Usage: sudo scripts/setup-debian.sh [--dev]
#   --dev  also installs python3-torch (only needed to regenerate golden files
#          and to run the PyTorch side-by-side benchmark in bench/).
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config git
  libgtest-dev libgmock-dev libbenchmark-dev
  libdnnl-dev
  libopenmpi-dev openmpi-bin
  libsentencepiece-dev sentencepiece
  libtomlplusplus-dev nlohmann-json3-dev libcli11-dev libfmt-dev libxxhash-dev
  gnuplot-nox
)
if [[ "${1:-}" == "--dev" ]]; then
  packages+=(python3-torch python3-numpy bible-kjv)
fi

SUDO=""
if [[ $(id -u) -ne 0 ]]; then SUDO=sudo; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${packages[@]}"
