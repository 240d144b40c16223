#!/bin/sh
# Runs a command and checks how it ends and what it says (stdout and stderr together):
#
#   expect-output.sh ok|fail TEXT... -- COMMAND [ARG...]
#
# ok: COMMAND must exit 0; fail: it must exit 1 (a crash, a signal or 77 is not the failure
# asked for). Every TEXT must appear in the output verbatim (grep -F). On a mismatch it
# prints the output and what was expected, and exits 1.
set -u
want=$1
shift
case $want in ok | fail) ;; *) echo "expect-output.sh: first argument must be ok or fail" >&2; exit 2 ;; esac
n=0
while [ $# -gt 0 ] && [ "$1" != "--" ]; do
  n=$((n + 1))
  eval "text_$n=\$1"
  shift
done
[ $# -gt 1 ] || { echo "expect-output.sh: no command after --" >&2; exit 2; }
shift
out=$("$@" 2>&1)
rc=$?
bad=0
if [ "$want" = ok ] && [ "$rc" -ne 0 ]; then
  echo "expected exit status 0, got $rc"; bad=1
elif [ "$want" = fail ] && [ "$rc" -ne 1 ]; then
  echo "expected exit status 1, got $rc"; bad=1
fi
i=1
while [ "$i" -le "$n" ]; do
  eval "text=\$text_$i"
  if ! printf '%s\n' "$out" | grep -qF -- "$text"; then
    echo "output does not contain: $text"; bad=1
  fi
  i=$((i + 1))
done
if [ "$bad" -ne 0 ]; then
  echo "--- output of: $*"
  printf '%s\n' "$out"
  exit 1
fi
echo "ok: exit status $rc, $n text(s) found"
