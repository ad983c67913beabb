"""JetEngine: fast inference for block diffusion language models (SDAR, SDAR-MoE, LLaDA), with
the original JetEngine's Python API: `from jetengine import LLM, SamplingParams`."""

try:
    from . import _jetengine  # noqa: F401  (the compiled engine)
except ImportError as error:
    raise ImportError("jetengine's compiled extension _jetengine is missing or broken: install the package "
                      "(pip install ./python) or build it with CMake and put <build>/python on PYTHONPATH") from error

from .llm import LLM
from .sampling_params import SamplingParams

__all__ = ["LLM", "SamplingParams"]
__version__ = "0.1.0"
