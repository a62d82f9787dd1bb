"""The differential test: generated call sequences through Python, Clojure, the Java facade and
the JPype bridge, compared step by step (see run.py)."""
