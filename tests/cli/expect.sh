#!/bin/sh
# expect.sh RC REGEX CMD...: runs CMD, passes iff it exits with RC and its combined
# output matches the extended regex REGEX (an empty REGEX matches anything).
# With KVF_NEED=FILE set and FILE missing: a failure under KVF_REQUIRE_MODELS=1, else a skip (77).
if [ -n "${KVF_NEED:-}" ] && [ ! -e "$KVF_NEED" ]; then
  if [ "${KVF_REQUIRE_MODELS:-0}" = 1 ]; then echo "expect.sh: required file $KVF_NEED is missing"; exit 1; fi
  echo "expect.sh: SKIP, $KVF_NEED is missing"; exit 77
fi
want_rc=$1; regex=$2; shift 2
out=$("$@" 2>&1); rc=$?
printf '%s\n' "$out"
if [ "$rc" -ne "$want_rc" ]; then echo "expect.sh: exit code $rc, wanted $want_rc"; exit 1; fi
if [ -n "$regex" ] && ! printf '%s\n' "$out" | grep -Eq -- "$regex"; then
  echo "expect.sh: output does not match /$regex/"; exit 1
fi
exit 0
