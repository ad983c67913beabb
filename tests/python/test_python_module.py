"""The built extension exports nothing of the engine: with torch imported first (it loads libraries
globally), exported engine or library symbols were resolved to torch's copies and crashed."""

import subprocess

from jet_test_utils import BUILD


def test_extension_exports_no_engine_symbols():
    [module] = (BUILD / "python" / "jetengine").glob("_jetengine*.so")
    exported = subprocess.run(["nm", "-D", "--defined-only", "-C", str(module)], capture_output=True, text=True,
                              check=True).stdout.splitlines()
    assert any(line.endswith(" PyInit__jetengine") for line in exported)
    leaked = [line for line in exported if "jet::" in line or "nlohmann" in line or "pcre2" in line]
    assert not leaked, leaked[:10]
