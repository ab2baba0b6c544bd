#!/usr/bin/env bash
# Installs every Debian 12 package zaya.cpp needs to build, test and run
# (clang and its runtimes are for the fuzz targets of scripts/test.sh, clang-format for its style check).
# Usage: sudo scripts/setup-debian.sh [--dev]
#   --dev  also installs what only developers need: python3-torch (to
#          regenerate the golden files, tools/make_golden.py) with OpenBLAS
#          (otherwise Debian's torch uses the slow netlib reference BLAS),
#          bible-kjv (to rebuild data/kjv, tools/make_kjv_corpus.py) and
#          librsvg2-bin (to look at the SVG plots as PNG).
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config git
  libgtest-dev libgmock-dev libbenchmark-dev
  libdnnl-dev
  libopenmpi-dev openmpi-bin
  mpich libmpich-dev
  libsentencepiece-dev sentencepiece
  libtomlplusplus-dev nlohmann-json3-dev libcli11-dev libfmt-dev libxxhash-dev
  zlib1g-dev libzstd-dev zstd  # compressed corpora (.gz, .zst); the zstd tool for the tests
  libcpp-httplib-dev  # zaya serve's HTTP server
  curl jq             # tests/e2e/serve.sh: the curl client and reading its JSON
  python3             # small helpers inside tests/e2e (data_inputs, disk_full, export_layouts)
  python3-venv        # the pinned PyPI environment of the tests (scripts/python-env.sh)
  gnuplot-nox
  clang libclang-rt-14-dev libomp-dev clang-format
  python3.11-doc  # the second corpus of configs/small-recipe.toml (scripts/prepare-recipe-data.sh)
)
if [[ "${1:-}" == "--dev" ]]; then
  packages+=(python3-torch python3-numpy libopenblas0-openmp bible-kjv librsvg2-bin)
fi

SUDO=""
if [[ $(id -u) -ne 0 ]]; then SUDO=sudo; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${packages[@]}"
