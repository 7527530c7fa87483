#!/bin/sh
# Registration on rxe0: lazy device open, MR counts and rkeys as the kernel
# sees them, with and without the registration cache (test/guest/md_reg.c).
. "${IBSHARE_SRCDIR:?}/test/lib.sh"

in_guest sh -c 'LD_PRELOAD=$IBSHARE_MODULE "$IBSHARE_BUILDDIR/test/guest/md_reg" rxe0'
check "md_reg passes in the guest" test $? -eq 0
finish
