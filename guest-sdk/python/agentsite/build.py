"""Builds a Python agent into a WebAssembly component.

    python -m agentsite.build path/to/app.py -o app.wasm

runs componentize-py (pinned by the SDK) against the agent world of
``wit/agent.wit``: it generates the bindings, then snapshots CPython after
importing the program, so that the program's top level (its ``Agent`` and
tools, their schemas) runs once, at build time, not on every call. A build
whose inputs (the program's directory, this SDK, the WIT, componentize-py's
version) are those of the existing output is skipped.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

SDK = Path(__file__).resolve().parent.parent
# The repository's WIT; an installed SDK is given --wit.
DEFAULT_WIT = SDK.parent.parent / "wit"
WORLD = "apps-agent"
ENTRY = "agentsite_component"


def componentize_py() -> str:
    beside = Path(sys.executable).parent / "componentize-py"
    found = str(beside) if beside.exists() else shutil.which("componentize-py")
    if not found:
        sys.exit("error: componentize-py is not installed (pip install componentize-py==0.25.1)")
    return found


def _files(directory: Path, suffixes: tuple[str, ...]) -> list[Path]:
    return sorted(
        p for p in directory.rglob("*")
        if p.is_file() and p.suffix in suffixes and "__pycache__" not in p.parts
    )


def inputs_digest(app: Path, wit: Path, tool: str) -> str:
    digest = hashlib.sha256()
    version = subprocess.run([tool, "--version"], capture_output=True, text=True).stdout
    digest.update(version.encode())
    for directory, suffixes in ((app.parent, (".py",)), (SDK / "agentsite", (".py",)),
                                (wit, (".wit",))):
        for path in _files(directory, suffixes):
            digest.update(str(path.relative_to(directory)).encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()


def build(app: Path, output: Path, wit: Path) -> bool:
    """Builds `app` into `output`; returns False when it was up to date."""
    tool = componentize_py()
    stamp = output.with_name(output.name + ".inputs")
    digest = inputs_digest(app, wit, tool)
    if output.exists() and stamp.exists() and stamp.read_text().strip() == digest:
        return False
    with tempfile.TemporaryDirectory(prefix="agentsite-py-") as work:
        work = Path(work)
        bindings = work / "bindings"
        subprocess.run([tool, "-d", str(wit), "-w", WORLD, "bindings", str(bindings)], check=True)
        entry = work / "entry"
        entry.mkdir()
        (entry / f"{ENTRY}.py").write_text(
            f"import {app.stem}  # the program: defines its Agent and tools\n"
            "from agentsite.agent import current\n"
            "current()  # a program without an Agent fails the build here\n"
            "from agentsite.exports import Apps, Card, Tools, Resources, Prompts\n"
        )
        output.parent.mkdir(parents=True, exist_ok=True)
        partial = output.with_name(output.name + ".partial")
        subprocess.run(
            [tool, "-d", str(wit), "-w", WORLD, "componentize", ENTRY,
             "-p", str(entry), "-p", str(app.parent), "-p", str(SDK), "-p", str(bindings),
             "-o", str(partial)],
            check=True,
        )
        os.replace(partial, output)
    stamp.write_text(digest + "\n")
    return True


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m agentsite.build", description=__doc__.split("\n\n")[0])
    parser.add_argument("app", type=Path, help="the program, a .py file that defines an Agent")
    parser.add_argument("-o", "--output", type=Path, required=True, help="the component to write")
    parser.add_argument("--wit", type=Path, default=DEFAULT_WIT, help="the directory of agent.wit")
    args = parser.parse_args()
    if not args.app.is_file():
        sys.exit(f"error: {args.app} is not a file")
    if not (args.wit / "agent.wit").is_file():
        sys.exit(f"error: {args.wit} has no agent.wit (pass --wit)")
    try:
        built = build(args.app.resolve(), args.output.resolve(), args.wit.resolve())
    except subprocess.CalledProcessError as e:
        sys.exit(f"error: componentize-py failed (exit {e.returncode}); its output is above")
    print(f"{'built' if built else 'up to date'}: {args.output}")


if __name__ == "__main__":
    main()
