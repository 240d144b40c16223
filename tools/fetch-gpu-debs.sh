#!/usr/bin/env bash
# Downloads (does not install) the Debian packages that the GPU machine lacks into
# .debs/ at the repository root, so that tools/gpu-suite.sh can unpack them there
# with `dpkg -x` (the GPU machine has no network). Run on a Debian 12 machine that
# reaches Debian's mirrors through apt. .debs/ is not committed (see .git/info/exclude).
#
#   tools/fetch-gpu-debs.sh            # fetch into <repo>/.debs
#   DEBS_DIR=/some/dir tools/fetch-gpu-debs.sh
#
# meson and ninja are not fetched: the GPU image has them from pip.
set -euo pipefail

repo_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
debs_dir=${DEBS_DIR:-$repo_root/.debs}

packages=(
  libcmocka0 libcmocka-dev            # tests
  libclblast1 libclblast-dev          # OpenCL GEMMs
  ocl-icd-libopencl1 ocl-icd-opencl-dev opencl-c-headers opencl-clhpp-headers  # OpenCL loader + headers
  pkgconf pkgconf-bin libpkgconf3     # pkg-config, for meson to find the above
  ccache libhiredis0.14               # nvcc through ccache: gpu-ab.sh's variants rebuild only what a macro changes
)

if ! command -v apt-get >/dev/null; then
  echo "fetch-gpu-debs.sh: needs apt-get (a Debian 12 machine)" >&2
  exit 1
fi

# apt-get download needs the package lists; refresh them when they are missing.
if ! apt-cache show libcmocka0 >/dev/null 2>&1; then
  echo "fetch-gpu-debs.sh: apt lists missing, running apt-get update" >&2
  apt-get update -qq
fi

mkdir -p "$debs_dir"
rm -f "$debs_dir"/*.deb
# apt-get download writes into the current folder (as root it warns that the download
# runs unsandboxed when the _apt user cannot write there; harmless).
cd "$debs_dir"
apt-get download -q "${packages[@]}"
# Plain file names only ('~' and '+' in versions, '%3a' for epochs), so every copier carries them.
for f in *.deb; do
  clean=${f//\~/_}
  clean=${clean//+/_}
  clean=${clean//%3a/_}
  [[ $clean == "$f" ]] || mv -f -- "$f" "$clean"
done

echo "fetch-gpu-debs.sh: $(find "$debs_dir" -maxdepth 1 -name '*.deb' | wc -l) packages in $debs_dir:"
find "$debs_dir" -maxdepth 1 -name '*.deb' -printf '  %10s  %f\n' | sort -k2
total=$(du -cb "$debs_dir"/*.deb | tail -1 | cut -f1)
echo "fetch-gpu-debs.sh: total $total bytes ($(( (total + 1048575) / 1048576 )) MiB)"
if (( total > 60 * 1048576 )); then
  echo "fetch-gpu-debs.sh: more than 60 MiB, too large to carry to the GPU machine" >&2
  exit 1
fi
