#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# README's three-board walkthrough ("A Raspberry Pi cluster"), its
# commands run on one machine: an authority made in its own folder (the
# admin machine's), an identity per board made in the board's folder, the
# boards' public keys certified by the authority, which never leaves its
# folder; board 1 starts the swarm, boards 2 and 3 bootstrap from the
# endpoint it printed, each listening on 127.0.0.1 instead of a LAN
# address. Every board must report a group of 3 and the mean of the
# values 1, 2 and 3 in both rounds; a board whose certificate is for
# another board's key must be refused.
# Usage: test_board_walkthrough.sh MOSHPIT-CERT BOARD-PEER [EMULATOR...]
# (EMULATOR: qemu-user for a cross build, as ctest's emulator)
# A failure says which command failed, where, with what status, and shows
# what every board printed so far (a command that fails under set -e
# would otherwise end the test without a word).
set -euo pipefail
cert_bin="${1:?moshpit-cert}"
peer_bin="${2:?board-peer}"
shift 2
emu=("$@")
cert_tool() { "${emu[@]}" "$cert_bin" "$@"; }
peer_tool() { "${emu[@]}" "$peer_bin" "$@"; }
tmp=$(mktemp -d)
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    rm -rf "$tmp"
}
trap cleanup EXIT
# dump: every board's output so far, to stderr
dump() {
    local f
    for f in "$tmp"/out*; do
        [ -f "$f" ] && sed "s|^|${f##*/}: |" "$f" >&2
    done
    return 0
}
fail() {
    trap - ERR
    echo "test_board_walkthrough: FAIL: $*" >&2
    dump
    exit 1
}
trap 'fail "line $LINENO: \"$BASH_COMMAND\" exited $?"' ERR

# on the admin machine
mkdir -p "$tmp/admin"
auth=$(cert_tool authority --secret-file "$tmp/admin/authority.sec" |
       sed -n 's/^public: //p')
[ -n "$auth" ] || fail "no authority key"
# on each board: an identity; its public key goes to the admin machine,
# the certificate comes back
for b in 1 2 3; do
    mkdir -p "$tmp/board$b"
    pub=$(peer_tool keygen --key-file "$tmp/board$b/id.key" |
          sed -n 's/^public: //p')
    [ -n "$pub" ] || fail "board $b: no public key"
    [ "$(stat -c %a "$tmp/board$b/id.key")" = 600 ] ||
        fail "board $b: key file not 0600"
    cert_tool issue --authority-secret-file "$tmp/admin/authority.sec" \
        --peer "$pub" --swarm pi-cluster --days 30 >"$tmp/board$b/board.cert"
done

common=(--swarm pi-cluster --authority "$auth" --members 3 --rounds 2
        --size 100000 --listen tcp://127.0.0.1:0 --advertise tcp://127.0.0.1)
# out1 exists before board 1 starts: the background shell opens it only
# when it first runs, and on a busy machine the loop below read it before
# that (sed: can't read ...), which under set -e ended the test at once
: >"$tmp/out1"
"${emu[@]}" "$peer_bin" run "${common[@]}" --key-file "$tmp/board1/id.key" \
    --cert-file "$tmp/board1/board.cert" --value 1 >"$tmp/out1" 2>&1 &
pids+=($!)
ep=""
for _ in $(seq 1 300); do # up to 30 s, emulated on a busy machine
    ep=$(sed -n 's/^endpoint //p' "$tmp/out1")
    [ -n "$ep" ] && break
    kill -0 "${pids[0]}" 2>/dev/null || break # board 1 exited
    sleep 0.1
done
[ -n "$ep" ] || fail "board 1 printed no endpoint: $(cat "$tmp/out1")"
for b in 2 3; do
    "${emu[@]}" "$peer_bin" run "${common[@]}" --key-file "$tmp/board$b/id.key" \
        --cert-file "$tmp/board$b/board.cert" --value "$b" \
        --bootstrap "$ep" >"$tmp/out$b" 2>&1 &
    pids+=($!)
done
# a fourth board with board 2's certificate: refused by moshpit_open
# (the certificate is for another key)
mkdir -p "$tmp/board4"
peer_tool keygen --key-file "$tmp/board4/id.key" >/dev/null
if peer_tool run "${common[@]}" --key-file "$tmp/board4/id.key" \
    --cert-file "$tmp/board2/board.cert" --bootstrap "$ep" \
    >"$tmp/out4" 2>&1; then
    fail "a board with another board's certificate ran"
fi
grep -q "open: " "$tmp/out4" || fail "board 4: $(cat "$tmp/out4")"
rc=0
for p in "${pids[@]}"; do wait "$p" || rc=1; done
pids=()
for b in 1 2 3; do
    cat "$tmp/out$b" | sed "s/^/board $b: /"
    for r in 1 2; do
        grep -q "^round $r: group of 3, value 2$" "$tmp/out$b" ||
            fail "board $b round $r: not the mean of a group of 3"
    done
done
[ "$rc" -eq 0 ] || fail "a board exited with an error"
echo "test_board_walkthrough: 3 boards averaged 1, 2, 3 to 2 in 2 rounds;" \
     "a borrowed certificate was refused"
