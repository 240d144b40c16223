#!/bin/sh
# Usage: check-elf.sh LIBRUDNN [GLUE...]
# librudnn.so must not need MPI, NCCL, RCCL or a GPU runtime (DT_NEEDED); each glue given must
# export exactly its entry: rudnn_comm_glue_entry_v1 (librudnn-mpi.so), rudnn_nccl_glue_entry_v1
# (librudnn-nccl.so), rudnn_rccl_glue_entry_v1 (librudnn-rccl.so); the NCCL glue must need no
# HIP/RCCL library and the RCCL glue no CUDA/NCCL one (one source, built twice).
set -eu
lib=$1
shift
needs() { readelf -d "$1" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'; }
needed=$(needs "$lib")
bad=$(printf '%s\n' "$needed" | grep -Ei 'mpi|nccl|rccl|cuda|cublas|amdhip|hipblas|OpenCL' || true)
if [ -n "$bad" ]; then
  echo "FAIL: $lib needs $bad"
  exit 1
fi
echo "ok: $lib needs only: $(printf '%s ' $needed)"
for glue in "$@"; do
  case $glue in
    *rccl*) want=rudnn_rccl_glue_entry_v1 foreign='cuda|nccl' ;;
    *nccl*) want=rudnn_nccl_glue_entry_v1 foreign='amdhip|rccl' ;;
    *) want=rudnn_comm_glue_entry_v1 foreign='' ;;
  esac
  exports=$(readelf --dyn-syms --wide "$glue" |
    awk '$7 != "UND" && $7 != "Ndx" && ($5 == "GLOBAL" || $5 == "WEAK") { print $8 }' | sort -u)
  if [ "$exports" != "$want" ]; then
    echo "FAIL: $glue exports: $exports (expected $want alone)"
    exit 1
  fi
  bad=$([ -z "$foreign" ] || needs "$glue" | grep -Ei "$foreign" || true)
  if [ -n "$bad" ]; then
    echo "FAIL: $glue needs $bad (the other runtime's)"
    exit 1
  fi
  echo "ok: $glue exports $want alone, needs: $(printf '%s ' $(needs "$glue"))"
done
