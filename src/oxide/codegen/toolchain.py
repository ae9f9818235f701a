"""Finding the NVIDIA pieces oxide uses: libdevice and the nvJitLink library.

Both come from pip wheels (nvidia-nvvm, nvidia-nvjitlink) or a CUDA toolkit.
The lookups avoid importing cuda.core (~0.3 s), so compiling stays fast.
"""

from __future__ import annotations

import functools
import glob
import os
import sys

from oxide.errors import TargetError


def _site_dirs() -> list[str]:
    return [p for p in sys.path if p.endswith(("site-packages", "dist-packages")) and os.path.isdir(p)]


@functools.cache
def find_libdevice() -> str:
    """The path of libdevice.10.bc: the nvidia-nvvm wheel, $CUDA_HOME, or cuda.pathfinder."""
    candidates = []
    for site in _site_dirs():
        candidates += glob.glob(os.path.join(site, "nvidia", "cu*", "nvvm", "libdevice",
                                             "libdevice.10.bc"))
        candidates += glob.glob(os.path.join(site, "nvidia", "cuda_nvcc", "nvvm", "libdevice",
                                             "libdevice.10.bc"))
    for env in ("CUDA_HOME", "CUDA_PATH"):
        if os.environ.get(env):
            candidates.append(os.path.join(os.environ[env], "nvvm", "libdevice", "libdevice.10.bc"))
    candidates.append("/usr/local/cuda/nvvm/libdevice/libdevice.10.bc")
    for c in candidates:
        if os.path.isfile(c):
            return c
    try:
        from cuda.pathfinder import find_bitcode_lib

        found = find_bitcode_lib("device")
        if found:
            return str(found)
    except Exception:  # pathfinder missing or too old: report below
        pass
    raise TargetError("libdevice (libdevice.10.bc) was not found",
                      hint="pip install nvidia-nvvm, or set CUDA_HOME to a CUDA toolkit")


@functools.cache
def find_nvjitlink() -> str:
    """The path of libnvJitLink.so: the nvidia-nvjitlink wheel, $CUDA_HOME, or the system."""
    candidates = []
    for site in _site_dirs():
        candidates += sorted(glob.glob(os.path.join(site, "nvidia", "cu*", "lib",
                                                    "libnvJitLink.so*")), reverse=True)
        candidates += sorted(glob.glob(os.path.join(site, "nvidia", "nvjitlink", "lib",
                                                    "libnvJitLink.so*")), reverse=True)
    for env in ("CUDA_HOME", "CUDA_PATH"):
        if os.environ.get(env):
            candidates += sorted(glob.glob(os.path.join(os.environ[env], "lib64",
                                                        "libnvJitLink.so*")), reverse=True)
    candidates += sorted(glob.glob("/usr/local/cuda/lib64/libnvJitLink.so*"), reverse=True)
    for c in candidates:
        if os.path.isfile(c):
            return c
    try:
        from cuda.pathfinder import load_nvidia_dynamic_lib

        return str(load_nvidia_dynamic_lib("nvJitLink").abs_path)
    except Exception:
        pass
    raise TargetError("nvJitLink (libnvJitLink.so) was not found",
                      hint="pip install nvidia-nvjitlink, or set CUDA_HOME to a CUDA toolkit")
