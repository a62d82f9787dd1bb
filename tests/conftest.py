import sys
from pathlib import Path

# tests/child.py holds the child-process helpers every suite (tests/trace too) uses.
sys.path.insert(0, str(Path(__file__).resolve().parent))
