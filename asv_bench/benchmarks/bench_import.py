"""Import cost in a fresh interpreter: `import jitgrad` must not import numba or
compile anything (numba is imported on the first elementwise op)."""


class Import:
    def timeraw_import_jitgrad(self):
        return "import jitgrad"

    def timeraw_import_numpy_numba_baseline(self):
        return "import numpy, numba"
