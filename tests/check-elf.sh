#!/bin/sh
# Usage: check-elf.sh LIBRUDNN [GLUE]
# librudnn.so must not need MPI or a GPU runtime (DT_NEEDED); the MPI glue, when given, must
# export exactly rudnn_comm_glue_entry_v1.
set -eu
lib=$1
needed=$(readelf -d "$lib" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p')
bad=$(printf '%s\n' "$needed" | grep -Ei 'mpi|cuda|cublas|amdhip|hipblas|OpenCL' || true)
if [ -n "$bad" ]; then
  echo "FAIL: $lib needs $bad"
  exit 1
fi
echo "ok: $lib needs only: $(printf '%s ' $needed)"
if [ $# -ge 2 ]; then
  glue=$2
  exports=$(readelf --dyn-syms --wide "$glue" |
    awk '$7 != "UND" && $7 != "Ndx" && ($5 == "GLOBAL" || $5 == "WEAK") { print $8 }' | sort -u)
  if [ "$exports" != "rudnn_comm_glue_entry_v1" ]; then
    echo "FAIL: $glue exports: $exports (expected rudnn_comm_glue_entry_v1 alone)"
    exit 1
  fi
  echo "ok: $glue exports rudnn_comm_glue_entry_v1 alone"
fi
