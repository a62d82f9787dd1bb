"""The Gluon CNN example as a script: the same as `pyprof train-demo` (see README.md here)."""

import sys

from pyprof.examples.gluon_cnn import main

if __name__ == "__main__":
    sys.exit(main())
