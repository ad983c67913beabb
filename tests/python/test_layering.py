"""The include graph follows the layering (README's Layout): every #include "..." of the library,
the public headers, the apps and the Python extension points down or sideways, never up.

    core        -> core
    sampling    -> core, sampling
    backend     -> core, sampling, backend          (backend/cpu and backend/cuda too)
    model       -> core, backend, model
    tokenizer   -> core, tokenizer, jet (the public tokenizer header it implements)
    chat        -> core, chat, jet (chat templates: the Jinja interpreter and chat.h)
    engine      -> everything in src, jet
    include/jet -> jet
    apps, python/src -> jet, core, and their own headers

Tests, benchmarks and fuzzers may reach into any layer: they test it."""

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)

ALLOWED = {
    "core": {"core"},
    "sampling": {"core", "sampling"},
    "backend": {"core", "sampling", "backend"},
    "model": {"core", "backend", "model"},
    "tokenizer": {"core", "tokenizer", "jet"},
    "chat": {"core", "chat", "jet"},
    "engine": {"core", "sampling", "backend", "model", "tokenizer", "chat", "engine", "jet"},
    "jet": {"jet"},
    "apps": {"jet", "core", "local"},
    "python": {"jet", "core", "local"},
}
SOURCES = ("*.h", "*.cpp", "*.cuh", "*.cu")


def layer_of(path, repo=REPO):
    """The layer of a source file of the tree."""
    parts = path.relative_to(repo).parts
    if parts[0] == "src":
        return parts[1]
    if parts[:2] == ("include", "jet"):
        return "jet"
    return parts[0]  # apps, python


def target_layer(include):
    """The layer an include names: its first directory ("local" for a header beside the file)."""
    return include.split("/")[0] if "/" in include else "local"


def violations(repo=REPO):
    """(every include checked, the ones against the layering)."""
    checked, found = 0, []
    for root in ("src", "include/jet", "apps", "python/src"):
        for pattern in SOURCES:
            for path in sorted((repo / root).rglob(pattern)):
                layer = layer_of(path, repo)
                for include in INCLUDE.findall(path.read_text(encoding="utf-8")):
                    checked += 1
                    target = target_layer(include)
                    if layer in ("apps", "python") and target == "local":
                        continue
                    if target == "local" and (path.parent / include).exists():
                        continue
                    if target not in ALLOWED[layer]:
                        found.append(f"{path.relative_to(repo)} ({layer}) includes {include} ({target})")
    return checked, found


def test_includes_follow_the_layering():
    checked, found = violations()
    assert checked > 300 and found == []


def test_the_check_reports_an_upward_include(tmp_path):
    (tmp_path / "src" / "backend").mkdir(parents=True)
    (tmp_path / "apps" / "cli").mkdir(parents=True)
    (tmp_path / "src" / "backend" / "op.h").write_text('#include "core/error.h"\n#include "model/model.h"\n')
    (tmp_path / "apps" / "cli" / "cmd.cpp").write_text('#include "arg_parser.h"\n#include "engine/engine_impl.h"\n')
    checked, found = violations(tmp_path)
    assert checked == 4
    assert found == ["src/backend/op.h (backend) includes model/model.h (model)",
                     "apps/cli/cmd.cpp (apps) includes engine/engine_impl.h (engine)"]
