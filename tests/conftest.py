"""Settings for the whole suite.

Hypothesis: no per-example deadline. Tests assert behaviour, never speed (speed is `make
bench`'s); on a shared 2-core machine a slow example is load, not a bug, and the default 200 ms
deadline turned it into a failure.
"""

import sys
from pathlib import Path

from hypothesis import settings

settings.register_profile("robowire", deadline=None, print_blob=True)
settings.load_profile("robowire")

# tests/support.py and tests/fuzzing.py are shared by tests in several folders
sys.path.insert(0, str(Path(__file__).resolve().parent))
