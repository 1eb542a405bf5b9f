"""The default process group: MPI's world, through mpi4py.

mpi4py is imported by `init_process_group`, never by `import jitgrad`: importing
`mpi4py.MPI` initializes MPI, which a program that trains in one process must
not pay for (or fail on, where no MPI library is installed).
"""
import enum
import importlib.util
import os
import sys
import time

from .._trace import graph_break

__all__ = ["DebugLevel", "is_available", "is_mpi_available", "is_initialized",
           "init_process_group", "destroy_process_group", "get_rank", "get_world_size",
           "get_backend", "get_debug_level", "set_debug_level"]

INSTALL_HINT = ("pip install 'jitgrad[mpi]' (mpi4py and the MPICH wheel, which brings mpiexec); "
                "on a cluster, load the site's MPI and pip install mpi4py against it")

NOT_INITIALIZED = ("Default process group has not been initialized, please make sure to call "
                   "init_process_group.")


class DebugLevel(enum.Enum):
    """How much checking the collectives do. DETAIL exchanges a small header
    (collective, dtype, shape, op, root) before each collective, so that ranks
    that disagree raise the same clear error instead of corrupting memory or
    hanging. Set with the environment variable JITGRAD_DISTRIBUTED_DEBUG=DETAIL
    (read by init_process_group) or with `set_debug_level`."""
    OFF = "OFF"
    DETAIL = "DETAIL"


class _World:
    """The one process group: a duplicate of MPI_COMM_WORLD, so that messages of
    the user's own mpi4py calls never match jitgrad's."""

    def __init__(self, mpi, comm, debug):
        self.MPI = mpi
        self.comm = comm
        self.rank = comm.Get_rank()
        self.size = comm.Get_size()
        self.debug = debug
        self.previous_excepthook = None


_world = [None]


def is_available():
    """Whether mpi4py is installed (checked without importing it, so without
    starting MPI)."""
    return importlib.util.find_spec("mpi4py") is not None


is_mpi_available = is_available


def load_mpi():
    """mpi4py's MPI module, or an error that says what to install."""
    try:
        from mpi4py import MPI
    except ImportError as e:
        raise RuntimeError(f"Distributed package doesn't have MPI built in: jitgrad.distributed "
                           f"needs mpi4py and an MPI library ({e}). Install them with "
                           f"{INSTALL_HINT}.") from e
    return MPI


def _debug_from_env():
    value = os.environ.get("JITGRAD_DISTRIBUTED_DEBUG", "OFF").upper()
    try:
        return DebugLevel(value)
    except ValueError:
        raise ValueError(f"JITGRAD_DISTRIBUTED_DEBUG={value!r} is not a debug level: use one of "
                         f"{', '.join(d.value for d in DebugLevel)}") from None


def init_process_group(backend=None, init_method=None, timeout=None, world_size=-1, rank=-1):
    """Join the processes of this job into the default process group.

    MPI's launcher does the rendezvous: `mpiexec -n 4 python train.py` starts four
    processes, and each learns its rank and the world size here. Outside mpiexec
    the process is a world of size 1. `init_method` and `timeout` are accepted
    for torch's signature and not used: MPI needs no rendezvous address, and a
    rank that raises aborts the whole job (MPI_Abort) instead of timing out.
    `world_size` and `rank`, if given, must agree with the launcher's. A world of
    more than one process gets a `sys.excepthook` that aborts the job (see
    docs/distributed.md). In `python train.py`:

        dist.init_process_group("mpi")
        dist.get_rank(), dist.get_world_size()      # (0, 1)
    """
    graph_break("jitgrad.distributed.init_process_group")
    if backend is not None and str(backend).lower() != "mpi":
        raise ValueError(f"backend {backend!r} is not available: jitgrad.distributed runs on MPI; "
                         "pass backend='mpi' or leave it out")
    if _world[0] is not None:
        raise RuntimeError("trying to initialize the default process group twice! Call "
                           "destroy_process_group() first.")
    debug = _debug_from_env()
    MPI = load_mpi()
    comm = MPI.COMM_WORLD
    for name, given, actual in (("world_size", world_size, comm.Get_size()),
                                ("rank", rank, comm.Get_rank())):
        if given not in (-1, None) and given != actual:
            raise ValueError(f"{name}={given} was passed but MPI's launcher set {actual}: with "
                             f"MPI, mpiexec decides (mpiexec -n N); leave {name} out")
    world = _World(MPI, comm.Dup(), debug)
    if world.size > 1:
        world.previous_excepthook = sys.excepthook
        sys.excepthook = _abort_on_uncaught_exception(world)
    _world[0] = world


def _abort_on_uncaught_exception(world):
    """A sys.excepthook that prints the traceback, then ends every rank: the others
    would otherwise wait forever in their next collective."""
    previous = world.previous_excepthook

    def hook(kind, value, tb):
        previous(kind, value, tb)
        sys.stderr.write(f"jitgrad.distributed: rank {world.rank} of {world.size} raised "
                         f"{kind.__name__}; aborting the job (MPI_Abort) so that no rank waits "
                         "for it\n")
        sys.stdout.flush()
        sys.stderr.flush()
        # MPICH's launcher tears the job down at once on an abort and can drop output
        # it has not forwarded yet: give it a moment to pass the traceback on.
        time.sleep(0.2)
        world.MPI.COMM_WORLD.Abort(1)
    return hook


def world():
    """The default process group, or torch's error when there is none."""
    w = _world[0]
    if w is None:
        raise ValueError(NOT_INITIALIZED)
    return w


def check_group(group):
    if group is not None:
        raise ValueError("jitgrad.distributed has one process group, the world: pass group=None "
                         "(new_group is not implemented)")
    return world()


def is_initialized():
    """Whether init_process_group has run (and destroy_process_group has not)."""
    return _world[0] is not None


def destroy_process_group(group=None):
    """Leave the default process group. MPI itself stays initialized (mpi4py
    finalizes it at exit), so init_process_group may be called again."""
    w = check_group(group)
    if w.previous_excepthook is not None:
        sys.excepthook = w.previous_excepthook
    w.comm.Free()
    _world[0] = None


def get_rank(group=None):
    """This process's rank in the group, 0 to world size - 1."""
    return check_group(group).rank


def get_world_size(group=None):
    """The number of processes in the group."""
    return check_group(group).size


def get_backend(group=None):
    check_group(group)
    return "mpi"


def get_debug_level():
    return world().debug if _world[0] is not None else _debug_from_env()


def set_debug_level(level):
    """Set the debug level of the default process group (see DebugLevel)."""
    world().debug = DebugLevel(level)
