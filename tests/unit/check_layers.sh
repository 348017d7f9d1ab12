#!/bin/sh
# SPDX-License-Identifier: MIT
#
# check_layers.sh SRC_DIR - the layers of src/ only point down
# (docs/DESIGN.md, "Layout"):
#
#   base  <-  core  <-  wire  <-  net  <-  api
#   base  <-  crypto  <-----------'
#
# Every #include "..." of a file in src/<layer>/ must name the public
# header, its own layer or a layer below it; the platform contract
# (platform.h) is for net and api only; third-party headers stay in the
# layer that owns them (msgpack: wire, libsodium and OpenSSL: crypto,
# ZeroMQ: net); api sees the engine only through net/engine_api.h.
# Prints every offending line and exits 1 if there is one.
set -eu
src=${1:?usage: check_layers.sh SRC_DIR}
[ -d "$src/base" ] || { echo "no $src/base" >&2; exit 2; }

# (the paths under src/ have no spaces)
files=$(find "$src" -mindepth 2 -maxdepth 2 -type f \( -name '*.c' -o -name '*.h' \) | sort)
[ -n "$files" ] || { echo "no sources under $src" >&2; exit 2; }
# shellcheck disable=SC2086
exec awk '
BEGIN {
    may["base"] = " base "
    may["core"] = " base core "
    may["crypto"] = " base crypto "
    may["wire"] = " base core wire "
    may["net"] = " base core crypto wire net platform "
    may["api"] = " base core crypto wire net api platform "
    own["msgpack"] = "wire"; own["sodium"] = "crypto"
    own["openssl"] = "crypto"; own["zmq"] = "net"
    bad = 0; checked = 0
}
function report(msg) {
    printf "%s:%d: %s\n", FILENAME, FNR, msg > "/dev/stderr"
    bad = 1
}
FNR == 1 {
    n = split(FILENAME, parts, "/")
    layer = parts[n - 1]
    if (!(layer in may))
        report("a directory the layer order does not know: " layer)
}
/^[ \t]*#[ \t]*include[ \t]*"/ {
    checked++
    inc = $0
    sub(/^[^"]*"/, "", inc); sub(/".*$/, "", inc)
    if (inc == "moshpit.h")
        next
    if (inc == "platform.h")
        to = "platform"
    else if (inc ~ /^\.\.\/[^\/]+\//) {
        to = substr(inc, 4); sub(/\/.*$/, "", to)
    } else if (inc ~ /\//) {
        to = inc; sub(/\/.*$/, "", to)
    } else
        to = layer
    if (index(may[layer], " " to " ") == 0)
        report(layer " includes \"" inc "\" (" to " is not below " layer ")")
    if (layer == "api" && to == "net" && inc != "net/engine_api.h")
        report("api sees the engine only through net/engine_api.h, not \"" inc "\"")
    next
}
/^[ \t]*#[ \t]*include[ \t]*</ {
    checked++
    inc = $0
    sub(/^[^<]*</, "", inc); sub(/>.*$/, "", inc)
    lib = inc; sub(/[\/.].*$/, "", lib)
    if ((lib in own) && own[lib] != layer)
        report("<" inc "> belongs to src/" own[lib] ", not src/" layer)
}
END {
    if (checked == 0) {
        print "no #include lines found" > "/dev/stderr"
        exit 2
    }
    if (bad)
        exit 1
    printf "layers: %d include lines point down\n", checked
}' $files
