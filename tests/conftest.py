import os
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
sys.path.insert(0, str(Path(__file__).parent))
os.environ.setdefault("PYTHONHASHSEED", "0")
