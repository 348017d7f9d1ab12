# SPDX-License-Identifier: MIT
# shellcheck shell=bash
# Sourced by make_baseline.sh and check_abi.sh: how both run abidw, so the
# baseline and the build it is compared with are described the same way.
# Only what include/moshpit.h declares (exported functions and the types
# they reach; struct moshpit stays opaque), without paths, line numbers or
# the libraries it links (a build without OpenSSL is the same ABI),
# with type ids that are hashes of the types rather than counters.
# Arguments: library, output file, header directory.
abi_dump() {
    abidw --headers-dir "$3" --drop-private-types --exported-interfaces-only \
        --no-corpus-path --no-comp-dir-path --no-show-locs --no-elf-needed \
        --type-id-style hash --out-file "$2" "$1"
}
