#!/usr/bin/env bash
# Installs what building and testing rudnn needs on Debian 12 (run as root).
# CUDA 13 is expected in /usr/local/cuda (not a Debian package); without it the
# cuda plugin is simply not built. libtsan2 is gcc 12's ThreadSanitizer runtime (.ci/run's
# TSan stage builds with -Db_sanitize=thread). Open MPI builds librudnn-mpi.so (the glue of
# rudnn_comm_create_mpi) and runs the comm-mpi tests under mpirun. RCCL, for librudnn-rccl.so,
# is not a Debian 12 package: see fetch_rccl below.
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive
packages=(meson ninja-build pkg-config python3 gcc g++ make
  libtsan2
  libcmocka-dev
  clang libclang-rt-14-dev
  pocl-opencl-icd ocl-icd-opencl-dev opencl-c-headers clinfo libclblast-dev
  openmpi-bin libopenmpi-dev
  hipcc libamdhip64-dev
  curl ca-certificates)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
echo "install-deps: all packages present"

# RCCL (AMD's NCCL) for compiling librudnn-rccl.so: Debian 12 has no package, trixie has
# librccl-dev and librccl1 5.4.3 (RCCL 2.13.4). Their files are unpacked with dpkg -x into
# RUDNN_RCCL_PREFIX (default /opt/rudnn-rccl, where comm/meson.build looks), not installed: the
# library needs glibc 2.38 at run time, so on Debian 12 the glue links against it but cannot
# load it (nothing here has an AMD GPU to run it on anyway). The .debs are checked against the
# sha256 below. Any failure warns and goes on: meson then skips the glue with a message.
rccl_prefix=${RUDNN_RCCL_PREFIX:-/opt/rudnn-rccl}
rccl_version=5.4.3-3+b1
# package, sha256, sha1 (snapshot.debian.org serves files by their sha1)
rccl_debs=(
  "librccl-dev 87e977a72579fcc891c37be5169f051699b9ab3822bef1331f6d33a0e66fd571 48a96a6d82ea05251665457b5233482e5688de88"
  "librccl1 735e8e0a69f88489bdbd0a8b69bc75a376da92f1129b9ed80a38c99726bfe3a7 cf905e7fed82786695d80d42665ca2ed8bc42960"
)

# fetch_deb NAME SHA256 SHA1 DIR: the .deb into DIR, from the pool, else from the snapshot archive
fetch_deb() {
  local file="$1_${rccl_version}_amd64.deb" url
  for url in "http://deb.debian.org/debian/pool/main/r/rccl/${file//+/%2B}" \
             "https://snapshot.debian.org/file/$3"; do
    if curl -fsSL --retry 2 --connect-timeout 20 -o "$4/$file" "$url" &&
       echo "$2  $4/$file" | sha256sum -c --quiet - >/dev/null 2>&1; then
      return 0
    fi
    echo "install-deps: $file from $url: download failed or sha256 differs" >&2
  done
  return 1
}

fetch_rccl() {
  local stamp="$rccl_prefix/.rudnn-rccl-version" work entry
  if [ "$(cat "$stamp" 2>/dev/null)" = "$rccl_version" ]; then
    echo "install-deps: RCCL $rccl_version already unpacked in $rccl_prefix"
    return 0
  fi
  [ "$(dpkg --print-architecture)" = amd64 ] || { echo "install-deps: RCCL .debs are amd64 only" >&2; return 1; }
  work=$(mktemp -d) || return 1
  for entry in "${rccl_debs[@]}"; do
    set -- $entry
    fetch_deb "$1" "$2" "$3" "$work" && dpkg -x "$work/$1_${rccl_version}_amd64.deb" "$work/root" ||
      { rm -rf "$work"; return 1; }
  done
  # prefix/include/rccl/, prefix/lib/<multiarch>/librccl.so*, prefix/share/doc/ (copyright);
  # an older unpack of ours (it has the stamp) is replaced, nothing else is removed
  if [ -f "$stamp" ]; then rm -rf "$rccl_prefix"; fi
  mkdir -p "$rccl_prefix" && cp -a "$work/root/usr/." "$rccl_prefix/" &&
    echo "$rccl_version" >"$stamp"
  local ok=$?
  rm -rf "$work"
  [ $ok -eq 0 ] && echo "install-deps: RCCL $rccl_version unpacked in $rccl_prefix"
  return $ok
}

fetch_rccl || echo "install-deps: WARNING: RCCL not unpacked into $rccl_prefix; librudnn-rccl.so will not be built" >&2
