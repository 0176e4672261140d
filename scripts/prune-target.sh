# Sourced by test.sh: keeps the shared CARGO_TARGET_DIR from filling the disk.
# Every change to the node leaves a new build of each test binary and of our
# own crates' libraries (hundreds of MB each) beside the old ones; a full
# disk kills the linker with a bus error. Dependencies are left alone, so a
# warm build stays warm.

# prune_deps DIR: in a cargo deps directory, keep the newest executable of
# each name and the newest six builds of each of our own crates' libraries.
prune_deps() {
    local dir=$1 stem
    [ -d "$dir" ] || return 0
    (
        cd "$dir"
        for stem in $(ls | sed -nE 's/^([A-Za-z0-9_]+)-[0-9a-f]{16}$/\1/p' | sort -u); do
            ls -t | grep -E "^${stem}-[0-9a-f]{16}$" | tail -n +2 | xargs -r rm -f
        done
        for stem in $(ls | sed -nE 's/^(libagentsite[A-Za-z0-9_]*)-[0-9a-f]{16}\.rlib$/\1/p' | sort -u); do
            ls -t | grep -E "^${stem}-[0-9a-f]{16}\.rlib$" | tail -n +7 | sed 's/\.rlib$//' |
                while read -r old; do rm -f "$old.rlib" "$old.rmeta"; done
        done
    )
}

prune_target() {
    local target=${CARGO_TARGET_DIR:?}
    prune_deps "$target/debug/deps"
    prune_deps "$target/release/deps"
    for dir in "$target"/fuzz/*/release/deps; do prune_deps "$dir"; done
    local free_kb
    # On a fresh machine the target directory does not exist yet: measure
    # the disk it will be made on (df fails on a missing path, and under
    # `set -e -o pipefail` that would end the whole run).
    mkdir -p "$target"
    free_kb=$(df -Pk "$target" | awk 'NR == 2 { print $4 }') || free_kb=
    if [ -n "$free_kb" ] && [ "$free_kb" -lt $((8 * 1024 * 1024)) ]; then
        echo "warning: $((free_kb / 1024)) MiB free under $target; the build may run out of disk" >&2
    fi
}
