#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) 2026, the ucx-ibshare developers
# The ibshare-run wrapper loads the module the way the UCX it was built for
# loads modules, and prints the mpirun options that do the same: UCX 1.13
# preloads it (LD_PRELOAD), UCX 1.22 finds it in UCX_PLUGIN_PATH.
. "${IBSHARE_SRCDIR:?}/test/lib.sh"

wrapper=$IBSHARE_BUILDDIR/contrib/ibshare-run
module_dir=$(cd "$(dirname "$IBSHARE_MODULE")" && pwd -P)
# The wrapper sets these itself, from its own environment
unset UCX_PLUGIN_PATH LD_PRELOAD

if [ "$IBSHARE_UCX_LOADS_PLUGINS" = yes ]; then
    out=$("$wrapper" sh -c 'echo "${LD_PRELOAD:-none}"')
    check "UCX loads plugins: no LD_PRELOAD" test "$out" = none

    out=$("$wrapper" sh -c 'echo "$UCX_PLUGIN_PATH"')
    check "UCX_PLUGIN_PATH set to the module's directory" \
          test "$out" = "$module_dir"

    out=$(UCX_PLUGIN_PATH=/nowhere "$wrapper" sh -c 'echo "$UCX_PLUGIN_PATH"')
    check "an existing UCX_PLUGIN_PATH is kept" \
          test "$out" = "$module_dir:/nowhere"

    out=$("$wrapper" --mpirun-args | grep -v -e LD_LIBRARY_PATH -e btl)
    check "--mpirun-args prints the -x option" \
          test "$out" = "-x UCX_PLUGIN_PATH=$module_dir"

    out=$("$wrapper" --mpiexec-args | grep -v LD_LIBRARY_PATH)
    check "--mpiexec-args prints hydra's -genv option" \
          test "$out" = "-genv UCX_PLUGIN_PATH $module_dir"
else
    out=$("$wrapper" sh -c 'echo "$LD_PRELOAD"')
    check "LD_PRELOAD set to the module" test "$out" = "$IBSHARE_MODULE"

    out=$(LD_PRELOAD=/lib/x86_64-linux-gnu/libc.so.6 "$wrapper" sh -c 'echo "$LD_PRELOAD"')
    check "an existing LD_PRELOAD is kept" \
          test "$out" = "$IBSHARE_MODULE /lib/x86_64-linux-gnu/libc.so.6"

    out=$("$wrapper" --mpirun-args | grep -v -e LD_LIBRARY_PATH -e btl)
    check "--mpirun-args prints the -x option" \
          test "$out" = "-x LD_PRELOAD=$IBSHARE_MODULE"

    out=$("$wrapper" --mpiexec-args | grep -v LD_LIBRARY_PATH)
    check "--mpiexec-args prints hydra's -genv option" \
          test "$out" = "-genv LD_PRELOAD $IBSHARE_MODULE"
fi

# Open MPI's btls that open the device beside UCX (issue 22)
out=$("$wrapper" --mpirun-args | grep btl)
check "--mpirun-args leaves out btl openib, uct and ofi ($out)" \
      test "$out" = "--mca btl ^openib,uct,ofi"

if [ -n "$IBSHARE_UCX_RUN_LIBDIR" ]; then
    out=$(env -u LD_LIBRARY_PATH "$wrapper" sh -c 'echo "$LD_LIBRARY_PATH"')
    check "a UCX outside the system's directories: LD_LIBRARY_PATH" \
          test "$out" = "$IBSHARE_UCX_RUN_LIBDIR"
fi

(eval "$("$wrapper" --env)" && env) > "$tmpdir/env"
check "--env sets what the wrapper sets" \
      grep -qE "^(LD_PRELOAD|UCX_PLUGIN_PATH)=($IBSHARE_MODULE|$module_dir)\$" \
      "$tmpdir/env"

"$wrapper" ucx_info -c -f | grep -q '^UCX_RC_SHARE_GID_INDEX='
check "ucx_info run through the wrapper sees the component" test $? -eq 0

IBSHARE_MODULE=$tmpdir/missing.so "$wrapper" true 2> "$tmpdir/err"
rc=$?
check "a missing module exits 127" test "$rc" -eq 127
check "and names the missing file" grep -q "missing.so" "$tmpdir/err"

finish
