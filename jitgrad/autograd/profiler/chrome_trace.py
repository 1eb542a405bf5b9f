"""Chrome trace JSON (chrome://tracing, Perfetto) of an event list."""
import json
import os
import tempfile


def write_chrome_trace(events, path):
    """`EventList.export_chrome_trace(path)`."""
    t0 = min((e.start_ns for e in events), default=0)
    pid = os.getpid()
    trace = []
    for e in events:
        args = {}
        if e.input_shapes:
            args["Input Dims"] = e.input_shapes
        if e.args is not None:
            args["args"] = e.args
        trace.append({"name": e.name, "ph": "X", "ts": (e.start_ns - t0) / 1000.0,
                      "dur": (e.end_ns - e.start_ns) / 1000.0, "pid": pid, "tid": e.thread,
                      "cat": e.kind, "args": args})
    _write_atomically(path, json.dumps({"traceEvents": trace, "displayTimeUnit": "ms"}))


def _write_atomically(path, text):
    path = os.fspath(path)
    folder = os.path.dirname(os.path.abspath(path))
    tmp = None
    try:
        fd, tmp = tempfile.mkstemp(dir=folder, prefix="." + os.path.basename(path) + ".",
                                   suffix=".tmp")
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.replace(tmp, path)
        tmp = None
    except OSError as e:
        raise OSError(e.errno, f"export_chrome_trace could not write the trace "
                      f"({e.strerror or e}); pass a file path in an existing, writable folder",
                      path) from e
    finally:
        if tmp is not None:
            try:
                os.remove(tmp)
            except OSError:
                pass
