#!/bin/sh
# Installs what hpt needs to build, test and run its default job, from
# Debian 12's packages. Does nothing when everything is already there.
#   gcc, make               the toolchain
#   libopenblas-openmp-dev  OpenBLAS built on OpenMP (shares our kernels' threads)
#   zlib1g-dev              gzip reading (Fashion-MNIST IDX files) and CRC-32
#   libcjson-dev            JSON reading and writing
#   libcairo2-dev           the plots (PNG and SVG), with real fonts
#   fonts-dejavu-core       the font the plots are drawn in
#   pkg-config              the compiler flags of the two above
#   fortunes                the default text corpus
#   dataset-fashion-mnist   the image task's data (--task fashion-mnist)
#   python3                 the CLI tests check JSON outputs with it
#   libopenmpi-dev          MPI for data-parallel training (mpirun -np N ./hpt train)
#   openmpi-bin             mpirun itself (tests/cli_mpi.sh)
#   python3-numpy, python3-pytest  the Python binding (python/hpt) and its tests (tests/cli_python.sh)
set -eu
pkgs="gcc make libc6-dev pkg-config libopenblas-openmp-dev zlib1g-dev libcjson-dev libcairo2-dev fonts-dejavu-core fortunes dataset-fashion-mnist python3 libopenmpi-dev openmpi-bin python3-numpy python3-pytest"
missing=""
for p in $pkgs; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
[ -z "$missing" ] && exit 0
echo "install-deps: installing$missing" >&2
if [ "$(id -u)" -eq 0 ]; then sudo=""; else sudo="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -q
$sudo apt-get install -y -q --no-install-recommends $missing
