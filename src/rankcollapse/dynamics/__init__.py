"""Deep self-attention dynamics: attention kernels, normalisations, layers, the simulator, theory."""
