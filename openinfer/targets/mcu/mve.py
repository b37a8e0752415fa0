"""What the Helium kernels' tiles are made of (Armv8.1-M MVE, f32): shared by the matmul
(helium.py) and the convolution (helium_conv.py)."""

#: Lanes of a Q register (f32).
LANES = 4
#: Vectors of sums a tile of R rows (of x, or output channels) keeps: R x V = 6 of the 8 Q
#: registers summing, the other 2 holding loaded vectors (two, alternating, so that a load does
#: not wait on the multiply-adds of the previous one).
TILE_VECTORS = {1: 6, 2: 3, 3: 2}
