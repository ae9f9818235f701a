"""CUDA kernels ported to oxide the way a newcomer would port them (issue 15, "Done when").

One module per kernel. Each holds the working port, a NumPy (or pure Python) model to
check it against, a `run(...)` that launches it on the current device and returns what
to compare, and, where the natural CUDA-like form does not compile today, that form as
written (`natural_*` builders) next to the workaround, with the error it gives recorded
in the module docstring. tests/test_ports.py runs them on the CPU, tests/test_gpu_ports.py
on a GPU.
"""
