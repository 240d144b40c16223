#!/bin/sh
# Usage: check-elf.sh LIBRUDNN [GLUE...]
# librudnn.so must not need MPI, NCCL or a GPU runtime (DT_NEEDED); each glue given must export
# exactly its entry: rudnn_comm_glue_entry_v1 (librudnn-mpi.so), rudnn_nccl_glue_entry_v1
# (librudnn-nccl.so).
set -eu
lib=$1
shift
needed=$(readelf -d "$lib" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p')
bad=$(printf '%s\n' "$needed" | grep -Ei 'mpi|nccl|cuda|cublas|amdhip|hipblas|OpenCL' || true)
if [ -n "$bad" ]; then
  echo "FAIL: $lib needs $bad"
  exit 1
fi
echo "ok: $lib needs only: $(printf '%s ' $needed)"
for glue in "$@"; do
  case $glue in
    *nccl*) want=rudnn_nccl_glue_entry_v1 ;;
    *) want=rudnn_comm_glue_entry_v1 ;;
  esac
  exports=$(readelf --dyn-syms --wide "$glue" |
    awk '$7 != "UND" && $7 != "Ndx" && ($5 == "GLOBAL" || $5 == "WEAK") { print $8 }' | sort -u)
  if [ "$exports" != "$want" ]; then
    echo "FAIL: $glue exports: $exports (expected $want alone)"
    exit 1
  fi
  echo "ok: $glue exports $want alone"
done
