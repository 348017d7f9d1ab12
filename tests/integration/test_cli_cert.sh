#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# test_cli_cert.sh - the moshpit-cert tool: authority, issue and inspect
# with their exit codes (0 ok/VALID, 1 INVALID/failure, 2 usage), secrets
# printed only by `authority`, the secret file written 0600, and inspect
# refusing every certificate changed in any single character.
# Dates past January 2038 print as such, or, where time_t has 32 bits
# (Debian 12's armhf), as past it, never as a wrapped date.
# Usage: test_cli_cert.sh path/to/moshpit-cert [EMULATOR...]
# (EMULATOR: qemu-user for a cross build, as ctest's emulator)
set -u
T=${1:?path to moshpit-cert}
shift
fails=0
fail() { echo "FAIL: $*" >&2; fails=$((fails + 1)); }
# expect CODE CMD...: runs CMD, stdout in $out, checks its exit code
expect() {
    local want=$1
    shift
    out=$("$@" 2>"$tmp/err")
    local rc=$?
    [ "$rc" = "$want" ] || fail "exit $rc, want $want: $* ($(cat "$tmp/err"))"
}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
if [ $# -gt 0 ]; then # the tool under the emulator, as one command
    {
        printf '#!/usr/bin/env bash\nexec'
        printf ' %q' "$@" "$T"
        printf ' "$@"\n'
    } >"$tmp/moshpit-cert"
    chmod +x "$tmp/moshpit-cert"
    T=$tmp/moshpit-cert
fi

# authority: public and secret key text
expect 0 "$T" authority
pub=$(sed -n 's/^public: //p' <<<"$out")
sec=$(sed -n 's/^secret: //p' <<<"$out")
[ ${#pub} = 40 ] || fail "public key text of ${#pub} characters"
[ ${#sec} = 80 ] || fail "secret key text of ${#sec} characters"
expect 0 "$T" authority
pub2=$(sed -n 's/^public: //p' <<<"$out")
sec2=$(sed -n 's/^secret: //p' <<<"$out")
[ "$pub" != "$pub2" ] || fail "two authorities with one key"

# authority --secret-file: only the public key printed, the file 0600
expect 0 "$T" authority --secret-file "$tmp/auth3.sec"
pub3=$(sed -n 's/^public: //p' <<<"$out")
grep -q secret <<<"$out" && fail "secret printed with --secret-file"
[ "$(stat -c %a "$tmp/auth3.sec")" = 600 ] || fail "secret file mode"
expect 1 "$T" authority --secret-file "$tmp/auth3.sec" # exists: O_EXCL

# a peer identity to certify: any key; take another authority's public key
peer=$pub2
expect 0 "$T" issue --authority-secret "$sec" --peer "$peer" --swarm run-1 \
    --days 2
cert=$out
[ ${#cert} = 200 ] || fail "certificate text of ${#cert} characters"
expect 0 "$T" issue --authority-secret-file "$tmp/auth3.sec" --peer "$peer" \
    --swarm run-1 --until $(($(date +%s) + 3600))
cert3=$out
echo "$sec" >"$tmp/auth1.sec"
expect 0 "$T" issue --authority-secret-file - --peer "$peer" --swarm run-1 \
    --days 1 <"$tmp/auth1.sec"

# inspect
expect 0 "$T" inspect --authority "$pub" "$cert"
grep -q '^status: *VALID$' <<<"$out" || fail "no VALID line: $out"
grep -q "^peer: *$(printf '%s' "$peer" | sed 's/[][\.*^$/]/\\&/g')$" \
    <<<"$out" || fail "peer not shown: $out"
expect 0 "$T" inspect --authority "$pub" --swarm run-1 --peer "$peer" "$cert"
expect 0 "$T" inspect --authority "$pub" - <<<"$cert"
expect 1 "$T" inspect --authority "$pub" --swarm run-2 "$cert"
grep -q 'INVALID (other swarm)' <<<"$out" || fail "other swarm: $out"
expect 1 "$T" inspect --authority "$pub" --peer "$pub" "$cert"
grep -q 'INVALID (other key)' <<<"$out" || fail "other key: $out"
expect 1 "$T" inspect --authority "$pub2" "$cert"
grep -q 'INVALID (foreign authority)' <<<"$out" || fail "foreign: $out"
expect 0 "$T" inspect --authority "$pub3" "$cert3"
expect 1 "$T" inspect --authority "$pub" "$cert3"

# every single-character change is refused (or is not certificate text)
z85='0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#'
accepted=0
for ((i = 0; i < 200; i++)); do
    c=${cert:i:1}
    k=$(((${#z85} + i * 7 + 1) % ${#z85}))
    r=${z85:k:1}
    [ "$r" = "$c" ] && r=${z85:$(((k + 1) % ${#z85})):1}
    mod="${cert:0:i}$r${cert:i+1}"
    "$T" inspect --authority "$pub" "$mod" >"$tmp/o" 2>&1
    rc=$?
    if [ $rc != 1 ] || ! grep -q INVALID "$tmp/o"; then
        accepted=$((accepted + 1))
        echo "character $i ($c -> $r): exit $rc" >&2
    fi
done
[ $accepted = 0 ] || fail "$accepted modified certificates not refused"
expect 1 "$T" inspect --authority "$pub" "${cert:0:199}"
expect 1 "$T" inspect --authority "$pub" "${cert}0"

# usage errors: exit 2, nothing on stdout
expect 2 "$T"
expect 2 "$T" frobnicate
expect 2 "$T" issue --authority-secret "$sec" --swarm run-1 --days 2
expect 2 "$T" issue --authority-secret "$sec" --peer "$peer" --days 2
expect 2 "$T" issue --authority-secret "$sec" --peer "$peer" --swarm s
expect 2 "$T" issue --authority-secret "$sec" --peer "$peer" --swarm s \
    --days 0
expect 2 "$T" issue --authority-secret "$sec" --peer "$peer" --swarm s \
    --days 1x
expect 2 "$T" issue --authority-secret "$sec" --peer "$peer" --swarm s \
    --until 1000
expect 2 "$T" issue --authority-secret "$sec" --peer short --swarm s --days 1
expect 2 "$T" issue --authority-secret "${sec:0:40}$pub2" --peer "$peer" \
    --swarm s --days 1
[ -z "$out" ] || fail "output from a refused issue: $out"
expect 2 "$T" issue --authority-secret "$sec" --authority-secret-file \
    "$tmp/auth3.sec" --peer "$peer" --swarm s --days 1
expect 2 "$T" inspect "$cert"
expect 2 "$T" inspect --authority nokey "$cert"
expect 2 "$T" inspect --authority "$pub" --peer nokey "$cert"

# a time past 2038 (2100-01-01) and the largest the tool prints as a date
for until in 4102444800:2100-01-01T00:00:00Z 253402300799:9999-12-31T23:59:59Z; do
    expect 0 "$T" issue --authority-secret "$sec" --peer "$peer" \
        --swarm run-1 --until "${until%%:*}"
    expect 0 "$T" inspect --authority "$pub" "$out"
    line=$(grep '^not after:' <<<"$out")
    case "$line" in
    *"(${until#*:})" | *"(past this system's time_t)") ;;
    *) fail "not after ${until%%:*} shown as: $line" ;;
    esac
done

# secrets appear only in the output of `authority`
for s in "$sec" "$sec2" "$(cat "$tmp/auth3.sec")"; do
    for cmd in "issue --authority-secret-file $tmp/auth3.sec --peer $peer \
--swarm run-1 --days 1" "inspect --authority $pub $cert"; do
        # shellcheck disable=SC2086
        o=$("$T" $cmd 2>&1)
        grep -qF -- "${s:0:40}" <<<"$o" && fail "secret in: $cmd"
    done
done

if [ $fails != 0 ]; then
    echo "test_cli_cert: $fails failed" >&2
    exit 1
fi
echo "test_cli_cert: ok"
