"""Direct tests of the op registry and the reference kernels."""
