#!/bin/sh
# gpu-debs.sh — on the CPU machine: Debian's packages for what the GPU
# machine's image lacks (cJSON, cairo and what cairo loads that the image
# does not have), downloaded into .gpu/debs (git ignores .gpu/), to be carried
# there with the working tree. bench/gpu_session.sh unpacks them (dpkg -x,
# never into /) and builds with make DEPS_PREFIX=. The list is the one that
# built and ran hpt there (docs/usage.md, "Devices: GPU (CUDA)": checked 2026-11-26 on an H200), plus
# fontconfig-config and fonts-dejavu-core: fontconfig's default configuration
# and a font, for the plots' labels. About 5 MB.
#
#     sh scripts/gpu-debs.sh [DIR]      (default .gpu/debs)
set -eu
dir=${1:-.gpu/debs}
pkgs="libcjson1 libcjson-dev libcairo2 libcairo2-dev libpixman-1-0 libfreetype6 libfontconfig1
      libxrender1 libxcb-render0 libxcb-shm0 libbrotli1 fontconfig-config fonts-dejavu-core"
mkdir -p "$dir"
# apt-get download writes into the current directory, as the user (no root)
( cd "$dir" && apt-get download $pkgs )
n=$(ls "$dir"/*.deb | wc -l)
echo "$n packages in $dir ($(du -sh "$dir" | cut -f1)):"
ls "$dir"
