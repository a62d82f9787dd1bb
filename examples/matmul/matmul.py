"""The dot example as a script: the same as `pyprof matmul` (see README.md here)."""

import sys

from pyprof.examples.matmul import main

if __name__ == "__main__":
    sys.exit(main())
