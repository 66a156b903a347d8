"""One BLAS thread for the RL comparison's small numpy work (LinUCB's updates, retrieval, the users' matvecs).

OpenBLAS starts one thread per core and its threads spin while they wait: on a shared 2-core machine (load about
10) 1,000 LinUCB steps took 19.3 s wall and 16.4 s CPU with its default threads, and 1.8 s wall and 1.3 s CPU with
one. The limit comes from ``threadpoolctl``, the maintained way to set BLAS thread pools at run time.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from threadpoolctl import threadpool_limits


@contextmanager
def blas_threads(limit: int) -> Iterator[None]:
    """Numpy's BLAS limited to ``limit`` threads inside the block (restored after)."""
    with threadpool_limits(limits=limit, user_api="blas"):
        yield
