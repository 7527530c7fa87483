#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) 2026, the ucx-ibshare developers
# The module built with AddressSanitizer and UndefinedBehaviorSanitizer
# (contrib/check builds one in build-sanitize and runs this test there), in
# ucx_perftest pairs on rxe0:1 in one guest boot: UCP tag matching (polling
# and -E sleep), put and get over rc_share, and UCT active messages, put, get
# and atomics. Both processes of a pair join one node group, so the node
# bootstrap runs under the sanitizers too; and an iface closed with its
# endpoint open and messages in flight (issue 21 item 4: conn_check
# iface_first). Every pair completes, and neither sanitizer reports anything
# (leaks included) in any process.
#
# The script runs itself in the guest (--guest OUTDIR PRELOAD), which only
# runs the pairs; the checks run here.

# Every case crosses the same code in its first iterations; more find no
# more under the sanitizers and cost guest time (500 and 50 until issue 19)
iters=200
warmup=20
client_timeout=120
server_grace=15

# The test cases, one a line: NAME ucx_perftest-options; node_*: with
# UCX_RC_SHARE_NODE_CONNS=y, through the node's engine (in shared mode; in
# fallback mode the iface says it cannot and connects per pair)
cases() {
    cat <<EOF
tag_lat_8_sleep   -t tag_lat -s 8 -E sleep
tag_lat_64K_sleep -t tag_lat -s 65536 -E sleep
tag_bw_8_sleep    -t tag_bw -s 8 -E sleep
tag_bw_64K        -t tag_bw -s 65536
ucp_put_bw_64K    -t ucp_put_bw -s 65536
ucp_get_8         -t ucp_get -s 8
ucp_get_64K       -t ucp_get -s 65536
uct_am_lat        -t am_lat -D short -s 8 -x rc_share -d rxe0:1
uct_am_bcopy      -t am_bw -D bcopy -s 1024 -x rc_share -d rxe0:1
uct_am_zcopy      -t am_bw -D zcopy -s 4096 -x rc_share -d rxe0:1
uct_put_bcopy     -t put_bw -D bcopy -s 1024 -x rc_share -d rxe0:1
uct_put_zcopy     -t put_bw -D zcopy -s 65536 -x rc_share -d rxe0:1
uct_get_bcopy     -t get -D bcopy -s 1024 -x rc_share -d rxe0:1
uct_get_zcopy     -t get -D zcopy -s 65536 -x rc_share -d rxe0:1
uct_fadd          -t fadd -s 8 -x rc_share -d rxe0:1
uct_cswap         -t cswap -s 8 -x rc_share -d rxe0:1
node_am_lat       -t am_lat -D short -s 8 -x rc_share -d rxe0:1
node_put_zcopy    -t put_bw -D zcopy -s 65536 -x rc_share -d rxe0:1
node_get_bcopy    -t get -D bcopy -s 1024 -x rc_share -d rxe0:1
node_fadd         -t fadd -s 8 -x rc_share -d rxe0:1
node_tag_bw_64K   -t tag_bw -s 65536
EOF
}

# ---------------------------------------------------------------- guest side

. "$IBSHARE_SRCDIR/test/guest/perf_pair.sh"

guest() {
    out=$1
    # Only ucx_perftest gets the runtimes, first in its preload list (it is
    # not instrumented; stdbuf adds its own library to the list): a wrapper
    # first in PATH
    mkdir -p "$out/bin"
    cat > "$out/bin/ucx_perftest" <<WRAPPER
#!/bin/sh
LD_PRELOAD="$2 $IBSHARE_PRELOAD \${LD_PRELOAD:-}" exec $(command -v ucx_perftest) "\$@"
WRAPPER
    chmod +x "$out/bin/ucx_perftest"
    PATH=$out/bin:$PATH
    UCX_TLS=rc_share,self
    UCX_NET_DEVICES=rxe0:1
    ASAN_OPTIONS=detect_leaks=1:log_path=$out/report.asan
    UBSAN_OPTIONS=print_stacktrace=1:log_path=$out/report.ubsan
    export PATH UCX_TLS UCX_NET_DEVICES ASAN_OPTIONS UBSAN_OPTIONS
    cases | grep -v '^node_' | while read -r name args; do
        echo "$name $args -n $iters -w $warmup"
    done | perf_pairs "$out" 20500
    cases | grep '^node_' | while read -r name args; do
        echo "$name $args -n $iters -w $warmup"
    done | {
        UCX_RC_SHARE_NODE_CONNS=y
        export UCX_RC_SHARE_NODE_CONNS
        perf_pairs "$out" 20600
    }
    # Issue 21 item 4: an iface closed with its endpoint open and messages
    # in flight (test/guest/conn_check.c)
    LD_PRELOAD="$2 $IBSHARE_PRELOAD" \
        "$IBSHARE_BUILDDIR/test/guest/conn_check" rxe0:1 iface_first 200 \
        > "$out/iface_first.cli" 2>&1
    echo $? > "$out/iface_first.rc"
}

if [ "${1:-}" = --guest ]; then
    guest "$2" "$3"
    exit 0
fi

# ---------------------------------------------------------------- host side

. "${IBSHARE_SRCDIR:?}/test/lib.sh"

# The runtimes the module links: an instrumented module needs them loaded
# before anything else in a program that is not instrumented
runtimes=$(ldd "$IBSHARE_MODULE" 2>/dev/null |
           awk '$1 ~ /^lib(asan|ubsan)\.so/ { printf "%s%s", sep, $3; sep = " " }')
case $runtimes in
*asan*ubsan* | *ubsan*asan*) ;;
*)
    fail "$IBSHARE_MODULE is not built with the sanitizers (configure" \
         "--enable-sanitizers: -fsanitize=address,undefined)" \
         "(it links: ${runtimes:-neither runtime}); contrib/check builds one" \
         "in build-sanitize and runs this test there"
    finish
    ;;
esac
echo "sanitizer runtimes: $runtimes"

in_guest --timeout 1200 sh "$IBSHARE_SRCDIR/test/guest/sanitizers.sh" \
    --guest "$tmpdir" "$runtimes" > "$tmpdir/guest.log" 2>&1
rc=$?
cat "$tmpdir/guest.log"
check "the guest ran every pair (status $rc)" test "$rc" -eq 0

cases > "$tmpdir/cases"
while read -r name args; do
    crc=$(cat "$tmpdir/$name.rc" 2>/dev/null || echo none)
    src=$(cat "$tmpdir/$name.srvrc" 2>/dev/null || echo none)
    done_iters=$(awk '$1 == "Final:" { n = $2 } END { print n + 0 }' \
                 "$tmpdir/$name.cli" 2>/dev/null)
    check "$name ($args): client and server exit 0 (status $crc, $src),\
 $done_iters of $iters iterations" \
        test "$crc" = 0 -a "$src" = 0 -a "${done_iters:-0}" -eq "$iters"
done < "$tmpdir/cases"

grep -E '^(ok|FAIL)' "$tmpdir/iface_first.cli" 2>/dev/null
check "an iface closed with its endpoint open, messages in flight (issue 21\
 item 4): the process ends cleanly (status $(cat "$tmpdir/iface_first.rc"\
 2>/dev/null))" sh -c "test \"\$(cat '$tmpdir/iface_first.rc')\" = 0 &&
    grep -q '^ok: .*the other side lived on' '$tmpdir/iface_first.cli'"

# In their log files, or (UBSan in a combined runtime) on stderr
reports=$(ls "$tmpdir"/report.* 2>/dev/null;
          grep -l -E 'runtime error:|ERROR: (Address|Leak)Sanitizer' \
              "$tmpdir"/*.cli "$tmpdir"/*.srv 2>/dev/null)
for report in $reports; do
    echo "--- $report" >&2
    head -n 40 "$report" >&2
done
check "no AddressSanitizer or UndefinedBehaviorSanitizer report" \
    test -z "$reports"
finish
