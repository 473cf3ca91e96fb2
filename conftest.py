"""Collection of the package's doctests: the Sphinx extension is skipped where Sphinx is not installed."""

import importlib.util

collect_ignore = [] if importlib.util.find_spec("sphinx") else ["torchrecorder/sphinxext.py"]
