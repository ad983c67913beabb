"""Helpers of the reference self-tests over model folders."""

import json
import shutil


def edit_config(source, folder, edit, keep_generation_config=True):
    """A copy of the model folder `source` whose config.json is edit(config) (in place)."""
    shutil.copytree(source, folder)
    config = json.loads((folder / "config.json").read_text())
    edit(config)
    (folder / "config.json").write_text(json.dumps(config))
    if not keep_generation_config:
        (folder / "generation_config.json").unlink()
    return str(folder)
