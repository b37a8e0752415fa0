"""The NumPy reference, the oracle for every target: the interpreter of bound graphs (executor.py,
with its persistent state in state.py) and the per-op kernels it runs (kernels/)."""
