"""Helpers shared by the Python tests: where the build is, running the CLI, making tiny models."""

import os
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
BUILD = Path(os.environ.get("JET_BUILD_DIR", REPO / "build"))
CLI = Path(os.environ.get("JET_BIN", BUILD / "apps" / "cli" / "jetengine"))


def run_cli(args, stdin=None, env=None, text=True):
    """Runs `jetengine ARGS`; returns the CompletedProcess, whatever the exit code. text=False
    passes stdin and stdout as bytes, for tests that feed or check raw bytes."""
    return subprocess.run([str(CLI), *map(str, args)], input=stdin, capture_output=True, text=text,
                          env=env, timeout=600)


def make_tiny_model(arch, out, seed=0, *extra):
    """Writes a tiny random HF model folder with tools/make_tiny_model.py."""
    subprocess.run(["/usr/bin/python3", str(REPO / "tools" / "make_tiny_model.py"), "--arch", arch,
                    "--out", str(out), "--seed", str(seed), *map(str, extra)], check=True,
                   capture_output=True, text=True)
    return Path(out)
