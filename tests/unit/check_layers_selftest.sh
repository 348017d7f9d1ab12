#!/bin/sh
# SPDX-License-Identifier: MIT
#
# check_layers_selftest.sh SRC_DIR - check_layers.sh can fail: on copies of
# SRC_DIR with one upward include each (core -> net, wire -> crypto, base
# -> core, crypto -> platform, api -> the engine's internal header, zmq.h
# in wire, "../net/..." from core) it must exit 1 and name the line; on the
# untouched copy it must pass.
set -eu
src=${1:?usage: check_layers_selftest.sh SRC_DIR}
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

fail=0
try() { # file line-to-append expected-status
    rm -rf "$tmp/src"
    cp -R "$src" "$tmp/src"
    [ -e "$tmp/src/$1" ] || { echo "selftest: no $1" >&2; exit 2; }
    [ -n "$2" ] && printf '%s\n' "$2" >>"$tmp/src/$1"
    set +e
    sh "$here/check_layers.sh" "$tmp/src" >"$tmp/out" 2>&1
    rc=$?
    set -e
    if [ "$rc" -ne "$3" ]; then
        echo "selftest: $1 + '$2': exit $rc, expected $3" >&2
        cat "$tmp/out" >&2
        fail=1
    elif [ "$3" -eq 1 ] && ! grep -q "$1:" "$tmp/out"; then
        echo "selftest: $1 + '$2': the report does not name the file" >&2
        fail=1
    fi
}

try base/base.h "" 0
try core/grid.c '#include "net/engine.h"' 1
try core/grid.c '#include "../net/net.h"' 1
try wire/wire.c '#include "crypto/crypto.h"' 1
try wire/wire.c '#include <zmq.h>' 1
try base/log.c '#include "core/grid.h"' 1
try crypto/cert.c '#include "platform.h"' 1
try core/agg.c '#include <sodium.h>' 1
try api/api.c '#include "net/engine.h"' 1
[ "$fail" -eq 0 ] && echo "check_layers.sh catches all 8 upward includes"
exit "$fail"
