#!/usr/bin/env bash
# Checks that each vendored crate (vendor/NAME) is still the release it
# names plus its patch (vendor/NAME.patch), and nothing else: the crate as
# published on crates.io (its checksum checked against the registry's index)
# is unpacked, the patch applied, and every file kept in vendor/NAME
# compared with the result. The manifest is compared without the test,
# bench and example targets and the build script, which vendor/README.md
# says are left out. Any difference fails, naming the file.
#
#   scripts/check-vendor.sh            # every folder in vendor/
#   scripts/check-vendor.sh yamux      # one
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v patch >/dev/null; then
    . scripts/env.sh
    apt_install patch
fi

crates=("$@")
if [ ${#crates[@]} -eq 0 ]; then
    for dir in vendor/*/; do crates+=("$(basename "$dir")"); done
fi
cache=${AGENTSITE_TOOLS:-$HOME/.cache/agentsite-tools}/crates
mkdir -p "$cache"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# package_field FILE KEY: a key of a manifest's [package] table.
package_field() {
    python3 -c 'import sys, tomllib
print(tomllib.load(open(sys.argv[1], "rb"))["package"][sys.argv[2]])' "$1" "$2"
}

# registry_checksum NAME VERSION: the sha256 crates.io's index records.
registry_checksum() {
    local name=$1 version=$2 path
    case ${#name} in
        1) path=1/$name ;;
        2) path=2/$name ;;
        3) path=3/${name:0:1}/$name ;;
        *) path=${name:0:2}/${name:2:2}/$name ;;
    esac
    curl -sSf --retry 3 "https://index.crates.io/$path" | python3 -c 'import json, sys
for line in sys.stdin:
    entry = json.loads(line)
    if entry["vers"] == sys.argv[1]:
        print(entry["cksum"])' "$version"
}

# published NAME VERSION: the path of the release's .crate file, fetched
# once into the tools cache and checked against the index.
published() {
    local name=$1 version=$2 file
    file=$cache/$name-$version.crate
    if [ ! -f "$file" ]; then
        local cached
        cached=$(ls "$HOME"/.cargo/registry/cache/*/"$name-$version.crate" 2>/dev/null | head -1 || true)
        if [ -n "$cached" ]; then
            cp "$cached" "$file.part"
        else
            curl -sSfL --retry 3 -o "$file.part" \
                "https://static.crates.io/crates/$name/$name-$version.crate"
        fi
        local expected actual
        expected=$(registry_checksum "$name" "$version")
        actual=$(sha256sum "$file.part" | cut -d' ' -f1)
        if [ -z "$expected" ] || [ "$expected" != "$actual" ]; then
            rm -f "$file.part"
            echo "$name $version: the downloaded crate does not match the registry's checksum" >&2
            return 1
        fi
        mv "$file.part" "$file"
    fi
    echo "$file"
}

# without_targets FILE: a manifest without [[test]], [[bench]] and
# [[example]] tables and without its build script.
without_targets() {
    python3 -c 'import re, sys
text = open(sys.argv[1]).read()
text = re.sub(r"\n\[\[(test|bench|example)\]\]\n(?:[^\[\n][^\n]*\n|\n(?!\[))*", "\n", text)
text = re.sub(r"^build = .*\n", "", text, flags=re.M)
text = re.sub(r"\n{3,}", "\n\n", text)
print(text.rstrip())' "$1"
}

failed=0
for crate in "${crates[@]}"; do
    vendored=vendor/$crate
    [ -d "$vendored" ] || { echo "$crate: no folder vendor/$crate" >&2; exit 2; }
    name=$(package_field "$vendored/Cargo.toml" name)
    version=$(package_field "$vendored/Cargo.toml" version)
    release=$(published "$name" "$version")
    unpacked=$work/$crate
    mkdir -p "$unpacked"
    tar xzf "$release" -C "$unpacked" --strip-components=1
    if [ -f "vendor/$crate.patch" ] &&
        ! patch -s -p1 --no-backup-if-mismatch -d "$unpacked" <"vendor/$crate.patch"; then
        echo "$crate: vendor/$crate.patch does not apply to $name $version" >&2
        failed=1
        continue
    fi
    differs=0
    while IFS= read -r -d '' file; do
        relative=${file#"$vendored"/}
        if [ "$relative" = Cargo.toml ]; then
            if ! diff -u <(without_targets "$unpacked/Cargo.toml") <(without_targets "$file") >/dev/null; then
                echo "$crate: Cargo.toml differs from $name $version's (tests, benches, examples and build script aside)" >&2
                differs=1
            fi
        elif [ ! -f "$unpacked/$relative" ]; then
            echo "$crate: $relative is not in $name $version nor added by the patch" >&2
            differs=1
        elif ! cmp -s "$unpacked/$relative" "$file"; then
            echo "$crate: $relative differs from $name $version plus vendor/$crate.patch:" >&2
            diff -u "$unpacked/$relative" "$file" | head -20 >&2 || true
            differs=1
        fi
    done < <(find "$vendored" -type f -print0)
    if [ "$differs" = 0 ]; then
        echo "$crate: vendor/$crate is $name $version plus vendor/$crate.patch"
    else
        failed=1
    fi
done
exit "$failed"
