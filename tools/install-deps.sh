#!/usr/bin/env bash
# Installs what building and testing rudnn needs on Debian 12 (run as root).
# CUDA 13 is expected in /usr/local/cuda (not a Debian package); without it the
# cuda plugin is simply not built. libtsan2 is gcc 12's ThreadSanitizer runtime (.ci/run's
# TSan stage builds with -Db_sanitize=thread). Open MPI builds librudnn-mpi.so (the glue of
# rudnn_comm_create_mpi) and runs the comm-mpi tests under mpirun.
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive
packages=(meson ninja-build pkg-config python3 gcc g++ make
  libtsan2
  libcmocka-dev
  clang libclang-rt-14-dev
  pocl-opencl-icd ocl-icd-opencl-dev opencl-c-headers clinfo libclblast-dev
  openmpi-bin libopenmpi-dev
  hipcc libamdhip64-dev)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
echo "install-deps: all packages present"
