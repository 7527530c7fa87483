#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) 2026, the ucx-ibshare developers
# How the UCX of the build loads the module, seen by `ucx_info -d` in the
# soft-RoCE guest (rc_share on rxe0:1, listed once):
# - UCX 1.22 (loads plugins): from UCX_PLUGIN_PATH=<build>/.libs; after
#   `make install` into its module directory, with no variable at all; and
#   through ibshare-run, which then sets no LD_PRELOAD.
# - UCX 1.13: through ibshare-run (preloaded); installed into its module
#   directory the module is not loaded, since 1.13 loads only the modules
#   built into it (what doc/loading.md says).
# The guest writes the installation into its own throw-away overlay, so
# neither the host's UCX nor its cached build is touched.
. "${IBSHARE_SRCDIR:?}/test/lib.sh"

in_guest sh -c '
    run() { name=$1; shift; "$@" > "$dir/$name" 2> "$dir/$name.err"; echo $? > "$dir/$name.rc"; }
    dir=$1 moduledir=$2
    unset LD_PRELOAD
    module_dir=$(dirname "$IBSHARE_MODULE")
    wrapper=$IBSHARE_BUILDDIR/contrib/ibshare-run
    run plain env -u UCX_PLUGIN_PATH ucx_info -d
    run plugin_path env UCX_PLUGIN_PATH="$module_dir" ucx_info -d
    run wrapper env -u UCX_PLUGIN_PATH "$wrapper" ucx_info -d
    run wrapper_preload env -u UCX_PLUGIN_PATH "$wrapper" \
        sh -c "echo \${LD_PRELOAD:-none}"
    run install make -C "$IBSHARE_BUILDDIR" install moduledir="$moduledir"
    run installed env -u UCX_PLUGIN_PATH ucx_info -d
    run installed_wrapper env -u UCX_PLUGIN_PATH \
        IBSHARE_MODULE="$moduledir/libuct_ibshare.so.0" "$wrapper" \
        sh -c "echo \${LD_PRELOAD:-none} \${UCX_PLUGIN_PATH:-none};
               ucx_info -d"
' sh "$tmpdir" "$IBSHARE_UCX_MODULEDIR"
check "guest ran" test $? -eq 0

rc() { cat "$tmpdir/$1.rc"; }
listed() { rc_share_devices "$tmpdir/$1"; }

echo "UCX: $(ucx_info -v | sed -n 's/^# Library version: //p')," \
     "loads plugins: $IBSHARE_UCX_LOADS_PLUGINS," \
     "module directory $IBSHARE_UCX_MODULEDIR"
for run in plain plugin_path wrapper installed installed_wrapper; do
    echo "$run: ucx_info -d status $(rc $run), lists rc_share/rxe0:1" \
         "$(listed $run) time(s)"
done

check "ucx_info -d without the module lists no rc_share" \
      test "$(rc plain)" -eq 0 -a "$(listed plain)" -eq 0
check "ibshare-run ucx_info -d lists rc_share once" \
      test "$(rc wrapper)" -eq 0 -a "$(listed wrapper)" -eq 1
check "make install into UCX's module directory succeeds" \
      test "$(rc install)" -eq 0
[ "$(rc install)" -eq 0 ] || tail -20 "$tmpdir/install" "$tmpdir/install.err"

if [ "$IBSHARE_UCX_LOADS_PLUGINS" = yes ]; then
    check "UCX_PLUGIN_PATH=<build>/.libs: ucx_info -d lists rc_share once" \
          test "$(rc plugin_path)" -eq 0 -a "$(listed plugin_path)" -eq 1
    check "ibshare-run sets no LD_PRELOAD" \
          test "$(cat "$tmpdir/wrapper_preload")" = none
    check "installed: ucx_info -d lists rc_share once, with no variable" \
          test "$(rc installed)" -eq 0 -a "$(listed installed)" -eq 1
    check "installed: ibshare-run sets neither LD_PRELOAD nor UCX_PLUGIN_PATH" \
          test "$(head -n 1 "$tmpdir/installed_wrapper")" = "none none"
else
    check "ibshare-run preloads the module" \
          test "$(cat "$tmpdir/wrapper_preload")" = "$IBSHARE_MODULE"
    check "installed: UCX 1.13 does not load it by itself" \
          test "$(rc installed)" -eq 0 -a "$(listed installed)" -eq 0
fi
check "installed: ibshare-run ucx_info -d lists rc_share once" \
      test "$(rc installed_wrapper)" -eq 0 -a \
           "$(listed installed_wrapper)" -eq 1
for run in plain plugin_path wrapper installed installed_wrapper; do
    [ ! -s "$tmpdir/$run.err" ] || { echo "--- $run stderr"; cat "$tmpdir/$run.err"; }
done
finish
