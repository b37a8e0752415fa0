"""The differential shape sweep: every op of the registry and every fused path, at shapes that
straddle every tile and vector width and selection threshold of the targets' kernels, on every
target and toolchain, against the NumPy reference (ggml's test-backend-ops is the model).
See tests/sweep/test_shape_sweep.py."""
