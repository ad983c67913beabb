"""Every C++ and CUDA file of the tree follows .clang-format (clang-format, installed by
scripts/setup.sh): `clang-format -i FILE` fixes one that does not."""

import shutil
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def sources():
    listed = subprocess.run(["git", "ls-files", "*.cpp", "*.h", "*.cu", "*.cuh"], cwd=REPO, capture_output=True,
                            text=True, check=True).stdout.split()
    return [REPO / name for name in listed]


def test_every_source_follows_clang_format():
    assert shutil.which("clang-format"), "clang-format is missing: scripts/setup.sh installs it"
    files = sources()
    assert len(files) > 200
    done = subprocess.run(["clang-format", "--dry-run", "--Werror", *map(str, files)], capture_output=True, text=True)
    unformatted = sorted({line.split(":")[0] for line in done.stderr.splitlines() if "error:" in line})
    assert done.returncode == 0 and unformatted == [], \
        f"not in .clang-format's style (clang-format -i fixes them): {unformatted or done.stderr[:2000]}"
